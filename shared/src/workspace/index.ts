/**
 * Files of a workspace: search/replace edits, tar archives, which files configure a test
 * runner or declare dependencies, and git with a vetted environment.
 * An explicit list: what is not named here is internal to the package.
 */
export { isDependencyManifest, isRunnerConfig, isTestFile } from "./runner-config.js";
export { forEachTarEntry, readTar, safeTarPath, type ReadTarOptions, type TarEntry } from "./tar.js";
export { git } from "./git.js";
export { applyEdits, checkEditPath, renderEditFailures, unifiedPatch } from "./edits.js";
export type { ApplyResult, PathCheck, ReadBase } from "./edits.js";
