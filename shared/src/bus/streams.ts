/**
 * The durable parts of the bus (JetStream): the task intake work queue, the events stream
 * a watcher can replay from the start, the conductor's durable pull consumer, the KV
 * bucket where the conductor checkpoints each task's state, and the object store that holds
 * the large parts of checkpoints (a checkpoint never exceeds the server's `max_payload`).
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { InvalidArgumentError, nanos } from "@nats-io/transport-node";
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { Task, type TaskInput } from "../contracts/task.js";
import { TaskEvent, type RejectNotice } from "../contracts/events.js";
import type { Logger } from "pino";
import { z } from "zod";
import { LoopsmithError } from "../runtime/errors.js";
import { permissionDenied } from "./nats-errors.js";
import {
  DEFAULT_OWNER,
  Streams,
  Subjects,
  eventsSubject,
  ownerOfSubject,
  rejectsSubject,
  tasksSubmitSubject,
} from "./subjects.js";

/** Redeliveries of a task message before the conductor gives up on it. */
export const TASK_MAX_DELIVER = 10;
/**
 * Ack wait of the conductor's consumer, in ms. Short, so that the tasks of a conductor that
 * died are redelivered within seconds; a live conductor keeps each task's message with
 * `working()` every few seconds (`HEARTBEAT_MS` in the architect).
 */
export const TASK_ACK_WAIT_MS = 10_000;
/** Window in which a resubmitted task id is a duplicate, in ms (24 h). */
export const TASK_DUPLICATE_WINDOW_MS = 24 * 3600_000;
/** How long events are kept, in ms (7 days). */
export const EVENTS_MAX_AGE_MS = 7 * 24 * 3600_000;

/**
 * The object store bucket of checkpoint blobs: the large parts of task and improvement-run
 * checkpoints (file contents, run outputs), each under `task/<task id>/<sha256 hex>` or `run/<run id>/<sha256 hex>`, put
 * before the checkpoint that names them and removed when the task ends (the architect's
 * `durable/` module). Only the architect reads and writes it.
 */
export const CHECKPOINT_BLOBS_BUCKET = "loopsmith-checkpoints";

/**
 * Creates the streams, the conductor consumer, the task-state bucket and the checkpoint
 * blob store ({@link CHECKPOINT_BLOBS_BUCKET}) when missing, and
 * updates those whose settings differ. Idempotent; every service that needs them may call it
 * at start. Only what is missing or different needs the JetStream management API, so a user
 * without it (a service or a client under the permission matrix) passes when an admin ran
 * `loopsmith bus setup`.
 * @throws LoopsmithError `permission_denied` when something is missing or different and this
 *   user may not manage streams (the message names it and says to run `loopsmith bus setup`)
 */
export async function ensureStreams(nc: NatsConnection, opts: StreamOptions = {}): Promise<void> {
  await ensureTaskIntake(nc, opts);
  const jsm = await jetstreamManager(nc);
  await upsertStream(jsm, {
    name: Streams.events,
    subjects: [Subjects.eventsAll],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    max_age: nanos(EVENTS_MAX_AGE_MS),
    num_replicas: replicasOf(opts),
  });
  await openTaskStates(nc, opts);
  await openCheckpointBlobs(nc, opts);
}

/** How loopsmith's streams, buckets and stores are made. */
export interface StreamOptions {
  /** Replicas on a JetStream cluster (`config.nats.replicas`). @defaultValue 1 */
  replicas?: number;
}

const replicasOf = (opts: StreamOptions): number => opts.replicas ?? 1;

/**
 * The task intake alone: its stream and the conductor's consumer, created or updated when
 * missing or different (read only otherwise). What a client checks before it submits: it may
 * read neither the events stream's nor the state bucket's info (they list other owners' tasks).
 * @throws LoopsmithError `permission_denied` as {@link ensureStreams}
 */
export async function ensureTaskIntake(nc: NatsConnection, opts: StreamOptions = {}): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await upsertStream(jsm, {
    name: Streams.tasks,
    subjects: [`${Subjects.tasksSubmit}.>`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: nanos(TASK_DUPLICATE_WINDOW_MS),
    num_replicas: replicasOf(opts),
  });
  await upsertConsumer(jsm, Streams.tasks, {
    durable_name: Streams.conductorConsumer,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(TASK_ACK_WAIT_MS),
    max_deliver: TASK_MAX_DELIVER,
  });
}

type Jsm = Awaited<ReturnType<typeof jetstreamManager>>;
type StreamConfig = Parameters<Jsm["streams"]["add"]>[0];

/**
 * The settings of `wanted` whose values `actual` does not have (compared as JSON). More
 * replicas (`num_replicas`) than wanted is not a difference: a process configured for fewer
 * never lowers a stream that an administrator raised.
 */
export function differingSettings(wanted: object, actual: object): string[] {
  const have = actual as Record<string, unknown>;
  return Object.entries(wanted)
    .filter(([key, value]) => value !== undefined && JSON.stringify(value) !== JSON.stringify(have[key]))
    .filter(
      ([key, value]) =>
        !(
          key === "num_replicas" &&
          typeof value === "number" &&
          typeof have[key] === "number" &&
          (have[key] as number) >= value
        ),
    )
    .map(([key]) => key);
}

/**
 * Raises the replicas of the stream behind a KV bucket or an object store (`KV_<bucket>`,
 * `OBJ_<bucket>`) to `replicas` when it has fewer; leaves it otherwise.
 * @throws LoopsmithError `permission_denied` when it must change and this user may not manage
 *   JetStream; the server's error (naming the setting) when the cluster cannot place the replicas
 */
export async function ensureReplicas(jsm: Jsm, stream: string, replicas: number): Promise<void> {
  if (replicas <= 1) return;
  const info = await manage(`the stream ${stream} cannot be read`, () => jsm.streams.info(stream));
  if ((info.config.num_replicas ?? 1) >= replicas) return;
  await manage(
    `the stream ${stream} has ${info.config.num_replicas ?? 1} replica(s), not ${replicas} (num_replicas)`,
    () => jsm.streams.update(stream, { ...info.config, num_replicas: replicas }),
  );
}

/**
 * Runs a JetStream management call; a permission refusal becomes a typed error that says what
 * was needed and who may do it.
 */
async function manage<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const refused = permissionDenied(err);
    if (!refused) throw err;
    throw new LoopsmithError(
      "permission_denied",
      `${what}, and this NATS user may not manage JetStream: run \`loopsmith bus setup\` with the admin user's credentials (${refused.message})`,
      { cause: err, retryable: false },
    );
  }
}

/** Creates a stream, or updates it to `config` when it exists with other settings. @throws LoopsmithError `permission_denied` (see {@link ensureStreams}) */
export async function upsertStream(jsm: Jsm, config: StreamConfig): Promise<void> {
  const name = config.name as string;
  let actual: object;
  try {
    actual = (await manage(`the stream ${name} cannot be read`, () => jsm.streams.info(name))).config;
  } catch (err) {
    if (err instanceof JetStreamApiError && err.status === 404) {
      await manage(`the stream ${name} is missing`, () => jsm.streams.add(config));
      return;
    }
    throw err;
  }
  const diff = differingSettings(config, actual);
  // The stream's own settings with ours on top: an update names every setting (what it leaves
  // out is not kept), and a cluster asked to raise the replicas with a partial configuration
  // answered "no suitable peers for placement" now and then. Replicas above ours are kept.
  const keep = (actual as { num_replicas?: number }).num_replicas ?? 1;
  const merged = { ...actual, ...config, num_replicas: Math.max(keep, config.num_replicas ?? 1) } as StreamConfig;
  if (diff.length)
    await manage(`the stream ${name} has other settings (${diff.join(", ")})`, () => jsm.streams.update(name, merged));
}

/** Creates a durable consumer on `stream`, or updates it when it exists with other settings. @throws LoopsmithError `permission_denied` (see {@link ensureStreams}) */
export async function upsertConsumer(
  jsm: Jsm,
  stream: string,
  consumer: Parameters<Jsm["consumers"]["add"]>[1] & { durable_name: string },
): Promise<void> {
  const name = consumer.durable_name;
  let actual: object;
  try {
    actual = (await manage(`the consumer ${name} of ${stream} cannot be read`, () => jsm.consumers.info(stream, name)))
      .config;
  } catch (err) {
    if (err instanceof JetStreamApiError && err.status === 404) {
      await manage(`the consumer ${name} of ${stream} is missing`, () => jsm.consumers.add(stream, consumer));
      return;
    }
    throw err;
  }
  const diff = differingSettings(consumer, actual);
  if (diff.length)
    await manage(`the consumer ${name} of ${stream} has other settings (${diff.join(", ")})`, () =>
      jsm.consumers.update(stream, name, consumer),
    );
}

/**
 * Opens the KV bucket `bucket`, creating it when missing.
 * @throws LoopsmithError `permission_denied` when it is missing and this user may not create it
 */
export async function openBucket(nc: NatsConnection, bucket: string, opts: StreamOptions = {}): Promise<KV> {
  const kv = await manage(`the bucket ${bucket} is missing or cannot be read`, () =>
    new Kvm(nc).create(bucket, { history: 1, replicas: replicasOf(opts) }),
  );
  await ensureReplicas(await jetstreamManager(nc), `KV_${bucket}`, replicasOf(opts));
  return kv;
}

/** Opens (creating when missing) the KV bucket of task states. */
export async function openTaskStates(nc: NatsConnection, opts: StreamOptions = {}): Promise<KV> {
  return openBucket(nc, Streams.taskStateBucket, opts);
}

/**
 * Opens (creating when missing) the object store of checkpoint blobs,
 * {@link CHECKPOINT_BLOBS_BUCKET} (file storage, no TTL: a blob lives as long as the
 * checkpoint that names it).
 * @throws LoopsmithError `permission_denied` when it is missing and this user may not create it
 */
export async function openCheckpointBlobs(nc: NatsConnection, opts: StreamOptions = {}): Promise<ObjectStore> {
  const objm = new Objm(nc);
  const bucket = CHECKPOINT_BLOBS_BUCKET;
  let store: ObjectStore;
  try {
    store = await objm.open(bucket);
  } catch {
    store = await manage(`the object store ${bucket} is missing`, () =>
      objm.create(bucket, {
        storage: StorageType.File,
        replicas: replicasOf(opts),
        description: "loopsmith checkpoint blobs: the large parts of task and run checkpoints, by sha256",
      }),
    );
  }
  if (replicasOf(opts) > 1) await ensureReplicas(await jetstreamManager(nc), `OBJ_${bucket}`, replicasOf(opts));
  return store;
}

/** What {@link submitTask} did. `duplicate` is true when a task with that id was already submitted. */
export interface Submitted {
  taskId: string;
  duplicate: boolean;
  seq: number;
}

/**
 * Publishes a task to its owner's intake subject (`loopsmith.tasks.submit.<owner>`) with
 * message id `<owner>:<taskId>`, so a resubmit is a duplicate, not a second task.
 * @param owner - the client the task belongs to (under the permission matrix, the NATS
 *   user's own token: see `subjects.ts`)
 * @throws LoopsmithError `bad_request` when the task fails its schema (nothing is sent);
 *   `permission_denied` when this NATS user may not submit tasks as `owner`
 */
export async function submitTask(
  nc: NatsConnection,
  input: TaskInput,
  owner: string = DEFAULT_OWNER,
): Promise<Submitted> {
  const parsed = Task.safeParse(input);
  if (!parsed.success) {
    throw new LoopsmithError(
      "bad_request",
      `the task is invalid: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  }
  const ack = await jetstream(nc)
    .publish(tasksSubmitSubject(owner), JSON.stringify(parsed.data), { msgID: `${owner}:${parsed.data.taskId}` })
    .catch((err: unknown) => Promise.reject(permissionDenied(err) ?? err));
  return { taskId: parsed.data.taskId, duplicate: ack.duplicate, seq: ack.seq };
}

/**
 * Publishes one progress event to the events stream, on its owner's subject
 * (`loopsmith.events.<owner>.<taskId>`). The message id is `owner:taskId:seq`, and
 * `owner:taskId:result` for the result, so a result published again after a crash is a duplicate.
 * @throws LoopsmithError `unavailable` (retryable) when JetStream does not take it — a
 *   timeout or a closed connection while NATS restarts, a stream without a leader — so the
 *   task resumes from its checkpoint instead of ending; `bad_request` (not retryable) when
 *   the client refuses the message (larger than the server's max_payload); `permission_denied`
 *   (not retryable) when this NATS user may not publish events
 */
export async function publishEvent(nc: NatsConnection, event: TaskEvent, owner: string = DEFAULT_OWNER): Promise<void> {
  const data = JSON.stringify(TaskEvent.parse(event));
  try {
    await jetstream(nc).publish(eventsSubject(owner, event.taskId), data, {
      msgID: event.kind === "result" ? `${owner}:${event.taskId}:result` : `${owner}:${event.taskId}:${event.seq}`,
    });
  } catch (err) {
    const refused = permissionDenied(err);
    if (refused) throw refused;
    if (err instanceof InvalidArgumentError) {
      throw new LoopsmithError("bad_request", `an event of task ${event.taskId} cannot be sent: ${err.message}`, {
        cause: err,
        retryable: false,
      });
    }
    throw new LoopsmithError(
      "unavailable",
      `an event of task ${event.taskId} could not be published: ${(err as Error)?.message ?? err}`,
      { cause: err, retryable: true },
    );
  }
}

/**
 * The `seq` of the last event published for a task, or -1 when there is none. A conductor
 * that resumes a task continues numbering after it (events published after the last
 * checkpoint were not checkpointed).
 */
export async function lastEventSeq(nc: NatsConnection, owner: string, taskId: string): Promise<number> {
  const jsm = await jetstreamManager(nc);
  try {
    const msg = await jsm.streams.getMessage(Streams.events, { last_by_subj: eventsSubject(owner, taskId) });
    if (!msg) return -1;
    const parsed = TaskEvent.safeParse(msg.json());
    return parsed.success ? parsed.data.seq : -1;
  } catch (err) {
    if (err instanceof JetStreamApiError && err.status === 404) return -1;
    throw err;
  }
}

/**
 * Replays a task's events from the start and follows new ones, until the `result` event
 * (inclusive) or until `signal` aborts, through an ordered JetStream consumer: for the
 * services, which may create consumers on the events stream. Clients use `watchEvents`
 * (`watch.ts`). Events that fail their schema are skipped.
 */
export async function* followEvents(
  nc: NatsConnection,
  owner: string,
  taskId: string,
  signal?: AbortSignal,
): AsyncGenerator<TaskEvent> {
  const consumer = await jetstream(nc).consumers.get(Streams.events, {
    filter_subjects: [eventsSubject(owner, taskId)],
    deliver_policy: DeliverPolicy.All,
  });
  const messages = await consumer.consume();
  const onAbort = (): void => void messages.close();
  signal?.addEventListener("abort", onAbort, { once: true });
  // A signal that fired before the listener was added (while the consumer was being made)
  // fires no event: without this check the caller would follow the events for ever.
  if (signal?.aborted) onAbort();
  try {
    for await (const m of messages) {
      const parsed = TaskEvent.safeParse(m.json());
      if (!parsed.success) continue;
      yield parsed.data;
      if (parsed.data.kind === "result") break;
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    await messages.close();
  }
}

/** An intake message as {@link rejectIntakeMessage} needs it (a JetStream message has all of it). */
export interface IntakeMessage {
  subject: string;
  data: Uint8Array;
  info?: { streamSequence: number };
}

/**
 * Rejects an intake message that is not JSON or fails its schema: one `error` log line (the
 * subject, the stream sequence, the task id when the message carries one, the problems; never
 * the message's content, which may hold secrets) and a {@link RejectNotice} on
 * `loopsmith.rejects.<intake>.<owner>` (the owner of the subject it came on). The caller then terminates the message.
 * @param schemaError - what the schema found (ignored when the data is not JSON at all)
 * @returns the notice published (also when publishing failed: that is logged, never thrown)
 */
export function rejectIntakeMessage(
  nc: NatsConnection,
  intake: "tasks" | "improve",
  msg: IntakeMessage,
  schemaError: z.ZodError,
  log: Logger,
): RejectNotice {
  const owner =
    ownerOfSubject(msg.subject, intake === "tasks" ? Subjects.tasksSubmit : Subjects.improveSubmit) ?? DEFAULT_OWNER;
  let taskId: string | undefined;
  let problems: string;
  try {
    const id = (JSON.parse(new TextDecoder().decode(msg.data)) as { taskId?: unknown; runId?: unknown } | null) ?? {};
    const raw = intake === "tasks" ? id.taskId : id.runId;
    if (typeof raw === "string" && raw.length <= 200) taskId = raw;
    problems = z.prettifyError(schemaError);
  } catch {
    problems = "not JSON";
  }
  const notice: RejectNotice = {
    v: 1,
    subject: msg.subject,
    ...(msg.info ? { streamSeq: msg.info.streamSequence } : {}),
    ...(taskId !== undefined ? { taskId } : {}),
    at: new Date().toISOString(),
    error: {
      code: "bad_request",
      message: `the message on ${msg.subject} is not a valid ${intake === "tasks" ? "task" : "improvement run"}: ${problems.slice(0, 2_000)}`,
      retryable: false,
    },
    bytes: msg.data.length,
  };
  log.error(
    { subject: msg.subject, streamSeq: notice.streamSeq, taskId, owner, bytes: notice.bytes, problems },
    "intake message rejected: it fails its schema",
  );
  try {
    nc.publish(rejectsSubject(intake, owner), JSON.stringify(notice));
  } catch (err) {
    log.warn({ err }, "could not publish the reject notice");
  }
  return notice;
}
