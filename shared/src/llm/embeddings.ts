/**
 * A client of an OpenAI-compatible embeddings API: `POST <baseUrl>/embeddings` with
 * `{model, input: string[], encoding_format: "float"}`, answered by
 * `{data: [{embedding, index}], model, usage}`. OpenAI speaks it, and so do local servers
 * (llama.cpp's server, vLLM, Ollama's OpenAI endpoint, LM Studio).
 *
 * The `openai` SDK makes the call (loaded on the first call, as the chat backends load it),
 * with its own retries off: this client retries with p-retry, only what a retry can help
 * (a timeout, a lost connection, 408, 429, 5xx), and maps every failure to one
 * {@link LoopsmithError} that names the server (`sdk-errors.ts`, as the chat backends do).
 * `encoding_format: "float"` is always sent: without it the SDK asks for base64, which not
 * every local server speaks.
 */
import type OpenAI from "openai";
import pRetry from "p-retry";
import { z } from "zod";
import { LoopsmithError } from "../runtime/errors.js";
import type { ErrorContext } from "./sdk-errors.js";

/** Options of {@link createEmbeddingsClient}. */
export interface EmbeddingsClientOptions {
  /** The server's base URL, the part before `/embeddings` (`https://api.openai.com/v1`, `http://127.0.0.1:8080/v1`). */
  baseUrl: string;
  /** The model, as the server names it. */
  model: string;
  /** Sent as `Authorization: Bearer <key>`; absent: a placeholder (local servers need none). */
  apiKey?: string | undefined;
  /** Timeout of one HTTP call, in ms. */
  timeoutMs: number;
  /** Retries after a failed call that a retry can help, 0 to 10. */
  maxRetries: number;
  /** Wait before the first retry, in ms, doubling for each next one. @defaultValue 250 */
  retryMinMs?: number;
  /** Settings named in error messages. @defaultValue the `memory.embedder.*` keys */
  settings?: { model?: string; timeout?: string; apiKey?: string };
}

/** One call's answer. */
export interface EmbeddingsReply {
  /** One vector per input text, in input order (`data` sorted by `index`). */
  vectors: number[][];
  /** The model the server says answered (its `model` field; the requested one when absent). */
  model: string;
  /** Prompt tokens the server counted (`usage.prompt_tokens`; 0 when absent). */
  promptTokens: number;
}

/** An embeddings API client. */
export interface EmbeddingsClient {
  /** Where it sends requests (the base URL as configured). */
  readonly baseUrl: string;
  readonly model: string;
  /**
   * Embeds `texts` in one HTTP call (retried as described above).
   * @returns one vector per text, in order
   * @throws LoopsmithError naming the server: `unavailable` (connection failed, 5xx),
   *   `timeout`, `llm_auth` (401/403), `llm_rate_limited` (429), `config_invalid` (404: an
   *   unknown model or URL), `bad_request` (another 4xx), `internal` (an answer that is not
   *   one finite vector per text)
   */
  embed(texts: readonly string[]): Promise<EmbeddingsReply>;
}

/** The part of the answer this client reads; extra fields are ignored. */
const Answer = z.object({
  data: z.array(z.object({ embedding: z.array(z.number()), index: z.number().int().min(0) })),
  model: z.string().optional(),
  usage: z.object({ prompt_tokens: z.number().optional() }).optional(),
});

/** Codes a retry can help (the SDK's own retry classes, mapped). */
const RETRIED = new Set(["timeout", "unavailable", "llm_rate_limited", "llm_overloaded"]);

/**
 * A client of the OpenAI-compatible embeddings API at `opts.baseUrl`. Building it loads
 * nothing and calls nothing; the SDK is loaded on the first {@link EmbeddingsClient.embed}.
 */
export function createEmbeddingsClient(opts: EmbeddingsClientOptions): EmbeddingsClient {
  const where = `the embeddings server at ${opts.baseUrl}`;
  const errors: ErrorContext = {
    provider: where,
    model: opts.model,
    credential: `the API key (${opts.settings?.apiKey ?? "memory.embedder.apiKey, LOOPSMITH_EMBEDDINGS_API_KEY"})`,
    maxRetries: opts.maxRetries,
    timeoutMs: opts.timeoutMs,
    modelSetting: opts.settings?.model ?? "memory.embedder.model",
    timeoutSetting: opts.settings?.timeout ?? "memory.embedder.timeoutMs",
  };
  let client: Promise<OpenAI> | undefined;
  const sdk = (): Promise<OpenAI> =>
    (client ??= import("openai").then(
      ({ default: OpenAISdk }) =>
        new OpenAISdk({
          apiKey: opts.apiKey ?? "no-key",
          baseURL: opts.baseUrl,
          timeout: opts.timeoutMs,
          maxRetries: 0,
        }),
    ));
  const once = async (texts: string[]): Promise<EmbeddingsReply> => {
    let raw: unknown;
    try {
      raw = await (await sdk()).embeddings.create({ model: opts.model, input: texts, encoding_format: "float" });
    } catch (err) {
      const { mapOpenAIError } = await import("./sdk-errors.js");
      throw mapOpenAIError(err, errors);
    }
    const parsed = Answer.safeParse(raw);
    if (!parsed.success) {
      throw new LoopsmithError(
        "internal",
        `${where} answered with no embeddings list for model ${opts.model}: ${z.prettifyError(parsed.error)}`,
      );
    }
    const data = [...parsed.data.data].sort((a, b) => a.index - b.index);
    if (data.length !== texts.length || data.some((d, i) => d.index !== i)) {
      throw new LoopsmithError(
        "internal",
        `${where} answered ${data.length} embeddings for ${texts.length} texts (model ${opts.model})`,
      );
    }
    const vectors = data.map((d) => d.embedding);
    if (vectors.some((v) => v.length === 0 || v.some((x) => !Number.isFinite(x)))) {
      throw new LoopsmithError("internal", `${where} answered an empty or non-finite embedding (model ${opts.model})`);
    }
    return {
      vectors,
      model: parsed.data.model ?? opts.model,
      promptTokens: parsed.data.usage?.prompt_tokens ?? 0,
    };
  };
  return {
    baseUrl: opts.baseUrl,
    model: opts.model,
    async embed(texts) {
      if (texts.length === 0) return { vectors: [], model: opts.model, promptTokens: 0 };
      const input = [...texts];
      return pRetry(() => once(input), {
        retries: opts.maxRetries,
        minTimeout: opts.retryMinMs ?? 250,
        factor: 2,
        shouldRetry: ({ error }) => error instanceof LoopsmithError && RETRIED.has(error.code),
      });
    },
  };
}
