/**
 * Reading a task's events back from the events stream (`LOOPSMITH_EVENTS`) when the task is
 * recorded. At `record_task` time the stream holds every event of the task but the result,
 * which is published right after; so the read stops at the task's last event so far
 * instead of waiting for a result.
 */
import type { Logger } from "pino";
import { RUN_EVENTS_CAP, type TaskEvent } from "@loopsmith/shared/contracts";
import { followEvents, lastEventSeq } from "@loopsmith/shared/bus";
import type { ReadEvents } from "./runs.js";

/** A NATS connection, as the shared stream helpers take it. */
export type EventsConnection = Parameters<typeof followEvents>[0];

/** Options of {@link readTaskEvents}. */
export interface ReadTaskEventsOptions {
  /** Longest the read may take, in ms; what was read by then is kept. @defaultValue 10000 */
  timeoutMs?: number;
  /** Most events read; a task with more is read only this far. @defaultValue 4 × RUN_EVENTS_CAP */
  limit?: number;
  log?: Logger;
}

/**
 * Every event of `owner`'s `taskId` now in the events stream, from the first to the last (or up to the
 * `result` event), in stream order. Never throws: when the stream cannot be read (no stream,
 * NATS down, the time is up), returns what it has with `complete: false` and logs a warning.
 */
export async function readTaskEvents(
  nc: EventsConnection,
  owner: string,
  taskId: string,
  opts: ReadTaskEventsOptions = {},
): Promise<ReadEvents> {
  const limit = opts.limit ?? 4 * RUN_EVENTS_CAP;
  const events: TaskEvent[] = [];
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), opts.timeoutMs ?? 10_000);
  try {
    const last = await lastEventSeq(nc, owner, taskId);
    if (last < 0) return { events, complete: true };
    for await (const e of followEvents(nc, owner, taskId, abort.signal)) {
      events.push(e);
      if (e.seq >= last || e.kind === "result") return { events, complete: true };
      if (events.length >= limit) break;
    }
    opts.log?.warn(
      { taskId, read: events.length, last, timedOut: abort.signal.aborted },
      "the run is recorded without all of its events",
    );
    return { events, complete: false };
  } catch (err) {
    opts.log?.warn(
      { err, taskId, read: events.length },
      "the task's events could not be read; the run is recorded without them",
    );
    return { events, complete: false };
  } finally {
    clearTimeout(timer);
  }
}
