/**
 * How a client follows one of its tasks: a core NATS subscription on the task's events
 * subject (`loopsmith.events.<owner>.<taskId>`) for what happens from now on, and the
 * architect's `events` endpoint for what was stored before (and whatever a reconnect lost).
 * A client needs no JetStream consumer for this: under the permission matrix it may create
 * none (a push consumer's delivery subject is not checked against its creator's rights), and
 * it may subscribe only on its own owner's events.
 */
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import {
  DEFAULT_OWNER,
  Endpoints,
  LoopsmithError,
  TaskEvent,
  call,
  eventsSubject,
  permissionDenied,
} from "@loopsmith/shared";

/**
 * How long a watch waits without news before it asks the architect for the stored events
 * again, in ms. A live event lost while the connection was down shows as a gap in `seq` at
 * the next event; this bounds the wait when the lost one was the last (the result).
 */
export const WATCH_POLL_MS = 10_000;

/** Options of {@link watchEvents}. */
export interface WatchOptions {
  /** The task's owner (the caller's token). @defaultValue DEFAULT_OWNER */
  owner?: string;
  /** Stops the watch (the generator returns). */
  signal?: AbortSignal;
  /** Idle time before asking for stored events again, in ms. @defaultValue WATCH_POLL_MS */
  pollMs?: number;
}

/**
 * Replays a task's events from the start and follows new ones, in `seq` order and each once,
 * until the `result` event (inclusive) or until `signal` aborts. Events that fail their
 * schema are skipped. While the architect cannot answer (restarting, not yet up), the watch
 * keeps following live events and asks again every `pollMs`.
 * @throws LoopsmithError `permission_denied` when this NATS user may not read `owner`'s
 *   events; `bad_request` for an invalid owner; `unavailable` once the connection is closed
 */
export async function* watchEvents(
  nc: NatsConnection,
  taskId: string,
  opts: WatchOptions = {},
): AsyncGenerator<TaskEvent> {
  const owner = opts.owner ?? DEFAULT_OWNER;
  const { signal } = opts;
  const pollMs = opts.pollMs ?? WATCH_POLL_MS;
  let live: TaskEvent[] = [];
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  let refused: LoopsmithError | undefined;
  let sub: Subscription;
  try {
    sub = nc.subscribe(eventsSubject(owner, taskId), {
      callback: (err, msg) => {
        if (err) {
          refused =
            permissionDenied(err) ??
            new LoopsmithError("unavailable", `the events of task ${taskId} cannot be followed: ${err.message}`, {
              cause: err,
            });
        } else {
          try {
            const parsed = TaskEvent.safeParse(msg.json());
            if (parsed.success && parsed.data.taskId === taskId) live.push(parsed.data);
          } catch {
            // not JSON: skipped like an event that fails its schema
          }
        }
        notify();
      },
    });
  } catch (err) {
    throw new LoopsmithError("bad_request", (err as Error).message, { cause: err });
  }
  // A subscription the server refuses (another owner's subject) ends with the violation.
  void sub.closed.then((ended) => {
    if (ended instanceof Error) {
      refused =
        permissionDenied(ended) ??
        new LoopsmithError("unavailable", `the events of task ${taskId} cannot be followed: ${ended.message}`, {
          cause: ended,
        });
      notify();
    }
  });
  const onAbort = (): void => notify();
  signal?.addEventListener("abort", onAbort, { once: true });
  let last = -1;
  let cursor = 0;
  let catchUp = true;
  let gapAsked = -2;
  try {
    // The subscription is in place at the server before the stored events are read: an
    // event published in between arrives live, not lost between the two.
    await nc.flush();
    while (!signal?.aborted) {
      if (refused) throw refused;
      if (nc.isClosed())
        throw new LoopsmithError("unavailable", `the connection to NATS closed while following task ${taskId}`, {
          retryable: true,
        });
      if (catchUp) {
        catchUp = false;
        try {
          for (let more = true; more && !signal?.aborted;) {
            const page = await call(
              nc,
              Endpoints.architect.events,
              { v: 1, taskId, after: cursor },
              { owner, timeoutMs: 10_000, retries: 1 },
            );
            cursor = page.cursor;
            more = page.more;
            for (const event of page.events) {
              if (event.seq <= last) continue;
              last = event.seq;
              yield event;
              if (event.kind === "result") return;
            }
          }
        } catch (err) {
          if (err instanceof LoopsmithError && (err.code === "permission_denied" || err.code === "bad_request"))
            throw err;
          // The architect is not answering now; live events go on, and the poll asks again.
        }
      }
      const ready = live.sort((a, b) => a.seq - b.seq);
      live = [];
      let held: TaskEvent[] = [];
      for (const [i, event] of ready.entries()) {
        if (event.seq <= last) continue;
        if (event.seq > last + 1 && gapAsked !== last) {
          // One was lost (a reconnect): read the stored ones first, once per gap.
          gapAsked = last;
          catchUp = true;
          held = ready.slice(i);
          break;
        }
        last = event.seq;
        yield event;
        if (event.kind === "result") return;
      }
      if (held.length > 0) {
        live = [...held, ...live];
        continue;
      }
      if (live.length > 0 || signal?.aborted) continue;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(() => {
          catchUp = true;
          notify();
        }, pollMs);
      });
      clearTimeout(timer);
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    sub.unsubscribe();
  }
}
