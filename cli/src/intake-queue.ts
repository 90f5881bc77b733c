/**
 * Where a submitted task stands in the intake queue: how many tasks the conductors have still
 * to take before it. Read from the conductor consumer's info (JetStream API
 * `$JS.API.CONSUMER.INFO.LOOPSMITH_TASKS.conductor`, which the permission matrix lets every
 * client user read): `delivered.stream_seq` is the last task message handed to a conductor,
 * `num_pending` the messages not yet handed out.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { Streams } from "@loopsmith/shared";

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

/**
 * Asks JetStream for the conductor consumer's info and places the task at `seq` in it.
 * @returns the tasks ahead, or undefined when it is taken already or the info cannot be read
 *   (no answer within `timeoutMs`, or an API error): the caller then says nothing
 */
export async function intakePosition(nc: NatsConnection, seq: number, timeoutMs = 2_000): Promise<number | undefined> {
  try {
    const reply = await nc.request(`$JS.API.CONSUMER.INFO.${Streams.tasks}.${Streams.conductorConsumer}`, "", {
      timeout: timeoutMs,
    });
    const info = reply.json<Partial<ConsumerPending> & { error?: unknown }>();
    if (info.error || typeof info.num_pending !== "number" || typeof info.delivered?.stream_seq !== "number")
      return undefined;
    return tasksAhead({ num_pending: info.num_pending, delivered: info.delivered }, seq);
  } catch {
    return undefined;
  }
}
