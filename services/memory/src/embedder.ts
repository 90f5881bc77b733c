/**
 * Embedders turn text into vectors for pgvector recall. They are pluggable; every stored row
 * records the {@link Embedder.id} that made its vector, and recall only compares rows of the
 * same embedder.
 *
 * The default, {@link createHashingEmbedder}, works offline with no model download: feature
 * hashing ("the hashing trick") over word tokens, word bigrams and character trigrams.
 */
import { LoopsmithError } from "@loopsmith/shared";

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

/** FNV-1a, 32 bits. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * Word tokens: placeholders (`<id>`, `<num>`, …) stay whole, everything else is split on
 * non-alphanumerics and lower-cased.
 */
export function tokens(text: string): string[] {
  return (text.toLowerCase().match(/<[a-z]+>|[a-z0-9_]+/g) ?? []).filter((t) => t.length > 0);
}

/** Weighted features of one text: tokens (1.0), token bigrams (0.7), character trigrams (0.3). */
function features(text: string): Array<[string, number]> {
  const toks = tokens(text.slice(0, MAX_TEXT));
  const out: Array<[string, number]> = [];
  toks.forEach((t, i) => {
    out.push([`w:${t}`, 1]);
    const next = toks[i + 1];
    if (next !== undefined) out.push([`b:${t} ${next}`, 0.7]);
    if (!t.startsWith("<")) {
      const padded = `^${t}$`;
      for (let j = 0; j + 3 <= padded.length; j++) out.push([`c:${padded.slice(j, j + 3)}`, 0.3]);
    }
  });
  if (out.length === 0) out.push(["w:<empty>", 1]);
  return out;
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
  const embedOne = (text: string): number[] => {
    const v = new Array<number>(dimensions).fill(0);
    for (const [feature, weight] of features(text)) {
      const h = fnv1a(feature);
      const sign = (h & 0x80000000) === 0 ? 1 : -1;
      const bucket = h % dimensions;
      v[bucket] = (v[bucket] ?? 0) + sign * weight;
    }
    let norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    if (norm === 0) {
      // Every feature cancelled out: fall back to one fixed bucket so cosine stays defined.
      v[0] = 1;
      norm = 1;
    }
    return v.map((x) => x / norm);
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
  const out = new Array<number>(first.length).fill(0);
  vectors.forEach((v, k) => {
    const w = weights[k] ?? 0;
    for (let i = 0; i < out.length; i++) out[i] = (out[i] ?? 0) + w * (v[i] ?? 0);
  });
  const norm = Math.sqrt(out.reduce((s, x) => s + x * x, 0));
  return norm === 0 ? first : out.map((x) => x / norm);
}

/**
 * Checks an embedder before use: its id is safe to store and to name an index after, and its
 * dimensions are an integer pgvector can index.
 * @throws LoopsmithError `config_invalid` naming what is wrong
 */
export function checkEmbedder(embedder: Embedder): void {
  if (!/^[A-Za-z0-9._:-]{1,100}$/.test(embedder.id)) {
    throw new LoopsmithError("config_invalid", `embedder id "${embedder.id}" must be 1-100 letters, digits, '.', '_', ':' or '-'`);
  }
  if (!Number.isInteger(embedder.dimensions) || embedder.dimensions < 1 || embedder.dimensions > 2_000) {
    throw new LoopsmithError("config_invalid", `embedder ${embedder.id} has ${embedder.dimensions} dimensions; 1 to 2000 are allowed (the HNSW limit of pgvector's vector type)`);
  }
}
