/** What memory stores and recalls. */
import { z } from "zod";
import { FileChange, Language, StepHeader, TaskId, Usage, V1 } from "./common.js";
import { Reflection } from "./plan.js";

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
  /** Nearest neighbours to return per kind. @defaultValue 3 */
  k: z.number().int().min(1).max(20).default(3),
  /** Leave out rows of this task (its own earlier iterations). @defaultValue true */
  excludeSameTask: z.boolean().default(true),
});
export type RecallRequest = z.infer<typeof RecallRequest>;

/** One recalled past failure. `similarity` is cosine similarity in [-1, 1]. */
export const RecalledFailure = z.object({
  id: z.string(),
  taskId: z.string(),
  goal: z.string(),
  signature: z.string(),
  failingTests: z.array(z.string()),
  reflection: Reflection.nullable(),
  similarity: z.number(),
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
});
export type TaskRecord = z.infer<typeof TaskRecord>;

/** Ask for recent tasks. */
export const HistoryRequest = z.object({ v: V1, limit: z.number().int().min(1).max(500).default(20) });
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
export const Failures = z.object({ failures: z.array(StoredFailure) });
export type Failures = z.infer<typeof Failures>;

/** Memory's statistics. */
export const MemoryStats = z.object({
  tasks: z.number().int(),
  passed: z.number().int(),
  failures: z.number().int(),
  successes: z.number().int(),
  meanIterationsToPass: z.number().nullable(),
  totalCostUsd: z.number(),
  /** Tokens, calls and USD summed per LLM role over every task recorded. */
  usageByRole: z.record(z.string(), Usage).default({}),
  backend: z.enum(["postgres", "pglite"]),
});
export type MemoryStats = z.infer<typeof MemoryStats>;

/** An empty request (for stats). */
export const Empty = z.object({ v: V1 });
export type Empty = z.infer<typeof Empty>;
