/**
 * A durable consumer: one JetStream pull consumer on a work-queue intake, whose messages are
 * long jobs (a task, an improvement run) checkpointed in a {@link CheckpointStore}. It takes
 * one message per free slot, heartbeats (`working()`) while the job runs, and acks only when
 * the job reached a final state; a redelivered message resumes from the last checkpoint, so a
 * runner killed mid-job (kill -9: no ack, no heartbeat) loses nothing and repeats no finished
 * step. Around that it owns what every such consumer needs: the owner of a message (its
 * subject's, never its body's), a key another owner already has (refused), a key already final
 * (its result published again, the message acked: a duplicate never runs twice), a malformed
 * message (a reject notice, then `term`), cancel markers, and the end of a job's blobs.
 *
 * Failures: a retryable infrastructure error (a `LoopsmithError` marked retryable, a hand-back
 * the handler names, a NATS call that met a restart or a reconnect: `isTransientNatsError`)
 * naks the message so the job resumes in {@link RETRY_DELAY_MS} (at once when stopping);
 * anything else ends the job at once with the handler's error state, as does a job still
 * failing on its last delivery (`maxDeliver`).
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, type Consumer, type JsMsg } from "@nats-io/jetstream";
import type { z } from "zod";
import {
  DEFAULT_OWNER,
  isTransientNatsError,
  lastEventSeq,
  ownerOfSubject,
  ownerOfTask,
  publishEvent,
  rejectIntakeMessage,
} from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type TaskEvent } from "@loopsmith/shared/contracts";
import type { CheckpointStore, Checkpointed } from "./checkpoints.js";
import { pipelinedEvents } from "./events.js";
import { HandBack } from "./handback.js";

/** Heartbeat period while a job runs, in ms (well within the consumers' 10 s ack wait, `TASK_ACK_WAIT_MS`). */
export const HEARTBEAT_MS = 3_000;
/** Delay before a job whose step failed for infrastructure reasons is tried again, in ms. */
export const RETRY_DELAY_MS = 5_000;

/** What a running job may do: its I/O, shaped as the conductor's `LoopIO`. */
export interface DurableContext<State> {
  /** Waits for the events emitted so far, writes the checkpoint (revision-checked), reads the cancel marker when due. */
  checkpoint(state: State): Promise<void>;
  /** Publishes an event without waiting for its ack (the next checkpoint waits). */
  emit(event: TaskEvent): Promise<void>;
  /** Tells the broker the job is still being worked on. */
  heartbeat(): void;
  /** True once a cancel was asked for (here, or through the KV marker). */
  cancelled(): boolean;
  /** True when the consumer is stopping: the job hands back at its next step. */
  stopping(): boolean;
  /** Gives the job's slot back while it waits on others (a DAG task on its children). */
  release(): void;
  log: Logger;
}

/** What one kind of job does; the consumer does the rest. */
export interface DurableHandler<Request, State> {
  /** The job's key: its id in the checkpoint store and in the events' subjects. */
  keyOf(request: Request): string;
  /** The request a state belongs to (its owner is the state's). */
  requestOf(state: State): Request;
  /** The first state of a new job (created before anything is published). */
  initial(request: Request): State;
  /** Publishes the job's acceptance (seq 0); returns the state with its next `eventSeq` (then checkpointed). */
  accepted(state: State): Promise<State>;
  /**
   * Runs the job to a final state from `state` (new or resumed, `revision` its checkpoint's).
   * @throws HandBack, or a retryable error, to be resumed later
   */
  run(state: State, revision: number, ctx: DurableContext<State>): Promise<State>;
  /** The final state of a job that failed for good; `base.eventSeq` is the next free seq. */
  failed(base: State, err: unknown): State;
  /** After the failed state is checkpointed: publish its result (and record it). */
  ended(state: State): Promise<void>;
  /** Publishes the result of a job found final again (a redelivery or a resubmitted key). */
  republish(state: State): Promise<void>;
  /** Tells the submitter the key belongs to another owner's job (publishes an error result on its own subject). */
  refuseTaken(request: Request): Promise<void>;
}

/** Options of {@link runDurableConsumer}. */
export interface DurableConsumerOptions<Request, State> {
  nc: NatsConnection;
  log: Logger;
  /** The work-queue stream and its durable pull consumer (created by the bus set-up). */
  stream: string;
  consumer: string;
  /** The intake, for reject notices (`loopsmith.rejects.<intake>.<owner>`). */
  intake: "tasks" | "improve";
  /** The submit subject's prefix the owner token follows (`Subjects.tasksSubmit`). */
  submitSubject: string;
  /** The consumer's `max_deliver`: on the last delivery a job that still fails ends. */
  maxDeliver: number;
  /** The request's schema. */
  schema: z.ZodType<Request>;
  store: CheckpointStore<State>;
  handler: DurableHandler<Request, State>;
  /** What a job is, in messages: `task`, `run`. */
  label: string;
  /** Jobs run at once. @defaultValue 1 */
  concurrency?: number;
  /**
   * How often a running job reads its KV cancel marker, at most, in ms (at a checkpoint).
   * Undefined: only cancels asked of this consumer are seen.
   */
  cancelPollMs?: number;
  /**
   * How long `stop()` waits for running jobs to hand back, in ms; past it they are abandoned:
   * their heartbeats stop and their messages are left unsettled, so the broker redelivers them
   * after the ack wait and they resume from their checkpoints. @defaultValue 30000
   */
  stopTimeoutMs?: number;
}

/** How often `stop()` names the jobs it still waits for, in ms. */
const STOP_REPORT_MS = 5_000;

/** A running durable consumer. */
export interface DurableConsumer<State> {
  /** The job's checkpoint, or null (also when the job is not `owner`'s). */
  status(key: string, owner: string): Promise<State | null>;
  /**
   * Asks a job to stop at its next step; true unless the job is already final, unknown, or
   * not `owner`'s. A job not yet taken is stopped by its marker when it starts.
   */
  cancel(key: string, owner: string): Promise<boolean>;
  /**
   * Stops taking jobs; running ones hand back at their next step (their messages are nak'd
   * and resume elsewhere from the checkpoint). Waits for them, naming every 5 s the ones it
   * still waits for, at most `stopTimeoutMs`. Safe to call twice.
   */
  stop(): Promise<void>;
}

type Owned = { owner?: string | undefined };

/** The owner of a job's state: its request's. */
const ownerOfState = <Request extends Owned, State>(handler: DurableHandler<Request, State>, state: State): string =>
  ownerOfTask(handler.requestOf(state));

/** The message's request, its owner taken from the subject it came on (the permission matrix vouches for the subject, not the body). */
function parseRequest<Request extends Owned, State>(opts: DurableConsumerOptions<Request, State>, msg: JsMsg) {
  let parsed;
  try {
    parsed = opts.schema.safeParse(msg.json());
  } catch {
    parsed = opts.schema.safeParse(null);
  }
  if (parsed.success) parsed.data.owner = ownerOfSubject(msg.subject, opts.submitSubject) ?? DEFAULT_OWNER;
  return parsed;
}

/** The next free event seq of a state: events published after its checkpoint were not counted in it. */
async function nextSeq<Request extends Owned, State extends Checkpointed>(
  opts: DurableConsumerOptions<Request, State>,
  state: State,
  request: Request,
): Promise<number> {
  return Math.max(state.eventSeq, (await lastEventSeq(opts.nc, ownerOfTask(request), opts.handler.keyOf(request))) + 1);
}

/** Ends a job with the handler's error state, from its checkpoint (or from the request alone). */
async function endWithError<Request extends Owned, State extends Checkpointed>(
  opts: DurableConsumerOptions<Request, State>,
  request: Request,
  err: unknown,
): Promise<void> {
  const { store, handler } = opts;
  const key = handler.keyOf(request);
  const current = await store.get(key);
  const base = current?.state ?? handler.initial(request);
  const final = handler.failed({ ...base, eventSeq: await nextSeq(opts, base, request) }, err);
  if (current) await store.update(final, current.revision);
  else await store.create(final);
  await handler.ended(final);
  await store.finish(key);
}

/**
 * Where a job starts: null when it is done already (refused as another owner's, or final and
 * published again; the message settled); else its state (resumed from its checkpoint, or new
 * and accepted) and the revision of its checkpoint.
 */
async function admit<Request extends Owned, State extends Checkpointed>(
  opts: DurableConsumerOptions<Request, State>,
  msg: JsMsg,
  request: Request,
  jlog: Logger,
): Promise<{ state: State; revision: number } | null> {
  const { store, handler, label } = opts;
  const key = handler.keyOf(request);
  const existing = await store.get(key);
  if (existing && ownerOfState(handler, existing.state) !== ownerOfTask(request)) {
    jlog.warn(`${label} id taken by another owner's ${label}; refusing the submission`);
    await handler.refuseTaken(request);
    msg.term(`${label} id taken by another owner`);
    return null;
  }
  if (existing?.state.status === "final") {
    jlog.info(`${label} already final; publishing its result again and acknowledging`);
    await handler.republish(existing.state);
    await store.finish(key);
    msg.ack();
    return null;
  }
  if (existing) {
    const state = { ...existing.state, eventSeq: await nextSeq(opts, existing.state, request) };
    jlog.info(`resuming the ${label} from its checkpoint`);
    return { state, revision: existing.revision };
  }
  const initial = handler.initial(request);
  const created = await store.create(initial);
  const state = await handler.accepted(initial);
  return { state, revision: await store.update(state, created) };
}

/**
 * Settles the message of a job that threw: a retryable failure before the last delivery is
 * nak'd (it resumes from its checkpoint); anything else ends the job with its error state and
 * terms the message. Never throws: a message that cannot be settled is redelivered.
 */
async function settleFailure<Request extends Owned, State extends Checkpointed>(
  opts: DurableConsumerOptions<Request, State>,
  stopping: () => boolean,
  msg: JsMsg,
  request: Request,
  err: unknown,
  jlog: Logger,
): Promise<void> {
  const { label } = opts;
  const retryable =
    err instanceof HandBack || (err instanceof LoopsmithError && err.retryable) || isTransientNatsError(err);
  try {
    if (retryable && msg.info.deliveryCount < opts.maxDeliver) {
      jlog.warn(
        { err },
        `the ${label} hands back (an infrastructure failure, or the service is stopping); it resumes from its checkpoint`,
      );
      msg.nak(stopping() ? 0 : RETRY_DELAY_MS);
    } else {
      jlog.error(
        { err, deliveries: msg.info.deliveryCount },
        retryable ? `${label} still failing on its last delivery; ending it` : `${label} failed; ending it`,
      );
      await endWithError(opts, request, err);
      msg.term(retryable ? "failed on its last delivery" : "failed");
    }
  } catch (ackErr) {
    // The connection is gone: the broker redelivers after the ack wait.
    jlog.warn({ err: ackErr }, `could not settle the ${label} message; it will be redelivered after the ack wait`);
  }
}

/** Runs one message's job to its end, and settles the message (ack, nak or term). */
async function processMessage<Request extends Owned, State extends Checkpointed>(
  opts: DurableConsumerOptions<Request, State>,
  stopping: () => boolean,
  msg: JsMsg,
  request: Request,
  abort: AbortController,
  release: () => void,
  abandon: AbortSignal,
): Promise<void> {
  const { nc, log, store, handler, label } = opts;
  const key = handler.keyOf(request);
  const owner = ownerOfTask(request);
  const jlog = log.child({ [label === "task" ? "taskId" : "runId"]: key, owner });
  let cancelSeen = false;
  // An abandoned job (one that did not hand back before `stop()` gave up) beats no more: the
  // broker redelivers its message after the ack wait, and it resumes from its checkpoint.
  const working = (): void => {
    if (!abandon.aborted) msg.working();
  };
  const heartbeat = setInterval(working, HEARTBEAT_MS);
  abandon.addEventListener("abort", () => clearInterval(heartbeat), { once: true });
  try {
    const start = await admit(opts, msg, request, jlog);
    if (!start) return;
    let { revision } = start;
    const poll = opts.cancelPollMs;
    cancelSeen = poll !== undefined && (await store.cancelRequested(key, owner));
    let cancelCheckedAt = Date.now();
    const events = pipelinedEvents((event) => publishEvent(nc, event, owner));
    const final = await handler.run(start.state, revision, {
      checkpoint: async (s) => {
        await events.flush();
        revision = await store.update(s, revision);
        // A cancel asked of this consumer aborts at once; one asked of another instance is
        // a KV marker, read at most every `cancelPollMs` (not a round trip per checkpoint).
        if (poll !== undefined && !cancelSeen && Date.now() - cancelCheckedAt >= poll) {
          cancelCheckedAt = Date.now();
          cancelSeen = await store.cancelRequested(key, owner);
        }
      },
      emit: events.emit,
      heartbeat: working,
      cancelled: () => cancelSeen || abort.signal.aborted,
      stopping,
      release,
      log: jlog,
    });
    await events.flush();
    await store.finish(key);
    jlog.info({ status: final.status }, `${label} finished`);
    msg.ack();
  } catch (err) {
    await settleFailure(opts, stopping, msg, request, err, jlog);
  } finally {
    clearInterval(heartbeat);
  }
}

/** A job running here. */
interface RunningJob<Request> {
  request: Request;
  /** Aborted by a cancel. */
  abort: AbortController;
  /** Aborted when stop() gave up waiting for it (see `stopTimeoutMs`). */
  abandon: AbortController;
  done: Promise<void>;
  /** The job takes one of the `limit` slots (a DAG task gives its slot back while its children run). */
  slot: boolean;
}

/** What one durable consumer holds: its options, its jobs, and the state of its fetch loop. */
interface ConsumerCore<Request extends Owned, State extends Checkpointed> {
  opts: DurableConsumerOptions<Request, State>;
  /** Slots (`concurrency`). */
  limit: number;
  running: Map<string, RunningJob<Request>>;
  stopped: boolean;
  /** Wakes the fetch loop waiting for a free slot. */
  wake: (() => void) | undefined;
  /**
   * The fetch waiting now: stop() ends it instead of waiting out its expiry (up to 2 s per
   * consumer). The broker drops a pull request once its subscription is gone (its
   * `num_waiting` is 0 right after), so no message is handed to the ended fetch.
   */
  fetching: { stop(): void } | undefined;
}

/** Slots taken now. */
function slotsTaken<Request extends Owned, State extends Checkpointed>(core: ConsumerCore<Request, State>): number {
  return [...core.running.values()].filter((r) => r.slot).length;
}

/** Starts the job of a request whose key does not run here. */
function startJob<Request extends Owned, State extends Checkpointed>(
  core: ConsumerCore<Request, State>,
  msg: JsMsg,
  request: Request,
): void {
  const { opts, running } = core;
  const key = opts.handler.keyOf(request);
  const abort = new AbortController();
  const release = (): void => {
    const entry = running.get(key);
    if (entry?.slot) {
      entry.slot = false;
      core.wake?.();
    }
  };
  const abandon = new AbortController();
  const done = processMessage(opts, () => core.stopped, msg, request, abort, release, abandon.signal)
    .catch((err: unknown) => opts.log.error({ err, key }, `${opts.label} processing failed`))
    .finally(() => {
      running.delete(key);
      core.wake?.();
    });
  running.set(key, { request, abort, abandon, done, slot: true });
}

/**
 * Takes one fetched message: a malformed one is rejected, one whose key another owner's job
 * has here refused, a redelivery of a job running here nak'd; any other starts its job.
 */
function take<Request extends Owned, State extends Checkpointed>(core: ConsumerCore<Request, State>, msg: JsMsg): void {
  const { opts } = core;
  const { nc, log, handler, label } = opts;
  const parsed = parseRequest(opts, msg);
  if (!parsed.success) {
    rejectIntakeMessage(nc, opts.intake, msg, parsed.error, log);
    msg.term(`invalid ${label}`);
    return;
  }
  const request = parsed.data;
  const key = handler.keyOf(request);
  const here = core.running.get(key);
  if (here && ownerOfTask(here.request) !== ownerOfTask(request)) {
    // Another owner's job with this key runs here: refused now, not after its redeliveries
    // run out while that job runs (the submitter would never hear back).
    void handler.refuseTaken(request).then(
      () => msg.term(`${label} id taken by another owner`),
      (err: unknown) => (
        log.warn({ err, key }, `could not refuse a taken ${label} id; it is offered again`),
        msg.nak(RETRY_DELAY_MS)
      ),
    );
    return;
  }
  if (here) {
    // Already running here (a redelivery): let the broker try again later.
    msg.nak(RETRY_DELAY_MS);
    return;
  }
  startJob(core, msg, request);
}

/** The fetch loop: one message per free slot until the consumer stops or its connection closes. */
async function fetchLoop<Request extends Owned, State extends Checkpointed>(
  core: ConsumerCore<Request, State>,
  consumer: Consumer,
): Promise<void> {
  const { nc, log, label } = core.opts;
  while (!core.stopped) {
    if (slotsTaken(core) >= core.limit) {
      await new Promise<void>((resolve) => (core.wake = resolve));
      continue;
    }
    try {
      const batch = await consumer.fetch({ max_messages: 1, expires: 2_000 });
      core.fetching = batch;
      if (core.stopped) batch.stop();
      // One that arrives as this consumer stops goes back to the broker at once.
      for await (const msg of batch) {
        if (core.stopped) msg.nak();
        else take(core, msg);
      }
      core.fetching = undefined;
    } catch (err) {
      if (core.stopped) break;
      if (nc.isClosed()) {
        // A closed connection never comes back (a reconnect happens under an open one).
        log.warn({ err }, `the connection is closed; the ${label} consumer takes no more ${label}s`);
        break;
      }
      log.warn({ err }, `fetching ${label}s failed; retrying`);
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
}

/** {@link DurableConsumer.cancel}: the KV marker, and the job aborted when it runs here. */
async function cancelJob<Request extends Owned, State extends Checkpointed>(
  core: ConsumerCore<Request, State>,
  key: string,
  owner: string,
): Promise<boolean> {
  const { store, handler } = core.opts;
  const current = await store.get(key);
  // One of another owner's is left alone (and the answer does not say whether it exists).
  if (current && ownerOfState(handler, current.state) !== owner) return false;
  if (current?.state.status === "final") return false;
  await store.requestCancel(key, owner);
  const mine = core.running.get(key);
  if (mine && ownerOfTask(mine.request) === owner) mine.abort.abort();
  return true;
}

/** {@link DurableConsumer.stop}: waits for the loop and the jobs, at most `stopTimeoutMs`, then abandons those left. */
async function stopConsumer<Request extends Owned, State extends Checkpointed>(
  core: ConsumerCore<Request, State>,
  loop: Promise<void>,
): Promise<void> {
  const { opts, running } = core;
  const { log, label } = opts;
  core.stopped = true;
  core.wake?.();
  core.fetching?.stop();
  const limitMs = opts.stopTimeoutMs ?? 30_000;
  const report = setInterval(
    () =>
      log.warn({ jobs: [...running.keys()] }, `stopping: still waiting for ${running.size} ${label}(s) to hand back`),
    STOP_REPORT_MS,
  );
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), limitMs)));
  try {
    const ended = await Promise.race([
      (async () => {
        await loop;
        await Promise.allSettled([...running.values()].map((r) => r.done));
        return "ended" as const;
      })(),
      deadline,
    ]);
    if (ended === "timeout") {
      log.error(
        { jobs: [...running.keys()], limitMs },
        `stopping: ${running.size} ${label}(s) did not hand back in time; left to the broker, which redelivers them after the ack wait`,
      );
      // Not aborted: `abort` means cancelled, and a stopping service cancels nothing.
      for (const r of running.values()) r.abandon.abort();
    }
  } finally {
    clearInterval(report);
    clearTimeout(timer);
  }
}

/** Starts a durable consumer's fetch loop (the stream and consumer must exist). */
export async function runDurableConsumer<Request extends Owned, State extends Checkpointed>(
  opts: DurableConsumerOptions<Request, State>,
): Promise<DurableConsumer<State>> {
  const { nc, store, handler } = opts;
  const consumer = await jetstream(nc).consumers.get(opts.stream, opts.consumer);
  const core: ConsumerCore<Request, State> = {
    opts,
    limit: opts.concurrency ?? 1,
    running: new Map(),
    stopped: false,
    wake: undefined,
    fetching: undefined,
  };
  const loop = fetchLoop(core, consumer);
  return {
    async status(key, owner) {
      const state = (await store.get(key))?.state ?? null;
      return state && ownerOfState(handler, state) === owner ? state : null;
    },
    cancel: (key, owner) => cancelJob(core, key, owner),
    stop: () => stopConsumer(core, loop),
  };
}
