/**
 * Everything loopsmith keeps in JetStream, created or brought up to date in one call: the
 * task and improvement-run intake streams with their durable consumers, the events stream,
 * the task-state, improvement-state and record-outbox buckets, and the repository snapshot
 * store. Under the permission matrix only the admin user may do this (`loopsmith bus setup`,
 * compose's `bus-setup` service); the services and clients then only check.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { ensureImproveStreams } from "./improve-streams.js";
import { checkClientNames } from "./nats-permissions.js";
import { openSnapshots, snapshotBucket } from "./snapshot.js";
import { openBucket } from "./streams.js";
import { DEFAULT_OWNER, Streams } from "./subjects.js";

/** Options of {@link setupBus}. */
export interface SetupBusOptions {
  /** Further client users (as in the server configuration): each gets its own snapshot store. */
  clients?: string[];
}

/**
 * Creates what is missing and updates what differs. Idempotent.
 * @returns the names of the streams, consumers, buckets and stores it ensured
 * @throws LoopsmithError `permission_denied` when this user may not manage JetStream;
 *   Error for a client name that is not a valid owner or is a role's
 */
export async function setupBus(nc: NatsConnection, opts: SetupBusOptions = {}): Promise<string[]> {
  const owners = [DEFAULT_OWNER, ...checkClientNames(opts.clients ?? [])];
  await ensureImproveStreams(nc);
  await openBucket(nc, Streams.recordOutboxBucket);
  for (const owner of owners) await openSnapshots(nc, owner);
  return [
    Streams.tasks,
    `${Streams.tasks}/${Streams.conductorConsumer}`,
    Streams.events,
    Streams.improve,
    `${Streams.improve}/${Streams.improveConsumer}`,
    `kv:${Streams.taskStateBucket}`,
    `kv:${Streams.improveStateBucket}`,
    `kv:${Streams.recordOutboxBucket}`,
    ...owners.map((owner) => `obj:${snapshotBucket(owner)}`),
  ];
}
