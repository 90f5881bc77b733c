/**
 * Pure parts of the loop: which files a verdict's workspace holds, the final state, the
 * fallback plan, and the trimming of an execution result for a checkpoint.
 */
import { isRunnerConfig, isTestFile } from "@loopsmith/shared/workspace";
import {
  summarizeTests,
  trimTests,
  type ExecutionResult,
  type FileChange,
  type Plan,
  type StopReason,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { trimToTokens } from "@loopsmith/shared/llm";
import { type LoopsmithError } from "@loopsmith/shared/runtime";
import type { TaskState } from "./state.js";

/** A verdict's workspace, and the candidate's files that were left out of it. */
export interface VerdictFiles {
  files: FileChange[];
  /**
   * Exactly the test files to run: the acceptance tests and the generated tests that the
   * runner would collect by name; undefined when there are none (the runner's conventions
   * then apply). A candidate's source file named like a test is not among them.
   */
  tests?: string[];
  /** Paths of candidate files not used: runner configuration, or a replaced acceptance test. */
  ignored: string[];
}

/**
 * The files a verdict runs over: the task's starting files, the candidate's files over
 * them, its generated tests (unless `generatedTests` is false, as for the hidden-test
 * score), and the task's acceptance tests last (a candidate cannot replace them). Candidate
 * files that configure the test runner ({@link isRunnerConfig}) are left out.
 */
export function verdictFiles(s: TaskState, opts: { generatedTests?: boolean } = {}): VerdictFiles {
  const language = s.task.language;
  const fixed = new Set(s.task.acceptanceTests.map((f) => f.path));
  const ignored: string[] = [];
  const fromCandidate = (f: FileChange): boolean => {
    if (isRunnerConfig(f.path, language) || fixed.has(f.path)) {
      ignored.push(f.path);
      return false;
    }
    return true;
  };
  const candidate = s.candidate?.files.filter(fromCandidate) ?? [];
  const generated = opts.generatedTests === false ? [] : (s.candidate?.tests.filter(fromCandidate) ?? []);
  const byPath = new Map<string, FileChange>();
  for (const f of [...s.task.files, ...candidate, ...generated, ...s.task.acceptanceTests]) byPath.set(f.path, f);
  const tests = [...s.task.acceptanceTests, ...generated].map((f) => f.path).filter((p) => isTestFile(p, language));
  return {
    files: [...byPath.values()],
    ignored: [...new Set(ignored)],
    ...(tests.length ? { tests: [...new Set(tests)] } : {}),
  };
}

/** A plan made from the task alone, used when the planner's reply could not be read. */
export function fallbackPlan(s: TaskState): Plan {
  const firstLine = s.task.goal.split("\n").find((l) => l.trim()) ?? s.task.goal;
  return {
    summary: firstLine.slice(0, 500),
    acceptanceCriteria: [],
    steps: ["Implement the goal."],
    files: s.task.files.map((f) => f.path),
  };
}

/** The state with its final result; pure. */
export function finalState(
  s: TaskState,
  reason: StopReason,
  message: string,
  error?: LoopsmithError,
  hidden: TaskResult["hidden"] = null,
  repo?: TaskResult["repo"],
): TaskState {
  const passed = reason === "passed";
  const result: TaskResult = {
    v: 1,
    taskId: s.task.taskId,
    status: passed ? "passed" : reason === "cancelled" ? "cancelled" : reason === "error" ? "error" : "failed", // needs_approval: failed (not passed; nothing broke)
    stopReason: reason,
    iterations: s.iteration,
    files: s.candidate?.files ?? [],
    tests: s.candidate?.tests ?? [],
    lastExecution: s.lastExecution
      ? { status: s.lastExecution.status, tests: s.lastExecution.tests, durationMs: s.lastExecution.durationMs }
      : null,
    hidden,
    failureIds: s.failureIds,
    usage: s.usage,
    scripted: s.scripted,
    providers: s.providers,
    durationMs: Date.now() - s.startedAtMs,
    message,
    ...(error ? { error: error.toData() } : {}),
    ...(repo ? { repo } : {}),
  };
  return { ...s, status: "final", phase: "done", result };
}

/** Output kept in a checkpoint per stream, in characters (head and tail); the state must fit a NATS message. */
export const CHECKPOINT_OUTPUT_CHARS = 16_000;
/** Test cases kept in a checkpoint (failing ones first). */
export const CHECKPOINT_TESTS = 500;

/** An execution result small enough to checkpoint: stdout and stderr trimmed, test list and messages capped. */
export function forCheckpoint(r: ExecutionResult): ExecutionResult {
  const cut = (t: string): string =>
    t.length > CHECKPOINT_OUTPUT_CHARS ? trimToTokens(t, CHECKPOINT_OUTPUT_CHARS / 4) : t;
  const trimmed = r.stdout.length > CHECKPOINT_OUTPUT_CHARS || r.stderr.length > CHECKPOINT_OUTPUT_CHARS;
  return {
    ...r,
    stdout: cut(r.stdout),
    stderr: cut(r.stderr),
    truncated: r.truncated || trimmed,
    summary: r.summary ?? summarizeTests(r.tests),
    tests: trimTests(r.tests, CHECKPOINT_TESTS).map((t) =>
      t.message && t.message.length > 2_000 ? { ...t, message: t.message.slice(0, 2_000) } : t,
    ),
  };
}
