/**
 * The improver: a durable pull consumer on the improvement-run intake, like the conductor's
 * on tasks. It takes one run at a time, heartbeats while the run works, checkpoints the run
 * in KV after every generation, and acks only when the run is final. A redelivered run
 * resumes at the generation it was in, from the same parent; a run already final publishes
 * its result again and is acknowledged (a resubmitted run id is never run twice).
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, type JsMsg } from "@nats-io/jetstream";
import {
  DEFAULT_OWNER,
  IMPROVE_MAX_DELIVER,
  ImproveRequest,
  LoopsmithError,
  Streams,
  Subjects,
  ensureImproveStreams,
  isTransientNatsError,
  lastEventSeq,
  openImproveStates,
  ownerOfSubject,
  ownerOfTask,
  publishEvent,
  rejectIntakeMessage,
  type GenerationReport,
} from "@loopsmith/shared";
import { HEARTBEAT_MS, RETRY_DELAY_MS } from "../conductor.js";
import type { GenerationDeps } from "./generation.js";
import { HandBack, runImprove, summarize } from "./run.js";
import { initialImproveState, kvImproveStore, type ImproveState, type ImproveStore } from "./state.js";

/** Largest report sent whole in an event, in characters; a larger one goes without its patch (the KV copy keeps it). */
const EVENT_REPORT_MAX_CHARS = 400_000;

/** The running improver. */
export interface Improver {
  /** A run's state and its reports so far (none when the run is not `owner`'s). */
  status(runId: string, owner: string): Promise<{ state: ImproveState | null; reports: GenerationReport[] }>;
  /** Stops taking runs; a running run hands back before its next generation. */
  stop(): Promise<void>;
}

/** Options of {@link startImprover}. */
export type ImproverOptions = Omit<GenerationDeps, "emit" | "saveHypothesis" | "rejectedFrom" | "nc" | "log"> & {
  nc: NatsConnection;
  log: Logger;
  /** Replicas of the streams and buckets it creates when missing (`config.nats.replicas`). @defaultValue 1 */
  replicas?: number;
};

/** Publishes one event of a run; returns the state with the next seq. */
async function publish(nc: NatsConnection, state: ImproveState, kind: "step" | "generation" | "warning" | "result", message: string, data?: Record<string, unknown>): Promise<ImproveState> {
  let payload = data;
  const report = data?.report as GenerationReport | undefined;
  if (report?.change && JSON.stringify(report).length > EVENT_REPORT_MAX_CHARS) {
    payload = { ...data, report: { ...report, change: { ...report.change, patch: `(patch of ${report.change.patch.length} characters: loopsmith.architect.improve_status has it)` } } };
  }
  await publishEvent(nc, { v: 1, taskId: state.request.runId, seq: state.eventSeq, at: new Date().toISOString(), iteration: Math.min(state.generation, 10_000), kind, message, ...(payload ? { data: payload } : {}) }, ownerOfTask(state.request));
  return { ...state, eventSeq: state.eventSeq + 1 };
}

/** Starts the improver's consumer loop (one run at a time: a run's generations already fill the stack). */
export async function startImprover(opts: ImproverOptions): Promise<Improver> {
  const { nc, log } = opts;
  const streams = { replicas: opts.replicas ?? 1 };
  await ensureImproveStreams(nc, streams);
  const store: ImproveStore = kvImproveStore(await openImproveStates(nc, streams));
  const consumer = await jetstream(nc).consumers.get(Streams.improve, Streams.improveConsumer);
  let stopped = false;
  let current: Promise<void> | undefined;

  const process = async (msg: JsMsg, request: ImproveRequest): Promise<void> => {
    const rlog = log.child({ runId: request.runId });
    const heartbeat = setInterval(() => msg.working(), HEARTBEAT_MS);
    try {
      const existing = await store.get(request.runId);
      if (existing && ownerOfTask(existing.state.request) !== ownerOfTask(request)) {
        const message = `the run id ${request.runId} belongs to another client's run: submit with another id`;
        rlog.warn({ owner: ownerOfTask(request) }, "run id taken by another owner's run; refusing the submission");
        await publishEvent(nc, { v: 1, taskId: request.runId, seq: 0, at: new Date().toISOString(), iteration: 0, kind: "result", message, data: { error: { code: "bad_request", message, retryable: false } } }, ownerOfTask(request));
        msg.term("run id taken by another owner");
        return;
      }
      if (existing?.state.status === "final") {
        rlog.info("run already final; publishing its result again");
        await publish(nc, existing.state, "result", existing.state.summary?.message ?? "final", { summary: existing.state.summary });
        msg.ack();
        return;
      }
      let state: ImproveState;
      let revision: number;
      if (existing) {
        state = { ...existing.state, eventSeq: Math.max(existing.state.eventSeq, (await lastEventSeq(nc, ownerOfTask(request), request.runId)) + 1) };
        revision = existing.revision;
        rlog.info({ generation: state.generation }, "resuming the run from its checkpoint");
      } else {
        state = initialImproveState(request);
        revision = await store.create(state);
        state = await publish(nc, state, "step", `run accepted: ${request.settings.generations} generation(s) on ${request.repo.name ?? request.repo.baseCommit.slice(0, 12)}`, { phase: "accepted" });
      }
      const final = await runImprove(state, revision, {
        ...opts,
        log: rlog,
        store,
        publish: (s, kind, message, data) => publish(nc, s, kind, message, data),
        cancelled: () => false,
        stopping: () => stopped,
      });
      rlog.info({ summary: final.summary }, "run finished");
      msg.ack();
    } catch (err) {
      const retryable = err instanceof HandBack || (err instanceof LoopsmithError && err.retryable) || isTransientNatsError(err);
      try {
        if (retryable && msg.info.deliveryCount < IMPROVE_MAX_DELIVER) {
          rlog.warn({ err }, "the run hands back; it resumes from its checkpoint");
          msg.nak(stopped ? 0 : RETRY_DELAY_MS);
        } else {
          rlog.error({ err }, "the run failed; ending it");
          await endWithError(request, err);
          msg.term("failed");
        }
      } catch (ackErr) {
        rlog.warn({ err: ackErr }, "could not settle the run message; it will be redelivered");
      }
    } finally {
      clearInterval(heartbeat);
    }
  };

  const endWithError = async (request: ImproveRequest, err: unknown): Promise<void> => {
    const current = await store.get(request.runId);
    const base = current?.state ?? initialImproveState(request);
    const message = `stopped: ${(err as Error)?.message ?? String(err)}`;
    const state = { ...base, eventSeq: Math.max(base.eventSeq, (await lastEventSeq(nc, ownerOfTask(request), request.runId)) + 1), status: "final" as const, summary: summarize(base, "error", message) };
    if (current) await store.update(state, current.revision);
    else await store.create(state);
    await publish(nc, state, "result", message, { summary: state.summary });
  };

  const loop = (async () => {
    while (!stopped) {
      try {
        const batch = await consumer.fetch({ max_messages: 1, expires: 2_000 });
        for await (const msg of batch) {
          let parsed;
          try {
            parsed = ImproveRequest.safeParse(msg.json());
          } catch {
            parsed = ImproveRequest.safeParse(null);
          }
          if (!parsed.success) {
            rejectIntakeMessage(nc, "improve", msg, parsed.error, log);
            msg.term("invalid run");
            continue;
          }
          // The owner is the subject's (the permission matrix vouches for it), never the body's.
          parsed.data.owner = ownerOfSubject(msg.subject, Subjects.improveSubmit) ?? DEFAULT_OWNER;
          current = process(msg, parsed.data);
          await current;
          current = undefined;
        }
      } catch (err) {
        if (stopped) break;
        log.warn({ err }, "fetching improvement runs failed; retrying");
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  })();

  return {
    async status(runId, owner) {
      const state = (await store.get(runId))?.state ?? null;
      if (!state || ownerOfTask(state.request) !== owner) return { state: null, reports: [] };
      return { state, reports: await store.reports(runId) };
    },
    async stop() {
      stopped = true;
      await loop;
      // A generation waiting on its task hands back at its next step; the message is
      // redelivered (the run resumes from its checkpoint) if it does not within 5 s.
      await Promise.race([current, new Promise((r) => setTimeout(r, 5_000).unref())]);
    },
  };
}
