/**
 * What a task's state says about the step requests it makes: idempotency keys, what is left
 * of the budget, the task's own script and memory scope, and a sandbox run's request. Pure
 * functions of the state (`state.ts`); the run (`run.ts`) and the phases call them.
 */
import {
  idempotencyKey,
  type Budget,
  type Candidate,
  type ExecutionRequest,
  type FileChange,
  type TaskScript,
} from "@loopsmith/shared/contracts";
import { runTimeoutOf, type TaskState } from "./state.js";

/**
 * The idempotency key of a step of the current iteration: `taskId/iteration/step`, with
 * `.attempt` after a first attempt (`idempotencyKey` in shared).
 */
export function stepKey(s: TaskState, step: string, attempt = 0): string {
  return idempotencyKey(s.task.taskId, s.iteration, step, attempt);
}

/** The task's own replies for an LLM step request (`Task.script`), or nothing. */
export function taskScript(s: TaskState): { script?: TaskScript } {
  return s.task.script ? { script: s.task.script } : {};
}

/** The task's memory scope for a recall request (`Task.memoryScope`), or nothing. */
export function recallScope(s: TaskState): { scope?: string } {
  return s.task.memoryScope ? { scope: s.task.memoryScope } : {};
}

/**
 * What is left of the task's budget (`Task.limits.maxCostUsd` in USD, `maxTokens` in
 * tokens), each only when the task sets that limit; may be negative once spent.
 */
export function budgetLeft(s: TaskState): Budget {
  const b: Budget = {};
  const used = s.usage.total;
  if (s.task.limits.maxCostUsd !== undefined) b.remainingUsd = s.task.limits.maxCostUsd - used.costUsd;
  // Every token billed counts, cached ones included (the same sum the providers' estimate uses).
  const tokens = used.inputTokens + used.outputTokens + used.cacheReadTokens + used.cacheWriteTokens;
  if (s.task.limits.maxTokens !== undefined) b.remainingTokens = s.task.limits.maxTokens - tokens;
  return b;
}

/**
 * A sandbox run of `files` for `step`, under the task's limits (run timeout in ms, memory
 * in MB); `attempt` (the sandbox failures before it) makes a retry a new idempotency key.
 */
export function executionRequest(
  s: TaskState,
  step: string,
  files: FileChange[],
  tests: string[] | undefined,
  attempt: number,
): ExecutionRequest {
  return {
    v: 1,
    taskId: s.task.taskId,
    iteration: s.iteration,
    idempotencyKey: stepKey(s, step, attempt),
    language: s.task.language,
    files,
    ...(tests ? { tests } : {}),
    timeoutMs: runTimeoutOf(s),
    memoryMb: s.task.limits.memoryMb,
  };
}

/**
 * Repo mode: the candidate whose tree the next iteration starts from (edits apply over it,
 * the prompt shows its files). The current candidate, unless it was blocked (by the policy,
 * the gate or the review: the failure's status `blocked`): a blocked change never becomes
 * the next base, so the latest candidate that ran is used (none: the base commit's tree).
 */
export function treeBase(s: TaskState): Candidate | undefined {
  return s.failure?.status === "blocked" ? s.lastRunCandidate : s.candidate;
}

/**
 * What is left of the task's wall-clock limit (`Task.limits.timeLimitMs`), in ms at `nowMs`:
 * counted from `startedAtMs`, which is checkpointed, so the clock goes on across a
 * redelivery. Undefined when the task has no limit; zero or less once it has passed.
 */
export function timeLeftMs(s: Pick<TaskState, "task" | "startedAtMs">, nowMs = Date.now()): number | undefined {
  const limit = s.task.limits.timeLimitMs;
  return limit === undefined ? undefined : s.startedAtMs + limit - nowMs;
}
