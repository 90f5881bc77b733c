/**
 * Makes the installable package (`npm run pack`): one tarball, `dist/loopsmith-<version>.tgz`,
 * that `npm install -g <tarball>` puts on PATH as `loopsmith`, working from any directory
 * (docs/INSTALL.md). Nothing is fetched when it is installed: the package
 * has no dependencies but the ones it carries.
 *
 * It builds the application (`deploy/build-app.ts --out dist/package`: the services and the
 * CLI bundled to JavaScript, the prompts, the memory migrations, the seccomp profile, PGlite),
 * adds what building the images needs (`deploy/build-images.sh`, `deploy/debian-mirror.sh`,
 * `deploy/rootfs/`) and `docs/INSTALL.md`, writes the package's manifest (name `loopsmith`,
 * so the installed code finds its root; `bin`, `engines`, PGlite as bundled dependencies), and
 * runs `npm pack` there.
 *
 *   dist/package/                 the package's folder, as installed
 *   dist/loopsmith-<version>.tgz  the tarball
 *
 * Usage: node --import tsx deploy/pack.ts   (prints the tarball's path on its last line)
 * @throws (exits non-zero) when the build or `npm pack` fails
 */
import { execFile } from "node:child_process";
import { chmod, cp, mkdir, readFile, readdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const STAGE = join(ROOT, "dist", "package");
const run = promisify(execFile);

/** Files of the checkout the package carries beside the build, relative to the root. */
const EXTRA = ["deploy/build-images.sh", "deploy/debian-mirror.sh", "deploy/rootfs", "docs/INSTALL.md"];

/** The fields of the root manifest the package's manifest copies. */
interface RootManifest {
  name: string;
  version: string;
  description?: string;
  license?: string;
  engines?: { node?: string };
}

/** The packages the build copies into `node_modules` (scoped names: `@scope/name`). */
async function copiedPackages(): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  const top = join(STAGE, "node_modules");
  for (const entry of await readdir(top)) {
    const names = entry.startsWith("@") ? (await readdir(join(top, entry))).map((n) => `${entry}/${n}`) : [entry];
    for (const name of names) {
      const manifest = JSON.parse(await readFile(join(top, name, "package.json"), "utf8")) as { version: string };
      found[name] = manifest.version;
    }
  }
  return found;
}

async function main(): Promise<void> {
  const started = Date.now();
  await run(process.execPath, ["--import", "tsx", join(ROOT, "deploy", "build-app.ts"), "--out", STAGE], {
    cwd: ROOT,
  });
  for (const path of EXTRA) await cp(join(ROOT, path), join(STAGE, path), { recursive: true });
  // The command npm links onto PATH: the bundled CLI has no `#!` line of its own.
  await mkdir(join(STAGE, "bin"), { recursive: true });
  await writeFile(join(STAGE, "bin", "loopsmith.js"), '#!/usr/bin/env node\nimport "../dist/cli.js";\n');
  await chmod(join(STAGE, "bin", "loopsmith.js"), 0o755);

  const root = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as RootManifest;
  const bundled = await copiedPackages();
  const manifest = {
    name: root.name,
    version: root.version,
    description: root.description,
    license: root.license,
    type: "module",
    engines: root.engines,
    bin: { loopsmith: "bin/loopsmith.js" },
    files: ["bin", "dist", "shared", "services", "deploy", "docs", "build.json"],
    dependencies: bundled,
    bundleDependencies: Object.keys(bundled),
  };
  await writeFile(join(STAGE, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", join(ROOT, "dist")], {
    cwd: STAGE,
    maxBuffer: 64 * 1024 * 1024,
  });
  const [packed] = JSON.parse(stdout) as Array<{ filename: string; size: number; entryCount: number }>;
  if (!packed) throw new Error("npm pack printed no package");
  process.stdout.write(
    `pack: ${packed.entryCount} files, ${(packed.size / 1e6).toFixed(1)} MB in ${((Date.now() - started) / 1000).toFixed(1)} s\n${join(ROOT, "dist", packed.filename)}\n`,
  );
}

await main();
