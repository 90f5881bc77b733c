/**
 * Usage and cost of LLM calls.
 *
 * Prices are USD per million tokens ({@link ModelPrice}; where they come from: `prices.ts`,
 * `config.llm.prices` over `@pydantic/genai-prices`). A call's token counts and cost come
 * from the provider's usage fields in its reply. The budget check (`budget.ts`) runs BEFORE
 * every HTTP call, when no reply exists yet, with the worst-case ESTIMATE made here (marked
 * `estimated: true`), so a task never passes its budget by more than the estimate's error.
 */
import type { Usage } from "../contracts/common.js";
import type { ModelPrice } from "../runtime/config.js";
import type { ChatMessage } from "./types.js";
import { flatCost, type Pricing } from "./prices.js";

/** Tokens of one or more calls, the part of {@link Usage} that has a price. */
export type TokenCounts = Pick<Usage, "inputTokens" | "outputTokens" | "cacheReadTokens" | "cacheWriteTokens">;

/**
 * Characters per token of a pre-call ESTIMATE (the providers' rule of thumb for English and
 * code; Anthropic publishes no tokenizer for its current models). Never a count: counts come
 * from the API's usage fields, and every figure made with this ratio is labelled estimated.
 */
export const CHARS_PER_TOKEN = 4;

/**
 * Cost in USD of `usage` at `price`:
 * `(input·inputPerMTok + output·outputPerMTok + cacheRead·cacheReadPerMTok + cacheWrite·cacheWritePerMTok) / 1e6`.
 * Token counts follow Anthropic's convention: `inputTokens` excludes cached tokens
 * (the OpenAI provider converts to it).
 */
export function costOf(price: ModelPrice, usage: TokenCounts): number {
  return flatCost(price, usage);
}

/** The prompt of one call, as far as the estimate needs it. */
export interface EstimateInput {
  system: string;
  messages: ReadonlyArray<Pick<ChatMessage, "content">>;
  /** Extra text sent with the prompt: the tool's JSON schema, re-ask feedback. */
  extraChars?: number;
  /** The call's output limit (`config.llm.maxOutputTokens`), in tokens. */
  maxOutputTokens: number;
}

/** A worst-case estimate of one call, made before it (no usage exists yet). */
export interface CostEstimate {
  /** Always `true`: these figures are estimated, not counted by the provider. */
  estimated: true;
  /** Estimated: `ceil(prompt characters / 4)` ({@link CHARS_PER_TOKEN}). */
  inputTokens: number;
  /** The output limit: a reply can never bill more. */
  outputTokens: number;
  /** `inputTokens + outputTokens`. */
  tokens: number;
  /** USD, every input token priced as uncached input (with the price's tiers when priced by `Pricing`). */
  usd: number;
}

/**
 * The pre-call estimate used by the budget check (`estimated: true`). Rule: input tokens are
 * `ceil(characters of system + messages + extra / 4)` ({@link CHARS_PER_TOKEN}); output
 * tokens are the full `maxOutputTokens` (the most the provider can bill); the cost prices
 * all input as uncached; with `pricing`, its own cost function (tiers) prices them, else
 * `price`'s flat rates. It over-estimates on purpose: a call it admits cannot overrun
 * the budget by more than the input-token error of the 4-characters rule.
 */
export function estimateCost(price: ModelPrice, input: EstimateInput, pricing?: Pricing): CostEstimate {
  let chars = input.system.length + (input.extraChars ?? 0);
  for (const m of input.messages) chars += m.content.length;
  const inputTokens = Math.ceil(chars / CHARS_PER_TOKEN);
  const outputTokens = input.maxOutputTokens;
  const tokens = { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0 };
  const usd = pricing ? pricing.costOf(tokens) : costOf(price, tokens);
  return { estimated: true, inputTokens, outputTokens, tokens: inputTokens + outputTokens, usd };
}

/**
 * USD spent by one process over all its tasks, for the per-process ceiling
 * (`config.llm.processCeilingUsd`). One meter per process: pass the same meter to every
 * provider the process builds (`createProvider({..., meter})`).
 */
export class SpendMeter {
  #spentUsd = 0;
  /** USD spent so far. */
  get spentUsd(): number {
    return this.#spentUsd;
  }
  /** Adds a call's cost, in USD. */
  add(usd: number): void {
    this.#spentUsd += usd;
  }
}
