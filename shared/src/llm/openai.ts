/**
 * The OpenAI Chat Completions backend (`openai` SDK, any base URL: Ollama, vLLM,
 * llama.cpp server, LM Studio, OpenRouter, OpenAI). Structured output never uses tool
 * calling, so a server without it works.
 *
 * Structured output, a ladder the backend walks down once per process:
 * `response_format: {type: "json_schema", json_schema: {name, schema, strict: false}}`;
 * when the server rejects that request (400 or 422), JSON mode
 * (`response_format: {type: "json_object"}`) with the schema quoted in the system prompt;
 * when that is rejected too, plain mode (no `response_format`, the schema in the prompt).
 * Every rung's reply text goes through the tolerant reader and the one re-ask, so a server
 * that ignores the format and answers with fenced or prose-wrapped JSON still works.
 *
 * Agent mode ({@link Backend.converse}), by `toolCalls`:
 * - `native`: function calling. The tools go in `tools: [{type: "function", function: {name,
 *   description, parameters}}]`; an assistant's calls are its `tool_calls` (arguments as JSON
 *   text), each result a `role: "tool"` message with its `tool_call_id` (a failed tool's
 *   content starts with `ERROR: `, the API having no error flag). Arguments the model sent
 *   are read tolerantly (`readToolArgs`): text that is no JSON object becomes
 *   `{_unparsed: text}`, never an exception. A server that rejects `tools` (400 or 422) is
 *   asked again in JSON mode, for the rest of the process.
 * - `json`: for servers or models without tool calling. The tools are described in the
 *   system prompt (`jsonModeInstruction`) and the model answers
 *   `{"thought": "...", "tool": "<name>", "args": {...}}`, read by the tolerant reader; an
 *   assistant's calls go back as that JSON, tool results as user messages. JSON mode asks
 *   for `response_format: {type: "json_object"}` until the server rejects it, then none. A
 *   reply that holds no such object is the model's text with no tool call.
 *
 * Start-up cost: this module loads no SDK (the `openai` package and the SDK-error mapping
 * are loaded when an error is first examined; the client comes in from `create.ts`, which
 * loads the SDK on the first call).
 */
import type OpenAI from "openai";
import type { Logger } from "pino";
import type { ModelPrice } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
import type { AgentMessage, ToolCall } from "../contracts/agent.js";
import { JsonModeTurn, jsonModeInstruction, readToolArgs } from "./agent-tools.js";
import type { Backend, Conversation, ToolTurn, TurnReply } from "./engine.js";
import { readStructured } from "./parse.js";
import { outputSchema } from "./schema.js";
import type { ErrorContext } from "./sdk-errors.js";
import type { ChatMessage, CompletionRequest, ConverseRequest } from "./types.js";

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
  /** Agent mode's tool calling (`llm.toolCalls`). @defaultValue "native" */
  toolCalls?: ToolCallMode | undefined;
}

/** How agent mode calls tools: the API's function calling, or JSON replies described in the prompt. */
export type ToolCallMode = "native" | "json";

type WireMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

/** The prefix of a failed tool's result in native mode (the API has no error flag). */
export const TOOL_ERROR_PREFIX = "ERROR: ";

/** An agent conversation as function-calling messages (after the system message). */
export function nativeMessages(messages: readonly AgentMessage[]): WireMessage[] {
  return messages.map((m): WireMessage => {
    if (m.role === "user") return { role: "user", content: m.content };
    if (m.role === "tool") {
      return { role: "tool", tool_call_id: m.toolCallId, content: (m.isError ? TOOL_ERROR_PREFIX : "") + m.content };
    }
    if (m.toolCalls.length === 0) return { role: "assistant", content: m.content };
    return {
      role: "assistant",
      content: m.content || null,
      tool_calls: m.toolCalls.map((c) => ({
        id: c.id,
        type: "function" as const,
        function: { name: c.name, arguments: JSON.stringify(c.args) },
      })),
    };
  });
}

/** An agent conversation in JSON mode: calls as the JSON the model answers with, results as user messages. */
export function jsonModeMessages(messages: readonly AgentMessage[]): WireMessage[] {
  return messages.map((m): WireMessage => {
    if (m.role === "user") return { role: "user", content: m.content };
    if (m.role === "tool") {
      return {
        role: "user",
        content: `Result of ${m.name} (${m.toolCallId})${m.isError ? ", an error" : ""}:\n${m.content}`,
      };
    }
    const calls = m.toolCalls.map((c, i) =>
      JSON.stringify({ thought: i === 0 ? m.content : "", tool: c.name, args: c.args }),
    );
    return { role: "assistant", content: calls.length ? calls.join("\n") : m.content };
  });
}

function tokensOf(resp: ChatCompletion): ToolTurn["tokens"] {
  const u = resp?.usage;
  const cached = u?.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    inputTokens: Math.max(0, (u?.prompt_tokens ?? 0) - cached),
    outputTokens: u?.completion_tokens ?? 0,
    cacheReadTokens: cached,
    cacheWriteTokens: 0,
  };
}

function choiceOf(resp: ChatCompletion, errors: ErrorContext): ChatCompletion["choices"][number] | undefined {
  const choice = Array.isArray(resp?.choices) ? resp.choices[0] : undefined;
  const refusal = choice?.message?.refusal;
  if (typeof refusal === "string" && refusal) {
    throw new LoopsmithError("llm_refused", `${errors.provider} declined to answer: ${refusal}`);
  }
  return choice;
}

/** A function-calling reply: its text, and its `tool_calls` with arguments read tolerantly. */
function readNative(resp: ChatCompletion, errors: ErrorContext, turn: number): ToolTurn {
  const choice = choiceOf(resp, errors);
  const message = choice?.message;
  const toolCalls: ToolCall[] = (Array.isArray(message?.tool_calls) ? message.tool_calls : []).flatMap((c, i) =>
    c.type === "function"
      ? [{ id: c.id || `call_${turn}_${i}`, name: c.function.name, args: readToolArgs(c.function.arguments) }]
      : [],
  );
  return {
    content: typeof message?.content === "string" ? message.content : "",
    toolCalls,
    tokens: tokensOf(resp),
    truncated: choice?.finish_reason === "length",
  };
}

/** A JSON-mode reply: the `{thought, tool, args}` object it holds as one call, else its text alone. */
function readJsonMode(resp: ChatCompletion, errors: ErrorContext, turn: number): ToolTurn {
  const choice = choiceOf(resp, errors);
  const text = typeof choice?.message?.content === "string" ? choice.message.content : "";
  const read = readStructured(text, JsonModeTurn);
  const base = { tokens: tokensOf(resp), truncated: choice?.finish_reason === "length" };
  if (!read.ok) return { ...base, content: text, toolCalls: [] };
  return {
    ...base,
    content: read.value.thought,
    toolCalls: [{ id: `call_${turn}_0`, name: read.value.tool, args: readToolArgs(read.value.args) }],
  };
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

/**
 * Agent mode's calls of one backend: the tool-call mode starts at `opts.toolCalls` and moves
 * to `json` for good when the server rejects `tools`; JSON mode's `response_format` moves to
 * none when the server rejects it.
 */
function agentCaller(opts: OpenAIBackendOptions): { converse(request: ConverseRequest): Promise<ToolTurn> } {
  let toolMode: ToolCallMode = opts.toolCalls ?? "native";
  let jsonFormat: "json_object" | "plain" = "json_object";
  const converseParams = (request: ConverseRequest): ChatParams => {
    const common = {
      model: opts.model,
      max_tokens: opts.maxOutputTokens,
      ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
    };
    const note: WireMessage[] = request.note ? [{ role: "user", content: request.note }] : [];
    if (toolMode === "native") {
      return {
        ...common,
        messages: [{ role: "system", content: request.system }, ...nativeMessages(request.messages), ...note],
        tools: request.tools.map((t) => ({
          type: "function" as const,
          function: { name: t.name, description: t.description, parameters: t.parameters },
        })),
      };
    }
    return {
      ...common,
      messages: [
        { role: "system", content: request.system + jsonModeInstruction(request.tools) },
        ...jsonModeMessages(request.messages),
        ...note,
      ],
      ...(jsonFormat === "json_object" ? { response_format: { type: "json_object" as const } } : {}),
    };
  };
  return {
    async converse(request: ConverseRequest): Promise<ToolTurn> {
      // The turn number makes JSON-mode call ids unique within a conversation.
      const turn = request.messages.filter((m) => m.role === "assistant").length;
      for (;;) {
        try {
          const resp = await opts.client.chat.completions.create(converseParams(request));
          return toolMode === "native" ? readNative(resp, opts.errors, turn) : readJsonMode(resp, opts.errors, turn);
        } catch (err) {
          const [{ default: OpenAI }, { mapOpenAIError }] = await Promise.all([
            import("openai"),
            import("./sdk-errors.js"),
          ]);
          const rejected = err instanceof OpenAI.BadRequestError || err instanceof OpenAI.UnprocessableEntityError;
          if (rejected && toolMode === "native") {
            opts.log.info({ status: err.status }, "the server rejected tool calling; agent mode uses JSON replies");
            toolMode = "json";
          } else if (rejected && jsonFormat === "json_object") {
            opts.log.info({ status: err.status }, "the server rejected response_format json_object in agent mode");
            jsonFormat = "plain";
          } else throw mapOpenAIError(err, opts.errors);
        }
      }
    },
  };
}

/** Builds the backend; the client comes in configured (base URL, key, retries, timeout). */
export function createOpenAIBackend(opts: OpenAIBackendOptions): Backend & { readonly mode: OpenAIOutputMode } {
  let mode: OpenAIOutputMode = "json_schema";
  const agent = agentCaller(opts);
  return {
    get mode() {
      return mode;
    },
    info: { name: "openai-compatible", model: opts.model, scripted: false },
    price: opts.price,
    ...(opts.verify ? { verify: opts.verify } : {}),
    converse: agent.converse,
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
