/**
 * The record outbox: a task's history record (`memory.record_task`) that memory cannot take
 * when the task ends (memory is down, restarting, or its database is) is not lost. It is kept
 * in a JetStream KV bucket (`loopsmith_record_outbox`, key = task id, durable across architect
 * restarts) and written again every {@link OUTBOX_RETRY_MS} until memory takes it, so a task
 * that passed during an outage appears in `history` once memory is back. `record_task` is an
 * upsert by task id, so a record written twice (two architect replicas draining, or a reply
 * lost after the write) is still one row.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { KV } from "@nats-io/kv";
import type { Logger } from "pino";
import { LoopsmithError, Streams, TaskRecord, openBucket, type Remembered } from "@loopsmith/shared";

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
export async function openRecordOutbox(nc: NatsConnection, send: (record: TaskRecord) => Promise<Remembered>, log: Logger, retryMs = OUTBOX_RETRY_MS, replicas = 1): Promise<RecordOutbox> {
  let kv: KV;
  try {
    kv = await openBucket(nc, Streams.recordOutboxBucket, { replicas });
  } catch (err) {
    if (err instanceof LoopsmithError && err.code === "permission_denied") throw err;
    throw new LoopsmithError("unavailable", `cannot open the record outbox (${Streams.recordOutboxBucket}): ${(err as Error).message}`, { cause: err });
  }
  let draining: Promise<number> | undefined;
  // Whether the bucket may hold records: true at open (an earlier process may have kept some),
  // after each record kept here, and when a drain leaves one behind. The timer lists the bucket
  // (a JetStream consumer each time) only then, not at every tick of an idle architect.
  let mayHoldRecords = true;

  const drainOnce = async (): Promise<number> => {
    // Cleared before listing, so a record kept while this drain runs sets it again.
    mayHoldRecords = false;
    try {
      return await sendKept();
    } catch (err) {
      mayHoldRecords = true;
      throw err;
    }
  };
  /** Offers each kept record once, in key order, until memory refuses one. */
  const sendKept = async (): Promise<number> => {
    let taken = 0;
    const keys: string[] = [];
    for await (const key of await kv.keys()) keys.push(key);
    for (const key of keys) {
      const entry = await kv.get(key);
      if (!entry || entry.operation !== "PUT") continue;
      const parsed = TaskRecord.safeParse(entry.json());
      if (!parsed.success) {
        log.error({ taskId: key, issues: parsed.error.issues }, "a kept task record fails its schema; deleting it");
        await kv.delete(key);
        continue;
      }
      try {
        await send(parsed.data);
      } catch (err) {
        log.debug({ err, taskId: key }, "memory still does not take the kept record");
        mayHoldRecords = true;
        break; // memory is still away: try again at the next tick
      }
      // Delete only the revision sent: a newer record of the same task stays.
      await kv.delete(key, { previousSeq: entry.revision }).catch(() => undefined);
      taken += 1;
      log.info({ taskId: key }, "kept task record written to memory");
    }
    return taken;
  };
  const drain = (): Promise<number> => {
    draining ??= drainOnce().finally(() => (draining = undefined));
    return draining;
  };
  const timer = setInterval(() => {
    if (mayHoldRecords) void drain().catch((err: unknown) => log.warn({ err }, "the record outbox could not be drained"));
  }, retryMs);
  timer.unref();

  return {
    async record(record) {
      try {
        return await send(record);
      } catch (err) {
        if (!(err instanceof LoopsmithError) || !err.retryable) throw err;
        // A task id (`[A-Za-z0-9._-]`) is a valid KV key as it is.
        await kv.put(record.taskId, JSON.stringify(record));
        mayHoldRecords = true;
        log.warn({ err, taskId: record.taskId }, "memory did not take the task record; kept, it is written when memory answers again");
        throw new LoopsmithError(err.code, `${err.message}; the task's record is kept and written to history when memory answers again`, { cause: err, retryable: true });
      }
    },
    drain,
    async pending() {
      let n = 0;
      for await (const _key of await kv.keys()) n += 1;
      return n;
    },
    async stop() {
      clearInterval(timer);
      await draining?.catch(() => undefined);
    },
  };
}
