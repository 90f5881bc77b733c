/**
 * Where a submitted task stands in the intake queue: how many tasks the conductors have still
 * to take before it. Read from the conductor consumer's info (JetStream API
 * `$JS.API.CONSUMER.INFO.LOOPSMITH_TASKS.conductor`, which the permission matrix lets every
 * client user read): `delivered.stream_seq` is the last task message handed to a conductor,
 * `num_pending` the messages not yet handed out.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { Streams } from "@loopsmith/shared/bus";

/** The fields of JetStream's consumer info this reads. */
export interface ConsumerPending {
  num_pending: number;
  delivered: { stream_seq: number };
}

/**
 * The tasks before the one published at stream sequence `seq`, or undefined when a conductor
 * has taken it already (`seq` at or below the last delivered). Counted as the messages
 * between the last delivered and `seq`, capped by what is pending minus the task itself (a
 * message between them may be gone: cancelled, or taken out of order after a redelivery).
 */
export function tasksAhead(info: ConsumerPending, seq: number): number | undefined {
  if (seq <= info.delivered.stream_seq) return undefined;
  return Math.max(0, Math.min(seq - info.delivered.stream_seq - 1, info.num_pending - 1));
}

/** The conductor consumer's info fields this module reads. */
type ConductorInfo = ConsumerPending & ConsumerActivity;

/**
 * The conductor consumer's info (`$JS.API.CONSUMER.INFO.LOOPSMITH_TASKS.conductor`), or
 * undefined when it cannot be read: no answer within `timeoutMs`, no JetStream, no such
 * consumer, or another API error.
 */
async function conductorInfo(nc: NatsConnection, timeoutMs: number): Promise<ConductorInfo | undefined> {
  try {
    const reply = await nc.request(`$JS.API.CONSUMER.INFO.${Streams.tasks}.${Streams.conductorConsumer}`, "", {
      timeout: timeoutMs,
    });
    const info = reply.json<Partial<ConductorInfo> & { error?: unknown }>();
    if (info.error || typeof info.num_pending !== "number" || typeof info.delivered?.stream_seq !== "number")
      return undefined;
    return {
      num_pending: info.num_pending,
      delivered: { stream_seq: info.delivered.stream_seq },
      num_waiting: info.num_waiting ?? 0,
      num_ack_pending: info.num_ack_pending ?? 0,
    };
  } catch {
    return undefined;
  }
}

/**
 * Asks JetStream for the conductor consumer's info and places the task at `seq` in it.
 * @returns the tasks ahead, or undefined when it is taken already or the info cannot be read
 *   (then the caller says nothing)
 */
export async function intakePosition(nc: NatsConnection, seq: number, timeoutMs = 2_000): Promise<number | undefined> {
  const info = await conductorInfo(nc, timeoutMs);
  return info ? tasksAhead(info, seq) : undefined;
}

/** The fields of JetStream's consumer info that show a conductor at work. */
export interface ConsumerActivity {
  /** Pull requests waiting (a conductor with a free slot fetches every 2 s). */
  num_waiting: number;
  /** Tasks handed to a conductor and not yet acknowledged (a conductor whose slots are all taken). */
  num_ack_pending: number;
}

/** Whether the intake's consumer shows a conductor at work: a fetch waiting or a task held. */
export function conductorActive(info: ConsumerActivity): boolean {
  return info.num_waiting > 0 || info.num_ack_pending > 0;
}

/**
 * Whether a conductor works the intake queue now, read from the conductor consumer's info:
 * the sign of a running stack that does not depend on its services answering a `$SRV` ping
 * (on a cluster whose node was just killed a whole stack can miss one).
 * @returns false when the info cannot be read
 */
export async function conductorAtWork(nc: NatsConnection, timeoutMs = 1_000): Promise<boolean> {
  const info = await conductorInfo(nc, timeoutMs);
  return info ? conductorActive(info) : false;
}
