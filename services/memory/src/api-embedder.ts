/**
 * The semantic embedder: a provider's OpenAI-compatible embeddings API (`POST
 * <baseUrl>/embeddings`, the client in `@loopsmith/shared/llm`), for when there is a server and
 * perhaps a key. The hashing embedder stays the default ({@link configuredEmbedder}).
 *
 * Vectors are stored at `memory.embedder.dimensions`, the length the embedder's id names and
 * its HNSW index is built for (the `embedding` column is an untyped `vector`; each embedder
 * has its own partial index on `embedding::vector(<dims>)`, so embedders of any length share
 * the table). A model whose vectors are longer is accepted only with `truncate` (the first
 * `dimensions` numbers, L2-normalised again: what a Matryoshka-trained model is made for, and
 * what OpenAI's own `dimensions` parameter does); any other length is a `config_invalid` error
 * naming the server, the model and both lengths. Every vector is L2-normalised, so the
 * weights of a failure's parts mean the same as with the hashing embedder.
 */
import { LoopsmithError, type Config } from "@loopsmith/shared/runtime";
import { createEmbeddingsClient, type EmbeddingsClient } from "@loopsmith/shared/llm";
import { createHashingEmbedder, type Embedder } from "./embedder.js";

/** Options of {@link createApiEmbedder}. */
export interface ApiEmbedderOptions {
  /** The server's base URL, the part before `/embeddings`. */
  baseUrl: string;
  model: string;
  apiKey?: string | undefined;
  /** Length of the stored vectors, 1 to 2000. */
  dimensions: number;
  /** Cut longer vectors to `dimensions` and normalise them again (Matryoshka models only). @defaultValue false */
  truncate?: boolean;
  /** Timeout of one HTTP call, in ms. @defaultValue 5000 */
  timeoutMs?: number;
  /** Retries of a call a retry can help. @defaultValue 2 */
  maxRetries?: number;
  /** Texts per HTTP call. @defaultValue 32 */
  batchSize?: number;
  /** The client to call; made from the options above when absent (tests give their own). */
  client?: EmbeddingsClient;
}

/** FNV-1a, 32 bits, as 8 hex digits. */
function fnv(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}

/**
 * The id of the API embedder of `model` at `dimensions`: `api:<model>:<dimensions>`, the
 * model's characters outside letters, digits, `.`, `_` and `-` made `_` and, when any was
 * (or the name passes 80 characters), a hash of the exact name added so that two models never
 * share an id (`BAAI/bge-small-en-v1.5` → `api:BAAI_bge-small-en-v1.5-<hash>:384`).
 */
export function apiEmbedderId(model: string, dimensions: number): string {
  const slug = model.replace(/[^A-Za-z0-9._-]/g, "_");
  const name = slug === model && slug.length <= 80 ? slug : `${slug.slice(0, 80)}-${fnv(model)}`;
  return `api:${name}:${dimensions}`;
}

/**
 * One vector as memory stores it: `dimensions` long (cut from a longer one when `truncate`),
 * L2-normalised.
 * @param where - the server and model, for the error message
 * @throws LoopsmithError `config_invalid` when the length is not `dimensions` (and not longer
 *   with `truncate`), naming the server, both lengths and the settings to change; `internal`
 *   for an all-zero vector
 */
export function fitVector(v: readonly number[], dimensions: number, truncate: boolean, where: string): number[] {
  if (v.length !== dimensions && !(truncate && v.length > dimensions)) {
    const hint =
      v.length > dimensions
        ? `set memory.embedder.dimensions to ${v.length}, or, for a model trained for truncation (Matryoshka), set memory.embedder.truncate`
        : `set memory.embedder.dimensions to ${v.length} (or less, with memory.embedder.truncate, for a Matryoshka model)`;
    throw new LoopsmithError(
      "config_invalid",
      `${where} returned vectors of ${v.length} dimensions, but memory.embedder.dimensions is ${dimensions}: ${hint}`,
    );
  }
  const kept = v.length === dimensions ? v : v.slice(0, dimensions);
  let sum = 0;
  for (const x of kept) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm === 0) throw new LoopsmithError("internal", `${where} returned an all-zero vector`);
  return kept.map((x) => x / norm);
}

/**
 * Stands in for an empty text: OpenAI's API refuses an empty input, and memory embeds the
 * empty goal of a record whose parts are all empty.
 */
const EMPTY_TEXT = "(empty)";

/**
 * An {@link Embedder} over an OpenAI-compatible embeddings API. Texts go `batchSize` at a
 * time, one call after another; each call is retried as the client retries.
 *
 * @returns an embedder with id {@link apiEmbedderId}`(model, dimensions)`
 * @throws LoopsmithError `config_invalid` (at once) when `dimensions` is not an integer from 1
 *   to 2000 or `batchSize` not a positive integer. Its `embed` throws the client's errors
 *   (each names the server) and {@link fitVector}'s.
 */
export function createApiEmbedder(opts: ApiEmbedderOptions): Embedder {
  const { dimensions } = opts;
  if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > 2_000) {
    throw new LoopsmithError("config_invalid", `the api embedder needs 1 to 2000 dimensions, not ${dimensions}`);
  }
  const batchSize = opts.batchSize ?? 32;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new LoopsmithError(
      "config_invalid",
      `the api embedder's batchSize must be a positive integer, not ${batchSize}`,
    );
  }
  const client =
    opts.client ??
    createEmbeddingsClient({
      baseUrl: opts.baseUrl,
      model: opts.model,
      apiKey: opts.apiKey,
      timeoutMs: opts.timeoutMs ?? 5_000,
      maxRetries: opts.maxRetries ?? 2,
    });
  const where = `the embeddings server at ${opts.baseUrl} (model ${opts.model})`;
  return {
    id: apiEmbedderId(opts.model, dimensions),
    dimensions,
    async embed(texts) {
      const out: number[][] = [];
      for (let at = 0; at < texts.length; at += batchSize) {
        const batch = texts.slice(at, at + batchSize).map((t) => (t.trim() === "" ? EMPTY_TEXT : t));
        const { vectors } = await client.embed(batch);
        for (const v of vectors) out.push(fitVector(v, dimensions, opts.truncate === true, where));
      }
      return out;
    },
  };
}

/**
 * The embedder `config.memory.embedder` names: the hashing embedder (`hash-v1-256`) for
 * `hashing`, else {@link createApiEmbedder} with its settings.
 * @throws LoopsmithError `config_invalid` when `api` lacks its base URL, model or dimensions
 *   (the configuration schema refuses that already)
 */
export function configuredEmbedder(config: Pick<Config, "memory">): Embedder {
  const e = config.memory.embedder;
  if (e.kind === "hashing") return createHashingEmbedder();
  if (e.baseUrl === undefined || e.model === undefined || e.dimensions === undefined) {
    throw new LoopsmithError(
      "config_invalid",
      "the api embedder needs memory.embedder.baseUrl, memory.embedder.model and memory.embedder.dimensions",
    );
  }
  return createApiEmbedder({
    baseUrl: e.baseUrl,
    model: e.model,
    apiKey: e.apiKey,
    dimensions: e.dimensions,
    truncate: e.truncate,
    timeoutMs: e.timeoutMs,
    maxRetries: e.maxRetries,
    batchSize: e.batchSize,
  });
}
