// Which code a loopsmith process runs: the JavaScript made by `npm run build` (dist/app), or
// the TypeScript sources through tsx. Plain JavaScript, so the `loopsmith` command can decide
// before tsx is loaded; typed by build-stamp.d.ts beside it.
//
// `npm run build` writes dist/app/build.json: the source files the bundles were made from
// (esbuild's list of inputs outside node_modules, the files read at run time, package-lock.json
// and the build script) and one SHA-256 fingerprint of their contents. A build is current
// when every listed file still exists and the fingerprint of their contents now is the same:
// an edited, added-and-imported or deleted source makes it stale, a `git checkout` that only
// touches timestamps does not. A stale build is never run; the sources are, through tsx.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** The stamp's file name inside the build folder. */
export const BUILD_STAMP = "build.json";
/** The build folder, relative to the source root. */
export const BUILD_DIR = join("dist", "app");
/** Stamp format version. */
const STAMP_VERSION = 1;

/**
 * SHA-256 (hex) over the listed files: each file's path (relative to `root`, `/`-separated)
 * and the SHA-256 of its bytes, in the order given (callers sort).
 * @param {string} root
 * @param {readonly string[]} files
 * @returns {string}
 * @throws the file system's error (`ENOENT`, …) when a file cannot be read
 */
export function sourceFingerprint(root, files) {
  const all = createHash("sha256");
  for (const file of files) {
    const one = createHash("sha256")
      .update(readFileSync(join(root, file)))
      .digest("hex");
    all.update(`${file}\0${one}\n`);
  }
  return all.digest("hex");
}

/**
 * The stamp `npm run build` writes beside the bundles.
 * @param {string} root the source root
 * @param {readonly string[]} files the source files the build was made from, relative to `root`
 * @returns {{ v: number; fingerprint: string; files: string[]; builtAt: string }}
 */
export function makeStamp(root, files) {
  const sorted = [...new Set(files)].sort();
  return {
    v: STAMP_VERSION,
    fingerprint: sourceFingerprint(root, sorted),
    files: sorted,
    builtAt: new Date().toISOString(),
  };
}

/**
 * The build folder when `<root>/dist/app` (or `dir`) was built from exactly the sources under
 * `root` now, else `null`: no build, an unreadable or older-format stamp, a listed file gone
 * or changed. `LOOPSMITH_FROM_SOURCE=1` always answers `null` (run the sources). Reads every
 * listed file (about 200 files: ~30 ms).
 * @param {string} root the source root (the repository's root)
 * @param {NodeJS.ProcessEnv} [env]
 * @param {string} [dir] the build folder (default `<root>/dist/app`; `npm run build -- --out`)
 * @returns {string | null}
 */
export function currentBuild(root, env = process.env, dir = join(root, BUILD_DIR)) {
  if (env.LOOPSMITH_FROM_SOURCE === "1") return null;
  try {
    const stamp = JSON.parse(readFileSync(join(dir, BUILD_STAMP), "utf8"));
    if (stamp?.v !== STAMP_VERSION || !Array.isArray(stamp.files) || typeof stamp.fingerprint !== "string") return null;
    return sourceFingerprint(root, stamp.files) === stamp.fingerprint ? dir : null;
  } catch {
    return null;
  }
}
