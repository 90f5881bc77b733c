/**
 * The security audit of a candidate (`Task.audit`, `loopsmith solve --audit`): what the
 * static tools (bandit, ESLint's security plugin) and the audit model found, as typed
 * findings. A `high` finding blocks the iteration; lower severities are warnings.
 */
import { z } from "zod";
import { Budget, StepHeader } from "./common.js";
import { Candidate } from "./plan.js";
import { TaskScript } from "./script.js";
import { LlmStepReply, TaskBrief } from "./steps.js";

/** How bad a finding is: `high` blocks the iteration, `medium` and `low` are warnings. */
export const AuditSeverity = z.enum(["high", "medium", "low"]);
export type AuditSeverity = z.infer<typeof AuditSeverity>;

/** Who found it: the audit model, bandit (Python) or ESLint's security plugin (JavaScript/TypeScript). */
export const AuditSource = z.enum(["model", "bandit", "eslint"]);
export type AuditSource = z.infer<typeof AuditSource>;

/**
 * One finding of the audit. `rule`: the tool's rule id (bandit's `B602`, ESLint's
 * `security/detect-eval-with-expression`) or the model's OWASP-class name (`injection`,
 * `unsafe-deserialization`, `path-traversal`, `secrets`, `ssrf`, `weak-crypto`, …); `file`:
 * a workspace-relative path; `line`: 1-based.
 */
export const AuditFinding = z.object({
  rule: z.string().min(1).max(200),
  file: z.string().min(1).max(500),
  line: z.number().int().positive().optional(),
  severity: AuditSeverity,
  source: AuditSource,
  message: z.string().min(1).max(2_000),
});
export type AuditFinding = z.infer<typeof AuditFinding>;

/** One finding as the audit model gives it (the source is always `model`, so it does not say). */
export const ModelAuditFinding = AuditFinding.omit({ source: true });
export type ModelAuditFinding = z.infer<typeof ModelAuditFinding>;

/** The audit model's reply: its findings (none when the candidate is clean). */
export const AuditVerdict = z.object({
  findings: z.array(ModelAuditFinding).max(50),
});
export type AuditVerdict = z.infer<typeof AuditVerdict>;

/**
 * How the static tools' run went: `ok` (their findings are in `findings`), `unavailable`
 * (no tool for the language, the tool is not in the sandbox image, or the sandbox failed:
 * `reason` says which; the audit goes on with the model alone), `skipped` (no file the tool
 * reads).
 */
export const StaticAuditRun = z.object({
  tool: z.string().max(200),
  status: z.enum(["ok", "unavailable", "skipped"]),
  reason: z.string().max(2_000).optional(),
});
export type StaticAuditRun = z.infer<typeof StaticAuditRun>;

/** Ask the reviewer's audit model to audit a candidate, with what the static tools found. */
export const AuditRequest = z.object({
  ...StepHeader,
  callsBefore: z.number().int().nonnegative().optional(),
  /** The task's own replies (`Task.script`): the step is answered from them, never by a model. */
  script: TaskScript.optional(),
  task: TaskBrief,
  candidate: Candidate,
  /** The static tools' findings on the candidate, for the model to weigh (it may confirm or add, not remove). */
  staticFindings: z.array(AuditFinding).max(200).default([]),
  budget: Budget.default({}),
});
export type AuditRequest = z.infer<typeof AuditRequest>;

/** The audit model's reply on the bus: its verdict, usage and who answered. */
export const AuditReply = LlmStepReply(AuditVerdict);
export type AuditReply = z.infer<typeof AuditReply>;

/**
 * The whole audit of one iteration, as its step event's `data.audit` carries it (the report
 * and `loopsmith show` read it from there): every finding (static first, then the model's),
 * whether it blocked, and how the static run went.
 */
export const AuditRecord = z.object({
  findings: z.array(AuditFinding).max(250),
  blocked: z.boolean(),
  static: StaticAuditRun,
  /** False when the model's reply could not be read (the static findings still count). */
  modelRead: z.boolean().default(true),
});
export type AuditRecord = z.infer<typeof AuditRecord>;
