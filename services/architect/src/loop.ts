/**
 * The loop of one task, as a resumable state machine:
 * (repo mode: PREPARE →) RECALL → PLAN → BUILD → GATE → REVIEW? → EXECUTE → (pass: SCORE → DONE)
 *                                                  → (fail: REMEMBER → REFLECT → BUILD …)
 * A DAG task (`decompose`, `dag/phases.ts`): PREPARE → RECALL → PLAN (subtasks) → SCHEDULE →
 * INTEGRATE → (pass: DONE) | (fail: one subtask re-opened → SCHEDULE …)
 * Every phase ends with a checkpoint, so a conductor that dies resumes at the phase it was in.
 * Steps are injected ({@link Steps}); the phases are in `phases.ts`, their shared mechanics
 * in `run.ts`, the pure parts in `verdict.ts`. Nothing here does I/O of its own.
 */
import type { Phase } from "@loopsmith/shared";
import { buildPhase, executePhase, gatePhase, planPhase, recallPhase, reflectPhase, rememberPhase, reviewPhase, type PhaseOutcome } from "./phases.js";
import { RetryLater, TaskRun } from "./run.js";
import { preparePhase } from "./repo/phases.js";
import { dagPlanPhase, integratePhase, schedulePhase } from "./dag/phases.js";
import type { TaskState } from "./state.js";
import type { LoopIO, Steps } from "./steps.js";

export { MAX_SANDBOX_ERRORS, RetryLater } from "./run.js";
export { CHECKPOINT_OUTPUT_CHARS, fallbackPlan, finalState, forCheckpoint, verdictFiles, type VerdictFiles } from "./verdict.js";

const PHASES: Record<Exclude<Phase, "score" | "done">, (run: TaskRun) => Promise<PhaseOutcome>> = {
  prepare: preparePhase,
  recall: recallPhase,
  plan: (run) => (run.s.task.decompose ? dagPlanPhase(run) : planPhase(run)),
  build: buildPhase,
  gate: gatePhase,
  review: reviewPhase,
  execute: executePhase,
  remember: rememberPhase,
  reflect: reflectPhase,
  schedule: schedulePhase,
  integrate: integratePhase,
};

/**
 * Runs one task from its current phase to a final state.
 * @throws RetryLater when the task must be handed back (the conductor is stopping, or a
 *   retryable infrastructure error): the message is redelivered and resumes from the checkpoint.
 */
export async function runLoop(state: TaskState, steps: Steps, io: LoopIO): Promise<TaskState> {
  const run = new TaskRun(state, steps, io);
  for (;;) {
    const s = run.s;
    if (s.status === "final") return s;
    if (io.cancelled()) return run.stop("cancelled", "cancelled on request");
    if (io.stopping()) throw new RetryLater("the conductor is stopping; the task resumes from its checkpoint");
    io.heartbeat();
    if (s.phase === "score" || s.phase === "done") return run.stop(s.result?.stopReason ?? "error", s.result?.message ?? "finished");
    const final = await PHASES[s.phase](run);
    if (final) return final;
  }
}
