/**
 * The conductor: a durable pull consumer on the task intake work queue. It takes one task
 * message per free slot, heartbeats (`working()`) while the task runs, checkpoints the
 * task's state in KV after every step, and acks only when the task reached a final state.
 * A redelivered message resumes from the last checkpoint.
 *
 * Failures: a retryable infrastructure error (`timeout`, `unavailable`, a checkpoint written
 * by another runner, a NATS call that met a restart or a reconnect: `isTransientNatsError`)
 * naks the message so the task resumes later; anything else ends the task
 * at once with an `error` result, as does a task still failing on its last delivery.
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, type JsMsg } from "@nats-io/jetstream";
import {
  DEFAULT_OWNER,
  LoopsmithError,
  Streams,
  Subjects,
  TASK_MAX_DELIVER,
  Task,
  ensureStreams,
  isTransientNatsError,
  lastEventSeq,
  openTaskStates,
  publishEvent,
  ownerOfSubject,
  ownerOfTask,
  rejectIntakeMessage,
  type TaskEvent,
} from "@loopsmith/shared";
import { RetryLater, finalState, runLoop } from "./loop.js";
import { initialState, kvStateStore, type StateStore, type TaskState } from "./state.js";
import type { Steps } from "./steps.js";
import { taskRecordOf } from "./task-record.js";

/** Heartbeat period while a task runs, in ms (well within the consumer's 10 s ack wait, TASK_ACK_WAIT_MS). */
export const HEARTBEAT_MS = 3_000;
/**
 * Longest a running task goes without reading its cancel marker, in ms: a cancel asked of
 * another conductor instance is seen at the first checkpoint after this long. Measured by
 * `npm run bench:overhead`: reading the marker at every checkpoint cost a KV round trip each.
 */
export const CANCEL_POLL_MS = 1_000;
/** Delay before a task whose step failed for infrastructure reasons is tried again, in ms. */
export const RETRY_DELAY_MS = 5_000;

/** The running conductor. */
export interface Conductor {
  /**
   * Asks a task to stop at its next step; true unless the task is already final, unknown, or
   * `owner`'s it is not.
   */
  cancel(taskId: string, owner: string): Promise<boolean>;
  /** The task's checkpoint, or null (also when the task is not `owner`'s). */
  status(taskId: string, owner: string): Promise<TaskState | null>;
  /**
   * Stops taking tasks; running tasks hand back at their next step (their messages are
   * nak'd and resume elsewhere from the checkpoint). Safe to call twice.
   */
  stop(): Promise<void>;
}

/** Options of {@link startConductor}. */
export interface ConductorOptions {
  nc: NatsConnection;
  steps: Steps;
  log: Logger;
  /** Tasks run at once by this conductor. @defaultValue 4 */
  concurrency?: number;
  /** Replicas of the streams and buckets it creates when missing (`config.nats.replicas`). @defaultValue 1 */
  replicas?: number;
}

/**
 * The task a message carries, its owner taken from the subject it came on (a body's `owner`
 * is replaced: the permission matrix vouches for the subject, not the body).
 */
function parseTask(msg: JsMsg) {
  let parsed;
  try {
    parsed = Task.safeParse(msg.json());
  } catch {
    return Task.safeParse(null);
  }
  if (parsed.success) parsed.data.owner = ownerOfSubject(msg.subject, Subjects.tasksSubmit) ?? DEFAULT_OWNER;
  return parsed;
}

/** Publishes events without waiting for each ack; {@link PipelinedEvents.flush} waits for them all. */
interface PipelinedEvents {
  emit(event: TaskEvent): Promise<void>;
  /** Waits for every event emitted so far. @throws the first publish error (then forgets it) */
  flush(): Promise<void>;
}

function pipelinedEvents(publish: (event: TaskEvent) => Promise<void>): PipelinedEvents {
  let pending: Promise<void>[] = [];
  return {
    emit: async (event) => {
      const p = publish(event);
      p.catch(() => undefined); // surfaced by flush
      pending.push(p);
    },
    flush: async () => {
      const waiting = pending;
      pending = [];
      await Promise.all(waiting);
    },
  };
}

/** Starts the conductor's consumer loop. */
export async function startConductor(opts: ConductorOptions): Promise<Conductor> {
  const { nc, steps, log } = opts;
  const streams = { replicas: opts.replicas ?? 1 };
  await ensureStreams(nc, streams);
  const store: StateStore = kvStateStore(await openTaskStates(nc, streams));
  const consumer = await jetstream(nc).consumers.get(Streams.tasks, Streams.conductorConsumer);
  const limit = opts.concurrency ?? 4;
  // `slot`: the task takes one of the `limit` slots (a DAG task gives its slot back while its children run).
  const running = new Map<string, { task: Task; abort: AbortController; done: Promise<void>; slot: boolean }>();
  const slotsTaken = (): number => [...running.values()].filter((r) => r.slot).length;
  let stopped = false;
  let wake: (() => void) | undefined;

  /** Publishes the final result of a state (idempotent: the result's message id is fixed). */
  const publishResult = async (state: TaskState): Promise<void> => {
    if (!state.result) return;
    const owner = ownerOfTask(state.task);
    const seq = Math.max(state.eventSeq - 1, (await lastEventSeq(nc, owner, state.task.taskId)) + 1);
    await publishEvent(nc, { v: 1, taskId: state.task.taskId, seq, at: new Date().toISOString(), iteration: state.iteration, kind: "result", phase: "done", message: state.result.message, result: state.result }, owner);
  };

  /** Ends a task with an `error` result from its checkpoint (or from the task alone). */
  const endWithError = async (task: Task, err: unknown): Promise<void> => {
    const error = err instanceof LoopsmithError ? err : new LoopsmithError("internal", (err as Error)?.message ?? String(err), { cause: err });
    const current = await store.get(task.taskId);
    const base = current?.state ?? initialState(task);
    const next = Math.max(base.eventSeq, (await lastEventSeq(nc, ownerOfTask(task), task.taskId)) + 1);
    const final = finalState({ ...base, eventSeq: next + 1 }, "error", `stopped: ${error.message}`, error);
    if (current) await store.update(final, current.revision);
    else await store.create(final);
    // Recorded like any ended task (history, stats, `show`); memory is advisory here too.
    try {
      await steps.recordTask(taskRecordOf(final, "error"));
    } catch (recordErr) {
      log.warn({ err: recordErr, taskId: task.taskId }, "could not record the task that ended in an error");
    }
    await publishResult(final);
  };

  /**
   * A task id another owner already has: the submitter gets an `error` result on its own
   * events subject; the other owner's task and checkpoint are left as they are.
   */
  const refuseTakenId = async (task: Task): Promise<void> => {
    const message = `the task id ${task.taskId} belongs to another client's task: submit with another id`;
    const result = finalState(initialState(task), "error", message, new LoopsmithError("bad_request", message, { retryable: false })).result;
    await publishEvent(nc, { v: 1, taskId: task.taskId, seq: 0, at: new Date().toISOString(), iteration: 0, kind: "result", phase: "done", message, ...(result ? { result } : {}) }, ownerOfTask(task));
  };

  const processMessage = async (msg: JsMsg, task: Task, abort: AbortController, release: () => void): Promise<void> => {
    const owner = ownerOfTask(task);
    const tlog = log.child({ taskId: task.taskId, owner });
    let cancelSeen = false;
    const heartbeat = setInterval(() => msg.working(), HEARTBEAT_MS);
    try {
      const existing = await store.get(task.taskId);
      if (existing && ownerOfTask(existing.state.task) !== owner) {
        tlog.warn("task id taken by another owner's task; refusing the submission");
        await refuseTakenId(task);
        msg.term("task id taken by another owner");
        return;
      }
      if (existing?.state.status === "final") {
        tlog.info("task already final; publishing its result again and acknowledging");
        await publishResult(existing.state);
        msg.ack();
        return;
      }
      let state: TaskState;
      let revision: number;
      if (existing) {
        // Events published after the last checkpoint were not counted in it.
        const next = Math.max(existing.state.eventSeq, (await lastEventSeq(nc, owner, task.taskId)) + 1);
        state = { ...existing.state, eventSeq: next };
        revision = existing.revision;
        tlog.info({ phase: state.phase, iteration: state.iteration }, "resuming task from its checkpoint");
      } else {
        state = initialState(task);
        revision = await store.create(state);
        const parent = task.parent ? { parentTaskId: task.parent.taskId, subtaskId: task.parent.subtaskId } : {};
        await publishEvent(nc, { v: 1, taskId: task.taskId, seq: 0, at: new Date().toISOString(), iteration: 0, kind: "accepted", message: `task accepted (${task.language}${task.parent ? `; subtask ${task.parent.subtaskId} of ${task.parent.taskId}` : ""})`, ...parent }, owner);
        state = { ...state, eventSeq: 1 };
        revision = await store.update(state, revision);
      }
      cancelSeen = await store.cancelRequested(task.taskId, owner);
      let cancelCheckedAt = Date.now();
      // Events are published without waiting for each ack (the connection keeps their order);
      // every checkpoint, and the end of the task, first waits for all of them, so a
      // checkpoint never runs ahead of an event JetStream did not take (its error is thrown there).
      const events = pipelinedEvents((event) => publishEvent(nc, event, owner));
      const final = await runLoop(state, steps, {
        checkpoint: async (s) => {
          await events.flush();
          revision = await store.update(s, revision);
          // A cancel asked of this conductor aborts at once; one asked of another instance is
          // a KV marker, read at most every CANCEL_POLL_MS (not a round trip per checkpoint).
          if (!cancelSeen && Date.now() - cancelCheckedAt >= CANCEL_POLL_MS) {
            cancelCheckedAt = Date.now();
            cancelSeen = await store.cancelRequested(s.task.taskId, owner);
          }
        },
        emit: events.emit,
        heartbeat: () => msg.working(),
        cancelled: () => cancelSeen || abort.signal.aborted,
        stopping: () => stopped,
        release,
        log: tlog,
      });
      await events.flush();
      tlog.info({ status: final.result?.status, stopReason: final.result?.stopReason, iterations: final.iteration }, "task finished");
      msg.ack();
    } catch (err) {
      const retryable = err instanceof RetryLater || (err instanceof LoopsmithError && err.retryable) || isTransientNatsError(err);
      try {
        if (retryable && msg.info.deliveryCount < TASK_MAX_DELIVER) {
          tlog.warn({ err }, "task step failed for infrastructure reasons; the task will resume from its checkpoint");
          msg.nak(stopped ? 0 : RETRY_DELAY_MS);
        } else {
          tlog.error({ err, deliveries: msg.info.deliveryCount }, retryable ? "task still failing on its last delivery; ending it" : "task failed; ending it");
          await endWithError(task, err);
          msg.term(retryable ? "failed on its last delivery" : "failed");
        }
      } catch (ackErr) {
        // The connection is gone: the broker redelivers after the ack wait.
        tlog.warn({ err: ackErr }, "could not settle the task message; it will be redelivered after the ack wait");
      }
    } finally {
      clearInterval(heartbeat);
    }
  };

  const take = (msg: JsMsg): void => {
    const parsed = parseTask(msg);
    if (!parsed.success) {
      rejectIntakeMessage(nc, "tasks", msg, parsed.error, log);
      msg.term("invalid task");
      return;
    }
    const taskId = parsed.data.taskId;
    const here = running.get(taskId);
    if (here && ownerOfTask(here.task) !== ownerOfTask(parsed.data)) {
      // Another owner's task with this id runs here: refused now, not after its redeliveries
      // run out while that task runs (the submitter would never hear back).
      void refuseTakenId(parsed.data).then(
        () => msg.term("task id taken by another owner"),
        (err: unknown) => (log.warn({ err, taskId }, "could not refuse a taken task id; it is offered again"), msg.nak(RETRY_DELAY_MS)),
      );
      return;
    }
    if (here) {
      // Already running here (a redelivery): let the broker try again later.
      msg.nak(RETRY_DELAY_MS);
      return;
    }
    const abort = new AbortController();
    const release = (): void => {
      const entry = running.get(taskId);
      if (entry?.slot) {
        entry.slot = false;
        wake?.();
      }
    };
    const done = processMessage(msg, parsed.data, abort, release)
      .catch((err: unknown) => log.error({ err, taskId }, "task processing failed"))
      .finally(() => {
        running.delete(taskId);
        wake?.();
      });
    running.set(taskId, { task: parsed.data, abort, done, slot: true });
  };

  const loop = (async () => {
    while (!stopped) {
      if (slotsTaken() >= limit) {
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      try {
        const batch = await consumer.fetch({ max_messages: 1, expires: 2_000 });
        for await (const msg of batch) take(msg);
      } catch (err) {
        if (stopped) break;
        log.warn({ err }, "fetching tasks failed; retrying");
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  })();

  return {
    async cancel(taskId, owner) {
      const current = await store.get(taskId);
      // A task not yet taken has no checkpoint: its marker stops it when it starts. One of
      // another owner's is left alone (and the answer does not say whether it exists).
      if (current && ownerOfTask(current.state.task) !== owner) return false;
      if (current?.state.status === "final") return false;
      await store.requestCancel(taskId, owner);
      const mine = running.get(taskId);
      if (mine && ownerOfTask(mine.task) === owner) mine.abort.abort();
      return true;
    },
    async status(taskId, owner) {
      const state = (await store.get(taskId))?.state ?? null;
      return state && ownerOfTask(state.task) === owner ? state : null;
    },
    async stop() {
      stopped = true;
      wake?.();
      await loop;
      await Promise.allSettled([...running.values()].map((r) => r.done));
    },
  };
}
