/**
 * Lessons and the measured use of memories. A lesson is what a task that passed after failing
 * learned: the cause and the fix of one of its failures as a short rule, free of the task's own
 * names and values, with the signature it came from and the task it came from. Every recall
 * records which memories (lessons, failures) it showed, so each memory's effect can be measured
 * (docs/MEMORY.md).
 */
import { z } from "zod";
import { Language, Owner, StepHeader, TaskId, V1 } from "./common.js";

/** Longest lesson rule, in characters. */
export const LESSON_RULE_MAX = 400;

/** One lesson as the reflect role writes it. */
export const DistilledLesson = z.object({
  /** The normalised error signature of the failure the lesson is about (one of the task's). */
  signature: z.string().min(1).max(300),
  /** Cause and fix as one short rule that fits any task with this failure (no names, no values). */
  rule: z.string().min(10).max(LESSON_RULE_MAX),
});
export type DistilledLesson = z.infer<typeof DistilledLesson>;

/** The reflect role's reply when a task passed after failures: one lesson per distinct failure. */
export const LessonReply = z.object({ lessons: z.array(DistilledLesson).min(1).max(5) });
export type LessonReply = z.infer<typeof LessonReply>;

/**
 * Where a lesson's rule came from: `reflect`, the reflect role's lesson reply; `fallback`, the
 * reflection on the task's last failure (the one the pass followed), used when the lesson
 * reply was unreadable or not asked for.
 */
export const LessonSource = z.enum(["reflect", "fallback"]);
export type LessonSource = z.infer<typeof LessonSource>;

/** Lessons to store: those of one task that passed at `iteration` after failing. */
export const LessonsRecord = z.object({
  ...StepHeader,
  language: Language,
  goal: z.string(),
  lessons: z
    .array(DistilledLesson.extend({ source: LessonSource }))
    .min(1)
    .max(20),
  /** The lesson prompt's version (`LESSON_PROMPT_VERSION`) for `reflect` lessons. */
  promptVersion: z.number().int().positive(),
  owner: Owner.optional(),
});
export type LessonsRecord = z.infer<typeof LessonsRecord>;

/** Reply of `remember_lessons`: the stored lessons' ids, in the record's order. */
export const LessonsStored = z.object({ ids: z.array(z.string()) });
export type LessonsStored = z.infer<typeof LessonsStored>;

/**
 * A memory's measured use so far (see docs/MEMORY.md): in how many finished tasks it was
 * recalled, how many of them passed, and the utility estimate with its standard error.
 */
export const MemoryUse = z.object({
  /** Finished tasks that were shown the memory. */
  recalledIn: z.number().int().nonnegative(),
  /** Of those, the tasks that passed. */
  passedAfter: z.number().int().nonnegative(),
  /**
   * Estimated change in pass rate when the memory is shown, in [-1, 1]: the smoothed pass rate of
   * the tasks that recalled it minus that of comparable tasks that did not; null before any use.
   */
  utility: z.number().nullable(),
  /** Standard error of `utility`; null with it. */
  stderr: z.number().nullable(),
  /** Left out of recall (never passed after `DEMOTE_AFTER` tasks, or reliably negative utility). */
  demoted: z.boolean(),
  /** Why it is demoted, or that a person promoted it back; absent otherwise. */
  reason: z.string().optional(),
});
export type MemoryUse = z.infer<typeof MemoryUse>;

/** One recalled lesson, with its source task and how often it helped before. */
export const RecalledLesson = z.object({
  id: z.string(),
  /** The task that learned it. */
  taskId: z.string(),
  signature: z.string(),
  rule: z.string(),
  source: LessonSource,
  /** `signature` when it equals the query's signature; `goal` when it came by goal similarity. */
  match: z.enum(["signature", "goal"]),
  /** Cosine similarity of the source task's goal and the query's goal, in [-1, 1]. */
  similarity: z.number(),
  use: MemoryUse,
});
export type RecalledLesson = z.infer<typeof RecalledLesson>;

/** A stored lesson as `loopsmith failures` lists it. */
export const StoredLesson = z.object({
  id: z.string(),
  taskId: z.string(),
  signature: z.string(),
  rule: z.string(),
  source: LessonSource,
  promptVersion: z.number().int(),
  createdAt: z.string(),
  use: MemoryUse,
});
export type StoredLesson = z.infer<typeof StoredLesson>;

/** What kind of memory a recall showed. */
export const MemoryKind = z.enum(["lesson", "failure"]);
export type MemoryKind = z.infer<typeof MemoryKind>;

/** One memory a recall showed to a task, and what happened next. */
export const RecallUse = z.object({
  kind: MemoryKind,
  memoryId: z.string(),
  taskId: TaskId,
  /** The iteration the recall was made at (0: before the first build); it feeds iteration + 1. */
  iteration: z.number().int().nonnegative(),
  /** Whether iteration + 1 passed; null while unknown (the task has not recorded it). */
  nextPassed: z.boolean().nullable(),
  /** Whether the task passed; null while it runs. */
  taskPassed: z.boolean().nullable(),
  /** The task's iterations when it ended; null while it runs. */
  taskIterations: z.number().int().nullable(),
  createdAt: z.string(),
});
export type RecallUse = z.infer<typeof RecallUse>;

/** A memory's utility row as `loopsmith failures --utility` lists it. */
export const UtilityRow = MemoryUse.extend({ kind: MemoryKind, id: z.string(), label: z.string() });
export type UtilityRow = z.infer<typeof UtilityRow>;

/** Recall use over a window (`loopsmith stats`): the hit rate of shown memories and the utility distribution. */
export const UtilityStats = z.object({
  /** Memories shown to the window's tasks (rows of the recall-use log). */
  shown: z.number().int().nonnegative(),
  /** Of those, lessons. */
  lessonsShown: z.number().int().nonnegative(),
  /** Tasks of the window that were shown at least one memory. */
  tasksShown: z.number().int().nonnegative(),
  /** Shown memories whose next iteration passed, over those whose next iteration is known; null with none. */
  nextPassRate: z.number().min(0).max(1).nullable(),
  /** Memories with at least one finished task that recalled them. */
  measured: z.number().int().nonnegative(),
  demoted: z.number().int().nonnegative(),
  /** Utility quartiles (min, 25 %, median, 75 %, max) over the measured memories; null with none. */
  quartiles: z.tuple([z.number(), z.number(), z.number(), z.number(), z.number()]).nullable(),
});
export type UtilityStats = z.infer<typeof UtilityStats>;

/** Ask memory to promote (recall again) or demote a memory by hand; reversible either way. */
export const MemoryVerdict = z.object({
  v: V1,
  kind: MemoryKind,
  id: z.string().regex(/^\d{1,18}$/, "a memory id is a decimal number"),
  demoted: z.boolean(),
});
export type MemoryVerdict = z.infer<typeof MemoryVerdict>;
