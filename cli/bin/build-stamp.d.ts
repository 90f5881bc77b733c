/** Types of build-stamp.js (plain JavaScript, so the `loopsmith` command can use it before tsx is loaded). */

/** The stamp's file name inside the build folder (`build.json`). */
export declare const BUILD_STAMP: string;
/** The build folder, relative to the source root (`dist/app`). */
export declare const BUILD_DIR: string;

/** What `npm run build` writes to `dist/app/build.json`. */
export interface BuildStamp {
  /** Stamp format version. */
  v: number;
  /** SHA-256 (hex) of the listed files' paths and contents ({@link sourceFingerprint}). */
  fingerprint: string;
  /** The source files the build was made from, relative to the root, sorted. */
  files: string[];
  /** When the build was made (ISO 8601). */
  builtAt: string;
}

/**
 * SHA-256 (hex) over the listed files (path and SHA-256 of the bytes of each, in order).
 * @throws the file system's error when a file cannot be read
 */
export declare function sourceFingerprint(root: string, files: readonly string[]): string;

/** The stamp for a build made from `files` (deduplicated and sorted) under `root`. */
export declare function makeStamp(root: string, files: readonly string[]): BuildStamp;

/**
 * The build folder (`dir`, default `<root>/dist/app`) when it was built from exactly the
 * sources under `root` now, else `null` (no build, a bad stamp, a listed file gone or
 * changed, or `LOOPSMITH_FROM_SOURCE=1`). Reads every listed file (~200 files: ~30 ms).
 */
export declare function currentBuild(root: string, env?: NodeJS.ProcessEnv, dir?: string): string | null;
