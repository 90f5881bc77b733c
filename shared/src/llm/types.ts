/**
 * The one LLM interface every service uses:
 * `complete({role, system, messages, schema}) -> {value, usage}`, where `value` has
 * already been validated against the zod `schema`.
 */
import type { z } from "zod";
import type { Budget, Usage } from "../contracts/common.js";
import type { ProviderInfo } from "../contracts/steps.js";

/** The LLM roles of the loop; each has one versioned prompt file. */
export const ROLES = ["spec", "plan", "build", "review", "reflect"] as const;
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
  context: { taskId: string; iteration: number };
  /** What is left of the task's budget; a call that would pass it is not made. */
  budget?: Budget;
}

/** A validated completion and what it cost (summed over the re-ask, if there was one). */
export interface Completion<T> {
  value: T;
  usage: Usage;
}

/**
 * A provider turns a request into a validated value. Implementations throw
 * `LoopsmithError` with codes `llm_auth`, `llm_rate_limited`, `llm_overloaded`, `timeout`,
 * `llm_bad_reply` (after the one re-ask), `budget_exceeded` (before the call) or `unavailable`.
 */
export interface LlmProvider {
  readonly info: ProviderInfo;
  complete<T>(request: CompletionRequest<T>): Promise<Completion<T>>;
  /**
   * Optional pre-flight check that costs no tokens (an authenticated `GET /v1/models`), so a
   * bad key or an unreachable server fails before a task starts. Absent where the API has
   * no such request (Bedrock's runtime API).
   * @throws LoopsmithError `llm_auth`, `unavailable` or `timeout`; other answers (a server
   *   without a models endpoint) pass
   */
  verify?(): Promise<void>;
}
