/** Events published without waiting for each ack, and waited for all at once before a checkpoint. */
import type { NatsConnection } from "@nats-io/transport-node";
import { publishEvent } from "@loopsmith/shared/bus";
import { type TaskEvent } from "@loopsmith/shared/contracts";

/** Publishes events without waiting for each ack; {@link PipelinedEvents.flush} waits for them all. */
export interface PipelinedEvents {
  /** Starts publishing `event`; resolves at once (its error surfaces at the next flush). */
  emit(event: TaskEvent): Promise<void>;
  /** Waits for every event emitted so far. @throws the first publish error (then forgets it) */
  flush(): Promise<void>;
}

/**
 * Pipelines `publish`: the connection keeps the events' order, and the caller flushes before
 * each checkpoint, so a checkpoint never runs ahead of an event JetStream did not take.
 */
export function pipelinedEvents(publish: (event: TaskEvent) => Promise<void>): PipelinedEvents {
  let pending: Promise<void>[] = [];
  return {
    emit: async (event) => {
      const p = publish(event);
      p.catch(() => undefined); // surfaced by flush
      pending.push(p);
    },
    flush: async () => {
      const waiting = pending;
      pending = [];
      await Promise.all(waiting);
    },
  };
}

/**
 * Publishes one event of a job (a task or a run) on its owner's events subject, stamped now
 * (`v` and `at` filled in). Its message id is `<owner>:<taskId>:<seq>` (`…:result` for a result),
 * so a repeat is a duplicate JetStream drops.
 * @throws as `publishEvent`: a NATS error when JetStream does not take it
 */
export async function publishJobEvent(
  nc: NatsConnection,
  owner: string,
  event: Omit<TaskEvent, "v" | "at">,
): Promise<void> {
  await publishEvent(nc, { v: 1, at: new Date().toISOString(), ...event }, owner);
}
