/**
 * The loop of one task, as a resumable state machine:
 * (repo mode: PREPARE →) RECALL → PLAN → BUILD → GATE → REVIEW? → AUDIT? → EXECUTE → (pass: SCORE → DONE)
 *                                                  → (fail: REMEMBER → REFLECT → BUILD …)
 * Agent mode (a repo task with `mode: "agent"`): RECALL → EXPLORE (one model turn and its
 * tools per execution, a checkpoint each, until submit) → GATE …, and EXPLORE in BUILD's place
 * after REFLECT (`agent/explore.ts`).
 * A DAG task (`decompose`, `dag/phases.ts`): PREPARE → RECALL → PLAN (subtasks) → SCHEDULE →
 * INTEGRATE → (pass: SCORE → DONE) | (fail: one subtask re-opened → SCHEDULE …)
 * Every phase ends with a checkpoint, so a conductor that dies resumes at the phase it was in.
 * Between phases the dispatcher stops a task that was cancelled, or whose wall-clock limit
 * (`limits.timeLimitMs`, from the checkpointed `startedAtMs`) has passed (`time_limit`).
 * Steps are injected ({@link Steps}); the phases are in `phases.ts`, `repo/phases.ts` and
 * `dag/phases.ts`, the task's mechanics in `run.ts`, the dispatcher and every checkpoint
 * between phases in `durable/machine.ts` (the improver's generations run through it too), the
 * pure parts in `verdict.ts` and `requests.ts`, the texts in `event-texts.ts`. Nothing here
 * does I/O of its own.
 */
import type { Phase } from "@loopsmith/shared/contracts";
import { explorePhase } from "./agent/explore.js";
import { auditPhase } from "./audit.js";
import { dagPlanPhase, integratePhase, schedulePhase } from "./dag/phases.js";
import { runTexts } from "./event-texts.js";
import {
  buildPhase,
  executePhase,
  gatePhase,
  planPhase,
  recallPhase,
  reflectPhase,
  rememberPhase,
  reviewPhase,
  scorePhase,
} from "./phases.js";
import { preparePhase } from "./repo/phases.js";
import { timeLeftMs } from "./requests.js";
import { HandBack, runPhases, type PhaseMachine } from "./durable/index.js";
import { TASK_STEPS, TaskRun, type PhaseFn, type Stop } from "./run.js";
import type { TaskState } from "./state.js";
import type { LoopIO, Steps } from "./steps.js";

export { MAX_SANDBOX_ERRORS } from "./run.js";
export {
  CHECKPOINT_OUTPUT_CHARS,
  fallbackPlan,
  finalState,
  forCheckpoint,
  verdictFiles,
  type VerdictFiles,
} from "./verdict.js";

const PHASES: Record<Phase, PhaseFn> = {
  prepare: preparePhase,
  recall: recallPhase,
  plan: (s, run) => (s.task.decompose ? dagPlanPhase(s, run) : planPhase(s, run)),
  build: buildPhase,
  explore: explorePhase,
  gate: gatePhase,
  review: reviewPhase,
  audit: auditPhase,
  execute: executePhase,
  score: scorePhase,
  remember: rememberPhase,
  reflect: reflectPhase,
  schedule: schedulePhase,
  integrate: integratePhase,
  // A final state resumed at DONE ends again with its own stop.
  done: async (s) => ({ stop: s.result?.stopReason ?? "error", message: s.result?.message ?? runTexts.finished }),
};

/**
 * Between phases: a final state ends, a cancelled task stops (unless it is being scored), one
 * past its wall-clock limit stops (unless it already passed), a stopping conductor hands back.
 * @throws HandBack when the conductor is stopping
 */
async function beforePhase(run: TaskRun): Promise<TaskState | undefined> {
  const { s, io } = run;
  if (s.status === "final") return s;
  // A task that passed is scored and ends as passed: a cancel no longer changes that.
  if (io.cancelled() && s.phase !== "score")
    return run.stop({ stop: "cancelled", message: runTexts.cancelledOnRequest });
  // Past its wall-clock limit (counted from the checkpointed start) the task stops, unless it already passed.
  const left = timeLeftMs(s);
  if (left !== undefined && left <= 0 && s.phase !== "score" && s.phase !== "done")
    return run.stop({
      stop: "time_limit",
      message: runTexts.timeLimit(s.task.limits.timeLimitMs ?? 0, Date.now() - s.startedAtMs, s.iteration),
    });
  if (io.stopping()) throw new HandBack(runTexts.handBack);
  io.heartbeat();
  return undefined;
}

/** The task's phase machine: its table, its phase field, the rules between phases, its stop. */
const TASK_MACHINE: PhaseMachine<Phase, TaskState, TaskRun, Stop> = {
  phases: PHASES,
  phaseOf: (s) => s.phase,
  before: beforePhase,
  ...TASK_STEPS,
};

/**
 * Runs one task from its current phase to a final state: each phase from the state it starts
 * at, its outcome carried out by the durable machine (checkpoint, or stop).
 * @throws HandBack when the task must be handed back (the conductor is stopping, or a
 *   retryable infrastructure error): the message is redelivered and resumes from the checkpoint.
 */
export async function runLoop(state: TaskState, steps: Steps, io: LoopIO): Promise<TaskState> {
  return runPhases(new TaskRun(state, steps, io), TASK_MACHINE);
}
