/**
 * The history row (and run record) memory keeps for a task that ended: one builder for
 * every way a task ends, the loop's own stop and the conductor's internal-error path, so
 * a task that ended in an error is in `history` and `show` with its reason like any other.
 */
import type { StopReason, TaskRecord, TaskResult } from "@loopsmith/shared/contracts";
import type { TaskState } from "./state.js";

/**
 * Largest task + result sent with the task record, in characters: under NATS's default 1 MiB
 * `max_payload` with room for the rest. A larger run keeps its row in history, not its record.
 */
export const RUN_RECORD_MAX_CHARS = 900_000;

/**
 * The record of a final state: status, stop reason, iterations, usage (tokens, USD) in all
 * and per role, wall time (ms) and, when the task and result fit
 * {@link RUN_RECORD_MAX_CHARS}, the task and result so memory records the whole run.
 * @param state a final state (its `result` set by `finalState`)
 * @param reason why it stopped (the result's stop reason)
 * @param finishedAt ISO-8601 time it ended; defaults to now
 * @throws Error when `state` has no result (it is not final)
 */
export function taskRecordOf(state: TaskState, reason: StopReason, finishedAt = new Date().toISOString()): TaskRecord {
  const result: TaskResult | undefined = state.result;
  if (!result) throw new Error(`task ${state.task.taskId} has no result: only a final state is recorded`);
  const fits = JSON.stringify(state.task).length + JSON.stringify(result).length < RUN_RECORD_MAX_CHARS;
  return {
    v: 1,
    taskId: state.task.taskId,
    goal: state.task.goal,
    language: state.task.language,
    status: result.status,
    stopReason: reason,
    iterations: state.iteration,
    usage: state.usage.total,
    usageByRole: state.usage.byRole,
    durationMs: result.durationMs,
    scripted: state.scripted,
    finishedAt,
    ...(fits ? { task: state.task, result } : {}),
    ...(state.task.owner ? { owner: state.task.owner } : {}),
  };
}
