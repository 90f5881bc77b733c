/**
 * From a finished sandbox run to the {@link ExecutionResult} the executor reports: the checks
 * that block a request before any container is used, and the verdict of a raw run (the
 * supervisor's trailer, the JUnit file, the stop reason) with its test cases and output.
 */
import { hasCode } from "@loopsmith/shared/runtime";
import {
  summarizeTests,
  trimTests,
  type ExecutionRequest,
  type ExecutionResult,
  type RunLimits,
  type TestCase,
} from "@loopsmith/shared/contracts";
import { judgeIntegrity, readChannel, type IntegrityJudgement } from "./integrity.js";
import { parseJUnit } from "./junit.js";
import { verdict, type Verdict } from "./outcome.js";
import { setupField, type RunPlan } from "./repo-run.js";
import type { RawRun, SandboxSpec } from "./sandbox.js";
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
  return {
    status: "sandbox_error",
    exitCode: null,
    durationMs: 0,
    tests: [],
    stdout: "",
    stderr: "",
    truncated: false,
    reason,
  };
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
 * The verdict from the controller's report ({@link judgeIntegrity}) of a run that ended by
 * itself: `tampering` when the report does not add up; `error` when the sessions could not
 * collect or a worker crashed; else `failed` when a test failed, `error` when no test ran or
 * the command exited non-zero with every test passing (loopsmith's own command), `failed`
 * for the same in a shell line (the line's other steps failed), and `passed` otherwise.
 */
export function controllerVerdict(j: IntegrityJudgement, exitCode: number | null, shell: boolean): Verdict {
  if (j.tampering) return { status: "tampering", exitCode, reason: `the verdict cannot be trusted: ${j.tampering}` };
  if (j.error) return { status: "error", exitCode, reason: j.error };
  if (j.tests.some((t) => t.status === "failed" || t.status === "error")) return { status: "failed", exitCode };
  if (!j.tests.some((t) => t.status === "passed"))
    return {
      status: "error",
      exitCode,
      reason: j.tests.length ? "every test was skipped" : "the test runner collected no tests",
    };
  if (exitCode !== 0) {
    const reason = `every test passed, but the command exited with code ${exitCode ?? "?"}`;
    return shell ? { status: "failed", exitCode, reason } : { status: "error", exitCode, reason };
  }
  return { status: "passed", exitCode: 0 };
}

/**
 * The limits of a run in `spec`'s container: its CPU quota, pids limit, tmpfs size and runtime,
 * the memory it ran with (bytes, updated per run) and the run's timeout (ms).
 */
export function limitsOf(spec: SandboxSpec, memoryBytes: number, timeoutMs: number): RunLimits {
  return {
    cpus: spec.cpus,
    memoryMb: Math.round(memoryBytes / (1024 * 1024)),
    pidsLimit: spec.pidsLimit,
    timeoutMs,
    tmpfsMb: spec.tmpfsMb,
    ...(spec.runtime ? { runtime: spec.runtime } : {}),
  };
}

/** Statuses decided before any report is read: the run did not end by itself. */
const STOPPED = new Set(["timeout", "output_limit", "killed", "oom", "blocked"]);

/**
 * The result of a finished run: the verdict and test cases from the runner's controller when
 * the run has a verdict channel (integrity.ts), else from the JUnit file the supervisor read
 * back (outcome.ts; a shell command's through `shellOutcome`); a failed setup named in the
 * reason, durations in ms (the command's own when the supervisor reported it, else wall time),
 * and the limits the run ran under when given ({@link limitsOf}).
 */
export function resultOf(raw: RawRun, plan: RunPlan, req: ExecutionRequest, limits?: RunLimits): DetailedResult {
  let tests: TestCase[] = [];
  const junit = raw.trailer?.result ? parseJUnit(Buffer.from(raw.trailer.result, "base64").toString("utf8")) : null;
  if (junit) tests = junit;
  let source: ExecutionResult["verdict"] = junit ? "result_file" : "exit_code";
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
  const judged =
    plan.integrity && !STOPPED.has(v.status)
      ? judgeIntegrity(
          readChannel(Buffer.from(raw.trailer?.verdict ?? "", "base64"), plan.integrity.key),
          plan.integrity,
          plan.integrityRequired ?? false,
        )
      : undefined;
  if (judged) {
    tests = judged.tests;
    v = controllerVerdict(judged, raw.trailer?.exitCode ?? null, plan.shell !== undefined);
    source = "controller";
  } else if (plan.shell !== undefined) {
    ({ verdict: v, tests } = shellOutcome(v, {
      shell: plan.shell,
      tests,
      stdout: raw.stdout.toString("utf8"),
      stderr: raw.stderr.toString("utf8"),
      durationMs,
    }));
  }
  if (plan.setup?.status === "failed" && v.status !== "passed") {
    v = {
      ...v,
      reason: `${v.reason ? `${v.reason}; ` : ""}the setup command failed, so the run had no dependency layer`,
    };
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
    ...(v.status === "passed" || v.status === "failed" || v.status === "tampering" ? { verdict: source } : {}),
    ...(plan.setup ? { setup: setupField(plan.setup) } : {}),
    ...(limits ? { limits } : {}),
  };
  return { result, stdout: raw.stdout, stderr: raw.stderr };
}
