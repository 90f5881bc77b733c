/**
 * The checkpoint document and its blobs: a state whose JSON is larger than the byte budget
 * (under the server's `max_payload`) has its largest parts moved out into blobs, each
 * referenced in the document by its SHA-256 digest ({@link BlobRef}). Long strings go first
 * (file contents, run outputs, transcripts), then, if the document is still over budget, the
 * largest arrays and objects (a 2,000-case test list), and as a last resort the whole state.
 * Pure functions: the store that writes the blobs and the document is `checkpoints.ts`.
 */
import { createHash } from "node:crypto";

/** The key that marks a blob reference in a checkpoint document (no state schema has it). */
export const BLOB_REF_KEY = "$blob";

/**
 * A reference to a blob, in place of the value it holds: `$blob` is the SHA-256 of the blob's
 * bytes (lower-case hex), `kind` says whether those bytes are the UTF-8 text of a string or
 * the JSON of an array or object (which may hold references of its own), `bytes` their length.
 */
export interface BlobRef {
  [BLOB_REF_KEY]: string;
  kind: "text" | "json";
  bytes: number;
}

/** A blob to write before the document that names it. */
export interface Blob {
  digest: string;
  data: Uint8Array;
}

/** A document ready for the KV bucket and the blobs it names. */
export interface Encoded {
  /** The JSON text of the document (at most the budget, in UTF-8 bytes). */
  text: string;
  /** Every blob the document names, nested ones included. */
  blobs: Blob[];
}

/** Strings shorter than this (UTF-8 bytes of their JSON) stay inline; longer ones may move to a blob. */
export const BLOB_MIN_BYTES = 4_096;
/** Strings a compacted final state keeps whole, in bytes (see {@link compact}). */
export const STUB_MIN_BYTES = 256;

const utf8 = new TextEncoder();
const bytesOf = (text: string): number => Buffer.byteLength(text, "utf8");
const sha256 = (data: Uint8Array): string => createHash("sha256").update(data).digest("hex");

/** True when `value` is a {@link BlobRef}. */
export function isBlobRef(value: unknown): value is BlobRef {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as Record<string, unknown>)[BLOB_REF_KEY] === "string"
  );
}

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
/** A place in the document: the container and the key or index that holds a value. */
interface Slot {
  parent: Json[] | { [key: string]: Json };
  key: string | number;
  /** The slot's path, `/`-joined, to tell which slots lie inside another. */
  path: string;
}

function slotsOf(root: Json): Array<Slot & { value: Json }> {
  const out: Array<Slot & { value: Json }> = [];
  const walk = (value: Json, path: string): void => {
    if (value === null || typeof value !== "object") return;
    const entries: Array<[string | number, Json]> = Array.isArray(value)
      ? value.map((v, i) => [i, v])
      : Object.entries(value);
    for (const [key, child] of entries) {
      const childPath = `${path}/${key}`;
      out.push({ parent: value, key, path: childPath, value: child });
      walk(child, childPath);
    }
  };
  walk(root, "");
  return out;
}

const put = (slot: Slot, value: Json): void => void ((slot.parent as Record<string | number, Json>)[slot.key] = value);

function refTo(kind: BlobRef["kind"], data: Uint8Array, blobs: Blob[]): BlobRef {
  const digest = sha256(data);
  if (!blobs.some((b) => b.digest === digest)) blobs.push({ digest, data });
  return { [BLOB_REF_KEY]: digest, kind, bytes: data.byteLength };
}

/**
 * Encodes a state for a checkpoint of at most `budget` bytes. A state that fits is its JSON,
 * with no blobs. Otherwise strings of {@link BLOB_MIN_BYTES} or more move to blobs, longest
 * first, until the document fits; then the largest arrays and objects; then the whole state.
 * Blobs are content-addressed, so a part that did not change between checkpoints has the
 * same digest.
 */
export function encode(state: unknown, budget: number): Encoded {
  const text = JSON.stringify(state);
  let size = bytesOf(text);
  if (size <= budget) return { text, blobs: [] };
  const doc = JSON.parse(text) as Json;
  const blobs: Blob[] = [];
  const strings = slotsOf(doc)
    .filter((s): s is Slot & { value: string } => typeof s.value === "string")
    .map((s) => ({ ...s, size: bytesOf(JSON.stringify(s.value)) }))
    .filter((s) => s.size >= BLOB_MIN_BYTES)
    .sort((a, b) => b.size - a.size);
  for (const s of strings) {
    if (size <= budget) break;
    const ref = refTo("text", utf8.encode(s.value), blobs);
    put(s, ref as unknown as Json);
    size -= s.size - bytesOf(JSON.stringify(ref));
  }
  if (size > budget) {
    const taken: string[] = [];
    const containers = slotsOf(doc)
      .filter((s) => s.value !== null && typeof s.value === "object" && !isBlobRef(s.value))
      .map((s) => ({ ...s, json: JSON.stringify(s.value) }))
      .sort((a, b) => b.json.length - a.json.length);
    for (const c of containers) {
      if (size <= budget) break;
      if (taken.some((p) => c.path.startsWith(`${p}/`))) continue;
      const ref = refTo("json", utf8.encode(c.json), blobs);
      put(c, ref as unknown as Json);
      taken.push(c.path);
      size -= bytesOf(c.json) - bytesOf(JSON.stringify(ref));
    }
  }
  if (size > budget) {
    const ref = refTo("json", utf8.encode(JSON.stringify(doc)), blobs);
    return { text: JSON.stringify(ref), blobs };
  }
  return { text: JSON.stringify(doc), blobs };
}

/** The digests a document names directly (not those inside its `json` blobs). */
export function refsOf(doc: unknown): string[] {
  if (isBlobRef(doc)) return [doc[BLOB_REF_KEY]];
  if (doc === null || typeof doc !== "object") return [];
  return (Array.isArray(doc) ? doc : Object.values(doc)).flatMap(refsOf);
}

/**
 * Replaces every blob reference in `doc` by the value it holds, reading each blob with
 * `read` (nested references too).
 * @returns the state and every digest it named
 * @throws what `read` throws; Error when a blob's bytes do not have its digest
 */
export async function decode(
  doc: unknown,
  read: (digest: string) => Promise<Uint8Array>,
): Promise<{ state: unknown; digests: string[] }> {
  const digests: string[] = [];
  const resolve = async (value: unknown): Promise<unknown> => {
    if (isBlobRef(value)) {
      const digest = value[BLOB_REF_KEY];
      const data = await read(digest);
      if (sha256(data) !== digest) throw new Error(`the checkpoint blob ${digest} does not have its digest`);
      digests.push(digest);
      const text = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8");
      return value.kind === "text" ? text : resolve(JSON.parse(text));
    }
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return Promise.all(value.map(resolve));
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) out[key] = await resolve(child);
    return out;
  };
  const state = await resolve(doc);
  return { state, digests };
}

/** The text that stands in a compacted final state for a string that was not kept. */
export function stubText(bytes: number, digest: string, label: string): string {
  return `[${bytes} bytes not kept after the ${label} ended; sha256 ${digest}]`;
}

/**
 * A final state made to fit `budget` without blobs: its longest strings (of
 * {@link STUB_MIN_BYTES} or more), longest first, are replaced by {@link stubText} until it
 * fits. A state that still does not fit is {@link encode}d (its blobs are kept).
 */
export function compact(state: unknown, budget: number, label: string): Encoded {
  const text = JSON.stringify(state);
  let size = bytesOf(text);
  if (size <= budget) return { text, blobs: [] };
  const doc = JSON.parse(text) as Json;
  const strings = slotsOf(doc)
    .filter((s): s is Slot & { value: string } => typeof s.value === "string")
    .map((s) => ({ ...s, size: bytesOf(JSON.stringify(s.value)) }))
    .filter((s) => s.size >= STUB_MIN_BYTES)
    .sort((a, b) => b.size - a.size);
  for (const s of strings) {
    if (size <= budget) break;
    const data = utf8.encode(s.value);
    const stub = stubText(data.byteLength, sha256(data), label);
    put(s, stub);
    size -= s.size - bytesOf(JSON.stringify(stub));
  }
  return size <= budget ? { text: JSON.stringify(doc), blobs: [] } : encode(doc, budget);
}
