/**
 * The durable-consumer module on real NATS JetStream, with a job of its own (numbered steps,
 * each with a side effect, then a checkpoint) on a work queue of its own: a runner killed
 * mid-job (its connection gone: no ack, no heartbeat) is resumed by another from the
 * checkpoint and no finished step runs twice; a retryable failure is redelivered after the
 * retry delay and resumes; a duplicate request never runs twice; a poison message is rejected
 * and the consumer goes on.
 */
import { describe, expect } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { AckPolicy, RetentionPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { z } from "zod";
import pino from "pino";
import {
  DEFAULT_OWNER,
  ensureStreams,
  followEvents,
  openBucket,
  openCheckpointBlobs,
  publishEvent,
  rejectsSubject,
} from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { RejectNotice, type TaskEvent } from "@loopsmith/shared/contracts";
import {
  RETRY_DELAY_MS,
  checkpointStore,
  maxPayloadOf,
  runDurableConsumer,
  type DurableConsumer,
} from "@loopsmith/architect";
import { it } from "../fixtures/index.js";
import { until } from "./helpers.js";

const log = pino({ level: "silent" });
const Job = z.object({
  v: z.literal(1),
  taskId: z.string().regex(/^[A-Za-z0-9_-]+$/),
  owner: z.string().optional(),
  steps: z.number().int().min(1).max(20),
});
type Job = z.infer<typeof Job>;
const JobState = z.object({
  status: z.enum(["running", "final"]),
  eventSeq: z.number().int(),
  request: Job,
  step: z.number().int(),
  error: z.string().optional(),
});
type JobState = z.infer<typeof JobState>;

const STREAM = "DURABLE_TEST";
const CONSUMER = "worker";
const SUBMIT = "durable.test.submit";
const MAX_DELIVER = 4;

/** The job's stream (a work queue with a 10 s ack wait, as the task intake's) and its consumer. */
async function ensureJobStream(nc: NatsConnection): Promise<void> {
  await ensureStreams(nc);
  const jsm = await jetstreamManager(nc);
  await jsm.streams
    .add({ name: STREAM, subjects: [`${SUBMIT}.>`], retention: RetentionPolicy.Workqueue })
    .catch(() => undefined);
  await jsm.consumers
    .add(STREAM, {
      durable_name: CONSUMER,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(10_000),
      max_deliver: MAX_DELIVER,
    })
    .catch(() => undefined);
}

/** What one runner did: each step's side effect by job, the states it started from, its result republishes. */
interface Runner {
  consumer: DurableConsumer<JobState>;
  effects: string[];
  startedAt: number[];
  republished: string[];
  ended: string[];
}

/**
 * A runner on `nc`. `before(key, step)` runs before a step's side effect (it may block or
 * throw); the effect is recorded, an event published, then the step is checkpointed.
 */
async function startRunner(
  nc: NatsConnection,
  before: (key: string, step: number) => Promise<void> = async () => undefined,
  options: { stopTimeoutMs?: number; log?: pino.Logger } = {},
): Promise<Runner> {
  const kv = await openBucket(nc, "durable_test");
  const store = checkpointStore({
    kv,
    blobs: await openCheckpointBlobs(nc),
    maxPayload: maxPayloadOf(nc),
    schema: JobState,
    keyOf: (s) => s.request.taskId,
    label: "job",
  });
  const runner: Omit<Runner, "consumer"> = { effects: [], startedAt: [], republished: [], ended: [] };
  const event = (s: JobState, kind: TaskEvent["kind"], message: string): TaskEvent => ({
    v: 1,
    taskId: s.request.taskId,
    seq: s.eventSeq,
    at: new Date().toISOString(),
    iteration: s.step,
    kind,
    message,
  });
  const result = (s: JobState) =>
    publishEvent(nc, event(s, "result", s.error ?? `done after ${s.step} steps`), s.request.owner);
  const consumer = await runDurableConsumer<Job, JobState>({
    nc,
    log: options.log ?? log,
    ...(options.stopTimeoutMs !== undefined ? { stopTimeoutMs: options.stopTimeoutMs } : {}),
    stream: STREAM,
    consumer: CONSUMER,
    intake: "tasks",
    submitSubject: SUBMIT,
    maxDeliver: MAX_DELIVER,
    schema: Job,
    store,
    label: "job",
    concurrency: 2,
    handler: {
      keyOf: (job) => job.taskId,
      requestOf: (s) => s.request,
      initial: (request) => ({ status: "running", eventSeq: 0, request, step: 0 }),
      accepted: async (s) => (
        await publishEvent(nc, event(s, "accepted", "accepted"), s.request.owner),
        { ...s, eventSeq: 1 }
      ),
      async run(state, _revision, ctx) {
        runner.startedAt.push(state.step);
        let s = state;
        while (s.step < s.request.steps) {
          const step = s.step + 1;
          await before(s.request.taskId, step);
          runner.effects.push(`${s.request.taskId}:${step}`);
          await ctx.emit(event(s, "step", `step ${step}`));
          s = { ...s, step, eventSeq: s.eventSeq + 1 };
          await ctx.checkpoint(s);
        }
        const final: JobState = { ...s, status: "final", eventSeq: s.eventSeq + 1 };
        await ctx.checkpoint(final);
        await result({ ...final, eventSeq: s.eventSeq });
        return final;
      },
      failed: (base, err) => ({ ...base, status: "final", error: `stopped: ${(err as Error).message}` }),
      ended: async (s) => (runner.ended.push(s.request.taskId), result(s)),
      republish: async (s) => (runner.republished.push(s.request.taskId), result({ ...s, eventSeq: s.eventSeq - 1 })),
      refuseTaken: async () => undefined,
    },
  });
  return {
    ...runner,
    consumer,
    effects: runner.effects,
    startedAt: runner.startedAt,
    republished: runner.republished,
    ended: runner.ended,
  };
}

let n = 0;
const job = (steps = 4): Job => ({ v: 1, taskId: `job-${Date.now().toString(36)}-${++n}`, steps });
const submit = (nc: NatsConnection, j: Job, msgID = j.taskId) =>
  jetstream(nc).publish(`${SUBMIT}.${DEFAULT_OWNER}`, JSON.stringify(j), { msgID });

async function eventsOf(nc: NatsConnection, key: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  for await (const e of followEvents(nc, DEFAULT_OWNER, key, AbortSignal.timeout(60_000))) events.push(e);
  return events;
}

async function queued(nc: NatsConnection): Promise<number> {
  return (
    (await (await jetstreamManager(nc)).consumers.info(STREAM, CONSUMER)).num_pending +
    (await (await jetstreamManager(nc)).consumers.info(STREAM, CONSUMER)).num_ack_pending
  );
}

describe("the durable consumer", () => {
  it("resumes a job from its checkpoint on another runner when the first dies mid-handler, and runs no finished step twice", async ({
    nats,
  }) => {
    const nc1 = await connect({ servers: nats.url });
    await ensureJobStream(nc1);
    let reached!: () => void;
    const blocked = new Promise<void>((r) => (reached = r));
    let kill!: (err: Error) => void;
    const dying = new Promise<void>((_, reject) => (kill = reject));
    dying.catch(() => undefined);
    const first = await startRunner(nc1, async (_key, step) => {
      if (step === 3) {
        reached();
        await dying;
      }
    });
    const j = job(5);
    await submit(nc1, j);
    await blocked;
    await nc1.close(); // the runner's process is gone: no ack, no more heartbeats
    const died = Date.now();
    kill(new Error("killed"));
    await first.consumer.stop();

    const nc2 = await connect({ servers: nats.url });
    const second = await startRunner(nc2);
    try {
      const events = await eventsOf(nc2, j.taskId);
      expect(events.at(-1)).toMatchObject({ kind: "result", message: "done after 5 steps" });
      // Back within the ack wait (10 s) and the fetch, not after minutes.
      expect(Date.now() - died).toBeLessThan(25_000);
      expect(first.effects).toEqual([`${j.taskId}:1`, `${j.taskId}:2`]);
      expect(second.startedAt).toEqual([2]);
      expect(second.effects).toEqual([`${j.taskId}:3`, `${j.taskId}:4`, `${j.taskId}:5`]);
      // Every event once, numbered without a gap across the two runners.
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
      expect(events.filter((e) => e.kind === "step").map((e) => e.message)).toEqual([
        "step 1",
        "step 2",
        "step 3",
        "step 4",
        "step 5",
      ]);
      expect((await second.consumer.status(j.taskId, DEFAULT_OWNER))?.status).toBe("final");
      await until(async () => (await queued(nc2)) === 0);
      expect(await queued(nc2)).toBe(0);
    } finally {
      await second.consumer.stop();
      await nc2.close();
    }
  }, 90_000);

  it("naks a retryable failure, which is redelivered after the retry delay and resumes from the checkpoint; ends a job at once on an error a retry cannot cure", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureJobStream(nc);
    let failedAt = 0;
    const flaky = job(3);
    const broken = job(3);
    const runner = await startRunner(nc, async (key, step) => {
      if (key === flaky.taskId && step === 2 && !failedAt) {
        failedAt = Date.now();
        throw new LoopsmithError("unavailable", "the step's service did not answer");
      }
      if (key === broken.taskId && step === 2) throw new LoopsmithError("bad_request", "the job cannot be done");
    });
    try {
      await submit(nc, flaky);
      await submit(nc, broken);
      const events = await eventsOf(nc, flaky.taskId);
      expect(events.at(-1)?.message).toBe("done after 3 steps");
      expect(Date.now() - failedAt).toBeGreaterThanOrEqual(RETRY_DELAY_MS - 500);
      // Resumed after step 1: step 1's effect once, steps 2 and 3 on the second delivery.
      expect(runner.effects.filter((e) => e.startsWith(flaky.taskId))).toEqual([
        `${flaky.taskId}:1`,
        `${flaky.taskId}:2`,
        `${flaky.taskId}:3`,
      ]);
      const brokenEvents = await eventsOf(nc, broken.taskId);
      expect(brokenEvents.at(-1)).toMatchObject({ kind: "result", message: "stopped: the job cannot be done" });
      expect(runner.ended).toEqual([broken.taskId]);
      expect(runner.effects.filter((e) => e.startsWith(broken.taskId))).toEqual([`${broken.taskId}:1`]);
      expect(await runner.consumer.status(broken.taskId, DEFAULT_OWNER)).toMatchObject({ status: "final", step: 1 });
      await until(async () => (await queued(nc)) === 0);
      expect(await queued(nc)).toBe(0);
    } finally {
      await runner.consumer.stop();
      await nc.close();
    }
  }, 90_000);

  it("never runs a duplicate request twice: one that arrives while the job runs waits, one after it ends gets the result again", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureJobStream(nc);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const j = job(2);
    const runner = await startRunner(nc, async (key, step) => {
      if (key === j.taskId && step === 2) await gate;
    });
    try {
      await submit(nc, j);
      await until(() => runner.effects.length >= 1);
      // Past the duplicate window a resubmit is a new message: another message id.
      await submit(nc, j, `${j.taskId}#again`);
      await new Promise((r) => setTimeout(r, 1_000));
      release();
      await eventsOf(nc, j.taskId);
      await until(() => runner.republished.length >= 1, 20_000);
      await submit(nc, j, `${j.taskId}#late`);
      await until(() => runner.republished.length >= 2, 20_000);
      await until(async () => (await queued(nc)) === 0);
      expect(runner.startedAt).toEqual([0]);
      expect(runner.effects).toEqual([`${j.taskId}:1`, `${j.taskId}:2`]);
      expect(runner.republished).toEqual([j.taskId, j.taskId]);
      expect(await queued(nc)).toBe(0);
    } finally {
      release();
      await runner.consumer.stop();
      await nc.close();
    }
  }, 90_000);

  it("rejects a poison message (not JSON, or failing the schema) with a notice, never runs it, and goes on", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureJobStream(nc);
    const runner = await startRunner(nc);
    const notices: RejectNotice[] = [];
    const sub = nc.subscribe(rejectsSubject("tasks", DEFAULT_OWNER), {
      callback: (_err, m) => void notices.push(RejectNotice.parse(m.json())),
    });
    try {
      const js = jetstream(nc);
      await js.publish(`${SUBMIT}.${DEFAULT_OWNER}`, "{not json", { msgID: "poison-1" });
      await js.publish(`${SUBMIT}.${DEFAULT_OWNER}`, JSON.stringify({ v: 1, taskId: "poison-2", steps: "many" }), {
        msgID: "poison-2",
      });
      await until(() => notices.length >= 2);
      expect(notices.map((x) => x.taskId)).toEqual([undefined, "poison-2"]);
      expect(notices.every((x) => x.error.code === "bad_request")).toBe(true);
      const good = job(1);
      await submit(nc, good);
      expect((await eventsOf(nc, good.taskId)).at(-1)?.message).toBe("done after 1 steps");
      expect(runner.startedAt).toEqual([0]);
      await until(async () => (await queued(nc)) === 0);
      expect(await queued(nc)).toBe(0);
    } finally {
      sub.unsubscribe();
      await runner.consumer.stop();
      await nc.close();
    }
  }, 60_000);

  it("stops in bounded time when a job never hands back; the job's message goes back to the broker and resumes on another runner", async ({
    nats,
  }) => {
    const nc1 = await connect({ servers: nats.url });
    await ensureJobStream(nc1);
    let reached!: () => void;
    const blocked = new Promise<void>((r) => (reached = r));
    // Step 2 never returns, and the job never looks at `stopping()`: a job stuck in a call.
    const first = await startRunner(
      nc1,
      async (_key, step) => {
        if (step === 2) {
          reached();
          await new Promise<never>(() => undefined);
        }
      },
      { stopTimeoutMs: 1_500 },
    );
    const j = job(3);
    await submit(nc1, j);
    await blocked;
    const started = Date.now();
    await first.consumer.stop();
    const stopMs = Date.now() - started;
    // The fetch loop ends within its 2 s fetch expiry; the stuck job is then given 1.5 s.
    expect(stopMs).toBeLessThan(6_000);
    expect(stopMs).toBeGreaterThanOrEqual(1_400);
    const nc2 = await connect({ servers: nats.url });
    const second = await startRunner(nc2);
    try {
      // No heartbeat beats for the abandoned job: it is redelivered after the 10 s ack wait.
      const events = await eventsOf(nc2, j.taskId);
      expect(events.at(-1)?.message).toBe("done after 3 steps");
      expect(second.startedAt).toEqual([1]);
      expect(second.effects).toEqual([`${j.taskId}:2`, `${j.taskId}:3`]);
      expect(first.effects).toEqual([`${j.taskId}:1`]);
    } finally {
      await second.consumer.stop();
      await nc2.close();
      await nc1.close();
    }
  }, 90_000);

  it("stops an idle consumer at once, ending its waiting fetch instead of its 2 s expiry, and a job sent after runs on another runner", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureJobStream(nc);
    const first = await startRunner(nc);
    // Its fetch is waiting on the broker.
    await until(async () => (await (await jetstreamManager(nc)).consumers.info(STREAM, CONSUMER)).num_waiting > 0);
    const started = Date.now();
    await first.consumer.stop();
    expect(Date.now() - started).toBeLessThan(500);
    const second = await startRunner(nc);
    try {
      const j = job(1);
      const sent = Date.now();
      await submit(nc, j);
      expect((await eventsOf(nc, j.taskId)).at(-1)?.message).toBe("done after 1 steps");
      // Not held by the first runner's abandoned fetch until the 10 s ack wait.
      expect(Date.now() - sent).toBeLessThan(3_000);
      expect(first.effects).toEqual([]);
      expect(second.effects).toEqual([`${j.taskId}:1`]);
    } finally {
      await second.consumer.stop();
      await nc.close();
    }
  }, 60_000);

  it("takes no more jobs once its connection is closed, instead of retrying a closed connection for ever", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureJobStream(nc);
    const lines: string[] = [];
    const sink = { write: (line: string) => void lines.push(line) };
    const runner = await startRunner(nc, undefined, { log: pino({ level: "warn" }, sink) });
    await nc.close();
    await new Promise((r) => setTimeout(r, 4_000));
    const messages = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(messages.filter((m) => m.includes("the connection is closed"))).toHaveLength(1);
    expect(messages.filter((m) => m.includes("failed; retrying")).length).toBeLessThanOrEqual(1);
    const started = Date.now();
    await runner.consumer.stop();
    expect(Date.now() - started).toBeLessThan(1_000);
  }, 30_000);

  it("stops following a task's events when the signal fired before the follow began", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    await ensureStreams(nc);
    const key = `follow-${Date.now().toString(36)}`;
    const at = new Date().toISOString();
    await publishEvent(nc, { v: 1, taskId: key, seq: 0, at, iteration: 0, kind: "accepted", message: "accepted" });
    const fired = new AbortController();
    fired.abort(new Error("the conductor is stopping"));
    try {
      // The task never ends: a follow that missed the abort would wait for ever.
      const ended = await Promise.race([
        (async () => {
          for await (const _ of followEvents(nc, DEFAULT_OWNER, key, fired.signal));
          return "ended";
        })(),
        new Promise((r) => setTimeout(() => r("still following"), 5_000)),
      ]);
      expect(ended).toBe("ended");
    } finally {
      await nc.close();
    }
  }, 30_000);
});
