/**
 * Idempotent step handlers: the same idempotency key (`taskId/iteration/step`) twice must
 * not do the work twice. A repeated key joins the call in flight or gets its result while
 * the result is kept; a call that fails is never kept, so a retry does the work again.
 */

/** A cache of calls by idempotency key. */
export interface IdempotencyCache<T> {
  /**
   * Runs `fn` once per key. `fn` may call `forget()` so that its result is not kept (for
   * example an infrastructure failure reported as a value).
   */
  run(key: string, fn: (forget: () => void) => Promise<T>): Promise<T>;
  /** Keys kept now (in flight or finished). */
  readonly size: number;
}

/** Options of {@link createIdempotencyCache}. */
export interface IdempotencyOptions {
  /** How long a finished call's result answers a repeated key, in ms. @defaultValue 600000 */
  ttlMs?: number;
  /** Most keys kept; the oldest go first. @defaultValue 256 */
  maxEntries?: number;
  /** The clock, in ms. @defaultValue Date.now */
  now?: () => number;
}

/** Creates an {@link IdempotencyCache}. */
export function createIdempotencyCache<T>(opts: IdempotencyOptions = {}): IdempotencyCache<T> {
  const ttlMs = opts.ttlMs ?? 600_000;
  const maxEntries = opts.maxEntries ?? 256;
  const now = opts.now ?? Date.now;
  const entries = new Map<string, { at: number; promise: Promise<T> }>();
  const evict = (): void => {
    const t = now();
    for (const [key, entry] of entries) {
      if (t - entry.at > ttlMs || entries.size > maxEntries) entries.delete(key);
      else break;
    }
  };
  return {
    run(key, fn) {
      evict();
      const known = entries.get(key);
      if (known) return known.promise;
      const entry: { at: number; promise: Promise<T> } = { at: now(), promise: Promise.resolve(undefined as T) };
      const forget = (): void => {
        if (entries.get(key) === entry) entries.delete(key);
      };
      entries.set(key, entry);
      try {
        entry.promise = fn(forget);
      } catch (err) {
        forget();
        throw err;
      }
      entry.promise.catch(forget);
      return entry.promise;
    },
    get size() {
      return entries.size;
    },
  };
}
