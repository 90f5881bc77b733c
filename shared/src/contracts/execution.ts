/** Running a command over a workspace in the sandbox. */
import { z } from "zod";
import { FileChange, Language, Owner, RelativePath, StepHeader } from "./common.js";
import { CommitId, SandboxImage } from "./repo.js";

/**
 * How a run ended.
 * - `passed`: the command exited 0 (tests ran and passed).
 * - `failed`: tests ran, some failed.
 * - `error`: the code could not run (syntax error, import error, collection error).
 * - `timeout`: the wall-clock limit killed it.
 * - `oom`: the memory limit killed it.
 * - `output_limit`: stdout/stderr passed the cap and the run was stopped.
 * - `killed`: ended by a signal other than the above (for example a cancel).
 * - `blocked`: refused before running (static gate, invalid workspace).
 * - `command_not_found`: the command does not exist in the sandbox (shell exit 127, or exec
 *   failed); a configuration error, never a test failure.
 * - `tampering`: the verdict cannot be trusted: the test runner's controller saw the code under
 *   test forge or cut short its results (a tripwire test with the wrong outcome or missing, a
 *   session that started and never ended, results for tests nobody collected, writes to the
 *   verdict channel by another process). Never a pass; `reason` says what was seen
 *   (docs/SANDBOX.md, "Verdicts").
 * - `sandbox_error`: the infrastructure failed; never counted against the candidate.
 */
export const ExecutionStatus = z.enum([
  "passed",
  "failed",
  "error",
  "timeout",
  "oom",
  "output_limit",
  "killed",
  "blocked",
  "command_not_found",
  "tampering",
  "sandbox_error",
]);
export type ExecutionStatus = z.infer<typeof ExecutionStatus>;

/** One test case's outcome. `durationMs` in ms. */
export const TestCase = z.object({
  name: z.string(),
  classname: z.string().default(""),
  status: z.enum(["passed", "failed", "error", "skipped"]),
  message: z.string().max(8_000).optional(),
  durationMs: z.number().nonnegative().default(0),
});
export type TestCase = z.infer<typeof TestCase>;

/**
 * Repo mode: the base tree a run's `files` overlay, and how to prepare it. The executor reads
 * the tree from the object store (cached by commit) and never copies `.git` or ignored files.
 */
export const ExecutionBase = z.object({
  /** Object name in its owner's snapshot store (see `snapshotName`, `snapshotBucket`). */
  snapshot: z.string().min(1).max(255),
  /** The owner of the task whose tree this is: whose snapshot store holds it. @defaultValue "client" */
  owner: Owner.optional(),
  commit: CommitId,
  /** Base paths the candidate removes. */
  deleted: z.array(RelativePath).max(500).default([]),
  /**
   * Installs dependencies, network limited to the package registries; its result is a layer
   * reused by every run with the same commit and manifests. Absent or `""`: no setup.
   */
  setupCommand: z.string().max(4_000).optional(),
});
export type ExecutionBase = z.infer<typeof ExecutionBase>;

/** Ask the executor to run `command` over `files` in a fresh container. */
export const ExecutionRequest = z.object({
  ...StepHeader,
  language: Language,
  /** The workspace (repo mode: the changed files, over `base`; may then be empty). */
  files: z.array(FileChange).max(500),
  /** Repo mode: the tree under `files`. */
  base: ExecutionBase.optional(),
  /** A command line run with `sh -c` at the workspace root (repo mode's test command), instead of `command`. */
  shell: z.string().min(1).max(4_000).optional(),
  /** argv inside the container; defaults to the language's test command. */
  command: z.array(z.string()).min(1).max(64).optional(),
  /**
   * With the default command: exactly the test files to run (paths among `files`). Absent:
   * every file the runner's naming conventions find. The hidden-test score names the hidden
   * test files, so nothing else is run or counted.
   */
  tests: z.array(RelativePath).min(1).max(500).optional(),
  /** Wall-clock limit in ms. @defaultValue 30000 */
  timeoutMs: z.number().int().min(100).max(600_000).default(30_000),
  /** Memory limit in MiB (swap equal to memory). @defaultValue 512 */
  memoryMb: z.number().int().min(32).max(16_384).default(512),
  /** The image to run in (repo mode); absent: loopsmith's image of the language. */
  image: SandboxImage.optional(),
});
export type ExecutionRequest = z.infer<typeof ExecutionRequest>;

/** Test cases of a run counted by status (all of them, also when `tests` was trimmed). */
export const TestSummary = z.object({
  total: z.number().int().nonnegative(),
  passed: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  error: z.number().int().nonnegative(),
  skipped: z.number().int().nonnegative(),
});
export type TestSummary = z.infer<typeof TestSummary>;

/**
 * The limits a sandbox run ran under, as the executor applied them: CPU quota (CPUs), memory
 * (MiB, no swap), processes and threads (cgroup pids limit), wall clock (ms), each tmpfs
 * (`/workspace`, `/tmp`, MiB), and the OCI runtime when it is not the engine's default. A
 * result that does not record them cannot be compared with another run.
 */
export const RunLimits = z.object({
  cpus: z.number().positive(),
  memoryMb: z.number().int().positive(),
  pidsLimit: z.number().int().positive(),
  timeoutMs: z.number().int().positive(),
  tmpfsMb: z.number().int().positive(),
  runtime: z.string().optional(),
});
export type RunLimits = z.infer<typeof RunLimits>;

/** What a sandbox run produced. Output fields are UTF-8 text, capped in bytes by configuration. */
export const ExecutionResult = z.object({
  status: ExecutionStatus,
  exitCode: z.number().int().nullable(),
  /** Wall time of the command in the container, in ms. */
  durationMs: z.number().nonnegative(),
  /** Test cases; failing ones first when the list was trimmed to fit (see `summary`). */
  tests: z.array(TestCase),
  /** Counts over every test case of the run; absent only from an older executor. */
  summary: TestSummary.optional(),
  stdout: z.string(),
  stderr: z.string(),
  /** True when stdout or stderr was cut at the cap. */
  truncated: z.boolean(),
  /** Why the run was blocked or errored in the sandbox, when it was. */
  reason: z.string().optional(),
  /**
   * Where the verdict came from: `controller` (the test runner's controller reported on the
   * signed verdict channel and the run's tripwires held: the code under test could not write
   * it), `result_file` (a JUnit file the command wrote: a shell line that ran no runner
   * loopsmith knows), `exit_code` (the exit status alone). Only `controller` resists a
   * candidate that forges its results. Absent from an older executor.
   */
  verdict: z.enum(["controller", "result_file", "exit_code"]).optional(),
  /**
   * Repo mode, when the request's `base.setupCommand` is non-empty: the dependency layer the
   * run used. `built` by this run, `reused` (built before, or by a concurrent run), `failed`
   * (this build, or a recent one, failed: the run went on without the layer; `message` says
   * why), `skipped` (not attempted, `message` says why). `key` is the layer's sha256 (hex);
   * `durationMs` the time this run spent on it, in ms.
   */
  setup: z
    .object({
      key: z.string(),
      status: z.enum(["built", "reused", "failed", "skipped"]),
      durationMs: z.number().nonnegative(),
      message: z.string().optional(),
    })
    .optional(),
  /** The limits the run ran under; absent when no container ran (blocked) or from an older executor. */
  limits: RunLimits.optional(),
});
export type ExecutionResult = z.infer<typeof ExecutionResult>;

/** Counts of `tests` by status. */
export function summarizeTests(tests: readonly TestCase[]): TestSummary {
  const s: TestSummary = { total: tests.length, passed: 0, failed: 0, error: 0, skipped: 0 };
  for (const t of tests) s[t.status] += 1;
  return s;
}

/** A result's test counts: its `summary`, or counted from `tests` when it has none. */
export function testSummary(result: Pick<ExecutionResult, "tests" | "summary">): TestSummary {
  return result.summary ?? summarizeTests(result.tests);
}

/**
 * At most `max` test cases, failing and erroring ones first (then the others, in run order),
 * so a run with 90 000 cases still reports what broke. The run's counts stay in `summary`.
 */
export function trimTests(tests: readonly TestCase[], max: number): TestCase[] {
  if (tests.length <= max) return [...tests];
  const bad = tests.filter((t) => t.status === "failed" || t.status === "error");
  const rest = tests.filter((t) => t.status !== "failed" && t.status !== "error");
  return [...bad, ...rest].slice(0, Math.max(0, max));
}
