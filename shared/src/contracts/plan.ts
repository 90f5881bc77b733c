/** Planning and reflection: what the architect's LLM roles produce. */
import { z } from "zod";
import { FileChange, StepHeader } from "./common.js";
import { Edit } from "./repo.js";

/** A plan: acceptance criteria from the goal, steps, and the files to write. */
export const Plan = z.object({
  summary: z.string().min(1).max(4_000),
  acceptanceCriteria: z.array(z.string().max(1_000)).max(30),
  steps: z.array(z.string().max(1_000)).max(30),
  /** Workspace-relative paths the builder should produce (repo mode: the files to read in full and change). */
  files: z.array(z.string().max(255)).max(50),
  /**
   * Repo mode: the planner judges the goal too big for one change; the architect then asks
   * for a plan of subtasks (`DagPlan`) and runs the task as a DAG task. Ignored in a
   * subtask's own child task and in inline mode.
   */
  decompose: z.boolean().optional(),
});
export type Plan = z.infer<typeof Plan>;

/** A reflection on one failed iteration: why it failed and what to change. */
export const Reflection = z.object({
  rootCause: z.string().min(1).max(4_000),
  hypothesis: z.string().max(4_000),
  fixPlan: z.string().min(1).max(8_000),
});
export type Reflection = z.infer<typeof Reflection>;

/**
 * A candidate: the builder's files and, where the task had none, generated tests. In repo
 * mode the builder answers with `edits`; the conductor applies them to the base tree and
 * `files` then holds every changed file in full, `deleted` the removed paths.
 */
export const Candidate = z
  .object({
    files: z.array(FileChange).max(50).default([]),
    tests: z.array(FileChange).max(20).default([]),
    notes: z.string().max(4_000).default(""),
    /** Repo mode: the builder's search/replace edits, as it sent them. */
    edits: z.array(Edit).max(50).optional(),
    /** Repo mode: base paths the edits remove. */
    deleted: z.array(z.string()).max(500).optional(),
    /** Repo mode: one line saying what the change does (the commit subject). */
    summary: z.string().max(500).optional(),
  })
  .refine((c) => c.files.length > 0 || (c.edits?.length ?? 0) > 0, {
    message: "a candidate needs at least one file or edit",
    path: ["files"],
  });
export type Candidate = z.infer<typeof Candidate>;

/** One finding of the gate or the review. */
export const Finding = z.object({
  severity: z.enum(["info", "warning", "error", "blocker"]),
  message: z.string().max(2_000),
  path: z.string().optional(),
  line: z.number().int().positive().optional(),
  rule: z.string().optional(),
});
export type Finding = z.infer<typeof Finding>;

/** The review of a candidate. `score` is in [0, 1]. */
export const Review = z.object({
  approved: z.boolean(),
  score: z.number().min(0).max(1),
  findings: z.array(Finding).max(50),
});
export type Review = z.infer<typeof Review>;

/** The static safety gate's verdict. A blocked candidate is never executed. */
export const GateResult = z.object({
  blocked: z.boolean(),
  findings: z.array(Finding),
});
export type GateResult = z.infer<typeof GateResult>;

export { StepHeader };
