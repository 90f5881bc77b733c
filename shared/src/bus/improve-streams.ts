/**
 * The durable parts of improvement runs: the intake work queue (message id = run id, so a
 * resubmitted run is a duplicate), the architect's durable consumer on it, and the KV bucket
 * where each run's state and its generations' reports are checkpointed. A run's progress
 * events go to the events stream under the run id (`loopsmith.events.<runId>`), like a task's.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { nanos } from "@nats-io/transport-node";
import { AckPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { ImproveRequest, type ImproveRequestInput } from "../contracts/improve.js";
import { LoopsmithError } from "../runtime/errors.js";
import { permissionDenied } from "./nats-errors.js";
import {
  TASK_ACK_WAIT_MS,
  TASK_DUPLICATE_WINDOW_MS,
  ensureStreams,
  openBucket,
  upsertConsumer,
  upsertStream,
  type StreamOptions,
  type Submitted,
} from "./streams.js";
import { DEFAULT_OWNER, Streams, Subjects, improveSubmitSubject } from "./subjects.js";

/** Redeliveries of a run message before the architect gives up on it (a run resumes from its checkpoint each time). */
export const IMPROVE_MAX_DELIVER = 20;

/**
 * Creates (or updates) the intake stream, its consumer and the state bucket, after the task
 * streams (a generation is a task), where missing or different. Idempotent.
 * @throws LoopsmithError `permission_denied` as `ensureStreams`
 */
export async function ensureImproveStreams(nc: NatsConnection, opts: StreamOptions = {}): Promise<void> {
  await ensureStreams(nc, opts);
  await ensureImproveIntake(nc, opts);
  await openImproveStates(nc, opts);
}

/**
 * The improvement intake alone: its stream and the improver's consumer (what a client checks,
 * after `ensureTaskIntake`). @throws LoopsmithError `permission_denied` as `ensureStreams`
 */
export async function ensureImproveIntake(nc: NatsConnection, opts: StreamOptions = {}): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await upsertStream(jsm, {
    name: Streams.improve,
    subjects: [`${Subjects.improveSubmit}.>`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: nanos(TASK_DUPLICATE_WINDOW_MS),
    num_replicas: opts.replicas ?? 1,
  });
  await upsertConsumer(jsm, Streams.improve, {
    durable_name: Streams.improveConsumer,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(TASK_ACK_WAIT_MS),
    max_deliver: IMPROVE_MAX_DELIVER,
  });
}

/** Opens (creating when missing) the KV bucket of improvement runs. */
export async function openImproveStates(nc: NatsConnection, opts: StreamOptions = {}): Promise<KV> {
  return openBucket(nc, Streams.improveStateBucket, opts);
}

/**
 * Publishes an improvement run to the intake work queue with message id = run id.
 * @returns `duplicate` true when a run with that id was already submitted (within 24 h)
 * @throws LoopsmithError `bad_request` when the request fails its schema (nothing is sent);
 *   `permission_denied` when this NATS user may not submit runs
 */
export async function submitImprove(
  nc: NatsConnection,
  input: ImproveRequestInput,
  owner: string = DEFAULT_OWNER,
): Promise<Submitted> {
  const parsed = ImproveRequest.safeParse(input);
  if (!parsed.success) {
    throw new LoopsmithError(
      "bad_request",
      `the improvement run is invalid: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  }
  const ack = await jetstream(nc)
    .publish(improveSubmitSubject(owner), JSON.stringify(parsed.data), { msgID: `${owner}:${parsed.data.runId}` })
    .catch((err: unknown) => Promise.reject(permissionDenied(err) ?? err));
  return { taskId: parsed.data.runId, duplicate: ack.duplicate, seq: ack.seq };
}
