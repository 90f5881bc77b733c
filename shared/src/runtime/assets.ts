/**
 * Files loopsmith reads at run time (the prompts, the memory migrations, the sandbox's
 * seccomp profile), found from the installation's root whatever the layout: the source tree
 * (`shared/src/runtime/assets.ts`, run through tsx) or the built application (`dist/*.js`, made by
 * `npm run build`), where all modules are bundled into a few files and a path relative to a
 * module would point elsewhere. The root is the nearest folder above this module that holds
 * the `package.json` named `loopsmith` (the repository's root, or `/app` in the image).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { LoopsmithError } from "./errors.js";

let root: string | undefined;

/**
 * The installation's root folder (absolute), found once and kept.
 * @throws LoopsmithError `internal` when no folder above this module holds loopsmith's
 *   `package.json` (a broken installation)
 */
export function installRoot(): string {
  if (root !== undefined) return root;
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file) && isRootManifest(file)) return (root = dir);
    if (dirname(dir) === dir) break;
  }
  throw new LoopsmithError("internal", `no loopsmith package.json above ${start}: the installation is incomplete`);
}

/** Whether `file` is the root manifest (`"name": "loopsmith"`), not a workspace's. */
function isRootManifest(file: string): boolean {
  try {
    return (JSON.parse(readFileSync(file, "utf8")) as { name?: unknown }).name === "loopsmith";
  } catch {
    return false;
  }
}

/**
 * The absolute path of a file shipped with loopsmith, given relative to the root
 * (`assetPath("shared", "prompts", "plan.v1.md")`). Whether it exists is the caller's check.
 * @throws LoopsmithError `internal` as {@link installRoot}
 */
export function assetPath(...segments: string[]): string {
  return join(installRoot(), ...segments);
}
