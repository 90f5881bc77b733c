/**
 * Everything loopsmith keeps in JetStream, created or brought up to date in one call: the
 * task and improvement-run intake streams with their durable consumers, the events stream,
 * the task-state, improvement-state and record-outbox buckets, and the repository snapshot
 * store. Under the permission matrix only the admin user may do this (`loopsmith bus setup`,
 * compose's `bus-setup` service); the services and clients then only check.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { ensureImproveStreams } from "./improve-streams.js";
import { openSnapshots, REPOS_BUCKET } from "./snapshot.js";
import { openBucket } from "./streams.js";
import { Streams } from "./subjects.js";

/**
 * Creates what is missing and updates what differs. Idempotent.
 * @returns the names of the streams, consumers, buckets and stores it ensured
 * @throws LoopsmithError `permission_denied` when this user may not manage JetStream
 */
export async function setupBus(nc: NatsConnection): Promise<string[]> {
  await ensureImproveStreams(nc);
  await openBucket(nc, Streams.recordOutboxBucket);
  await openSnapshots(nc);
  return [
    Streams.tasks,
    `${Streams.tasks}/${Streams.conductorConsumer}`,
    Streams.events,
    Streams.improve,
    `${Streams.improve}/${Streams.improveConsumer}`,
    `kv:${Streams.taskStateBucket}`,
    `kv:${Streams.improveStateBucket}`,
    `kv:${Streams.recordOutboxBucket}`,
    `obj:${REPOS_BUCKET}`,
  ];
}
