/**
 * From what happened in the container to an {@link ExecutionStatus}: the executor's own
 * stops first (timeout, output cap, cancel), then the OOM killer, then the supervisor's
 * report (setup failure, signal, exit code read by the runner's conventions).
 */
import { constants } from "node:os";
import type { ExecutionStatus, TestCase } from "@loopsmith/shared/contracts";
import type { BootTrailer } from "./bootstrap.js";
import type { Runner } from "./commands.js";

/** Why the executor stopped a container itself, if it did. */
export type StopReason = "timeout" | "output_limit" | "cancelled" | "stopped" | "trailer_too_large";

/** Everything the status depends on. */
export interface Outcome {
  runner: Runner;
  stopReason: StopReason | null;
  /** Docker's `State.OOMKilled`. */
  oomKilled: boolean;
  /** The supervisor's report, or null when none arrived. */
  trailer: BootTrailer | null;
  /** Container exit code (from inspect), when known. */
  containerExitCode: number | null;
  /** Test cases parsed from the result file. */
  tests: TestCase[];
  /** The run's limits, for the reasons' wording. */
  timeoutMs: number;
  memoryMb: number;
}

/** The status, and a reason when the status alone does not say enough. */
export interface Verdict {
  status: ExecutionStatus;
  exitCode: number | null;
  reason?: string;
}

/** `SIGSEGV` for 11, else `signal N`. */
export function signalName(n: number): string {
  const name = Object.entries(constants.signals).find(([, v]) => v === n)?.[0];
  return name ?? `signal ${n}`;
}

function byExitCode(runner: Runner, code: number, tests: TestCase[]): Verdict {
  if (code === 0) return { status: "passed", exitCode: 0 };
  if (runner === "pytest") {
    if (code === 1) return { status: "failed", exitCode: code };
    if (code === 5) return { status: "error", exitCode: code, reason: "pytest collected no tests" };
    if (code === 2)
      return { status: "error", exitCode: code, reason: "pytest could not collect the tests (syntax or import error)" };
    return { status: "error", exitCode: code, reason: `pytest ended with exit code ${code}` };
  }
  if (code === 127) return { status: "error", exitCode: code, reason: "the command was not found" };
  if (code === 126) return { status: "error", exitCode: code, reason: "the command could not be executed" };
  if (runner === "node") {
    // A file that fails to load is reported as one failing "test" named by its absolute path.
    const ran = tests.some((t) => t.status === "passed" || t.status === "skipped");
    const loadFailure = !ran && tests.every((t) => t.name.startsWith("/workspace/"));
    if (loadFailure) {
      return { status: "error", exitCode: code, reason: "the tests could not be loaded (syntax or import error)" };
    }
  }
  return { status: "failed", exitCode: code };
}

/** Decides the status of one run. */
export function verdict(o: Outcome): Verdict {
  const exit = o.trailer?.exitCode ?? o.containerExitCode;
  switch (o.stopReason) {
    case "timeout":
      return {
        status: "timeout",
        exitCode: null,
        reason: `the run passed its ${o.timeoutMs} ms time limit and was killed`,
      };
    case "output_limit":
      return {
        status: "output_limit",
        exitCode: null,
        reason: "stdout or stderr passed the output cap and the run was stopped",
      };
    case "cancelled":
      return { status: "killed", exitCode: null, reason: "the run was cancelled" };
    case "stopped":
      return { status: "killed", exitCode: null, reason: "the executor stopped during the run" };
    case "trailer_too_large":
      return { status: "output_limit", exitCode: null, reason: "the result file passed its size limit" };
    default:
      break;
  }
  if (o.oomKilled) {
    return {
      status: "oom",
      exitCode: exit ?? null,
      reason: `the run passed its ${o.memoryMb} MiB memory limit and was killed`,
    };
  }
  const t = o.trailer;
  if (!t) {
    return {
      status: "killed",
      exitCode: o.containerExitCode,
      reason: "the sandbox's supervisor process was killed before it could report (by the command?)",
    };
  }
  if (t.phase === "setup")
    return { status: "blocked", exitCode: null, reason: `the workspace could not be written: ${t.error ?? "unknown"}` };
  if (t.signal !== null) {
    return { status: "killed", exitCode: 128 + t.signal, reason: `the command was killed by ${signalName(t.signal)}` };
  }
  return byExitCode(o.runner, t.exitCode ?? 1, o.tests);
}
