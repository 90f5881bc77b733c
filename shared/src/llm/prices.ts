/**
 * Model prices: where a model's price comes from, and the rule that a USD
 * budget needs one.
 *
 * Source, first match wins:
 * 1. the configuration: a role's `llm.roles.<role>.prices` merged over `llm.prices`, by the
 *    exact model id, then by its base id ({@link basePriceKey}); a price of 0 set there is a
 *    price (a local model that is free on purpose);
 * 2. the price data bundled with `@pydantic/genai-prices` (Pydantic's maintained list of
 *    providers' public prices), looked up by the provider (`anthropic`, Bedrock as `aws`, an
 *    openai-compatible server by its base URL: OpenAI, OpenRouter, Groq, …). Only the data
 *    shipped in the installed package is read: nothing is fetched at run time.
 *
 * A model found in neither has no price. Under a USD budget (`--budget-usd`,
 * `limits.maxCostUsd`) or a process ceiling (`llm.processCeilingUsd`) its calls are refused
 * before they are made ({@link unpricedRefusal}); without one they count as $0 and the user is
 * warned.
 *
 * The package is loaded on the first look-up (about 80 ms, 0.5 MB of data), not when this
 * module is imported: services that never call a model never load it.
 */
import { createRequire } from "node:module";
import type * as GenaiPricesModule from "@pydantic/genai-prices";
import type { ModelPrice, ProviderName } from "./config-schema.js";
import { LoopsmithError } from "../runtime/errors.js";
import type { Usage } from "../contracts/common.js";

/** Tokens of one call, as `Usage` counts them (`TokenCounts` in cost.ts). */
type TokenCounts = Pick<Usage, "inputTokens" | "outputTokens" | "cacheReadTokens" | "cacheWriteTokens">;

/** A price of zero, for scripted and simulated replies (no model is called). */
export const ZERO_PRICE: ModelPrice = { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 };

/** Where a model's price was found. */
export type PriceSource =
  /** In the configuration, at `key` (e.g. `llm.prices["qwen2.5-coder:14b"]`). */
  | { kind: "config"; key: string }
  /** In `@pydantic/genai-prices`' bundled data: its provider id and model id. */
  | { kind: "genai-prices"; provider: string; model: string }
  /** Nowhere: see {@link unpricedRefusal}. */
  | { kind: "unknown" };

/** One model's price as loopsmith charges it. */
export interface Pricing {
  /** The model id as configured. */
  model: string;
  source: PriceSource;
  /**
   * USD per million tokens of a call below any context-length tier (the package's `base`
   * price when a model has tiers): what the pre-call estimate's rates and `config show` use.
   * Zero when the source is `unknown`.
   */
  rates: ModelPrice;
  /**
   * USD of one call's tokens. Tokens follow loopsmith's convention (`inputTokens` excludes
   * cache reads and writes). For a genai-prices model this is the package's own
   * `calcPrice`, with its tiers (e.g. Claude Sonnet 4.5 above 200k input tokens) and the
   * price in force today; for a configured price it is {@link flatCost}; 0 when unknown.
   */
  costOf(tokens: TokenCounts): number;
}

/**
 * Cost in USD of `tokens` at flat per-million-token rates:
 * `(input·inputPerMTok + output·outputPerMTok + cacheRead·cacheReadPerMTok + cacheWrite·cacheWritePerMTok) / 1e6`.
 */
export function flatCost(price: ModelPrice, tokens: TokenCounts): number {
  return (
    (tokens.inputTokens * price.inputPerMTok +
      tokens.outputTokens * price.outputPerMTok +
      tokens.cacheReadTokens * (price.cacheReadPerMTok ?? 0) +
      tokens.cacheWriteTokens * (price.cacheWritePerMTok ?? 0)) /
    1_000_000
  );
}

/**
 * The base model id of a Bedrock or dated model id, for the configured price table:
 * `us.anthropic.claude-sonnet-4-5-20250929-v1:0` → `claude-sonnet-4-5`.
 */
export function basePriceKey(model: string): string {
  return model
    .replace(/^(us|eu|apac|jp|au|global)\./, "")
    .replace(/^anthropic\./, "")
    .replace(/-v\d+(:\d+)?$/, "")
    .replace(/-\d{8}$/, "");
}

type GenaiPrices = typeof GenaiPricesModule;
let genai: GenaiPrices | undefined;
/** The package, loaded on first use (its CommonJS build, so the look-up stays synchronous). */
function genaiPrices(): GenaiPrices {
  genai ??= createRequire(import.meta.url)("@pydantic/genai-prices") as GenaiPrices;
  return genai;
}

/** genai-prices' usage: `input_tokens` is the TOTAL input, cache reads and writes included. */
function genaiUsage(t: TokenCounts): Record<string, number> {
  return {
    input_tokens: t.inputTokens + t.cacheReadTokens + t.cacheWriteTokens,
    cache_read_tokens: t.cacheReadTokens,
    cache_write_tokens: t.cacheWriteTokens,
    output_tokens: t.outputTokens,
  };
}

/** The first tier's price of one genai-prices price field (USD per million tokens). */
function baseRate(v: unknown): number {
  if (typeof v === "number") return v;
  if (v && typeof v === "object" && typeof (v as { base?: unknown }).base === "number")
    return (v as { base: number }).base;
  return 0;
}

/** What a price is looked up by. */
export interface PriceQuery {
  provider: ProviderName;
  model: string;
  /** An openai-compatible server's base URL: genai-prices tells OpenAI, OpenRouter, Groq, … apart by it. */
  baseUrl?: string | undefined;
  /** The configured prices for this model's role (`llm.prices` with the role's `prices` over it). */
  prices: Record<string, ModelPrice>;
  /** Where `prices` comes from, for {@link PriceSource} keys. @defaultValue "llm.prices" */
  pricesKey?: string | undefined;
}

/** genai-prices' options for a provider: its provider id, or the server's URL. */
function genaiOptions(q: PriceQuery): { providerId?: string; providerApiUrl?: string } | undefined {
  switch (q.provider) {
    case "anthropic":
      // A base URL here is a proxy in front of Anthropic's API: still Anthropic's prices.
      return { providerId: "anthropic" };
    case "bedrock":
      return { providerId: "aws" };
    case "openai-compatible":
      // A server the package does not know (a local server) matches nothing: no price.
      return q.baseUrl ? { providerApiUrl: q.baseUrl } : {};
    case "scripted":
      return undefined;
  }
}

/**
 * The price of one model: the configuration, then `@pydantic/genai-prices`, else `unknown`
 * (see the module's comment). A scripted target is priced at zero (`config` source
 * `scripted`): no model is called.
 */
export function lookupPricing(q: PriceQuery): Pricing {
  const model = q.model;
  if (q.provider === "scripted") {
    return { model, source: { kind: "config", key: "scripted" }, rates: ZERO_PRICE, costOf: () => 0 };
  }
  const where = q.pricesKey ?? "llm.prices";
  for (const key of [model, basePriceKey(model)]) {
    const found = Object.hasOwn(q.prices, key) ? q.prices[key] : undefined;
    if (found) {
      const rates: ModelPrice = {
        ...found,
        cacheReadPerMTok: found.cacheReadPerMTok ?? 0,
        cacheWritePerMTok: found.cacheWritePerMTok ?? 0,
      };
      return {
        model,
        source: { kind: "config", key: `${where}[${JSON.stringify(key)}]` },
        rates,
        costOf: (t) => flatCost(rates, t),
      };
    }
  }
  const options = genaiOptions(q);
  if (options) {
    const { calcPrice } = genaiPrices();
    const zero = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const hit = calcPrice(genaiUsage(zero), model, options);
    if (hit) {
      const p = hit.model_price;
      const rates: ModelPrice = {
        inputPerMTok: baseRate(p.input_mtok),
        outputPerMTok: baseRate(p.output_mtok),
        cacheReadPerMTok: baseRate(p.cache_read_mtok),
        cacheWritePerMTok: baseRate(p.cache_write_mtok),
      };
      return {
        model,
        source: { kind: "genai-prices", provider: hit.provider.id, model: hit.model.id },
        rates,
        costOf: (t) => calcPrice(genaiUsage(t), model, options)?.total_price ?? flatCost(rates, t),
      };
    }
  }
  return { model, source: { kind: "unknown" }, rates: ZERO_PRICE, costOf: () => 0 };
}

/** Where a pricing came from, in words: `llm.prices["x"]`, `genai-prices anthropic/claude-sonnet-4-6`, `unknown`. */
export function describePriceSource(source: PriceSource): string {
  switch (source.kind) {
    case "config":
      return source.key;
    case "genai-prices":
      return `@pydantic/genai-prices ${source.provider}/${source.model}`;
    case "unknown":
      return "unknown";
  }
}

/** A model with no known price, and the role and configuration place that calls it. */
export interface UnpricedModel {
  model: string;
  provider: ProviderName;
  /** The roles whose chain calls it. */
  roles: string[];
  /** Where it is configured (`llm`, `llm.roles.build`, `llm.roles.build.fallback[0]`). */
  source: string;
  /** The configuration key that would price it: `llm.prices["<model>"]`. */
  priceKey: string;
}

/**
 * The sentence that refuses a USD-limited call or task for unpriced models: names each model,
 * its roles and the key to set, and says 0 is allowed for a free local model.
 */
export function unpricedRefusal(models: readonly UnpricedModel[], limit = "a USD budget (--budget-usd)"): string {
  const list = models.map((m) => `${m.model} (${m.provider}; role ${m.roles.join(", ")}; ${m.source})`).join(", ");
  const keys = [...new Set(models.map((m) => m.priceKey))].join(", ");
  return (
    `no price is known for ${list}, so ${limit} cannot bind: set ${keys} ` +
    `to its USD per million tokens ({"inputPerMTok": …, "outputPerMTok": …}; 0 for a free local model), or run without the USD limit`
  );
}

/**
 * A warning for unpriced models when no USD limit applies: their calls count as $0.
 */
export function unpricedWarning(models: readonly UnpricedModel[]): string {
  const list = models.map((m) => `${m.model} (role ${m.roles.join(", ")})`).join(", ");
  const keys = [...new Set(models.map((m) => m.priceKey))].join(", ");
  return `no price is known for ${list}: its calls count as $0 in costs and budgets; set ${keys} to price it`;
}

/**
 * @throws LoopsmithError `config_invalid` with {@link unpricedRefusal} when `models` is not empty
 */
export function refuseUnpriced(models: readonly UnpricedModel[], limit?: string): void {
  if (models.length === 0) return;
  throw new LoopsmithError("config_invalid", unpricedRefusal(models, limit), {
    retryable: false,
    details: { unpriced: models },
  });
}
