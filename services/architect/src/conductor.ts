/**
 * The conductor: a durable pull consumer on the task intake work queue. It takes one task
 * message per free slot, heartbeats (`working()`) while the task runs, checkpoints the
 * task's state in KV after every step, and acks only when the task reached a final state.
 * A redelivered message resumes from the last checkpoint.
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, type JsMsg } from "@nats-io/jetstream";
import {
  LoopsmithError,
  Streams,
  TASK_MAX_DELIVER,
  Task,
  ensureStreams,
  openTaskStates,
  publishEvent,
  type TaskEvent,
} from "@loopsmith/shared";
import { RetryLater, finalState, runLoop } from "./loop.js";
import { initialState, kvStateStore, type StateStore, type TaskState } from "./state.js";
import type { Steps } from "./steps.js";

/** Heartbeat period while a task runs, in ms (well within the consumer's 30 s ack wait). */
export const HEARTBEAT_MS = 10_000;
/** Delay before a task whose step failed for infrastructure reasons is tried again, in ms. */
export const RETRY_DELAY_MS = 5_000;

/** The running conductor. */
export interface Conductor {
  /** Asks a task to stop; true when the task was known and not final. */
  cancel(taskId: string): Promise<boolean>;
  /** The task's checkpoint, or null. */
  status(taskId: string): Promise<TaskState | null>;
  /** Stops taking tasks, waits for in-flight tasks to reach a checkpoint; safe to call twice. */
  stop(): Promise<void>;
}

/** Options of {@link startConductor}. */
export interface ConductorOptions {
  nc: NatsConnection;
  steps: Steps;
  log: Logger;
  /** Tasks run at once by this conductor. @defaultValue 4 */
  concurrency?: number;
}

/** Starts the conductor's consumer loop. */
export async function startConductor(opts: ConductorOptions): Promise<Conductor> {
  const { nc, steps, log } = opts;
  await ensureStreams(nc);
  const store: StateStore = kvStateStore(await openTaskStates(nc));
  const consumer = await jetstream(nc).consumers.get(Streams.tasks, Streams.conductorConsumer);
  const limit = opts.concurrency ?? 4;
  const running = new Map<string, { abort: AbortController; done: Promise<void> }>();
  let stopped = false;
  let wake: (() => void) | undefined;

  const processMessage = async (msg: JsMsg, abort: AbortController): Promise<void> => {
    const parsed = Task.safeParse((() => { try { return msg.json(); } catch { return null; } })());
    if (!parsed.success) {
      log.error({ issues: parsed.success ? undefined : parsed.error.issues }, "task message fails its schema; dropped");
      msg.term("invalid task");
      return;
    }
    const task = parsed.data;
    const tlog = log.child({ taskId: task.taskId });
    let cancelSeen = false;
    const heartbeat = setInterval(() => msg.working(), HEARTBEAT_MS);
    try {
      let existing = await store.get(task.taskId);
      if (existing?.state.status === "final") {
        tlog.info("task already final; acknowledging the duplicate");
        msg.ack();
        return;
      }
      let revision: number;
      let state: TaskState;
      if (existing) {
        ({ state, revision } = existing);
        tlog.info({ phase: state.phase, iteration: state.iteration }, "resuming task from its checkpoint");
      } else {
        state = initialState(task);
        revision = await store.create(state);
        await publishEvent(nc, { v: 1, taskId: task.taskId, seq: 0, at: new Date().toISOString(), iteration: 0, kind: "accepted", message: `task accepted (${task.language})` });
        state = { ...state, eventSeq: 1 };
        revision = await store.update(state, revision);
      }
      existing = null;
      const final = await runLoop(state, steps, {
        checkpoint: async (s) => {
          // Keep a cancel that arrived through the store.
          const current = await store.get(s.task.taskId);
          if (current?.state.cancelRequested) cancelSeen = true;
          const merged = cancelSeen ? { ...s, cancelRequested: true } : s;
          revision = await store.update(merged, current?.revision ?? revision);
        },
        emit: (event: TaskEvent) => publishEvent(nc, event),
        heartbeat: () => msg.working(),
        cancelled: () => cancelSeen || abort.signal.aborted,
        log: tlog,
      });
      tlog.info({ status: final.result?.status, stopReason: final.result?.stopReason, iterations: final.iteration }, "task finished");
      msg.ack();
    } catch (err) {
      const infra = err instanceof RetryLater || (err instanceof LoopsmithError && err.retryable);
      try {
        if (msg.info.deliveryCount >= TASK_MAX_DELIVER) {
          tlog.error({ err, deliveries: msg.info.deliveryCount }, "task failed on its last delivery; giving up");
          await giveUp(task.taskId, err).catch((e: unknown) => tlog.error({ err: e }, "could not record the failed task"));
          msg.term("failed on its last delivery");
        } else {
          tlog.warn({ err, infra }, "task step failed; the task will be redelivered and resume from its checkpoint");
          msg.nak(RETRY_DELAY_MS);
        }
      } catch (ackErr) {
        // The connection is gone: the broker redelivers after the ack wait.
        tlog.warn({ err: ackErr }, "could not nak the task message; it will be redelivered after the ack wait");
      }
    } finally {
      clearInterval(heartbeat);
    }
  };

  /** Final `error` result for a task that failed on its last delivery. */
  const giveUp = async (taskId: string, err: unknown): Promise<void> => {
    const current = await store.get(taskId);
    if (!current) return;
    const error = err instanceof LoopsmithError ? err : new LoopsmithError("internal", (err as Error)?.message ?? String(err));
    const final = finalState(current.state, "error", `stopped: ${error.message}`, error);
    await publishEvent(nc, { v: 1, taskId, seq: final.eventSeq, at: new Date().toISOString(), iteration: final.iteration, kind: "result", phase: "done", message: final.result?.message ?? "", ...(final.result ? { result: final.result } : {}) });
    await store.update({ ...final, eventSeq: final.eventSeq + 1 }, current.revision);
  };

  const loop = (async () => {
    while (!stopped) {
      if (running.size >= limit) {
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      let batch;
      try {
        batch = await consumer.fetch({ max_messages: 1, expires: 2_000 });
      } catch (err) {
        if (stopped) break;
        log.warn({ err }, "fetching tasks failed; retrying");
        await new Promise((r) => setTimeout(r, 1_000));
        continue;
      }
      for await (const msg of batch) {
        let id = `seq-${msg.seq}`;
        try {
          id = String((msg.json() as { taskId?: unknown }).taskId ?? id);
        } catch {
          /* invalid task; processMessage terminates it */
        }
        const abort = new AbortController();
        const done = processMessage(msg, abort).finally(() => {
          running.delete(id);
          wake?.();
        });
        running.set(id, { abort, done });
      }
    }
  })();

  return {
    async cancel(taskId) {
      for (let attempt = 0; attempt < 5; attempt++) {
        const current = await store.get(taskId);
        if (!current || current.state.status === "final") return false;
        try {
          await store.update({ ...current.state, cancelRequested: true }, current.revision);
          running.get(taskId)?.abort.abort();
          return true;
        } catch {
          /* raced with a checkpoint; read again */
        }
      }
      return false;
    },
    async status(taskId) {
      return (await store.get(taskId))?.state ?? null;
    },
    async stop() {
      stopped = true;
      wake?.();
      await loop.catch(() => undefined);
      await Promise.allSettled([...running.values()].map((r) => r.done));
    },
  };
}
