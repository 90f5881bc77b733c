/** The task a user submits, and its limits. */
import { z } from "zod";
import { FileChange, Language, Owner, TaskId, V1 } from "./common.js";
import { SubtaskId } from "./dag.js";
import { RepoSpec } from "./repo.js";
import { TaskScript } from "./script.js";
import { MAX_ITERATIONS, MEMORY_MODES, PARALLEL, SUBTASK_ATTEMPTS, TIME_LIMIT_MS } from "./values.js";

/** Per-task limits. Every field has a documented default. */
export const TaskLimits = z.object({
  /** Build/execute iterations at most. @defaultValue 5 */
  maxIterations: z.number().int().min(MAX_ITERATIONS.min).max(MAX_ITERATIONS.max).default(MAX_ITERATIONS.default),
  /** Total LLM budget in USD for the task; unlimited when absent. */
  maxCostUsd: z.number().positive().optional(),
  /** Total LLM budget in tokens (input + output) for the task; unlimited when absent. */
  maxTokens: z.number().int().positive().optional(),
  /**
   * Wall-clock limit of the whole task, in ms (1 s to 7 days), counted from when a conductor
   * accepted it (`startedAtMs` of its checkpointed state, so a task redelivered to another
   * conductor keeps its clock). Checked before every phase; past it the task stops with
   * `time_limit` (a phase already running finishes first). Not the limit of one sandbox run
   * ({@link TaskLimits.runTimeoutMs}). Unlimited when absent.
   */
  timeLimitMs: z.number().int().min(TIME_LIMIT_MS.min).max(TIME_LIMIT_MS.max).optional(),
  /**
   * DAG tasks: wall-clock limit of each attempt of a subtask (one child task), in ms (1 s to
   * 7 days); a child is never given more than what is left of the parent's
   * {@link TaskLimits.timeLimitMs}. A child stopped by it is a failed attempt, retried like
   * any other. Unlimited when absent.
   */
  subtaskTimeLimitMs: z.number().int().min(TIME_LIMIT_MS.min).max(TIME_LIMIT_MS.max).optional(),
  /** Wall-clock limit of one sandbox run, in ms. @defaultValue 30000 */
  runTimeoutMs: z.number().int().min(100).max(600_000).default(30_000),
  /** Memory limit of one sandbox run, in MiB. @defaultValue 512 */
  memoryMb: z.number().int().min(32).max(16_384).default(512),
  /** Same error signature this many times in a row stops the task (`stuck`). @defaultValue 3 */
  stuckAfter: z.number().int().min(2).max(20).default(3),
  /** When the circuit breaker fires, re-plan once before stopping with `stuck`. @defaultValue false */
  replanOnStuck: z.boolean().default(false),
  /**
   * DAG tasks: attempts per subtask, each a child task with these limits; backoff between
   * them. @defaultValue 3
   */
  subtaskAttempts: z
    .number()
    .int()
    .min(SUBTASK_ATTEMPTS.min)
    .max(SUBTASK_ATTEMPTS.max)
    .default(SUBTASK_ATTEMPTS.default),
  /**
   * Repo tasks in agent mode: model turns (tool-calling steps) at most in one iteration's
   * loop; the loop stops with `steps` after the last. @defaultValue 40
   */
  maxAgentSteps: z.number().int().min(1).max(500).default(40),
});
export type TaskLimits = z.infer<typeof TaskLimits>;

/** Where a task came from, when it came from a benchmark. */
export const TaskSource = z.object({
  /** `humaneval`, `mbpp`, `jsbench`: a task of `loopsmith bench`'s dataset formats. */
  kind: z.enum(["user", "humaneval", "mbpp", "jsbench"]),
  id: z.string().optional(),
});
export type TaskSource = z.infer<typeof TaskSource>;

/**
 * A coding task. `files` are the starting workspace; `acceptanceTests` are visible to the
 * model; `hiddenTests` never reach a prompt and are run once at the end to score.
 */
export const Task = z.object({
  v: V1,
  taskId: TaskId,
  goal: z.string().min(1).max(100_000),
  language: Language,
  files: z.array(FileChange).max(200).default([]),
  acceptanceTests: z.array(FileChange).max(200).default([]),
  hiddenTests: z.array(FileChange).max(200).default([]),
  /**
   * Repo mode: change this repository (its snapshot is in the object store) instead of an
   * inline workspace; `files`/`acceptanceTests` are then unused, the repository's own test
   * command is the verdict.
   */
  repo: RepoSpec.optional(),
  /** Run the review step (LLM) before executing. @defaultValue false */
  review: z.boolean().default(false),
  /**
   * Run the security audit before executing: the static tools in the sandbox (bandit,
   * ESLint's security plugin) and the audit model; a `high` finding blocks the iteration
   * (docs/AUDIT.md). @defaultValue false
   */
  audit: z.boolean().default(false),
  /**
   * `on`: recalled failures, fixes and successes of other tasks go into the prompts. `off`:
   * nothing is recalled, so no prompt carries a memory hint (the control arm of a memory A/B
   * comparison). Either way the task's own failures, fixes and success are stored, so its
   * failure signatures, the circuit breaker and later tasks work the same. @defaultValue "on"
   */
  memory: z.enum(MEMORY_MODES).default("on"),
  /**
   * Recall only failures and successes of tasks whose id starts with this prefix (a
   * benchmark arm's own run, so its memory starts empty and is warmed by its earlier tasks
   * only). Absent: all of memory.
   */
  memoryScope: z.string().min(1).max(200).optional(),
  /**
   * Replies that travel with the task (a script or a simulation, see {@link TaskScript}):
   * every LLM step of this task is answered from it, whatever provider the stack runs, and
   * says `scripted: true`. Never shown to a prompt.
   */
  script: TaskScript.optional(),
  /**
   * Plan the goal as a DAG of subtasks (`DagPlan`), each built as a child task, then run the
   * task's tests on the merged tree. Repo mode only (an empty repository works).
   * @defaultValue false
   */
  decompose: z.boolean().default(false),
  /** DAG tasks: subtasks running at once. Absent: the builder replicas the architect finds (`$SRV`). */
  parallel: z.number().int().min(PARALLEL.min).max(PARALLEL.max).optional(),
  /** Set on a subtask's child task by its parent's scheduler: the parent task, the subtask and the attempt. */
  parent: z.object({ taskId: TaskId, subtaskId: SubtaskId, attempt: z.number().int().min(1) }).optional(),
  limits: TaskLimits.default(TaskLimits.parse({})),
  source: TaskSource.default({ kind: "user" }),
  /** ISO-8601 time of submission. */
  submittedAt: z.string(),
  /**
   * The client the task belongs to. Set by the conductor from the subject the task arrived on
   * (`loopsmith.tasks.submit.<owner>`); a value a client writes here is replaced.
   */
  owner: Owner.optional(),
});
export type Task = z.infer<typeof Task>;
/** A task as a client writes it (defaults not yet applied). */
export type TaskInput = z.input<typeof Task>;

/** Request to cancel a running task. */
export const CancelRequest = z.object({ v: V1, taskId: TaskId, reason: z.string().max(500).optional() });
export type CancelRequest = z.infer<typeof CancelRequest>;

/** Request for a task's current state. */
export const StatusRequest = z.object({ v: V1, taskId: TaskId });
export type StatusRequest = z.infer<typeof StatusRequest>;
