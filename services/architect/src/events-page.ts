/**
 * `loopsmith.architect.events.<owner>`: one page of a task's stored events, read from the
 * events stream on the owner's subject (`loopsmith.events.<owner>.<taskId>`). Clients read
 * stored events this way (they may create no JetStream consumer); the subject carries the
 * owner, so a page holds only that owner's events whatever task id is asked for.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { EVENTS_PAGE_MAX, TaskEvent, type EventsPage, type EventsRequest } from "@loopsmith/shared/contracts";
import { Streams, eventsSubject } from "@loopsmith/shared/bus";

/** Largest page, in bytes of event JSON: well under NATS's default 1 MiB `max_payload`. */
export const EVENTS_PAGE_BYTES = 512 * 1024;

/**
 * Reads the events stored after stream sequence `req.after` on `owner`'s subject of the
 * task, at most {@link EVENTS_PAGE_MAX} and {@link EVENTS_PAGE_BYTES} (one event is always
 * taken, whatever its size). Stored messages that fail the event schema are passed over.
 * @throws the JetStream error of a read that fails (a timeout while NATS restarts: the caller retries)
 */
export async function readEventsPage(nc: NatsConnection, owner: string, req: EventsRequest): Promise<EventsPage> {
  const jsm = await jetstreamManager(nc);
  const subject = eventsSubject(owner, req.taskId);
  const events: TaskEvent[] = [];
  let cursor = req.after;
  let bytes = 0;
  for (;;) {
    // `next_by_subj` from a sequence: the first message on the subject at or after it.
    const query = { seq: cursor + 1, next_by_subj: subject } as unknown as { seq: number };
    const msg = await jsm.streams.getMessage(Streams.events, query);
    if (!msg) return { events, cursor, more: false };
    if (events.length >= EVENTS_PAGE_MAX || (events.length > 0 && bytes + msg.data.length > EVENTS_PAGE_BYTES)) {
      return { events, cursor, more: true };
    }
    cursor = msg.seq;
    bytes += msg.data.length;
    let parsed;
    try {
      parsed = TaskEvent.safeParse(msg.json());
    } catch {
      continue;
    }
    if (parsed.success) events.push(parsed.data);
  }
}
