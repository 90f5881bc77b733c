/** What memory stores and recalls. */
import { z } from "zod";
import { FileChange, Language, Owner, StepHeader, TaskId, Usage, V1 } from "./common.js";
import { TaskEvent, TaskResult } from "./events.js";
import { Reflection } from "./plan.js";
import { Task } from "./task.js";
import {
  MemoryUse,
  MemoryVerdict,
  RecallUse,
  RecalledLesson,
  StoredLesson,
  UtilityRow,
  UtilityStats,
} from "./lesson.js";

/** A failure to remember: one failed iteration with its normalised signature. */
export const FailureRecord = z.object({
  ...StepHeader,
  language: Language,
  goal: z.string(),
  /** Normalised error signature (see memory's `signature`); computed by memory when absent. */
  signature: z.string().optional(),
  /** The raw error text the signature is made from (the first error of the output). */
  errorText: z.string().max(20_000),
  failingTests: z.array(z.string()).max(200),
  outputTail: z.string().max(20_000),
  status: z.string(),
  reflection: Reflection.optional(),
  /**
   * The failing candidate's code (its files, or the part that changed). Recall compares it,
   * so that two mistakes that fail the same test the same way can be told apart.
   */
  code: z.string().max(50_000).optional(),
  /** The client whose task failed (who may list it); `client` when absent. */
  owner: Owner.optional(),
});
export type FailureRecord = z.infer<typeof FailureRecord>;

/** Attach the reflection (the fix plan) to a stored failure, once it is known. */
export const FailureFix = z.object({
  ...StepHeader,
  failureId: z.string(),
  reflection: Reflection,
});
export type FailureFix = z.infer<typeof FailureFix>;

/** A success to remember: the goal and the files that passed. */
export const SuccessRecord = z.object({
  ...StepHeader,
  language: Language,
  goal: z.string(),
  files: z.array(FileChange),
});
export type SuccessRecord = z.infer<typeof SuccessRecord>;

/** Reply of a remember call: the stored row's id. */
export const Remembered = z.object({ id: z.string(), signature: z.string().optional() });
export type Remembered = z.infer<typeof Remembered>;

/** Ask for the nearest past failures and successes. */
export const RecallRequest = z.object({
  v: V1,
  taskId: TaskId,
  language: Language,
  /** Free text to match: the task's goal, plus the error text after a failure. */
  text: z.string().max(50_000),
  /** Raw error text of the latest failure, when there is one. */
  errorText: z.string().max(20_000).optional(),
  /** The latest failure's failing tests, when there is one. */
  failingTests: z.array(z.string()).max(200).optional(),
  /** The code that failed (as in {@link FailureRecord}'s `code`), when there is one. */
  code: z.string().max(50_000).optional(),
  /** Nearest neighbours to return per kind. @defaultValue 3 */
  k: z.number().int().min(1).max(20).default(3),
  /** Leave out this task's own failures and successes (its earlier iterations). @defaultValue true */
  excludeSameTask: z.boolean().default(true),
  /** Only failures and successes of tasks whose id starts with this prefix (`Task.memoryScope`). */
  scope: z.string().min(1).max(200).optional(),
  /** The iteration the recall is made at (0 before the first build), for the recall-use log. */
  iteration: z.number().int().nonnegative().optional(),
});
export type RecallRequest = z.infer<typeof RecallRequest>;

/** The success that followed a failure in its task: the files that then passed. */
export const FailureFixedBy = z.object({
  successId: z.string(),
  iteration: z.number().int(),
  files: z.array(FileChange),
});
export type FailureFixedBy = z.infer<typeof FailureFixedBy>;

/**
 * One recalled past failure. `similarity` is the cosine similarity of the embeddings, in
 * [-1, 1]; failures come ranked by `score` (reciprocal rank fusion of vector and full-text
 * ranks), highest first.
 */
export const RecalledFailure = z.object({
  id: z.string(),
  taskId: z.string(),
  goal: z.string(),
  signature: z.string(),
  failingTests: z.array(z.string()),
  /** The reflection (root cause and fix plan) attached to the failure, when one was. */
  reflection: Reflection.nullable(),
  similarity: z.number(),
  /** The full signature: headline, failing test, assertion, innermost frame in candidate code. */
  key: z.string().optional(),
  /** The fused rank score: sum over the rankings of weight / (60 + rank). */
  score: z.number().optional(),
  /** What fixed it: the task's first success after the failure; null when the task never passed. */
  fixedBy: FailureFixedBy.nullable().optional(),
  /**
   * Its measured use so far (in how many finished tasks it was recalled, how many passed, its
   * utility), as a recalled lesson carries; absent from a memory that does not measure it.
   */
  use: MemoryUse.optional(),
});
export type RecalledFailure = z.infer<typeof RecalledFailure>;

/** One recalled past success. */
export const RecalledSuccess = z.object({
  id: z.string(),
  taskId: z.string(),
  goal: z.string(),
  files: z.array(FileChange),
  similarity: z.number(),
});
export type RecalledSuccess = z.infer<typeof RecalledSuccess>;

/** What recall returns. `signature` is the normalised form of the request's error text. */
export const Recall = z.object({
  /**
   * Lessons that fit the query, first: those learned from a failure with the query's signature,
   * else (a recall without an error) from tasks with a similar goal. When any fits, `failures`
   * is empty: the raw failures come only when no lesson fits.
   */
  lessons: z.array(RecalledLesson).optional(),
  failures: z.array(RecalledFailure),
  successes: z.array(RecalledSuccess),
  signature: z.string().optional(),
  embedder: z.string(),
});
export type Recall = z.infer<typeof Recall>;

/** A finished task, for history and statistics. */
export const TaskRecord = z.object({
  v: V1,
  taskId: TaskId,
  goal: z.string(),
  language: Language,
  status: z.string(),
  stopReason: z.string(),
  iterations: z.number().int().nonnegative(),
  usage: Usage,
  /** The same usage per LLM role (`plan`, `build`, …), each at its own model's price. */
  usageByRole: z.record(z.string(), Usage).default({}),
  durationMs: z.number().nonnegative(),
  scripted: z.boolean(),
  finishedAt: z.string(),
  /**
   * The task as submitted. When present, memory also records the whole run (see
   * {@link RunRecord}): the task, its events read from the events stream, and `result`.
   * Optional, so that older senders still validate.
   */
  task: Task.optional(),
  /** The task's final result, stored with the run (absent: the run has no result). */
  result: TaskResult.optional(),
  /** The client the task belongs to (who may read it back); `client` when absent. */
  owner: Owner.optional(),
});
export type TaskRecord = z.infer<typeof TaskRecord>;

/** Most events one recorded run keeps (see `RunRecord.eventsTruncated`). */
export const RUN_EVENTS_CAP = 5_000;

/**
 * One recorded run, as `loopsmith show`, `export` and `replay` read it back: the task, every
 * progress event it published (the LLM steps carry the validated model reply in
 * `data.llm`), and the final result. Recorded by memory when a task ends.
 */
export const RunRecord = z.object({
  v: V1,
  taskId: TaskId,
  task: Task,
  /** The final result; null when the run was recorded without one. */
  result: TaskResult.nullable(),
  /** The task's events in `seq` order, ending with the `result` event when there is a result. */
  events: z.array(TaskEvent),
  /**
   * True when `events` lacks some of the task's events: more than {@link RUN_EVENTS_CAP}
   * (the `phase` events go first, then `usage`; model replies and the result stay), or the
   * events stream could not be read completely when the run was recorded.
   */
  eventsTruncated: z.boolean().default(false),
  /** How many events the task published (read from the stream), including those left out. */
  eventsTotal: z.number().int().nonnegative().optional(),
  /** ISO-8601 time the run was (last) recorded. */
  recordedAt: z.string(),
});
export type RunRecord = z.infer<typeof RunRecord>;

/**
 * Ask for one task's recorded run. A run can be larger than one NATS message, so it comes
 * in parts: the run's JSON text from `offset` (in UTF-16 code units, as JavaScript counts
 * string length) on, as much as fits one reply.
 */
export const RunRequest = z.object({
  v: V1,
  taskId: TaskId,
  /** Where in the run's JSON text this part starts. @defaultValue 0 */
  offset: z.number().int().nonnegative().default(0),
});
export type RunRequest = z.infer<typeof RunRequest>;

/**
 * One part of a recorded run's JSON text (`JSON.stringify` of a {@link RunRecord}). The
 * parts of one run, concatenated in `offset` order, are the whole text of `total` code
 * units, whose SHA-256 (hex, over its UTF-8 bytes) is `sha256`. A part whose `sha256`
 * differs from the first one's belongs to a run recorded again in between: start over.
 */
export const RunPart = z.object({
  v: V1,
  taskId: TaskId,
  recordedAt: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** Length of the whole JSON text, in UTF-16 code units. */
  total: z.number().int().nonnegative(),
  offset: z.number().int().nonnegative(),
  text: z.string(),
});
export type RunPart = z.infer<typeof RunPart>;

/** Most tasks one history reply carries; a longer history is read in pages (`offset`). */
export const HISTORY_PAGE_MAX = 500;
/** Longest goal a history row carries, in characters (the whole goal is in the run: `show`). */
export const HISTORY_GOAL_CHARS = 200;

/**
 * Ask for recent tasks, newest first: `limit` of them (at most {@link HISTORY_PAGE_MAX}) after
 * skipping the `offset` newest. Each row's goal is cut to {@link HISTORY_GOAL_CHARS}
 * characters, so a full page stays under NATS's default 1 MiB `max_payload`.
 */
export const HistoryRequest = z.object({
  v: V1,
  limit: z.number().int().min(1).max(HISTORY_PAGE_MAX).default(20),
  offset: z.number().int().nonnegative().default(0),
});
export type HistoryRequest = z.infer<typeof HistoryRequest>;

/** Recent tasks, newest first. */
export const History = z.object({ tasks: z.array(TaskRecord) });
export type History = z.infer<typeof History>;

/** Ask for the failures memory stored: one task's, or the most recent of all. */
export const FailuresRequest = z.object({
  v: V1,
  /** Only this task's failures, oldest first; absent: the most recent of every task, newest first. */
  taskId: TaskId.optional(),
  limit: z.number().int().min(1).max(500).default(20),
  /** Also list every recalled memory's measured use (`loopsmith failures --utility`). */
  utility: z.boolean().optional(),
  /** First promote or demote one memory by hand (`--promote`, `--demote`). */
  verdict: MemoryVerdict.omit({ v: true }).optional(),
});
export type FailuresRequest = z.infer<typeof FailuresRequest>;

/** One stored failure as a person or a tool reads it back. */
export const StoredFailure = z.object({
  id: z.string(),
  taskId: z.string(),
  iteration: z.number().int(),
  status: z.string(),
  /** The normalised error signature recall matches on. */
  signature: z.string(),
  failingTests: z.array(z.string()),
  /** The error text, at most 2 000 characters. */
  errorText: z.string(),
  /** The reflection attached as its fix, when one was. */
  reflection: Reflection.nullable(),
  createdAt: z.string(),
});
export type StoredFailure = z.infer<typeof StoredFailure>;

/** Stored failures. */
export const Failures = z.object({
  failures: z.array(StoredFailure),
  /** Stored lessons: the task's, or the most recent of all, newest first. */
  lessons: z.array(StoredLesson).optional(),
  /** With a task id: the memories its recalls showed, and what happened next. */
  uses: z.array(RecallUse).optional(),
  /** With `utility`: every recalled memory's measured use, lowest utility first. */
  utility: z.array(UtilityRow).optional(),
});
export type Failures = z.infer<typeof Failures>;

/**
 * Which tasks statistics cover: those finished at or after `since` (ISO-8601), and of those
 * the `last` most recent. Both absent: every task recorded.
 */
export const StatsRequest = z.object({
  v: V1,
  since: z.iso.datetime({ offset: true }).optional(),
  last: z.number().int().min(1).max(1_000_000).optional(),
});
export type StatsRequest = z.infer<typeof StatsRequest>;

/**
 * How often recall had the same failure to offer. A failure recall (one made with an error)
 * is a hit when a recalled failure has the query's signature; `withFix` counts hits whose
 * failure carries the reflection that fixed it.
 */
export const RecallStats = z.object({
  /** Failure recalls made by the tasks of the window. */
  recalls: z.number().int().nonnegative(),
  hits: z.number().int().nonnegative(),
  withFix: z.number().int().nonnegative(),
  /** hits / recalls, in [0, 1]; null when there was no failure recall. */
  hitRate: z.number().min(0).max(1).nullable(),
});
export type RecallStats = z.infer<typeof RecallStats>;

/** Memory's statistics over a window of tasks (see {@link StatsRequest}). */
export const MemoryStats = z.object({
  /** The window asked for (absent fields: not limited that way). */
  window: z.object({ since: z.string().optional(), last: z.number().int().optional() }).default({}),
  tasks: z.number().int(),
  passed: z.number().int(),
  /** passed / tasks, in [0, 1]; null with no task. */
  passRate: z.number().min(0).max(1).nullable().default(null),
  /** Tasks per stop reason (`passed`, `max_iterations`, `error`, …). */
  stopReasons: z.record(z.string(), z.number().int()).default({}),
  /** Stored failures and successes (all of memory, not windowed). */
  failures: z.number().int(),
  successes: z.number().int(),
  meanIterationsToPass: z.number().nullable(),
  /** Mean and 90th percentile (nearest rank) of iterations over every task; null with no task. */
  meanIterations: z.number().nullable().default(null),
  p90Iterations: z.number().nullable().default(null),
  /** Tokens summed over the window's tasks. */
  inputTokens: z.number().int().nonnegative().default(0),
  outputTokens: z.number().int().nonnegative().default(0),
  totalCostUsd: z.number(),
  /** Mean USD per task; null with no task. */
  meanCostUsd: z.number().nullable().default(null),
  /** Tokens, calls and USD summed per LLM role over the window's tasks. */
  usageByRole: z.record(z.string(), Usage).default({}),
  recall: RecallStats.default({ recalls: 0, hits: 0, withFix: 0, hitRate: null }),
  /** What recalls showed the window's tasks, and the utility of the memories (docs/MEMORY.md). */
  utility: UtilityStats.optional(),
  backend: z.enum(["postgres", "pglite"]),
});
export type MemoryStats = z.infer<typeof MemoryStats>;

/** An empty request (for stats). */
export const Empty = z.object({ v: V1 });
export type Empty = z.infer<typeof Empty>;
