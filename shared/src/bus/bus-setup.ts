/**
 * Everything loopsmith keeps in JetStream, created or brought up to date in one call: the
 * task and improvement-run intake streams with their durable consumers, the events stream,
 * the task-state, improvement-state and record-outbox buckets, the checkpoint blob store,
 * and the repository snapshot stores. Under the permission matrix only the admin user may do this (`loopsmith bus setup`,
 * compose's `bus-setup` service); the services and clients then only check.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { JetStreamApiError } from "@nats-io/jetstream";
import pRetry from "p-retry";
import { LoopsmithError } from "../runtime/errors.js";
import { ensureImproveStreams } from "./improve-streams.js";
import { checkClientNames } from "./nats-permissions.js";
import { openSnapshots, snapshotBucket } from "./snapshot.js";
import { CHECKPOINT_BLOBS_BUCKET, openBucket } from "./streams.js";
import { DEFAULT_OWNER, Streams } from "./subjects.js";

/** Options of {@link setupBus}. */
export interface SetupBusOptions {
  /** Further client users (as in the server configuration): each gets its own snapshot store. */
  clients?: string[];
  /** Replicas of every stream, bucket and store (`config.nats.replicas`; 3 on a three-node cluster). @defaultValue 1 */
  replicas?: number;
  /**
   * How long to keep trying while a cluster is not ready to place the replicas yet (its nodes
   * still joining, a leader being elected), in ms. @defaultValue 0
   */
  waitMs?: number;
}

/**
 * JetStream's answers while a cluster is still forming: no peers to place replicas on yet,
 * no meta leader (API requests time out or find no responder), not enough resources
 * reported. Passing; anything else (a refused permission, a bad setting) is not.
 */
export function clusterNotReady(err: unknown): boolean {
  if (err instanceof JetStreamApiError)
    return /no suitable peers|insufficient resources|not (?:yet )?available|no meta leader|jetstream system temporarily unavailable|stream is offline/i.test(
      err.message,
    );
  // A JetStream API request nobody answers in time, or no responder at all: no meta leader yet.
  const e = err as { name?: string; message?: string; cause?: { name?: string } } | undefined;
  return (
    e?.name === "TimeoutError" ||
    e?.cause?.name === "TimeoutError" ||
    /no responders|jetstream not enabled/i.test(e?.message ?? "")
  );
}

/** How long a client keeps retrying a JetStream call while a cluster elects a leader, in ms: past this a client reports the failure instead of staying silent (docs/OPERATIONS.md). */
export const CLUSTER_SETTLE_MS = 30_000;

/**
 * Runs a JetStream call, trying again while the cluster is not ready (a node went away and
 * a leader is being elected: see {@link clusterNotReady}), for at most `waitMs`. Only for
 * calls that are safe to repeat (a check, a publish with a message id).
 * @throws the call's last error
 */
export function retryWhileClusterSettles<T>(fn: () => Promise<T>, waitMs = CLUSTER_SETTLE_MS): Promise<T> {
  return pRetry(fn, {
    retries: Number.POSITIVE_INFINITY,
    maxRetryTime: waitMs,
    minTimeout: 250,
    factor: 1.5,
    maxTimeout: 2_000,
    shouldRetry: ({ error }) => clusterNotReady(error),
  });
}

/**
 * The error for replicas JetStream would not place (its "no suitable peers for placement" or
 * "insufficient resources" after the whole wait), saying where to look: fewer nodes than
 * replicas in the JetStream meta group, which each node's monitoring `/jsz` shows (the
 * leader lists the members under `meta_cluster.replicas`). Undefined for any other error.
 */
export function unplaceable(err: unknown, replicas: number, waitedMs: number): LoopsmithError | undefined {
  if (!(err instanceof JetStreamApiError) || !/no suitable peers|insufficient resources/i.test(err.message))
    return undefined;
  return new LoopsmithError(
    "unavailable",
    `JetStream could not place ${replicas} replica${replicas === 1 ? "" : "s"}${waitedMs ? ` in ${waitedMs} ms` : ""} (${err.message}): ` +
      `fewer than ${replicas} nodes with JetStream are in its meta group. Each node's monitoring port answers /jsz, where the leader lists the members under meta_cluster.replicas: ` +
      'start the missing node, or restart it if it runs (README, "Running on several machines"), or set nats.replicas (NATS_REPLICAS) to the nodes you have',
    { cause: err, details: { replicas } },
  );
}

/**
 * Creates what is missing and updates what differs. Idempotent.
 * @returns the names of the streams, consumers, buckets and stores it ensured
 * @throws LoopsmithError `permission_denied` when this user may not manage JetStream;
 *   `unavailable` when JetStream would not place the replicas within `waitMs` ({@link unplaceable});
 *   Error for a client name that is not a valid owner or is a role's
 */
export async function setupBus(nc: NatsConnection, opts: SetupBusOptions = {}): Promise<string[]> {
  const owners = [DEFAULT_OWNER, ...checkClientNames(opts.clients ?? [])];
  const streams = { replicas: opts.replicas ?? 1 };
  const once = async (): Promise<void> => {
    await ensureImproveStreams(nc, streams);
    await openBucket(nc, Streams.recordOutboxBucket, streams);
    for (const owner of owners) await openSnapshots(nc, owner, streams);
  };
  try {
    if (opts.waitMs) await retryWhileClusterSettles(once, opts.waitMs);
    else await once();
  } catch (err) {
    throw unplaceable(err, streams.replicas, opts.waitMs ?? 0) ?? err;
  }
  return [
    Streams.tasks,
    `${Streams.tasks}/${Streams.conductorConsumer}`,
    Streams.events,
    Streams.improve,
    `${Streams.improve}/${Streams.improveConsumer}`,
    `kv:${Streams.taskStateBucket}`,
    `kv:${Streams.improveStateBucket}`,
    `kv:${Streams.recordOutboxBucket}`,
    `obj:${CHECKPOINT_BLOBS_BUCKET}`,
    ...owners.map((owner) => `obj:${snapshotBucket(owner)}`),
  ];
}
