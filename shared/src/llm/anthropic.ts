/**
 * The Anthropic Messages API backend, used by the `anthropic` provider
 * (`@anthropic-ai/sdk`) and the `bedrock` provider (`@anthropic-ai/bedrock-sdk`, whose
 * client is the same `BaseAnthropic` with Bedrock's URL rewriting and SigV4 signing).
 *
 * Structured output is a forced tool call: one tool named `request.schemaName` whose
 * `input_schema` is generated from the zod schema, and `tool_choice: {type: "tool", name}`.
 * Prompt caching: `cache_control: {type: "ephemeral"}` on the system block (tools and
 * system form the cached prefix) and on the last message marked `cache: true`.
 *
 * Agent mode ({@link Backend.converse}): native tool use. The tools go in `tools` with
 * `tool_choice: {type: "auto"}`; an assistant message's tool calls are `tool_use` blocks after
 * its text, and the tool results that answer them are `tool_result` blocks (`is_error` when
 * the tool failed) in ONE user message, consecutive user messages being merged (the API
 * wants the roles to alternate). Cache breakpoints: the system block (tools and system), the
 * opening message and the last message, so each turn reads the conversation before it from
 * the cache; the request's `note` (steps left) follows the last breakpoint.
 *
 * Start-up cost: this module loads no SDK. The client comes in from `create.ts` (which
 * loads the SDK on the first call) and the SDK-error mapping is loaded when an error is
 * first mapped, so a service that never calls a model never loads `@anthropic-ai/sdk`.
 */
import type Anthropic from "@anthropic-ai/sdk";
import type { ModelPrice } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
import type { AgentMessage, ToolCall } from "../contracts/agent.js";
import { readToolArgs } from "./agent-tools.js";
import type { Backend, Conversation, ToolTurn, TurnReply } from "./engine.js";
import { outputSchema, unwrapValue } from "./schema.js";
import type { ErrorContext } from "./sdk-errors.js";
import type { ChatMessage, CompletionRequest, ConverseRequest } from "./types.js";

/** The part of an Anthropic (or Bedrock) client this backend uses. */
export interface AnthropicMessagesClient {
  messages: {
    create(params: Anthropic.MessageCreateParamsNonStreaming): PromiseLike<Anthropic.Message>;
  };
}

/** Options of {@link createAnthropicBackend}. */
export interface AnthropicBackendOptions {
  client: AnthropicMessagesClient;
  /** Provider name in `info` ("anthropic" or "bedrock"). */
  name: string;
  model: string;
  price: ModelPrice;
  /** `max_tokens` of every call (`config.llm.maxOutputTokens`). */
  maxOutputTokens: number;
  /** Names used in error messages. */
  errors: ErrorContext;
  /** The provider's pre-flight check, when its API has one. */
  verify?: () => Promise<void>;
  /** Sampling temperature; the API's default when absent. */
  temperature?: number | undefined;
}

const EPHEMERAL = { type: "ephemeral" } as const;

function toParams(messages: ChatMessage[]): Anthropic.MessageParam[] {
  let lastCached = -1;
  messages.forEach((m, i) => {
    if (m.cache) lastCached = i;
  });
  return messages.map((m, i) => ({
    role: m.role,
    content: [{ type: "text", text: m.content, ...(i === lastCached ? { cache_control: EPHEMERAL } : {}) }],
  }));
}

function readMessage(msg: Anthropic.Message, toolName: string, wrapped: boolean, errors: ErrorContext): TurnReply {
  if (msg.stop_reason === "refusal") {
    throw new LoopsmithError("llm_refused", `${errors.provider} declined to answer (stop_reason "refusal")`);
  }
  const content = Array.isArray(msg.content) ? msg.content : [];
  const tool = content.find((b): b is Anthropic.ToolUseBlock => b.type === "tool_use" && b.name === toolName);
  const text = content
    .filter((b): b is Anthropic.TextBlock => b.type === "text")
    .map((b) => b.text)
    .join("\n");
  const u = msg.usage;
  return {
    content: tool ? { kind: "json", value: unwrapValue(tool.input, wrapped) } : { kind: "text", text },
    tokens: {
      inputTokens: u?.input_tokens ?? 0,
      outputTokens: u?.output_tokens ?? 0,
      cacheReadTokens: u?.cache_read_input_tokens ?? 0,
      cacheWriteTokens: u?.cache_creation_input_tokens ?? 0,
    },
    truncated: msg.stop_reason === "max_tokens",
  };
}

type Block = Anthropic.ContentBlockParam;

/** Marks the last block of a message as a cache breakpoint. */
function markCached(message: Anthropic.MessageParam | undefined): void {
  const blocks = message?.content;
  if (!Array.isArray(blocks) || blocks.length === 0) return;
  const last = blocks[blocks.length - 1] as Block & { cache_control?: unknown };
  last.cache_control = EPHEMERAL;
}

/**
 * An agent conversation on the wire: text and `tool_use` blocks for an assistant message,
 * `tool_result` blocks for tool messages, consecutive same-role messages merged into one;
 * cache breakpoints on the opening and the last message; `note` after them, as a text block
 * of the last user message (or a user message of its own).
 */
export function agentParams(messages: readonly AgentMessage[], note?: string): Anthropic.MessageParam[] {
  const wire: Anthropic.MessageParam[] = [];
  const push = (role: "user" | "assistant", blocks: Block[]): void => {
    const last = wire[wire.length - 1];
    if (last && last.role === role && Array.isArray(last.content)) last.content.push(...blocks);
    else wire.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === "user") push("user", [{ type: "text", text: m.content || "(empty)" }]);
    else if (m.role === "tool") {
      push("user", [
        {
          type: "tool_result",
          tool_use_id: m.toolCallId,
          content: m.content || "(no output)",
          ...(m.isError ? { is_error: true } : {}),
        },
      ]);
    } else {
      const blocks: Block[] = [];
      if (m.content.trim()) blocks.push({ type: "text", text: m.content });
      for (const c of m.toolCalls) blocks.push({ type: "tool_use", id: c.id, name: c.name, input: c.args });
      push("assistant", blocks.length ? blocks : [{ type: "text", text: "(no reply)" }]);
    }
  }
  markCached(wire[0]);
  markCached(wire[wire.length - 1]);
  if (note) push("user", [{ type: "text", text: note }]);
  return wire;
}

/** An agent-mode reply: its text blocks joined, its `tool_use` blocks as tool calls. */
function readToolTurn(msg: Anthropic.Message, errors: ErrorContext): ToolTurn {
  if (msg.stop_reason === "refusal") {
    throw new LoopsmithError("llm_refused", `${errors.provider} declined to answer (stop_reason "refusal")`);
  }
  const content = Array.isArray(msg.content) ? msg.content : [];
  const toolCalls: ToolCall[] = content
    .filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use")
    .map((b) => ({ id: b.id, name: b.name, args: readToolArgs(b.input) }));
  const text = content
    .filter((b): b is Anthropic.TextBlock => b.type === "text")
    .map((b) => b.text)
    .join("\n");
  const u = msg.usage;
  return {
    content: text,
    toolCalls,
    tokens: {
      inputTokens: u?.input_tokens ?? 0,
      outputTokens: u?.output_tokens ?? 0,
      cacheReadTokens: u?.cache_read_input_tokens ?? 0,
      cacheWriteTokens: u?.cache_creation_input_tokens ?? 0,
    },
    truncated: msg.stop_reason === "max_tokens",
  };
}

/** One agent-mode call of the backend (see the module comment). */
async function converseOnce(opts: AnthropicBackendOptions, request: ConverseRequest): Promise<ToolTurn> {
  let msg: Anthropic.Message;
  try {
    msg = await opts.client.messages.create({
      model: opts.model,
      max_tokens: opts.maxOutputTokens,
      ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
      system: [{ type: "text", text: request.system, cache_control: EPHEMERAL }],
      messages: agentParams(request.messages, request.note),
      tools: request.tools.map((t) => ({
        name: t.name,
        description: t.description,
        input_schema: t.parameters as Anthropic.Tool.InputSchema,
      })),
      tool_choice: { type: "auto" },
    });
  } catch (err) {
    const { mapAnthropicError } = await import("./sdk-errors.js");
    throw mapAnthropicError(err, opts.errors);
  }
  return readToolTurn(msg, opts.errors);
}

/** Builds the backend; the client comes in configured (retries, timeout, base URL). */
export function createAnthropicBackend(opts: AnthropicBackendOptions): Backend {
  return {
    info: { name: opts.name, model: opts.model, scripted: false },
    price: opts.price,
    ...(opts.verify ? { verify: opts.verify } : {}),
    converse: (request) => converseOnce(opts, request),
    open<T>(request: CompletionRequest<T>): Conversation {
      const { jsonSchema, wrapped } = outputSchema(request.schema);
      const tool: Anthropic.Tool = {
        name: request.schemaName,
        description: `Give your answer (${request.schemaName}) as this tool's input.`,
        input_schema: jsonSchema as Anthropic.Tool.InputSchema,
      };
      const neutral: ChatMessage[] = [...request.messages];
      const wire: Anthropic.MessageParam[] = toParams(request.messages);
      let last: Anthropic.Message | undefined;
      return {
        system: request.system,
        extraChars: JSON.stringify(tool).length,
        messages: () => [...neutral],
        async send(): Promise<TurnReply> {
          try {
            last = await opts.client.messages.create({
              model: opts.model,
              max_tokens: opts.maxOutputTokens,
              ...(opts.temperature !== undefined ? { temperature: opts.temperature } : {}),
              system: [{ type: "text", text: request.system, cache_control: EPHEMERAL }],
              messages: wire,
              tools: [tool],
              tool_choice: { type: "tool", name: request.schemaName },
            });
          } catch (err) {
            const { mapAnthropicError } = await import("./sdk-errors.js");
            throw mapAnthropicError(err, opts.errors);
          }
          return readMessage(last, request.schemaName, wrapped, opts.errors);
        },
        reask(reply: TurnReply, feedback: string): void {
          const content = Array.isArray(last?.content) ? last.content : [];
          const toolUse = content.find((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
          if (toolUse) {
            // After a tool_use the next user turn must carry its tool_result.
            wire.push({
              role: "assistant",
              content: [{ type: "tool_use", id: toolUse.id, name: toolUse.name, input: toolUse.input }],
            });
            wire.push({
              role: "user",
              content: [{ type: "tool_result", tool_use_id: toolUse.id, is_error: true, content: feedback }],
            });
          } else {
            const text = reply.content.kind === "text" ? reply.content.text.trim() : "";
            if (text) wire.push({ role: "assistant", content: [{ type: "text", text }] });
            wire.push({ role: "user", content: [{ type: "text", text: feedback }] });
          }
          const said = reply.content.kind === "json" ? (JSON.stringify(reply.content.value) ?? "") : reply.content.text;
          if (said.trim()) neutral.push({ role: "assistant", content: said });
          neutral.push({ role: "user", content: feedback });
        },
      };
    },
  };
}
