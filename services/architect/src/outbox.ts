/**
 * The record outbox: a task's history record (`memory.record_task`) that memory cannot take
 * when the task ends (memory is down, restarting, or its database is) is not lost. It is kept
 * in the KV bucket `loopsmith_record_outbox` (key = task id) and written again every
 * {@link OUTBOX_RETRY_MS} until memory takes it, so a task that passed during an outage
 * appears in `history` once memory is back. `record_task` is an upsert by task id, so a record
 * written twice is still one row. The mechanism is the durable module's outbox (`durable/outbox.ts`).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { Streams } from "@loopsmith/shared/bus";
import { TaskRecord, type Remembered } from "@loopsmith/shared/contracts";
import { openOutbox } from "./durable/index.js";

/** How often kept records are offered to memory again, in ms. */
export const OUTBOX_RETRY_MS = 5_000;

/** The outbox of a running architect. */
export interface RecordOutbox {
  /**
   * Records a task through `send`; when that fails with a retryable error the record is kept
   * and the error rethrown with a sentence saying so (the loop shows it as a warning).
   * @throws LoopsmithError what `send` threw (`unavailable` and `timeout` after keeping the
   *   record; anything else as it is)
   */
  record(record: TaskRecord): Promise<Remembered>;
  /** Offers every kept record to memory once; returns how many it took. */
  drain(): Promise<number>;
  /** Records kept now. */
  pending(): Promise<number>;
  /** Stops the retry timer (kept records stay in the bucket for the next start). */
  stop(): Promise<void>;
}

/**
 * Opens the outbox bucket and starts the retry timer.
 * @param send - the bus call (`memory.record_task`)
 * @throws LoopsmithError `unavailable` when the bucket cannot be opened, `permission_denied` when
 *   it is missing and this user may not create it
 */
export async function openRecordOutbox(
  nc: NatsConnection,
  send: (record: TaskRecord) => Promise<Remembered>,
  log: Logger,
  retryMs = OUTBOX_RETRY_MS,
  replicas = 1,
): Promise<RecordOutbox> {
  const outbox = await openOutbox({
    nc,
    bucket: Streams.recordOutboxBucket,
    schema: TaskRecord,
    // A task id (`[A-Za-z0-9._-]`) is a valid KV key as it is.
    keyOf: (record) => record.taskId,
    send,
    kept: "the task's record is kept and written to history when memory answers again",
    log,
    retryMs,
    replicas,
  });
  return { record: outbox.send, drain: outbox.drain, pending: outbox.pending, stop: outbox.stop };
}
