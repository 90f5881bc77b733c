/**
 * The improver: the durable consumer (`durable/`) of the improvement-run intake, like the
 * conductor's on tasks. It takes one run at a time, runs it through the durable phase machine
 * (`run.ts`), which checkpoints the run after every phase through the consumer's context, and
 * acks only when the run is final. A redelivered run resumes at the phase it was in, from the
 * same parent; a run already final publishes its result again and is acknowledged (a
 * resubmitted run id is never run twice).
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { IMPROVE_MAX_DELIVER, Streams, Subjects, ensureImproveStreams, ownerOfTask } from "@loopsmith/shared/bus";
import { ImproveRequest, type GenerationReport } from "@loopsmith/shared/contracts";
import { publishJobEvent, runDurableConsumer } from "../durable/index.js";
import { improveTexts } from "../event-texts.js";
import { publishRunEvent } from "./events.js";
import { runImprove, summarize, type ImproveDeps } from "./run.js";
import { initialImproveState, openImproveStore, type ImproveState } from "./state.js";

/** The running improver. */
export interface Improver {
  /** A run's state and its reports so far (none when the run is not `owner`'s). */
  status(runId: string, owner: string): Promise<{ state: ImproveState | null; reports: GenerationReport[] }>;
  /** Stops taking runs; a running run hands back before its next phase. */
  stop(): Promise<void>;
}

/** Options of {@link startImprover}. */
export type ImproverOptions = Omit<ImproveDeps, "store" | "nc"> & {
  nc: NatsConnection;
  log: Logger;
  /** Replicas of the streams and buckets it creates when missing (`config.nats.replicas`). @defaultValue 1 */
  replicas?: number;
  /**
   * Runs before a run's first step; what it throws ends the run with that error (a USD budget
   * over an unpriced model: `budgetAdmission`).
   */
  admit?: (request: ImproveRequest) => void;
};

/** Starts the improver's consumer loop (one run at a time: a run's generations already fill the stack). */
export async function startImprover(opts: ImproverOptions): Promise<Improver> {
  const { nc, log } = opts;
  const streams = { replicas: opts.replicas ?? 1 };
  await ensureImproveStreams(nc, streams);
  const store = await openImproveStore(nc, streams);
  const result = (state: ImproveState, message: string) =>
    publishRunEvent(nc, state, "result", message, { summary: state.summary });
  const runs = await runDurableConsumer<ImproveRequest, ImproveState>({
    nc,
    log,
    stream: Streams.improve,
    consumer: Streams.improveConsumer,
    intake: "improve",
    submitSubject: Subjects.improveSubmit,
    maxDeliver: IMPROVE_MAX_DELIVER,
    schema: ImproveRequest,
    store,
    label: "run",
    handler: {
      keyOf: (request) => request.runId,
      requestOf: (state) => state.request,
      initial: (request) => initialImproveState(request),
      accepted: (state) => {
        const { repo, settings, measureOnly } = state.request;
        const what = improveTexts.acceptedWhat(measureOnly, settings.generations);
        const on = repo.name ?? repo.baseCommit.slice(0, 12);
        return publishRunEvent(nc, state, "step", improveTexts.accepted(what, on), { phase: "accepted" });
      },
      async run(state, _revision, ctx) {
        opts.admit?.(state.request);
        const final = await runImprove(state, { ...opts, store }, ctx);
        ctx.log.info({ summary: final.summary }, "run finished");
        return final;
      },
      failed: (base, err) => ({
        ...base,
        status: "final",
        summary: summarize(base, "error", `stopped: ${(err as Error)?.message ?? String(err)}`),
      }),
      ended: async (state) => void (await result(state, state.summary?.message ?? "final")),
      republish: async (state) => void (await result(state, state.summary?.message ?? "final")),
      async refuseTaken(request) {
        const message = improveTexts.taken(request.runId);
        const data = { error: { code: "bad_request", message, retryable: false } };
        const event = { taskId: request.runId, seq: 0, iteration: 0, message, data };
        await publishJobEvent(nc, ownerOfTask(request), { ...event, kind: "result" });
      },
    },
  });
  return {
    async status(runId, owner) {
      const state = await runs.status(runId, owner);
      return state ? { state, reports: await store.reports(runId) } : { state: null, reports: [] };
    },
    stop: () => runs.stop(),
  };
}
