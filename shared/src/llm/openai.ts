/**
 * The OpenAI Chat Completions backend (`openai` SDK, any base URL: Ollama, vLLM,
 * llama.cpp server, LM Studio, OpenRouter, OpenAI). It never uses tool calling, so a
 * server without it works.
 *
 * Structured output, a ladder the backend walks down once per process:
 * `response_format: {type: "json_schema", json_schema: {name, schema, strict: false}}`;
 * when the server rejects that request (400 or 422), JSON mode
 * (`response_format: {type: "json_object"}`) with the schema quoted in the system prompt;
 * when that is rejected too, plain mode (no `response_format`, the schema in the prompt).
 * Every rung's reply text goes through the tolerant reader and the one re-ask, so a server
 * that ignores the format and answers with fenced or prose-wrapped JSON still works.
 *
 * Start-up cost: this module loads no SDK (the `openai` package and the SDK-error mapping
 * are loaded when an error is first examined; the client comes in from `create.ts`, which
 * loads the SDK on the first call).
 */
import type OpenAI from "openai";
import type { Logger } from "pino";
import type { ModelPrice } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
import type { Backend, Conversation, TurnReply } from "./engine.js";
import { outputSchema } from "./schema.js";
import type { ErrorContext } from "./sdk-errors.js";
import type { ChatMessage, CompletionRequest } from "./types.js";

type ChatParams = OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
type ChatCompletion = OpenAI.Chat.Completions.ChatCompletion;

/** The part of an OpenAI client this backend uses. */
export interface OpenAIChatClient {
  chat: { completions: { create(params: ChatParams): PromiseLike<ChatCompletion> } };
}

/** Options of {@link createOpenAIBackend}. */
export interface OpenAIBackendOptions {
  client: OpenAIChatClient;
  model: string;
  price: ModelPrice;
  /** `max_tokens` of every call (`config.llm.maxOutputTokens`). */
  maxOutputTokens: number;
  errors: ErrorContext;
  log: Logger;
  /** Sampling temperature; the server's default when absent. */
  temperature?: number | undefined;
  /** The provider's pre-flight check. */
  verify?: () => Promise<void>;
}

/** Structured-output mode: `json_schema` until the server rejects it, then `json_object`, then `plain`. */
export type OpenAIOutputMode = "json_schema" | "json_object" | "plain";

const NEXT_MODE: Record<OpenAIOutputMode, OpenAIOutputMode | undefined> = {
  json_schema: "json_object",
  json_object: "plain",
  plain: undefined,
};

function plainInstruction(schemaJson: string): string {
  return (
    "\n\nReply with only one JSON value, no prose and no code fences. " +
    `It must validate against this JSON Schema:\n${schemaJson}`
  );
}

function readCompletion(resp: ChatCompletion, errors: ErrorContext): TurnReply {
  const choice = Array.isArray(resp?.choices) ? resp.choices[0] : undefined;
  const message = choice?.message;
  if (typeof message?.refusal === "string" && message.refusal) {
    throw new LoopsmithError("llm_refused", `${errors.provider} declined to answer: ${message.refusal}`);
  }
  const u = resp?.usage;
  const cached = u?.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    content: { kind: "text", text: typeof message?.content === "string" ? message.content : "" },
    tokens: {
      // OpenAI counts cached tokens inside prompt_tokens; loopsmith counts them apart.
      inputTokens: Math.max(0, (u?.prompt_tokens ?? 0) - cached),
      outputTokens: u?.completion_tokens ?? 0,
      cacheReadTokens: cached,
      cacheWriteTokens: 0,
    },
    truncated: choice?.finish_reason === "length",
  };
}

/** Builds the backend; the client comes in configured (base URL, key, retries, timeout). */
export function createOpenAIBackend(opts: OpenAIBackendOptions): Backend & { readonly mode: OpenAIOutputMode } {
  let mode: OpenAIOutputMode = "json_schema";
  return {
    get mode() {
      return mode;
    },
    info: { name: "openai-compatible", model: opts.model, scripted: false },
    price: opts.price,
    ...(opts.verify ? { verify: opts.verify } : {}),
    open<T>(request: CompletionRequest<T>): Conversation {
      const { jsonSchema, wrapped } = outputSchema(request.schema);
      const schemaJson = JSON.stringify(jsonSchema);
      const neutral: ChatMessage[] = [...request.messages];
      const systemNow = (): string =>
        mode === "json_schema" ? request.system : request.system + plainInstruction(schemaJson);
      const format = (): Pick<ChatParams, "response_format"> =>
        mode === "json_schema"
          ? {
              response_format: {
                type: "json_schema",
                json_schema: { name: request.schemaName, schema: jsonSchema, strict: false },
              },
            }
          : mode === "json_object"
            ? { response_format: { type: "json_object" } }
            : {};
      const call = (): PromiseLike<ChatCompletion> =>
        opts.client.chat.completions.create({
          model: opts.model,
          max_tokens: opts.maxOutputTokens,
          ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
          messages: [
            { role: "system", content: systemNow() },
            ...neutral.map((m) => ({ role: m.role, content: m.content })),
          ],
          ...format(),
        });
      const read = (resp: ChatCompletion): TurnReply => {
        const reply = readCompletion(resp, opts.errors);
        // A wrapped schema asked for {value: …}; the reader accepts that or the bare value.
        return wrapped && reply.content.kind === "text" ? { ...reply, content: { ...reply.content, wrapped } } : reply;
      };
      return {
        get system() {
          return systemNow();
        },
        extraChars: schemaJson.length,
        messages: () => [...neutral],
        async send(): Promise<TurnReply> {
          for (;;) {
            try {
              return read(await call());
            } catch (err) {
              const [{ default: OpenAI }, { mapOpenAIError }] = await Promise.all([
                import("openai"),
                import("./sdk-errors.js"),
              ]);
              const rejected = err instanceof OpenAI.BadRequestError || err instanceof OpenAI.UnprocessableEntityError;
              const next = NEXT_MODE[mode];
              if (!rejected || !next) throw mapOpenAIError(err, opts.errors);
              opts.log.info(
                { status: err.status, from: mode, to: next },
                `the server rejected response_format ${mode}; using ${next}`,
              );
              mode = next;
            }
          }
        },
        reask(reply: TurnReply, feedback: string): void {
          const said = reply.content.kind === "text" ? reply.content.text : (JSON.stringify(reply.content.value) ?? "");
          if (said.trim()) neutral.push({ role: "assistant", content: said });
          neutral.push({ role: "user", content: feedback });
        },
      };
    },
  };
}
