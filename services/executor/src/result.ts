/**
 * From a finished sandbox run to the {@link ExecutionResult} the executor reports: the checks
 * that block a request before any container is used, and the verdict of a raw run (the
 * supervisor's trailer, the JUnit file, the stop reason) with its test cases and output.
 */
import { hasCode, summarizeTests, trimTests, type ExecutionRequest, type ExecutionResult, type TestCase } from "@loopsmith/shared";
import { parseJUnit } from "./junit.js";
import { verdict } from "./outcome.js";
import { setupField, type RunPlan } from "./repo-run.js";
import type { RawRun } from "./sandbox.js";
import { shellOutcome } from "./shell.js";
import { checkFiles } from "./workspace.js";

/** Most test cases listed in a result (failing ones first); `summary` counts them all. */
export const MAX_TESTS_REPORTED = 1_000;

/** A result with the exact bytes of the output (the result's strings are UTF-8 decoded). */
export interface DetailedResult {
  result: ExecutionResult;
  /** stdout as produced, at most `outputLimitBytes`. */
  stdout: Buffer;
  /** stderr as produced, at most `outputLimitBytes`. */
  stderr: Buffer;
}

/** A `sandbox_error` result saying `reason`, with nothing run. */
export function sandboxError(reason: string): ExecutionResult {
  return { status: "sandbox_error", exitCode: null, durationMs: 0, tests: [], stdout: "", stderr: "", truncated: false, reason };
}

/** A result with no output bytes (nothing ran). */
export function withoutOutput(result: ExecutionResult): DetailedResult {
  return { result, stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) };
}

/** A `blocked` result saying `reason` (the request was refused before any container was used). */
export function blocked(reason: string): DetailedResult {
  return withoutOutput({ ...sandboxError(reason), status: "blocked" });
}

/**
 * The checks of a request before any container is used: its files fit the workspace
 * (`checkFiles`, `tmpfsBytes` in bytes) and the test files it names are among them (unless
 * it runs on a repository's base tree, where they may already be).
 * @returns a `blocked` result, or undefined when the request may run
 * @throws whatever `checkFiles` throws besides `workspace_invalid`
 */
export function precheck(req: ExecutionRequest, tmpfsBytes: number): DetailedResult | undefined {
  try {
    checkFiles(req.files, tmpfsBytes);
  } catch (err) {
    if (!hasCode(err, "workspace_invalid")) throw err;
    return blocked(err.message);
  }
  const missing = req.base ? [] : (req.tests ?? []).filter((t) => !req.files.some((f) => f.path === t));
  if (missing.length) return blocked(`the test files to run are not in the workspace: ${missing.join(", ")}`);
  return undefined;
}

/**
 * The result of a finished run: test cases from the JUnit file the supervisor read back, the
 * verdict (outcome.ts; a shell command's through `shellOutcome`), a failed setup named in the
 * reason, durations in ms (the command's own when the supervisor reported it, else wall time).
 */
export function resultOf(raw: RawRun, plan: RunPlan, req: ExecutionRequest): DetailedResult {
  let tests: TestCase[] = [];
  if (raw.trailer?.result) tests = parseJUnit(Buffer.from(raw.trailer.result, "base64").toString("utf8")) ?? [];
  let v = verdict({
    runner: plan.runner,
    stopReason: raw.stopReason,
    oomKilled: raw.oomKilled,
    trailer: raw.trailer,
    containerExitCode: raw.containerExitCode,
    tests,
    timeoutMs: req.timeoutMs,
    memoryMb: req.memoryMb,
  });
  const durationMs = raw.trailer?.durationMs ?? raw.wallMs;
  if (plan.shell !== undefined) {
    ({ verdict: v, tests } = shellOutcome(v, { shell: plan.shell, tests, stdout: raw.stdout.toString("utf8"), stderr: raw.stderr.toString("utf8"), durationMs }));
  }
  if (plan.setup?.status === "failed" && v.status !== "passed") {
    v = { ...v, reason: `${v.reason ? `${v.reason}; ` : ""}the setup command failed, so the run had no dependency layer` };
  }
  const result: ExecutionResult = {
    status: v.status,
    exitCode: v.exitCode,
    durationMs: Math.round(durationMs * 1000) / 1000,
    tests: trimTests(tests, MAX_TESTS_REPORTED),
    summary: summarizeTests(tests),
    stdout: raw.stdout.toString("utf8"),
    stderr: raw.stderr.toString("utf8"),
    truncated: raw.truncated,
    ...(v.reason ? { reason: v.reason } : {}),
    ...(plan.setup ? { setup: setupField(plan.setup) } : {}),
  };
  return { result, stdout: raw.stdout, stderr: raw.stderr };
}
