/**
 * Embedders turn text into vectors for pgvector recall. They are pluggable; every stored row
 * records the {@link Embedder.id} that made its vector, and recall only compares rows of the
 * same embedder.
 *
 * The default, {@link createHashingEmbedder}, works offline with no model download: feature
 * hashing ("the hashing trick") over word tokens, word bigrams and character trigrams.
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";

/** Turns texts into fixed-size vectors. */
export interface Embedder {
  /**
   * Stable name of the embedder and its settings, e.g. `hash-v1-256`. Rows made by two
   * embedders with different ids are never compared. Letters, digits, `.`, `_`, `:`, `-`; at
   * most 100 characters.
   */
  readonly id: string;
  /** Length of every vector {@link embed} returns (1 to 2,000: the HNSW limit of pgvector's `vector`). */
  readonly dimensions: number;
  /**
   * Embeds each text. Vectors are for cosine distance; they need not be normalised, but a
   * vector must never be all zeros.
   * @returns one vector of {@link dimensions} numbers per text, in order
   */
  embed(texts: string[]): Promise<number[][]>;
}

/** Options of {@link createHashingEmbedder}. */
export interface HashingEmbedderOptions {
  /** Vector length. @defaultValue 256 */
  dimensions?: number;
}

/** Only this much of a text is embedded, in characters. */
const MAX_TEXT = 8_000;

/** FNV-1a's offset basis and prime (32 bits). */
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** Continues an FNV-1a hash state over `text` (unsigned result not yet taken). */
function fold(h: number, text: string): number {
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return h;
}

/** FNV-1a state after each feature kind's prefix (`w:`, `b:`, `c:`). */
const PREFIX_W = fold(FNV_OFFSET, "w:");
const PREFIX_B = fold(FNV_OFFSET, "b:");
const PREFIX_C = fold(FNV_OFFSET, "c:");
const CARET = "^".charCodeAt(0);
const DOLLAR = "$".charCodeAt(0);
const SPACE = " ".charCodeAt(0);
const LT = "<".charCodeAt(0);

/**
 * Word tokens: placeholders (`<id>`, `<num>`, …) stay whole, everything else is split on
 * non-alphanumerics and lower-cased.
 */
export function tokens(text: string): string[] {
  return (text.toLowerCase().match(/<[a-z]+>|[a-z0-9_]+/g) ?? []).filter((t) => t.length > 0);
}

/** Adds `weight` to the bucket of `hash` (unsigned: `hash % dimensions`), negated when its top bit is set. */
function addHashed(v: Float64Array, hash: number, weight: number): void {
  const h = hash >>> 0;
  const bucket = h % v.length;
  v[bucket] = (v[bucket] as number) + ((h & 0x80000000) === 0 ? weight : -weight);
}

/**
 * Adds one text's weighted features to `v` (zeros on entry): each word token (1.0), each token
 * bigram (0.7) and each character trigram of a token padded as `^token$` (0.3; not of
 * placeholders such as `<num>`), in that order per token, each hashed (FNV-1a, 32 bits, of
 * `w:token`, `b:token next`, `c:abc`) to a bucket and a sign. With no token, the feature
 * `w:<empty>`. Hashes are folded from the prefix without building the feature strings; the
 * loops are written out (no closure per token: bulk inserts embed 10,000s of texts a second).
 */
function addFeatures(text: string, v: Float64Array): void {
  const toks = tokens(text.slice(0, MAX_TEXT));
  if (toks.length === 0) {
    addHashed(v, fold(PREFIX_W, "<empty>"), 1);
    return;
  }
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i] as string;
    let word = PREFIX_W;
    let pair = PREFIX_B;
    for (let j = 0; j < t.length; j++) {
      const c = t.charCodeAt(j);
      word = Math.imul(word ^ c, FNV_PRIME);
      pair = Math.imul(pair ^ c, FNV_PRIME);
    }
    addHashed(v, word, 1);
    const next = toks[i + 1];
    if (next !== undefined) addHashed(v, fold(Math.imul(pair ^ SPACE, FNV_PRIME), next), 0.7);
    if (t.charCodeAt(0) !== LT) {
      // Trigrams of `^t$`, in order: (a, b, c) slides one character at a time.
      let a = CARET;
      let b = t.charCodeAt(0);
      for (let j = 1; j <= t.length; j++) {
        const c = j === t.length ? DOLLAR : t.charCodeAt(j);
        let h = Math.imul(PREFIX_C ^ a, FNV_PRIME);
        h = Math.imul(h ^ b, FNV_PRIME);
        h = Math.imul(h ^ c, FNV_PRIME);
        addHashed(v, h, 0.3);
        a = b;
        b = c;
      }
    }
  }
}

/**
 * The default offline embedder: deterministic feature hashing. Each feature is hashed to a
 * bucket and a sign (so collisions cancel out rather than add up); the vector is
 * L2-normalised. Texts sharing words and word pieces end up close in cosine distance.
 *
 * @param opts.dimensions - vector length, 16 to 4,096. @defaultValue 256
 * @returns an {@link Embedder} with id `hash-v1-<dimensions>`
 * @throws LoopsmithError `config_invalid` when `dimensions` is out of range or not an integer
 */
export function createHashingEmbedder(opts: HashingEmbedderOptions = {}): Embedder {
  const dimensions = opts.dimensions ?? 256;
  if (!Number.isInteger(dimensions) || dimensions < 16 || dimensions > 4096) {
    throw new LoopsmithError("config_invalid", `the hashing embedder needs 16 to 4096 dimensions, not ${dimensions}`);
  }
  const v = new Float64Array(dimensions);
  const embedOne = (text: string): number[] => {
    v.fill(0);
    addFeatures(text, v);
    let sum = 0;
    for (let i = 0; i < dimensions; i++) sum += (v[i] as number) * (v[i] as number);
    let norm = Math.sqrt(sum);
    if (norm === 0) {
      // Every feature cancelled out: fall back to one fixed bucket so cosine stays defined.
      v[0] = 1;
      norm = 1;
    }
    const out = new Array<number>(dimensions);
    for (let i = 0; i < dimensions; i++) out[i] = (v[i] as number) / norm;
    return out;
  };
  return {
    id: `hash-v1-${dimensions}`,
    dimensions,
    embed: (texts) => Promise.resolve(texts.map(embedOne)),
  };
}

/** Cosine similarity of two vectors of equal length, in [-1, 1]; 0 when either is all zeros. */
export function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/**
 * A weighted sum of vectors, L2-normalised: how a failure's signature and its context are
 * combined into one vector (see the store). All vectors must have the same length.
 */
export function combine(vectors: number[][], weights: number[]): number[] {
  const first = vectors[0];
  if (!first) throw new LoopsmithError("internal", "combine needs at least one vector");
  const n = first.length;
  const out = new Float64Array(n);
  for (let k = 0; k < vectors.length; k++) {
    const v = vectors[k] as number[];
    const w = weights[k] ?? 0;
    for (let i = 0; i < n; i++) out[i] = (out[i] as number) + w * (v[i] ?? 0);
  }
  let sum = 0;
  for (let i = 0; i < n; i++) sum += (out[i] as number) * (out[i] as number);
  const norm = Math.sqrt(sum);
  if (norm === 0) return first;
  const result = new Array<number>(n);
  for (let i = 0; i < n; i++) result[i] = (out[i] as number) / norm;
  return result;
}

/**
 * Checks an embedder before use: its id is safe to store and to name an index after, and its
 * dimensions are an integer pgvector can index.
 * @throws LoopsmithError `config_invalid` naming what is wrong
 */
export function checkEmbedder(embedder: Embedder): void {
  if (!/^[A-Za-z0-9._:-]{1,100}$/.test(embedder.id)) {
    throw new LoopsmithError(
      "config_invalid",
      `embedder id "${embedder.id}" must be 1-100 letters, digits, '.', '_', ':' or '-'`,
    );
  }
  if (!Number.isInteger(embedder.dimensions) || embedder.dimensions < 1 || embedder.dimensions > 2_000) {
    throw new LoopsmithError(
      "config_invalid",
      `embedder ${embedder.id} has ${embedder.dimensions} dimensions; 1 to 2000 are allowed (the HNSW limit of pgvector's vector type)`,
    );
  }
}
