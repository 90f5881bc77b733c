/**
 * The checkpoint store of a durable consumer: one state per key in a JetStream KV bucket,
 * written with revision checks, whose large parts live in the checkpoint blob store (an
 * object store) so that no checkpoint exceeds the server's `max_payload`.
 *
 * The order that keeps a checkpoint readable at every moment, a crash included:
 * 1. the blobs a new checkpoint names are put first (under `<label>/<key>/<sha256>`);
 * 2. then the checkpoint is written, revision-checked;
 * 3. then the blobs the previous checkpoint named and this one does not are deleted.
 * A process that dies between 1 and 2 leaves blobs no checkpoint names; the runner that
 * resumes the key removes them when the key ends ({@link CheckpointStore.finish}), as it
 * removes every other blob of the key: the final state is kept in KV, compacted to fit
 * without blobs (its longest strings replaced by a note of their size and digest).
 */
import type { KV } from "@nats-io/kv";
import { JetStreamApiError } from "@nats-io/jetstream";
import { InvalidArgumentError, type NatsConnection } from "@nats-io/transport-node";
import type { z } from "zod";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { compact, decode, encode, refsOf, type Encoded } from "./blobs.js";

/**
 * What the store needs of an object store (`@nats-io/obj`'s `ObjectStore` is one): put, read,
 * delete and list objects by name.
 */
export interface BlobStore {
  putBlob(meta: { name: string }, data: Uint8Array): Promise<unknown>;
  /** The object's bytes, or null when there is none of that name. */
  getBlob(name: string): Promise<Uint8Array | null>;
  delete(name: string): Promise<unknown>;
  list(): Promise<Array<{ name: string; deleted: boolean }>>;
}

/** NATS's default `max_payload`, in bytes: what a connection that has not heard the server's yet assumes. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** The server's largest message on this connection (`max_payload` of its INFO), in bytes. */
export function maxPayloadOf(nc: NatsConnection): number {
  return nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
}

/** Room kept under `max_payload` for the KV message's subject and headers, in bytes. */
export const CHECKPOINT_HEADROOM_BYTES = 4_096;

/** A state as the durable consumer needs it: running or final, with the next event seq. */
export interface Checkpointed {
  status: "running" | "final";
  eventSeq: number;
}

/** A state read back, with the KV revision a revision-checked write must name. */
export interface Revisioned<State> {
  state: State;
  revision: number;
}

/** The checkpoint store of one kind of state (tasks, improvement runs). */
export interface CheckpointStore<State> {
  /**
   * The state and its revision, or null when the key is unknown. Reads the blobs it names.
   * @throws LoopsmithError `internal` when the state fails its schema; `unavailable`
   *   (retryable) when a blob it names cannot be read
   */
  get(key: string): Promise<Revisioned<State> | null>;
  /**
   * Creates the state (its blobs first); returns its revision.
   * @throws LoopsmithError `unavailable` (retryable) when it exists or the write failed on the way;
   *   `internal` when the server refuses the write
   */
  create(state: State): Promise<number>;
  /**
   * Writes the state (its new blobs first) if nobody wrote since `revision` (the revision this
   * runner last wrote); returns the new revision. Then deletes the blobs only the previous
   * checkpoint named.
   * @throws LoopsmithError `unavailable` (retryable) when another runner wrote in between;
   *   `internal` (not retryable) when the server refuses the write
   */
  update(state: State, revision: number): Promise<number>;
  /**
   * The key ended: its final state is rewritten without blobs when it named any (the longest
   * strings replaced by a note of their size and digest, see `compact`), and every blob of
   * the key is deleted (also blobs of a runner that died before the checkpoint naming them).
   * Call it when the final state's result is published. Idempotent.
   * @throws LoopsmithError as {@link CheckpointStore.update}
   */
  finish(key: string): Promise<void>;
  /** Deletes the state and every blob of the key. */
  remove(key: string): Promise<void>;
  /** The names of the key's objects in the blob store (`<label>/<key>/<sha256>`), from its listing. */
  blobsOf(key: string): Promise<string[]>;
  /**
   * Marks `owner`'s key as cancelled; works before its first checkpoint too. The marker is
   * per owner, so a cancel sent for another owner's key stops nothing.
   */
  requestCancel(key: string, owner: string): Promise<void>;
  /** True once `owner` asked to cancel the key. */
  cancelRequested(key: string, owner: string): Promise<boolean>;
}

/** Options of {@link checkpointStore}. */
export interface CheckpointStoreOptions<State> {
  kv: KV;
  blobs: BlobStore;
  /** The server's largest message, in bytes (`nc.info.max_payload`). */
  maxPayload: number;
  schema: z.ZodType<State>;
  keyOf(state: State): string;
  /** What a key is, in messages: `task`, `run`. */
  label: string;
}

/** JetStream's API error code for a write whose expected last sequence does not match. */
const WRONG_LAST_SEQUENCE = 10071;
/** Reads of a checkpoint whose blob vanished under it (a newer checkpoint's clean-up) before giving up. */
const READ_ATTEMPTS = 3;

const cancelKey = (key: string, owner: string): string => `cancel.${owner}.${key}`;

/** What one checkpoint store holds: its buckets, its budget, and what it knows of each key's blobs. */
interface StoreCore<State> {
  kv: KV;
  blobs: BlobStore;
  schema: z.ZodType<State>;
  label: string;
  /** The largest checkpoint document, in bytes (`max_payload` less the headroom). */
  budget: number;
  /**
   * The digests of the checkpoint this process last wrote, per key. Reads never change it: a
   * read that raced a newer write must not make a later write skip a blob it needs.
   */
  named: Map<string, Set<string>>;
  /** Keys that may have blobs this process does not know of: written by another runner, or a write that failed after its blobs. */
  suspect: Set<string>;
}

/** A key's prefix in the blob store. Tasks and runs share it: a key's blobs are `<label>/<key>/<sha256>`. */
function prefixOf(label: string, key: string): string {
  return `${label}/${key}/`;
}

/** The blob store's name of one blob of a key. */
function blobName(label: string, key: string, digest: string): string {
  return `${prefixOf(label, key)}${digest}`;
}

/**
 * The error a failed write of `label` `key`'s checkpoint becomes: `unavailable` (retryable)
 * when another runner wrote in between or the write failed on the way, `internal` (not
 * retryable) when the server refuses the request.
 */
function writeError(label: string, err: unknown, key: string): LoopsmithError {
  if (err instanceof LoopsmithError) return err;
  if (err instanceof JetStreamApiError && err.code === WRONG_LAST_SEQUENCE) {
    return new LoopsmithError("unavailable", `the checkpoint of ${label} ${key} was written by another runner`, {
      cause: err,
      retryable: true,
    });
  }
  // A request the server refuses: retrying cannot help.
  if (err instanceof JetStreamApiError || err instanceof InvalidArgumentError) {
    return new LoopsmithError(
      "internal",
      `the checkpoint of ${label} ${key} could not be written: ${(err as Error).message}`,
      { cause: err, retryable: false },
    );
  }
  return new LoopsmithError(
    "unavailable",
    `the checkpoint of ${label} ${key} could not be written: ${(err as Error)?.message ?? err}`,
    { cause: err, retryable: true },
  );
}

/** Deletes the key's blobs of these digests; one that cannot be deleted makes the key suspect. */
async function deleteBlobs<State>(core: StoreCore<State>, key: string, digests: Iterable<string>): Promise<void> {
  for (const digest of digests) {
    // A blob left behind is removed when the key ends (the key is then swept).
    await core.blobs.delete(blobName(core.label, key, digest)).catch(() => core.suspect.add(key));
  }
}

/**
 * Puts the blobs the document names that this process's last checkpoint of the key did not,
 * writes the document (`revision` undefined creates the key), then deletes the blobs only
 * that last checkpoint named.
 * @returns the new revision
 * @throws LoopsmithError as {@link writeError} makes it
 */
async function write<State>(
  core: StoreCore<State>,
  key: string,
  encoded: Encoded,
  revision: number | undefined,
): Promise<number> {
  const { kv, named, suspect } = core;
  const before = named.get(key);
  // Updating a checkpoint another runner wrote: the blobs it named are not known here.
  if (!before && revision !== undefined) suspect.add(key);
  try {
    for (const blob of encoded.blobs)
      if (!before?.has(blob.digest))
        await core.blobs.putBlob({ name: blobName(core.label, key, blob.digest) }, blob.data);
    const rev =
      revision === undefined ? await kv.create(key, encoded.text) : await kv.update(key, encoded.text, revision);
    const now = new Set(encoded.blobs.map((b) => b.digest));
    named.set(key, now);
    await deleteBlobs(
      core,
      key,
      [...(before ?? [])].filter((d) => !now.has(d)),
    );
    return rev;
  } catch (err) {
    if (encoded.blobs.length) suspect.add(key);
    throw writeError(core.label, err, key);
  }
}

/** The names of the key's objects in the blob store, from its listing. */
async function blobsOf<State>(core: StoreCore<State>, key: string): Promise<string[]> {
  const prefix = prefixOf(core.label, key);
  return (await core.blobs.list()).filter((o) => !o.deleted && o.name.startsWith(prefix)).map((o) => o.name);
}

/** Deletes every blob of the key but `keep`: those named here or in `seen`, and all listed when the key is suspect. */
async function clearBlobs<State>(
  core: StoreCore<State>,
  key: string,
  keep: Set<string>,
  seen: string[] = [],
): Promise<void> {
  const { named, suspect } = core;
  const known = [...new Set([...(named.get(key) ?? []), ...seen])].filter((d) => !keep.has(d));
  await deleteBlobs(core, key, known);
  if (suspect.has(key)) {
    suspect.delete(key);
    const listed = (await blobsOf(core, key))
      .map((name) => name.slice(prefixOf(core.label, key).length))
      .filter((d) => !keep.has(d) && !known.includes(d));
    await deleteBlobs(core, key, listed);
  }
  if (keep.size) named.set(key, keep);
  else named.delete(key);
}

/**
 * One blob a checkpoint names.
 * @throws LoopsmithError `unavailable` (retryable) when it is gone
 */
async function readBlob<State>(core: StoreCore<State>, key: string, digest: string): Promise<Uint8Array> {
  const data = await core.blobs.getBlob(blobName(core.label, key, digest));
  if (!data)
    throw new LoopsmithError(
      "unavailable",
      `the checkpoint of ${core.label} ${key} names the blob ${digest}, which is gone`,
      {
        retryable: true,
      },
    );
  return data;
}

/**
 * The key's checkpoint with its revision, its document and the digests it names, or null
 * when there is none. A blob gone under the read (a newer checkpoint's clean-up) reads again,
 * up to {@link READ_ATTEMPTS} times.
 * @throws LoopsmithError `internal` when the state fails its schema; `unavailable`
 *   (retryable) when a blob it names cannot be read
 */
async function read<State>(
  core: StoreCore<State>,
  key: string,
): Promise<(Revisioned<State> & { doc: unknown; digests: string[] }) | null> {
  const { kv, label } = core;
  for (let attempt = 1; ; attempt++) {
    const entry = await kv.get(key);
    if (!entry || entry.operation !== "PUT" || entry.length === 0) return null;
    const doc = entry.json<unknown>();
    let decoded: { state: unknown; digests: string[] };
    try {
      decoded = await decode(doc, (digest) => readBlob(core, key, digest));
    } catch (err) {
      // A newer checkpoint was written and cleaned up after this one was read: read again.
      if (attempt < READ_ATTEMPTS && err instanceof LoopsmithError && err.retryable) continue;
      throw err instanceof LoopsmithError
        ? err
        : new LoopsmithError(
            "unavailable",
            `the checkpoint of ${label} ${key} could not be read: ${(err as Error).message}`,
            { cause: err, retryable: true },
          );
    }
    const parsed = core.schema.safeParse(decoded.state);
    if (!parsed.success) {
      throw new LoopsmithError("internal", `the checkpoint of ${label} ${key} fails its schema`, {
        details: parsed.error.issues,
      });
    }
    return { state: parsed.data, revision: entry.revision, doc, digests: decoded.digests };
  }
}

/**
 * {@link CheckpointStore.finish}: the final state rewritten without blobs when it names any,
 * then every blob of the key deleted.
 * @throws LoopsmithError as {@link CheckpointStore.update}
 */
async function finish<State>(core: StoreCore<State>, key: string): Promise<void> {
  const { named, suspect } = core;
  const mine = named.get(key);
  // The common case: this process wrote the key's last checkpoint, and it named no blob.
  if (mine && mine.size === 0 && !suspect.has(key)) return void named.delete(key);
  if (!mine) suspect.add(key);
  const found = await read(core, key);
  let keep = new Set<string>();
  if (found && refsOf(found.doc).length) {
    const compacted = compact(found.state, core.budget, core.label);
    await write(core, key, compacted, found.revision);
    keep = new Set(compacted.blobs.map((b) => b.digest));
  }
  await clearBlobs(core, key, keep, found?.digests);
}

/** A {@link CheckpointStore} over a KV bucket and a blob store. */
export function checkpointStore<State extends Checkpointed>(
  opts: CheckpointStoreOptions<State>,
): CheckpointStore<State> {
  const { kv, blobs, schema, label } = opts;
  const budget = opts.maxPayload - CHECKPOINT_HEADROOM_BYTES;
  const core: StoreCore<State> = { kv, blobs, schema, label, budget, named: new Map(), suspect: new Set() };
  return {
    async get(key) {
      const found = await read(core, key);
      return found && { state: found.state, revision: found.revision };
    },
    create: (state) => write(core, opts.keyOf(state), encode(state, budget), undefined),
    update: (state, revision) => write(core, opts.keyOf(state), encode(state, budget), revision),
    finish: (key) => finish(core, key),
    async remove(key) {
      const found = await read(core, key).catch(() => null);
      await kv.delete(key);
      core.suspect.add(key);
      await clearBlobs(core, key, new Set(), found?.digests);
    },
    blobsOf: (key) => blobsOf(core, key),
    async requestCancel(key, owner) {
      await kv.put(cancelKey(key, owner), "1");
    },
    async cancelRequested(key, owner) {
      const entry = await kv.get(cancelKey(key, owner));
      // Exactly the marker requestCancel writes: any other value there (a message a JetStream
      // push consumer delivered to the subject, say) cancels nothing.
      return !!entry && entry.operation === "PUT" && entry.string() === "1";
    },
  };
}
