/**
 * The one LLM interface every service uses:
 * `complete({role, system, messages, schema}) -> {value, usage}`, where `value` has
 * already been validated against the zod `schema`.
 */
import type { z } from "zod";
import type { Budget, Usage } from "../contracts/common.js";
import type { ProviderInfo } from "../contracts/steps.js";
import type { TaskScript } from "../contracts/script.js";
import type { AgentMessage, ToolCall } from "../contracts/agent.js";
import { ROLES } from "../contracts/values.js";

/**
 * The LLM roles of the loop (defined with the contracts' plain values); each has one versioned
 * prompt file. `agent` is agent mode's model: it is called through {@link LlmProvider.converse},
 * not `complete`.
 */
export { ROLES };
export type Role = (typeof ROLES)[number];

/** One chat message. `cache: true` marks the end of a stable prefix worth caching. */
export interface ChatMessage {
  role: "user" | "assistant";
  content: string;
  cache?: boolean;
}

/** One structured completion request. */
export interface CompletionRequest<T> {
  role: Role;
  /** System prompt; stable per role and cached where the provider supports it. */
  system: string;
  messages: ChatMessage[];
  /** The reply must validate against this schema. */
  schema: z.ZodType<T>;
  /** Name of the structured output (tool name / JSON schema name), `[a-z_]+`. */
  schemaName: string;
  /** Which task and iteration this call serves (for the scripted provider, logs, transcripts). */
  /**
   * Which task asks. `callsBefore`: the calls this task already made for the role (re-asks
   * included), from the task's own state; the scripted provider replays by it, so a step
   * retried on another replica or after a restart gets the same reply.
   */
  /**
   * `script`: the task's own replies (`Task.script`); when set, the call is answered from
   * them and no model is called.
   */
  context: { taskId: string; iteration: number; callsBefore?: number; script?: TaskScript };
  /** What is left of the task's budget; a call that would pass it is not made. */
  budget?: Budget;
}

/** The model a role's call failed over from: who failed, and how. */
export interface FallbackNote {
  /** Provider name of the model that failed (or was skipped while cooling down). */
  name: string;
  model: string;
  /** Its error code: `llm_overloaded`, `llm_rate_limited`, `timeout` or `unavailable`. */
  code: string;
  /** Its error's sentence (or why it was skipped). */
  message: string;
}

/** Who answered one `complete()`: {@link ProviderInfo}, plus the switch when a fallback answered. */
export interface AnsweredBy extends ProviderInfo {
  /** Set when a fallback answered: the model tried before it (the role's primary). */
  fallbackFrom?: FallbackNote;
}

/** A validated completion and what it cost (summed over the re-ask, if there was one). */
export interface Completion<T> {
  value: T;
  /**
   * Usage of every call this `complete()` made, each priced at the model that made it (a
   * primary's calls before it failed over are included).
   */
  usage: Usage;
  /**
   * The model that produced `value`: the role's primary, or a fallback (then with
   * `fallbackFrom`). Set by every built-in provider; put it in the step reply rather than
   * `LlmProvider.info`, which names only the default model.
   */
  provider?: AnsweredBy;
}

/** The task a call serves; see {@link CompletionRequest.context}. */
export type CallContext = CompletionRequest<unknown>["context"];

/** One tool as the model is offered it. */
export interface ToolSpec {
  /** The tool's name, `[a-z_]+` (`ToolName`). */
  name: string;
  /** What it does and when to use it, one or two sentences. */
  description: string;
  /** JSON Schema (draft 2020-12, without `$schema`) of its arguments; the root is an object. */
  parameters: Record<string, unknown>;
}

/**
 * One agent-mode model turn: the conversation so far in, the model's next
 * message out. The provider keeps the stable prefix cacheable: the system prompt, the tools
 * and the first message (the opening) come first and never change within a loop.
 */
export interface ConverseRequest {
  role: Role;
  system: string;
  /** The conversation, oldest first; the first is the user's opening message. */
  messages: AgentMessage[];
  tools: ToolSpec[];
  /**
   * A short text sent after the conversation, outside the cached prefix, that changes every
   * turn (the steps left). The providers add it as a user message (Anthropic: a text block
   * after the last cache breakpoint); the next turn's request no longer carries it.
   */
  note?: string;
  context: CallContext;
  /** What is left of the task's budget; a call that would pass it is not made. */
  budget?: Budget;
}

/** The model's next message, and what the call cost. */
export interface ConverseReply {
  /** Its text (reasoning, or an answer without a tool call); may be empty. */
  content: string;
  /**
   * Its tool calls, in order. Arguments are as the model gave them, not validated; when the
   * model's argument text was not a JSON object, `args` is `{[UNPARSED_ARGS]: "<the text>"}`
   * (see `UNPARSED_ARGS` in `agent-tools.ts`).
   */
  toolCalls: ToolCall[];
  usage: Usage;
  /** The model that answered (a fallback, with `fallbackFrom`). */
  provider?: AnsweredBy;
  /** True when the reply stopped at the output limit. */
  truncated?: boolean;
}

/**
 * A provider turns a request into a validated value. Implementations throw
 * `LoopsmithError` with codes `llm_auth`, `llm_rate_limited`, `llm_overloaded`, `timeout`,
 * `llm_bad_reply` (after the one re-ask), `budget_exceeded` (before the call) or `unavailable`.
 */
export interface LlmProvider {
  /**
   * The default model (`llm.provider`/`llm.model`); with per-role models or fallbacks, the
   * model of one call is {@link Completion.provider}. `scripted` is true when any role replays a script.
   */
  readonly info: ProviderInfo;
  complete<T>(request: CompletionRequest<T>): Promise<Completion<T>>;
  /**
   * One agent-mode turn with the model's tool calling ({@link ConverseRequest}): Anthropic
   * tool use, OpenAI function calling, or JSON mode for servers without it
   * (`llm.toolCalls`). The budget is checked before the call as for `complete`; there is no
   * re-ask (the agent loop answers a bad tool call with an error observation). Every
   * built-in provider has it; it is optional so that test doubles need not.
   * @throws LoopsmithError the codes of `complete` (without `llm_bad_reply`), and
   *   `bad_request` from a provider without agent mode (the simulated provider)
   */
  converse?(request: ConverseRequest): Promise<ConverseReply>;
  /**
   * Optional pre-flight check that costs no tokens (an authenticated `GET /v1/models`), so a
   * bad key or an unreachable server fails before a task starts. Absent where the API has
   * no such request (Bedrock's runtime API).
   * @throws LoopsmithError `llm_auth`, `unavailable` or `timeout`; other answers (a server
   *   without a models endpoint) pass
   */
  verify?(): Promise<void>;
}
