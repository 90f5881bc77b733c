/**
 * The shapes of `loopsmith bench`: a dataset task as the harness sees it,
 * one result line of `results.jsonl`, and `summary.json`.
 */
import { z } from "zod";
import { DatasetFormat } from "@loopsmith/evals";
import { MachineState } from "./machine.js";

/** A dataset task and its format are the evals package's (`evals/src/case.ts`). */
export { BenchCase, DatasetFormat, type SkippedLine } from "@loopsmith/evals";

/** The formats a run's summary names: the case formats, and `swe-bench` (repository instances, evals/src/swe-bench). */
export const RunFormat = z.enum([...DatasetFormat.options, "swe-bench"]);
export type RunFormat = z.infer<typeof RunFormat>;

/** The arm of a run: one arm (`on`/`off`, as `--memory` says), or both for `--memory ab`. */
export const BenchArm = z.enum(["on", "off"]);
export type BenchArm = z.infer<typeof BenchArm>;

/** Who answered: a model, or no model at all (`scripted`, `simulated`). */
export const ProviderLabel = z.enum(["model", "scripted", "simulated"]);
export type ProviderLabel = z.infer<typeof ProviderLabel>;

/**
 * What memory showed one task: its recalls (counted from the task's events) and the memories
 * they showed (read from memory's recall-use log when the task ended). A memory-off task makes
 * no recall, so all of it is zero.
 */
export const ResultMemory = z.object({
  /** Recalls the task made: before its first build, and after each failure. */
  recalls: z.number().int().nonnegative(),
  /** Of those, the recalls that showed at least one memory (a lesson or a raw failure). */
  hits: z.number().int().nonnegative(),
  /** Ids of the lessons shown, once per recall that showed each. */
  lessons: z.array(z.string()),
  /** Ids of the raw failures shown, once per recall that showed each. */
  failures: z.array(z.string()),
});
export type ResultMemory = z.infer<typeof ResultMemory>;

/** One line of `results.jsonl`: one task of one arm. */
export const BenchResult = z.object({
  v: z.literal(1),
  runId: z.string(),
  caseId: z.string(),
  arm: BenchArm,
  taskId: z.string(),
  /** The task's status; `error` also when no result came (the message says why). */
  status: z.enum(["passed", "failed", "cancelled", "error"]),
  stopReason: z.string(),
  /** The score: every hidden test passed. */
  passed: z.boolean(),
  /** The visible (acceptance) tests passed: the loop's own verdict. */
  visiblePassed: z.boolean(),
  hidden: z.object({ passed: z.number().int(), total: z.number().int() }).nullable(),
  iterations: z.number().int().nonnegative(),
  tokensIn: z.number().int().nonnegative(),
  tokensOut: z.number().int().nonnegative(),
  costUsd: z.number().nonnegative(),
  /** Wall time from submission to result, ms. */
  wallMs: z.number().nonnegative(),
  provider: ProviderLabel,
  /** Submissions it took (a task retried after an error counts each). */
  attempts: z.number().int().positive(),
  error: z.string().optional(),
  /**
   * The error's code (the task's `error.code`; `task_timeout` when no result came within the
   * bench's task timeout): what {@link ArmSummary}'s `infraErrors` is counted from.
   */
  errorCode: z.string().optional(),
  /**
   * SWE-bench instances only: the grade by the official rule. `status` is also the line's
   * `stopReason`; `passed` is `status === "resolved"`; `hidden` counts both test lists.
   */
  swe: z
    .object({
      status: z.enum(["resolved", "unresolved", "patch_failed", "error"]),
      failToPass: z.object({ passed: z.number().int(), total: z.number().int() }),
      passToPass: z.object({ passed: z.number().int(), total: z.number().int() }),
      /** Agent steps (tool calls) of the run that made the patch; 0 when graded offline. */
      steps: z.number().int().nonnegative(),
      /** Wall time of the graded test run, ms. */
      testMs: z.number().nonnegative(),
    })
    .optional(),
  /** What memory showed the task (absent from lines written before it was recorded, or when memory could not be read). */
  memory: ResultMemory.optional(),
  /** ISO-8601. */
  finishedAt: z.string(),
});
export type BenchResult = z.infer<typeof BenchResult>;

/**
 * Memory's use in one arm, over its tasks that recorded it (`tasks`): recalls, the recalls that
 * showed a memory, the lessons and raw failures shown (per recall and distinct), and the mean
 * utility (docs/MEMORY.md: a measured association, read from memory at the end of the run) of
 * the distinct lessons and failures shown whose utility memory knows. The off arm makes no
 * recall by construction: every count is 0.
 */
export const ArmMemory = z.object({
  /** Tasks whose result line records memory's use. */
  tasks: z.number().int().nonnegative(),
  recalls: z.number().int().nonnegative(),
  hits: z.number().int().nonnegative(),
  /** hits / recalls; null with no recall. */
  hitRate: z.number().min(0).max(1).nullable(),
  lessonsShown: z.number().int().nonnegative(),
  distinctLessons: z.number().int().nonnegative(),
  /** Distinct lessons shown whose utility is known, and their mean utility (null with none). */
  lessonsMeasured: z.number().int().nonnegative(),
  meanLessonUtility: z.number().nullable(),
  failuresShown: z.number().int().nonnegative(),
  distinctFailures: z.number().int().nonnegative(),
  failuresMeasured: z.number().int().nonnegative(),
  meanFailureUtility: z.number().nullable(),
});
export type ArmMemory = z.infer<typeof ArmMemory>;

/** Totals of one arm. Units: tokens per task, USD per task, iterations per task. */
export const ArmSummary = z.object({
  tasks: z.number().int(),
  passed: z.number().int(),
  /** passed / tasks (one sample per task: pass@1). */
  passAt1: z.number(),
  visiblePassRate: z.number(),
  meanIterations: z.number(),
  p90Iterations: z.number(),
  tokensInPerTask: z.number(),
  tokensOutPerTask: z.number(),
  usdPerTask: z.number(),
  meanWallMs: z.number(),
  errors: z.number().int(),
  /**
   * Tasks that did not pass because the infrastructure failed (`summarizeArm`'s
   * INFRA_ERROR_CODES: the sandbox, the bus, the database; a task timeout while the machine
   * was over 90 % busy, `BUSY_MACHINE_PCT`), counted apart from the agent's failures.
   */
  infraErrors: z.number().int().default(0),
  /** Tasks that did not pass for any other reason: the agent's failures. */
  agentFailures: z.number().int().default(0),
  stopReasons: z.record(z.string(), z.number().int()),
  /** Tasks per iteration count (`"1"`: tasks that ended after one iteration). */
  iterationsHistogram: z.record(z.string(), z.number().int()),
  /** Memory's use in the arm; absent when no result line of it records one. */
  memory: ArmMemory.optional(),
});
export type ArmSummary = z.infer<typeof ArmSummary>;

/**
 * `--memory ab`: per task, memory on minus memory off. Pass: discordant pairs and the exact
 * McNemar p (two-sided); iterations and tokens: mean paired difference and the Wilcoxon
 * signed-rank p (two-sided; null when every difference is 0).
 */
export const PairedSummary = z.object({
  pairs: z.number().int(),
  bothPass: z.number().int(),
  onlyOn: z.number().int(),
  onlyOff: z.number().int(),
  neither: z.number().int(),
  passDiff: z.number(),
  mcnemarP: z.number(),
  meanIterationsDiff: z.number(),
  iterationsP: z.number().nullable(),
  meanTokensDiff: z.number(),
  tokensP: z.number().nullable(),
});
export type PairedSummary = z.infer<typeof PairedSummary>;

/** `summary.json`. */
export const BenchSummary = z.object({
  v: z.literal(1),
  runId: z.string(),
  dataset: z.string(),
  format: RunFormat,
  provider: z.object({ label: ProviderLabel, name: z.string(), model: z.string() }),
  /** The one sentence every output carries when no model answered. */
  notice: z.string().optional(),
  memory: z.enum(["on", "off", "ab"]),
  concurrency: z.number().int(),
  startedAt: z.string(),
  finishedAt: z.string(),
  wallMs: z.number(),
  /** Tasks (of all arms) finished per minute of wall time. */
  tasksPerMin: z.number(),
  arms: z.object({ on: ArmSummary.optional(), off: ArmSummary.optional() }),
  paired: PairedSummary.optional(),
  skippedLines: z.array(z.object({ line: z.number().int(), message: z.string() })),
  /** The machine the run ran on (absent from a summary written before it was recorded). */
  machine: MachineState.optional(),
});
export type BenchSummary = z.infer<typeof BenchSummary>;
