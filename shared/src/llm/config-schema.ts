/**
 * The LLM parts of the configuration schema that stand alone: prices, provider names, and
 * what a role (`llm.roles.<role>`) or a fallback may set. `config.ts` assembles them into
 * `llm` and re-exports them; they are here to keep that file short.
 */
import { z } from "zod";
import { strictObject } from "../runtime/unknown-keys.js";
import { PROVIDERS } from "../contracts/values.js";

/**
 * Price of one model in USD per million tokens, as `llm.prices` (and a role's `prices`) set
 * it: an override of `@pydantic/genai-prices`' data (see `prices.ts`). 0 is a price (a free
 * local model).
 */
export const ModelPrice = strictObject({
  inputPerMTok: z.number().nonnegative(),
  outputPerMTok: z.number().nonnegative(),
  cacheReadPerMTok: z.number().nonnegative().default(0),
  cacheWritePerMTok: z.number().nonnegative().default(0),
});
export type ModelPrice = z.infer<typeof ModelPrice>;

export const ProviderName = z.enum(PROVIDERS);
export type ProviderName = z.infer<typeof ProviderName>;

/**
 * How agent mode calls tools on an openai-compatible server: `native` function calling (a
 * server that rejects `tools` is then asked in JSON mode), or `json`, the tools described in
 * the prompt and the model answering `{"thought", "tool", "args"}` as JSON, for models
 * without tool calling. Anthropic and Bedrock always use native tool use.
 */
export const ToolCallMode = z.enum(["native", "json"]);
export type ToolCallMode = z.infer<typeof ToolCallMode>;

/**
 * Where one model is called, as a role or a fallback overrides it; each absent field comes
 * from the role, then from `llm` (`apiKey` and `baseUrl` only from a level whose provider is
 * the same, so a key meant for one provider is never sent to another).
 */
const TargetFields = {
  apiKey: z.string().optional(),
  /** The server URL (openai-compatible: including `/v1`). */
  baseUrl: z.string().optional(),
  /** Bedrock region. */
  awsRegion: z.string().optional(),
  /** Output token limit of one call (`max_tokens`). @defaultValue `llm.maxOutputTokens` */
  maxTokens: z.number().int().min(16).optional(),
  /** Sampling temperature; the provider's own default when absent. */
  temperature: z.number().min(0).max(2).optional(),
  /** Agent mode's tool calling on an openai-compatible server ({@link ToolCallMode}). @defaultValue `llm.toolCalls` */
  toolCalls: ToolCallMode.optional(),
};

/** A fallback model: tried after the one before it failed with a retryable error. */
export const FallbackTarget = strictObject({ provider: ProviderName, model: z.string().min(1), ...TargetFields });
export type FallbackTarget = z.infer<typeof FallbackTarget>;

/** One role's model (`llm.roles.<role>`); every absent field falls back to `llm`. */
export const RoleLlm = strictObject({
  provider: ProviderName.optional(),
  /** Model id. Required when `provider` differs from `llm.provider`. */
  model: z.string().min(1).optional(),
  ...TargetFields,
  /** USD per million tokens, merged over `llm.prices` for this role's models. */
  prices: z.record(z.string(), ModelPrice).optional(),
  /** Tried in order after retryable failures (429, 529, 5xx, timeouts). @defaultValue `llm.fallback` */
  fallback: z.array(FallbackTarget).optional(),
});
export type RoleLlm = z.infer<typeof RoleLlm>;
