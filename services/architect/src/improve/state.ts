/**
 * An improvement run's checkpoint, in the `loopsmith_improve` KV bucket: key `<runId>` holds
 * the run's state (its large parts in the checkpoint blob store, `durable/checkpoints.ts`),
 * key `<runId>.gen.<N>` the report of generation N. The state is written after every phase
 * of the run's phase machine (`run.ts`: calibrate, then per generation plan, implement,
 * validate, measure, decide, report), with what the generation running now has done so far
 * ({@link GenerationProgress}), so a run whose architect died resumes at the phase it was in,
 * with the same parent, and repeats no finished phase.
 */
import { z } from "zod";
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { openCheckpointBlobs, openImproveStates, type StreamOptions } from "@loopsmith/shared/bus";
import {
  Calibration,
  ParentMeasure,
  CheckCounts,
  CommitId,
  GenerationError,
  GenerationReport,
  GenerationReview,
  Hypothesis,
  ImproveRequest,
  ImproveSummary,
  RepoChange,
  TaskResult,
  Usage,
  emptyUsage,
} from "@loopsmith/shared/contracts";
import { checkpointStore, maxPayloadOf, type BlobStore, type CheckpointStore } from "../durable/index.js";

/** A tree a generation can start from. */
export const Tree = z.object({ commit: CommitId, snapshot: z.string() });
export type Tree = z.infer<typeof Tree>;

/**
 * The phases of a run's machine (`run.ts`): CALIBRATE once before generation 1, then per
 * generation PLAN → IMPLEMENT → VALIDATE → MEASURE → DECIDE → REPORT (a phase that ends the
 * generation goes to REPORT at once), then PLAN of the next.
 */
export const ImprovePhase = z.enum(["calibrate", "plan", "implement", "validate", "measure", "decide", "report"]);
export type ImprovePhase = z.infer<typeof ImprovePhase>;

/** How a generation ended: its report, and what the run takes from it. */
export const GenerationEnd = z.object({
  report: GenerationReport,
  /** The new parent, when accepted. */
  accepted: Tree.optional(),
  /** The check's counts on the parent, when measured (kept while the parent stays). */
  parentCheck: CheckCounts.optional(),
  /** The run cannot go on (no check command, a benchmark that does not run on the parent). */
  fatal: z.boolean().optional(),
  /** The run's USD budget is used up (the hypothesis spent the rest): the run stops with `budget`. */
  budget: z.boolean().optional(),
});
export type GenerationEnd = z.infer<typeof GenerationEnd>;

/**
 * What the generation running now has done, checkpointed after each of its phases: its clock,
 * usage and reviews so far, and each finished phase's outcome (the task's result, the
 * validated candidate, the measurements, the generation's end), which the next phase starts
 * from. The measurements are this run's own (`commands.ts`, `metrics.ts`), read back as written.
 */
export const GenerationProgress = z.object({
  /** When the generation started, ISO 8601. */
  startedAt: z.string(),
  /** Wall time per report phase so far, ms. */
  phasesMs: z.record(z.string(), z.number().nonnegative()),
  usage: Usage,
  reviews: z.array(GenerationReview),
  /** IMPLEMENT's: the generation's task's result. */
  result: TaskResult.optional(),
  /** VALIDATE's: the candidate's change, its report part so far, the check's counts on the parent. */
  validated: z
    .object({
      change: RepoChange,
      checkPart: GenerationReport.pick({ change: true, hypothesis: true, check: true }),
      parentCheck: CheckCounts,
    })
    .optional(),
  /** MEASURE's: each side's runs (benchmark case runs, or quality measurements). */
  measured: z.object({ parent: z.array(z.unknown()), candidate: z.array(z.unknown()) }).optional(),
  /** The generation's end, for REPORT. */
  end: GenerationEnd.optional(),
});
export type GenerationProgress = z.infer<typeof GenerationProgress>;

/** The checkpoint of a run. */
export const ImproveState = z.object({
  request: ImproveRequest,
  status: z.enum(["running", "final"]),
  /** The phase the run is at (a checkpoint written before phases were kept resumes at CALIBRATE, which skips what is done). */
  phase: ImprovePhase.default("calibrate"),
  /** The generation running now (or next), 1-based. */
  generation: z.number().int().min(1),
  parent: Tree,
  /** Accepted generations in order, with their trees. */
  accepted: z.array(z.object({ generation: z.number().int(), tree: Tree })),
  /** The check's counts on the current parent, once measured. */
  parentCheck: CheckCounts.optional(),
  /** The hypothesis of the generation running now, so a resumed generation does not ask again. */
  hypothesis: Hypothesis.optional(),
  /** The LLM usage of asking for that hypothesis. */
  hypothesisUsage: Usage.optional(),
  /**
   * Errors the generation running now met so far, for its report's `errors`: those its
   * finished phases recorded, and those that ended earlier attempts of a phase (retryable
   * ones: the run resumed it from this checkpoint).
   */
  generationErrors: z.array(GenerationError).optional(),
  /** What the generation running now has done so far (absent before its PLAN, and after its REPORT). */
  progress: GenerationProgress.optional(),
  /** LLM usage of the whole run so far. */
  usage: Usage,
  /** The highest cost of one generation so far, USD: the estimate a budget check uses. */
  maxGenerationUsd: z.number().nonnegative().default(0),
  /**
   * The base parent's calibration runs, its flaky cases and the seeded split into
   * selection and confirmation sets, measured once before generation 1 and kept for the run.
   */
  calibration: Calibration.optional(),
  /** The base parent measured once before generation 1 (a dry run, a `measureOnly` run), kept for the summary. */
  parentMeasure: ParentMeasure.optional(),
  /** Paired tests the run has made (generations that reached DECIDE): the next one is tested at α_{tests+1}. */
  tests: z.number().int().nonnegative().default(0),
  /** Next event seq. */
  eventSeq: z.number().int().nonnegative(),
  summary: ImproveSummary.optional(),
  startedAt: z.string(),
});
export type ImproveState = z.infer<typeof ImproveState>;

/** The first state of a run. */
export function initialImproveState(request: ImproveRequest): ImproveState {
  return {
    request,
    status: "running",
    phase: "calibrate",
    generation: 1,
    parent: { commit: request.repo.baseCommit, snapshot: request.repo.snapshot },
    accepted: [],
    usage: emptyUsage(),
    maxGenerationUsd: 0,
    tests: 0,
    eventSeq: 0,
    startedAt: new Date().toISOString(),
  };
}

/** Runs' checkpoints (revision-checked, see `durable/checkpoints.ts`) and their generations' reports. */
export interface ImproveStore extends CheckpointStore<ImproveState> {
  putReport(report: GenerationReport): Promise<void>;
  reports(runId: string): Promise<GenerationReport[]>;
  /**
   * Rejected generations of OTHER runs that started from the tree `parent` (newest first, at
   * most `max`): what was already tried on this very code, and why it failed.
   */
  rejectedFrom(parent: string, exceptRunId: string, max: number): Promise<GenerationReport[]>;
}

const reportKey = (runId: string, generation: number): string => `${runId}.gen.${generation}`;

/** The store over the `loopsmith_improve` bucket and the blob store; `maxPayload` is the server's, bytes. */
export function kvImproveStore(kv: KV, blobs: BlobStore, maxPayload: number): ImproveStore {
  return {
    ...checkpointStore({ kv, blobs, maxPayload, schema: ImproveState, keyOf: (s) => s.request.runId, label: "run" }),
    async putReport(report) {
      await kv.put(reportKey(report.runId, report.generation), JSON.stringify(report));
    },
    async rejectedFrom(parent, exceptRunId, max) {
      const found: GenerationReport[] = [];
      for await (const key of await kv.keys("*.gen.*")) {
        if (key.startsWith(`${exceptRunId}.gen.`)) continue;
        const e = await kv.get(key);
        if (!e || e.operation !== "PUT") continue;
        const r = GenerationReport.safeParse(e.json());
        if (r.success && r.data.parent === parent && r.data.decision.verdict === "rejected") found.push(r.data);
      }
      return found.sort((a, b) => b.finishedAt.localeCompare(a.finishedAt)).slice(0, max);
    },
    async reports(runId) {
      const out: GenerationReport[] = [];
      for (let n = 1; ; n++) {
        const e = await kv.get(reportKey(runId, n));
        if (!e || e.operation !== "PUT") break;
        out.push(GenerationReport.parse(e.json()));
      }
      return out;
    },
  };
}

/**
 * Opens the improvement-run bucket and the checkpoint blob store (creating them when missing).
 * @throws LoopsmithError `permission_denied` when one is missing and this user may not create it
 */
export async function openImproveStore(nc: NatsConnection, opts: StreamOptions = {}): Promise<ImproveStore> {
  return kvImproveStore(await openImproveStates(nc, opts), await openCheckpointBlobs(nc, opts), maxPayloadOf(nc));
}
