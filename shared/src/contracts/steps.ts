/** Step requests between the conductor and the LLM-backed services, and their replies. */
import { z } from "zod";
import { Budget, FileChange, Language, StepHeader, Usage } from "./common.js";
import { Recall } from "./memory.js";
import { RepoBrief } from "./repo.js";
import { TaskScript } from "./script.js";
import { Candidate, Finding, GateResult, Plan, Reflection, Review } from "./plan.js";

/** Which provider answered, so every output can say whether a model was involved. */
export const ProviderInfo = z.object({
  name: z.string(),
  model: z.string(),
  /** True when replies were replayed from a file: no model was called. */
  scripted: z.boolean(),
  /** Set when a fallback answered: the model that failed first, and why (its error code). */
  fallbackFrom: z.object({ name: z.string(), model: z.string(), code: z.string(), message: z.string() }).optional(),
});
export type ProviderInfo = z.infer<typeof ProviderInfo>;

/** The parts of a task a prompt may see (never the hidden tests). */
export const TaskBrief = z.object({
  goal: z.string(),
  language: Language,
  files: z.array(FileChange),
  acceptanceTests: z.array(FileChange),
  /** Repo mode: the map and the picked files (the builder then answers with edits). */
  repo: RepoBrief.optional(),
});
export type TaskBrief = z.infer<typeof TaskBrief>;

/** What went wrong last time, as the next build and the reflection see it. */
export const FailureBrief = z.object({
  iteration: z.number().int(),
  status: z.string(),
  signature: z.string(),
  failingTests: z.array(z.string()),
  /** Trimmed tool output (head and tail). */
  output: z.string(),
  findings: z.array(Finding).default([]),
});
export type FailureBrief = z.infer<typeof FailureBrief>;

/**
 * Fields of every LLM step request: the header, and the calls the task already made for
 * the step's role (re-asks included, from its usage), which a scripted provider replays by.
 */
const LlmStepHeader = {
  ...StepHeader,
  callsBefore: z.number().int().nonnegative().optional(),
  /** The task's own replies (`Task.script`): the step is answered from them, never by a model. */
  script: TaskScript.optional(),
};

/** Ask the architect's planner for a plan. */
export const PlanRequest = z.object({
  ...LlmStepHeader,
  task: TaskBrief,
  recall: Recall.optional(),
  /** A re-plan after the circuit breaker fired carries the failures so far. */
  previousFailures: z.array(FailureBrief).default([]),
  budget: Budget.default({}),
});
export type PlanRequest = z.infer<typeof PlanRequest>;

/** Ask for a reflection on a failure. */
export const ReflectRequest = z.object({
  ...LlmStepHeader,
  task: TaskBrief,
  plan: Plan,
  candidate: Candidate,
  failure: FailureBrief,
  recall: Recall.optional(),
  budget: Budget.default({}),
});
export type ReflectRequest = z.infer<typeof ReflectRequest>;

/** Ask the builder for a candidate. */
export const BuildRequest = z.object({
  ...LlmStepHeader,
  task: TaskBrief,
  plan: Plan,
  /** The previous candidate, its failure and the reflection on it (absent on iteration 1). */
  previous: z.object({ candidate: Candidate, failure: FailureBrief, reflection: Reflection.optional() }).optional(),
  /** One-line summaries of older iterations, oldest first. */
  history: z.array(z.string()).default([]),
  recall: Recall.optional(),
  budget: Budget.default({}),
});
export type BuildRequest = z.infer<typeof BuildRequest>;

/** Ask the reviewer to review a candidate. */
export const ReviewRequest = z.object({
  ...LlmStepHeader,
  task: TaskBrief,
  plan: Plan,
  candidate: Candidate,
  /**
   * What the gate could not judge and the review must: its non-blocking evaluation-tampering
   * findings (rules `tampering.*`, severity `warning`). A candidate with any goes to review
   * even when the task's review is off.
   */
  concerns: z.array(Finding).max(50).optional(),
  budget: Budget.default({}),
});
export type ReviewRequest = z.infer<typeof ReviewRequest>;

/** Ask the reviewer's deterministic gate to check files before anything runs. */
export const GateRequest = z.object({
  ...StepHeader,
  language: Language,
  files: z.array(FileChange).min(1),
  /**
   * Names of what the candidate is judged by: the words of the check's and the benchmark's
   * command lines, test and result file paths. Code outside the tests that names one is
   * special-casing the evaluation (rule `tampering.branch_on_runner`); only path-like names
   * count. Absent: no names known.
   */
  evaluation: z.array(z.string().max(1_000)).max(200).optional(),
});
export type GateRequest = z.infer<typeof GateRequest>;

/** An LLM step's reply: its value, its usage and who answered. */
export function LlmStepReply<T extends z.ZodType>(value: T) {
  return z.object({ value, usage: Usage, provider: ProviderInfo });
}
export const PlanReply = LlmStepReply(Plan);
export type PlanReply = z.infer<typeof PlanReply>;
export const ReflectReply = LlmStepReply(Reflection);
export type ReflectReply = z.infer<typeof ReflectReply>;
export const BuildReply = LlmStepReply(Candidate);
export type BuildReply = z.infer<typeof BuildReply>;
export const ReviewReply = LlmStepReply(Review);
export type ReviewReply = z.infer<typeof ReviewReply>;
export { GateResult };
