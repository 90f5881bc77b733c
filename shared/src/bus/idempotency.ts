/**
 * Idempotent step handlers: the same idempotency key (`taskId/iteration/step`) twice must
 * not do the work twice. A repeated key joins the call in flight or gets its result while
 * the result is kept; a call that fails is never kept, so a retry does the work again.
 * The keeping is lru-cache's (`ttl` from the call's start, `max` keys).
 */
import { LRUCache } from "lru-cache";

/** A cache of calls by idempotency key. */
export interface IdempotencyCache<T> {
  /**
   * Runs `fn` once per key. `fn` may call `forget()` so that its result is not kept (for
   * example an infrastructure failure reported as a value).
   */
  run(key: string, fn: (forget: () => void) => Promise<T>): Promise<T>;
  /** Keys kept now (in flight or finished; expired ones may count until they are next looked up or pushed out). */
  readonly size: number;
}

/** Options of {@link createIdempotencyCache}. */
export interface IdempotencyOptions {
  /** How long a call answers a repeated key, in ms from the call's start. @defaultValue 600000 */
  ttlMs?: number;
  /** Most keys kept; the least recently used go first. @defaultValue 256 */
  maxEntries?: number;
  /** The clock, in ms. @defaultValue performance.now */
  now?: () => number;
}

/**
 * Creates an {@link IdempotencyCache}.
 * @throws TypeError when `ttlMs` or `maxEntries` is not a positive integer (lru-cache's check)
 */
export function createIdempotencyCache<T>(opts: IdempotencyOptions = {}): IdempotencyCache<T> {
  const now = opts.now;
  // A box per call: `forget` removes only its own call, never a later one under the same key.
  const calls = new LRUCache<string, { promise: Promise<T> }>({
    max: opts.maxEntries ?? 256,
    ttl: opts.ttlMs ?? 600_000,
    // lru-cache reads a start time of 0 as "no ttl": a given clock is moved on by 1 ms so
    // that one starting at 0 still expires its first calls. No caching of the time either.
    ...(now ? { perf: { now: () => now() + 1 }, ttlResolution: 0 } : {}),
  });
  return {
    run(key, fn) {
      const known = calls.get(key);
      if (known) return known.promise;
      const call: { promise: Promise<T> } = { promise: Promise.resolve(undefined as T) };
      const forget = (): void => {
        if (calls.peek(key) === call) calls.delete(key);
      };
      calls.set(key, call);
      try {
        call.promise = fn(forget);
      } catch (err) {
        forget();
        throw err;
      }
      call.promise.catch(forget);
      return call.promise;
    },
    get size() {
      return calls.size;
    },
  };
}
