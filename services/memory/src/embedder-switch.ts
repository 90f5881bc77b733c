/**
 * Memory's embedder with its fallback: a call that the configured embedder fails (after its
 * own retries) is made again with the fallback (the offline hashing embedder by default), and
 * for a cool-down after it calls go straight to the fallback, so a server that is down costs
 * its timeouts once, not per call. Rows stored by another embedder than the configured one
 * are re-embedded in the background (`reembed.ts`), again once the embedder answers after a
 * failure (with `reembed`).
 */
import type { Logger } from "pino";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import type { Embedder } from "./embedder.js";
import { reembedRows, type ReembedResult } from "./reembed.js";
import type { Database } from "./db.js";

/** Options of {@link embedderSwitch}. */
export interface EmbedderSwitchOptions {
  /** What stores and recalls with when the embedder fails (see `MemoryStoreDeps.fallback`). */
  fallback?: Embedder | undefined;
  /**
   * Re-embed rows of other embedders in the background, after the embedder answers again
   * following a failure (`memory.embedder.reembed`). @defaultValue false
   */
  reembed?: boolean;
  /**
   * After the embedder failed, how long calls go straight to the fallback, in ms
   * (`memory.embedder.cooldownMs`). @defaultValue 30000
   */
  cooldownMs?: number;
}

/** What {@link embedderSwitch} gives the store. */
export interface EmbedderSwitch {
  /**
   * Runs `fn` with the embedder; when the embedder fails and there is a fallback, runs it
   * again with the fallback (the embedder's error logged).
   * @throws what `fn` throws with the fallback, or the embedder's error without one
   */
  withEmbedder<T>(what: string, fn: (e: Embedder) => Promise<T>): Promise<T>;
  /** One re-embedding pass now (the running one, if one runs). */
  reembed(): Promise<ReembedResult>;
  /** Stops starting passes and waits for the running one. */
  close(): Promise<void>;
}

/**
 * An error the embedder threw (or a reply of the wrong shape), kept apart from the database's
 * errors so that only an embedder's failure falls back. Same code and message as the cause.
 */
export class EmbedderFailed extends LoopsmithError {
  constructor(
    readonly embedderId: string,
    cause: unknown,
  ) {
    const e =
      cause instanceof LoopsmithError
        ? cause
        : new LoopsmithError(
            "internal",
            `embedder ${embedderId} failed: ${(cause as Error)?.message ?? String(cause)}`,
          );
    super(e.code, e.message, { cause, retryable: e.retryable, details: e.details });
  }
}

/**
 * `embedder` with its failures marked as {@link EmbedderFailed} (a reply of the wrong number
 * or size of vectors too) and `onAnswer` called after each call that succeeded.
 */
function guarded(embedder: Embedder, onAnswer: () => void): Embedder {
  return {
    id: embedder.id,
    dimensions: embedder.dimensions,
    async embed(texts) {
      let vectors: number[][];
      try {
        vectors = await embedder.embed(texts);
      } catch (err) {
        throw new EmbedderFailed(embedder.id, err);
      }
      if (vectors.length !== texts.length || vectors.some((v) => v.length !== embedder.dimensions)) {
        throw new EmbedderFailed(
          embedder.id,
          new LoopsmithError("internal", `embedder ${embedder.id} returned a missing vector or one of the wrong size`),
        );
      }
      onAnswer();
      return vectors;
    },
  };
}

/**
 * The switch between `configured` and `opts.fallback` over `db` (see the module's comment).
 */
export function embedderSwitch(
  db: Database,
  configured: Embedder,
  log: Logger,
  opts: EmbedderSwitchOptions = {},
): EmbedderSwitch {
  const fallback = opts.fallback && opts.fallback.id !== configured.id ? opts.fallback : undefined;
  const cooldownMs = opts.cooldownMs ?? 30_000;
  let pass: Promise<ReembedResult> | undefined;
  /** Another pass is due once the running one ends (rows were stored behind its cursor). */
  let again = false;
  let closing = false;
  /** Rows wait for the embedder to answer again: a fallback stored them, or a pass stopped on its error. */
  let waiting = false;
  /** Until when (ms since the epoch) calls go straight to the fallback, after the embedder failed. */
  let downUntil = 0;

  const runPass = (): Promise<ReembedResult> =>
    (pass ??= reembedRows(db, embedder, { log, stop: () => closing })
      .then((result) => {
        if (result.stoppedBy !== undefined) {
          waiting = true;
          log.warn(
            { err: result.stoppedBy, embedder: configured.id, done: result },
            "re-embedding stopped: the embedder failed; it goes on once the embedder answers again",
          );
        }
        return result;
      })
      .finally(() => {
        pass = undefined;
        if (again) {
          again = false;
          setImmediate(background);
        }
      }));
  /** Starts a pass in the background (or, while one runs, another after it). */
  function background(): void {
    if (closing) return;
    if (pass) {
      again = true;
      return;
    }
    runPass().catch((err: unknown) => log.warn({ err, embedder: configured.id }, "re-embedding failed"));
  }
  const embedder = guarded(configured, () => {
    downUntil = 0;
    if (waiting && opts.reembed === true && fallback) {
      waiting = false;
      // On a later turn: after the statement this call is part of.
      setImmediate(background);
    }
  });
  /**
   * Runs `fn` with the embedder; when the embedder fails and there is a fallback, runs it
   * again with the fallback (the embedder's error logged), and for `cooldownMs` after goes
   * straight to the fallback (a server that is down costs its timeouts once, not per call).
   */
  const withEmbedder = async <T>(what: string, fn: (e: Embedder) => Promise<T>): Promise<T> => {
    if (fallback && Date.now() < downUntil) {
      waiting = true;
      return fn(fallback);
    }
    try {
      return await fn(embedder);
    } catch (err) {
      if (!(err instanceof EmbedderFailed) || !fallback) throw err;
      waiting = true;
      downUntil = Date.now() + cooldownMs;
      log.warn(
        { err, embedder: configured.id, fallback: fallback.id, cooldownMs },
        `memory could not ${what} with embedder ${configured.id}: ${err.message}; using ${fallback.id} (for ${cooldownMs} ms)`,
      );
      return fn(fallback);
    }
  };

  return {
    withEmbedder,
    reembed: () => runPass(),
    async close() {
      closing = true;
      await pass?.catch(() => undefined);
    },
  };
}
