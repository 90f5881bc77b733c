/**
 * The conductor: the durable consumer (`durable/`) of the task intake work queue. Each task
 * message runs the loop (`runLoop`) from the task's checkpoint, which is written after every
 * step; the message is acked when the task is final. The consumer owns heartbeats, resume,
 * owner checks, nak/term and cancel markers; this file says what a task is to it.
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { Streams, Subjects, TASK_MAX_DELIVER, ensureStreams, lastEventSeq, ownerOfTask } from "@loopsmith/shared/bus";
import { Task } from "@loopsmith/shared/contracts";
import { publishJobEvent, runDurableConsumer, type DurableConsumer } from "./durable/index.js";
import { conductorTexts } from "./event-texts.js";
import { finalState, runLoop } from "./loop.js";
import { initialState, openStateStore, type TaskState } from "./state.js";
import type { Steps } from "./steps.js";
import { taskRecordOf } from "./task-record.js";

/**
 * Longest a running task goes without reading its cancel marker, in ms: a cancel asked of
 * another conductor instance is seen at the first checkpoint after this long. Measured by
 * `npm run bench:overhead`: reading the marker at every checkpoint cost a KV round trip each.
 */
export const CANCEL_POLL_MS = 1_000;

/** The running conductor: `cancel`, `status` and `stop` as {@link DurableConsumer}'s, by task id. */
export type Conductor = DurableConsumer<TaskState>;

/** Options of {@link startConductor}. */
export interface ConductorOptions {
  nc: NatsConnection;
  steps: Steps;
  log: Logger;
  /** Tasks run at once by this conductor. @defaultValue 4 */
  concurrency?: number;
  /** Replicas of the streams and buckets it creates when missing (`config.nats.replicas`). @defaultValue 1 */
  replicas?: number;
  /**
   * Checked before a task's loop runs (each delivery, before any step): throws a
   * non-retryable `LoopsmithError` to end the task with that error and call no model. The
   * architect refuses here a USD budget over a model without a known price.
   */
  admit?: (task: Task) => void;
}

/** Starts the conductor's consumer loop. */
export async function startConductor(opts: ConductorOptions): Promise<Conductor> {
  const { nc, steps, log } = opts;
  const streams = { replicas: opts.replicas ?? 1 };
  await ensureStreams(nc, streams);

  /** Publishes the final result of a state (idempotent: the result's message id is fixed). */
  const publishResult = async (state: TaskState): Promise<void> => {
    if (!state.result) return;
    const { task, result } = state;
    const seq = Math.max(state.eventSeq - 1, (await lastEventSeq(nc, ownerOfTask(task), task.taskId)) + 1);
    const event = { taskId: task.taskId, seq, iteration: state.iteration, message: result.message, result };
    await publishJobEvent(nc, ownerOfTask(task), { ...event, kind: "result", phase: "done" });
  };

  return runDurableConsumer<Task, TaskState>({
    nc,
    log,
    stream: Streams.tasks,
    consumer: Streams.conductorConsumer,
    intake: "tasks",
    submitSubject: Subjects.tasksSubmit,
    maxDeliver: TASK_MAX_DELIVER,
    schema: Task,
    store: await openStateStore(nc, streams),
    label: "task",
    concurrency: opts.concurrency ?? 4,
    cancelPollMs: CANCEL_POLL_MS,
    handler: {
      keyOf: (task) => task.taskId,
      requestOf: (state) => state.task,
      initial: (task) => initialState(task),
      async accepted(state) {
        const { task } = state;
        const parent = task.parent ? { parentTaskId: task.parent.taskId, subtaskId: task.parent.subtaskId } : {};
        const message = conductorTexts.accepted(task.language, task.parent);
        const event = { taskId: task.taskId, seq: 0, iteration: 0, message, ...parent };
        await publishJobEvent(nc, ownerOfTask(task), { ...event, kind: "accepted" });
        return { ...state, eventSeq: 1 };
      },
      async run(state, _revision, ctx) {
        opts.admit?.(state.task);
        const final = await runLoop(state, steps, ctx);
        const { status, stopReason } = final.result ?? {};
        ctx.log.info({ status, stopReason, iterations: final.iteration }, "task finished");
        return final;
      },
      failed(base, err) {
        const error =
          err instanceof LoopsmithError
            ? err
            : new LoopsmithError("internal", (err as Error)?.message ?? String(err), { cause: err });
        return finalState({ ...base, eventSeq: base.eventSeq + 1 }, "error", `stopped: ${error.message}`, error);
      },
      async ended(final) {
        // Recorded like any ended task (history, stats, `show`); memory is advisory here too.
        const record = steps.recordTask(taskRecordOf(final, "error"));
        await record.catch((err: unknown) => log.warn({ err, taskId: final.task.taskId }, "could not record the task"));
        await publishResult(final);
      },
      republish: publishResult,
      async refuseTaken(task) {
        // The submitter gets an `error` result on its own events subject; the other owner's task is left as it is.
        const message = conductorTexts.taken(task.taskId);
        const error = new LoopsmithError("bad_request", message, { retryable: false });
        const result = finalState(initialState(task), "error", message, error).result;
        const event = { taskId: task.taskId, seq: 0, iteration: 0, message, ...(result ? { result } : {}) };
        await publishJobEvent(nc, ownerOfTask(task), { ...event, kind: "result", phase: "done" });
      },
    },
  });
}
