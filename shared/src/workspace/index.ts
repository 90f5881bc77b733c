/**
 * Files of a workspace: search/replace edits, tar archives, and which files configure a test
 * runner or declare dependencies (git, `./git.ts`, is the `@loopsmith/shared/git` subpath only:
 * simple-git stays out of the services, which never run git).
 * An explicit list: what is not named here is internal to the package.
 */
export { isDependencyManifest, isRunnerConfig, isTestFile } from "./runner-config.js";
export { forEachTarEntry, readTar, safeTarPath, type ReadTarOptions, type TarEntry } from "./tar.js";
export { applyEdits, checkEditPath, renderEditFailures, unifiedPatch } from "./edits.js";
export type { ApplyResult, PathCheck, ReadBase } from "./edits.js";
