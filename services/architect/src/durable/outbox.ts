/**
 * An outbox: a message a bus call could not deliver because the other side is away (down,
 * restarting, its database is) is not lost. It is kept in a JetStream KV bucket (key = the
 * item's key, durable across restarts) and sent again every `retryMs` until the other side
 * takes it. The call must be an upsert by key, so an item sent twice (two replicas draining,
 * or a reply lost after the write) is still one. The architect's record outbox (`outbox.ts`
 * one level up) is one: a task's history record for `memory.record_task`.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { KV } from "@nats-io/kv";
import type { Logger } from "pino";
import type { z } from "zod";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { openBucket } from "@loopsmith/shared/bus";

/** An outbox's items: sent at once when the other side answers, kept and sent later when it does not. */
export interface Outbox<Item, Reply> {
  /**
   * Sends an item; when that fails with a retryable error the item is kept and the error
   * rethrown with a sentence saying so (`kept` of the options).
   * @throws LoopsmithError what `send` threw (retryable ones after keeping the item; anything else as it is)
   */
  send(item: Item): Promise<Reply>;
  /** Offers every kept item once, in key order, until one is refused; returns how many were taken. */
  drain(): Promise<number>;
  /** Items kept now. */
  pending(): Promise<number>;
  /** Stops the retry timer (kept items stay in the bucket for the next start). */
  stop(): Promise<void>;
}

/** Options of {@link openOutbox}. */
export interface OutboxOptions<Item, Reply> {
  nc: NatsConnection;
  /** The KV bucket that keeps the items (created when missing). */
  bucket: string;
  schema: z.ZodType<Item>;
  /** The item's key in the bucket (a valid KV key). */
  keyOf(item: Item): string;
  /** The bus call. */
  send(item: Item): Promise<Reply>;
  /** What is said of a kept item, appended to the error `send` rethrows. */
  kept: string;
  log: Logger;
  /** How often kept items are offered again, in ms. */
  retryMs: number;
  /** Replicas of the bucket when it is created. @defaultValue 1 */
  replicas?: number;
}

/**
 * Offers each kept item once, in key order, until the other side refuses one; deletes each
 * item taken (only the revision sent) and each that fails its schema.
 * @returns the items taken, and whether the other side refused one (the rest stay kept)
 */
async function sendKept<Item, Reply>(
  kv: KV,
  opts: OutboxOptions<Item, Reply>,
): Promise<{ taken: number; refused: boolean }> {
  const { log } = opts;
  let taken = 0;
  const keys: string[] = [];
  for await (const key of await kv.keys()) keys.push(key);
  for (const key of keys) {
    const entry = await kv.get(key);
    if (!entry || entry.operation !== "PUT") continue;
    const parsed = opts.schema.safeParse(entry.json());
    if (!parsed.success) {
      log.error({ key, issues: parsed.error.issues }, "a kept item fails its schema; deleting it");
      await kv.delete(key);
      continue;
    }
    try {
      await opts.send(parsed.data);
    } catch (err) {
      log.debug({ err, key }, "the kept item is still not taken");
      return { taken, refused: true }; // still away: try again at the next tick
    }
    // Delete only the revision sent: a newer item of the same key stays.
    await kv.delete(key, { previousSeq: entry.revision }).catch(() => undefined);
    taken += 1;
    log.info({ key }, "kept item sent");
  }
  return { taken, refused: false };
}

/**
 * Opens the outbox's bucket and starts its retry timer.
 * @throws LoopsmithError `unavailable` when the bucket cannot be opened, `permission_denied` when
 *   it is missing and this user may not create it
 */
export async function openOutbox<Item, Reply>(opts: OutboxOptions<Item, Reply>): Promise<Outbox<Item, Reply>> {
  const { log } = opts;
  let kv: KV;
  try {
    kv = await openBucket(opts.nc, opts.bucket, { replicas: opts.replicas ?? 1 });
  } catch (err) {
    if (err instanceof LoopsmithError && err.code === "permission_denied") throw err;
    throw new LoopsmithError("unavailable", `cannot open the outbox ${opts.bucket}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  let draining: Promise<number> | undefined;
  // Whether the bucket may hold items: true at open (an earlier process may have kept some),
  // after each item kept here, and when a drain leaves one behind. The timer lists the bucket
  // (a JetStream consumer each time) only then, not at every tick of an idle process.
  let mayHoldItems = true;

  const drainOnce = async (): Promise<number> => {
    // Cleared before listing, so an item kept while this drain runs sets it again.
    mayHoldItems = false;
    try {
      const sent = await sendKept(kv, opts);
      if (sent.refused) mayHoldItems = true;
      return sent.taken;
    } catch (err) {
      mayHoldItems = true;
      throw err;
    }
  };
  const drain = (): Promise<number> => {
    draining ??= drainOnce().finally(() => (draining = undefined));
    return draining;
  };
  const timer = setInterval(() => {
    if (mayHoldItems)
      void drain().catch((err: unknown) => log.warn({ err }, `the outbox ${opts.bucket} could not be drained`));
  }, opts.retryMs);
  timer.unref();

  return {
    async send(item) {
      try {
        return await opts.send(item);
      } catch (err) {
        if (!(err instanceof LoopsmithError) || !err.retryable) throw err;
        const key = opts.keyOf(item);
        await kv.put(key, JSON.stringify(item));
        mayHoldItems = true;
        log.warn({ err, key }, `not taken; kept, it is sent again when the other side answers (${opts.bucket})`);
        throw new LoopsmithError(err.code, `${err.message}; ${opts.kept}`, { cause: err, retryable: true });
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
