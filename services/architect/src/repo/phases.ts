/**
 * Repo mode's own phase, PREPARE: the base tree, the commands, and the baseline run of the
 * repository's own checks. The rest of repo mode (the prompt's view, the builder's edits, the
 * policy check, the change a task ends with) is in `workspace.ts`, used by the loop's phases.
 */
import {
  BASELINE_LIMIT_MS,
  RUN_LIMIT_MULTIPLE,
  instructionsUse,
  runLimitFromBaseline,
  testSummary,
} from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { loopTexts, repoTexts, runTexts } from "../event-texts.js";
import { failingTests } from "../failure.js";
import { MAX_SANDBOX_ERRORS, type PhaseOutcome, type TaskRun } from "../run.js";
import type { TaskState } from "../state.js";
import { detectCommands, listTree, readBaseFile } from "./context.js";
import { readInstructions } from "./instructions.js";
import { baseTree, repoExecution, repoOf } from "./workspace.js";

/**
 * PREPARE: the base tree is fetched (once per commit), the commands detected when the task
 * did not give them, the project instructions found (an event names the file, its size and
 * whether it was cut), and the repository's checks run once on the base commit: the failing
 * tests there are what the task starts from, and its wall time sets the limit of every later
 * run (`runLimitFromBaseline`, unless the user gave `testTimeoutMs`; said in an event). A
 * command the sandbox does not have stops the
 * task before any model is called (`command_not_found`).
 * @throws the base tree's error when it is retryable (the task is handed back)
 */
export async function preparePhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  const repo = repoOf(s.task);
  await run.emit("phase", repoTexts.preparing(repo.baseCommit), { phase: "prepare" });
  let root: string;
  try {
    root = await baseTree(s, run.steps);
  } catch (err) {
    const e =
      err instanceof LoopsmithError ? err : new LoopsmithError("internal", (err as Error).message, { cause: err });
    if (e.retryable) throw err;
    return { stop: "error", message: runTexts.stopped(e.message), error: e };
  }
  const files = listTree(root);
  const detected = detectCommands(files, (p) => readBaseFile(root, p));
  const testCommand = repo.testCommand ?? detected.testCommand;
  if (!testCommand)
    return {
      stop: "error",
      message: repoTexts.noTestCommand,
      error: new LoopsmithError("bad_request", "no test command"),
    };
  const setupCommand = repo.setupCommand ?? detected.setupCommand;
  await run.emit(
    "step",
    repoTexts.commands(files.length, testCommand, repo.testCommand ? undefined : detected.why, setupCommand),
    { phase: "prepare", data: { files: files.length, testCommand, setupCommand } },
  );
  // The project instructions every prompt of the task will carry (`repoBrief` reads the same file).
  const instructions = readInstructions(root);
  if (instructions) {
    const use = instructionsUse(instructions);
    await run.emit("step", repoTexts.instructions(use), { phase: "prepare", data: { instructions: use } });
  }
  // The baseline runs with the commands in use; its outcome completes them. Its limit is the
  // user's test timeout, else generous: its time sets the limit of every later run.
  const floorMs = s.task.limits.runTimeoutMs;
  const baselineLimitMs = repo.testTimeoutMs ?? Math.max(floorMs, BASELINE_LIMIT_MS);
  const commands = {
    repo: { testCommand, setupCommand, failingAtBase: [], baseStatus: "unknown", runTimeoutMs: baselineLimitMs },
  };
  const withCommands = { ...s, ...commands };
  const result = await run.sandbox(
    "prepare",
    (attempt) => repoExecution(withCommands, "baseline", undefined, attempt),
    repoTexts.baselineSandboxFailed,
  );
  if (result.status === "sandbox_error") {
    return {
      stop: "error",
      message: repoTexts.baselineGaveUp(MAX_SANDBOX_ERRORS, result.reason),
      error: new LoopsmithError("sandbox_error", result.reason ?? "sandbox failure"),
      patch: commands,
    };
  }
  if (result.status === "command_not_found") {
    const error = new LoopsmithError("command_not_found", `${testCommand}: ${result.reason ?? "command not found"}`);
    return { stop: "error", message: loopTexts.commandNotFound(result.reason ?? testCommand), error, patch: commands };
  }
  if (result.setup?.status === "failed")
    await run.emit("warning", repoTexts.setupFailed(result.setup.message), { phase: "prepare" });
  const failing = failingTests(result);
  const counts = testSummary(result);
  const runTimeoutMs =
    repo.testTimeoutMs ??
    runLimitFromBaseline(
      { durationMs: result.durationMs, timedOut: result.status === "timeout" },
      baselineLimitMs,
      floorMs,
    );
  await run.emit("step", repoTexts.baseline(repo.baseCommit, result.status, counts.total, failing, result.durationMs), {
    phase: "prepare",
    data: { status: result.status, failingTests: failing.slice(0, 100), summary: counts, setup: result.setup },
  });
  const limitWhy = repo.testTimeoutMs !== undefined ? "given" : result.status === "timeout" ? "timeout" : "derived";
  await run.emit("step", repoTexts.runLimit(runTimeoutMs, limitWhy, result.durationMs, floorMs), {
    phase: "prepare",
    data: { runTimeoutMs, baselineMs: result.durationMs, floorMs, multiple: RUN_LIMIT_MULTIPLE, source: limitWhy },
  });
  return {
    next: "recall",
    patch: {
      repo: {
        testCommand,
        setupCommand,
        failingAtBase: failing.slice(0, 200),
        baseStatus: result.status,
        runTimeoutMs,
      },
    },
  };
}
