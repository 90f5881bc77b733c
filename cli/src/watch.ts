/**
 * How a client follows one of its tasks: a core NATS subscription on the task's events
 * subject (`loopsmith.events.<owner>.<taskId>`) for what happens from now on, and the
 * architect's `events` endpoint for what was stored before (and whatever a reconnect lost).
 * A client needs no JetStream consumer for this: under the permission matrix it may create
 * none (a push consumer's delivery subject is not checked against its creator's rights), and
 * it may subscribe only on its own owner's events.
 */
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { DEFAULT_OWNER, Endpoints, call, eventsSubject, permissionDenied } from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { TaskEvent } from "@loopsmith/shared/contracts";

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

/** Live events received and not yet yielded, and whatever ended the subscription. */
interface LiveFeed {
  live: TaskEvent[];
  refused?: LoopsmithError;
  /** Resolves the wait of {@link waitForNews}, if one is pending. */
  wake?: () => void;
}

/** Where a watch is: the last `seq` yielded, the architect's page cursor, and whether to read stored events next. */
interface WatchPosition {
  last: number;
  cursor: number;
  catchUp: boolean;
  /** The `last` at which stored events were last read for a gap (once per gap). */
  gapAsked: number;
}

/** Ends a pending {@link waitForNews}. */
function notify(feed: LiveFeed): void {
  const w = feed.wake;
  feed.wake = undefined;
  w?.();
}

/** The error that ends a watch whose subscription failed: a permission refusal, else `unavailable`. */
function followError(err: Error, taskId: string): LoopsmithError {
  return (
    permissionDenied(err) ??
    new LoopsmithError("unavailable", `the events of task ${taskId} cannot be followed: ${err.message}`, {
      cause: err,
    })
  );
}

/**
 * Subscribes to the task's events subject: each valid event of this task goes into `feed.live`,
 * a failure into `feed.refused`.
 * @throws LoopsmithError `bad_request` when the subject cannot be subscribed to (an invalid owner)
 */
function followLive(nc: NatsConnection, owner: string, taskId: string, feed: LiveFeed): Subscription {
  let sub: Subscription;
  try {
    sub = nc.subscribe(eventsSubject(owner, taskId), {
      callback: (err, msg) => {
        if (err) feed.refused = followError(err, taskId);
        else {
          try {
            const parsed = TaskEvent.safeParse(msg.json());
            if (parsed.success && parsed.data.taskId === taskId) feed.live.push(parsed.data);
          } catch {
            // not JSON: skipped like an event that fails its schema
          }
        }
        notify(feed);
      },
    });
  } catch (err) {
    throw new LoopsmithError("bad_request", (err as Error).message, { cause: err });
  }
  // A subscription the server refuses (another owner's subject) ends with the violation.
  void sub.closed.then((ended) => {
    if (ended instanceof Error) {
      feed.refused = followError(ended, taskId);
      notify(feed);
    }
  });
  return sub;
}

/**
 * Yields the stored events after `pos.last`, page by page from the architect; returns true
 * once it yielded the `result`. An architect that does not answer ends it quietly.
 * @throws LoopsmithError `permission_denied` or `bad_request` from the architect
 */
async function* storedEvents(
  nc: NatsConnection,
  taskId: string,
  owner: string,
  signal: AbortSignal | undefined,
  pos: WatchPosition,
): AsyncGenerator<TaskEvent, boolean> {
  try {
    for (let more = true; more && !signal?.aborted;) {
      const page = await call(
        nc,
        Endpoints.architect.events,
        { v: 1, taskId, after: pos.cursor },
        { owner, timeoutMs: 10_000, retries: 1 },
      );
      pos.cursor = page.cursor;
      more = page.more;
      for (const event of page.events) {
        if (event.seq <= pos.last) continue;
        pos.last = event.seq;
        yield event;
        if (event.kind === "result") return true;
      }
    }
  } catch (err) {
    if (err instanceof LoopsmithError && (err.code === "permission_denied" || err.code === "bad_request")) throw err;
    // The architect is not answering now; live events go on, and the poll asks again.
  }
  return false;
}

/**
 * Yields the live events received so far, in `seq` order. Returns `result` once it yielded
 * the result, `again` when a gap in `seq` put the rest back to read the stored events first,
 * and `done` when it yielded all.
 */
function* liveEvents(feed: LiveFeed, pos: WatchPosition): Generator<TaskEvent, "result" | "again" | "done"> {
  const ready = feed.live.sort((a, b) => a.seq - b.seq);
  feed.live = [];
  for (const [i, event] of ready.entries()) {
    if (event.seq <= pos.last) continue;
    if (event.seq > pos.last + 1 && pos.gapAsked !== pos.last) {
      // One was lost (a reconnect): read the stored ones first, once per gap.
      pos.gapAsked = pos.last;
      pos.catchUp = true;
      feed.live = [...ready.slice(i), ...feed.live];
      return "again";
    }
    pos.last = event.seq;
    yield event;
    if (event.kind === "result") return "result";
  }
  return "done";
}

/** Waits for a live event, the end of the subscription, an abort, or `pollMs` (then stored events are read again). */
async function waitForNews(feed: LiveFeed, pollMs: number, pos: WatchPosition): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await new Promise<void>((resolve) => {
    feed.wake = resolve;
    timer = setTimeout(() => {
      pos.catchUp = true;
      notify(feed);
    }, pollMs);
  });
  clearTimeout(timer);
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
  const feed: LiveFeed = { live: [] };
  const sub = followLive(nc, owner, taskId, feed);
  const onAbort = (): void => notify(feed);
  signal?.addEventListener("abort", onAbort, { once: true });
  const pos: WatchPosition = { last: -1, cursor: 0, catchUp: true, gapAsked: -2 };
  try {
    // The subscription is in place at the server before the stored events are read: an
    // event published in between arrives live, not lost between the two.
    await nc.flush();
    while (!signal?.aborted) {
      if (feed.refused) throw feed.refused;
      if (nc.isClosed())
        throw new LoopsmithError("unavailable", `the connection to NATS closed while following task ${taskId}`, {
          retryable: true,
        });
      if (pos.catchUp) {
        pos.catchUp = false;
        if (yield* storedEvents(nc, taskId, owner, signal, pos)) return;
      }
      const next = yield* liveEvents(feed, pos);
      if (next === "result") return;
      if (next === "again" || feed.live.length > 0 || signal?.aborted) continue;
      await waitForNews(feed, pollMs, pos);
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    sub.unsubscribe();
  }
}
