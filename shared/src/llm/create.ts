/**
 * `createProvider`: builds the configured {@link LlmProvider} from `config.llm`.
 * The SDK clients get `maxRetries` and `timeout` from configuration: the SDKs' own retry
 * loops (408/409/429/5xx, connection errors, timeouts; `retry-after`/`retry-after-ms`
 * honoured) are the only retries; nothing here loops around them.
 */
import Anthropic from "@anthropic-ai/sdk";
import { AnthropicBedrock } from "@anthropic-ai/bedrock-sdk";
import OpenAI from "openai";
import type { Logger } from "pino";
import { DEFAULT_PRICES, type Config, type ModelPrice } from "../config.js";
import { LoopsmithError } from "../errors.js";
import { createAnthropicBackend } from "./anthropic.js";
import { SpendMeter } from "./cost.js";
import { createEngineProvider, type Backend } from "./engine.js";
import { createOpenAIBackend } from "./openai.js";
import { createScriptedBackend, loadScript } from "./scripted.js";
import { mapAnthropicError, mapOpenAIError } from "./sdk-errors.js";
import { createTranscriptWriter } from "./transcript.js";
import type { LlmProvider } from "./types.js";

/** Dependencies of {@link createProvider}. */
export interface CreateProviderDeps {
  config: Config;
  log: Logger;
  /**
   * The process's spend meter for `config.llm.processCeilingUsd`. Pass the same meter to
   * every provider one process builds. @defaultValue a new meter for this provider
   */
  meter?: SpendMeter;
}

/**
 * The base model id of a Bedrock or dated model id, for the price table:
 * `us.anthropic.claude-sonnet-4-5-20250929-v1:0` → `claude-sonnet-4-5`.
 */
export function basePriceKey(model: string): string {
  return model
    .replace(/^(us|eu|apac|jp|au|global)\./, "")
    .replace(/^anthropic\./, "")
    .replace(/-v\d+(:\d+)?$/, "")
    .replace(/-\d{8}$/, "");
}

/**
 * The price of `model`: `config.llm.prices` then `DEFAULT_PRICES`, by the exact id, then
 * by {@link basePriceKey}. An unpriced model costs 0 and is logged once at `warn` (at
 * `info` for the openai-compatible provider, which is usually a free local model).
 */
export function resolvePrice(config: Config, model: string, log: Logger): ModelPrice {
  const table = { ...DEFAULT_PRICES, ...config.llm.prices };
  const found = table[model] ?? table[basePriceKey(model)];
  if (found) return found;
  const level = config.llm.provider === "openai-compatible" ? "info" : "warn";
  log[level]({ model }, `no price for model ${model} in llm.prices; its calls count as $0`);
  return { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 };
}

/**
 * A pre-flight check around one cheap request: it fails on `llm_auth`, `unavailable` and
 * `timeout` and lets anything else pass (a server without `GET /v1/models` still works).
 */
function verifier(run: () => PromiseLike<unknown>, map: (err: unknown) => LoopsmithError, log: Logger): () => Promise<void> {
  return async () => {
    try {
      await run();
    } catch (err) {
      const e = map(err);
      if (e.code === "llm_auth" || e.code === "unavailable" || e.code === "timeout") throw e;
      log.debug({ code: e.code }, "the provider check was inconclusive; going on");
    }
  };
}

function backendFor(config: Config, log: Logger): Backend {
  const llm = config.llm;
  const common = { maxRetries: llm.maxRetries, timeout: llm.timeoutMs };
  const errorsBase = { model: llm.model, maxRetries: llm.maxRetries, timeoutMs: llm.timeoutMs };
  switch (llm.provider) {
    case "anthropic": {
      if (!llm.apiKey) {
        throw new LoopsmithError(
          "config_invalid",
          "ANTHROPIC_API_KEY is not set: the anthropic provider needs an API key (or choose another provider with LOOPSMITH_PROVIDER)",
        );
      }
      const errors = { ...errorsBase, provider: "Anthropic", credential: "the API key (ANTHROPIC_API_KEY)" };
      const client = new Anthropic({
        ...common,
        apiKey: llm.apiKey,
        authToken: null,
        ...(llm.baseUrl ? { baseURL: llm.baseUrl } : {}),
      });
      return createAnthropicBackend({
        client,
        name: "anthropic",
        model: llm.model,
        price: resolvePrice(config, llm.model, log),
        maxOutputTokens: llm.maxOutputTokens,
        errors,
        verify: verifier(() => client.models.list({ limit: 1 }), (err) => mapAnthropicError(err, errors), log),
      });
    }
    case "bedrock": {
      // Credentials come from the AWS chain the SDK resolves itself: AWS_BEARER_TOKEN_BEDROCK,
      // AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO, instance roles.
      const client = new AnthropicBedrock({
        ...common,
        ...(llm.awsRegion ? { awsRegion: llm.awsRegion } : {}),
        ...(llm.baseUrl ? { baseURL: llm.baseUrl } : {}),
      });
      return createAnthropicBackend({
        client,
        name: "bedrock",
        model: llm.model,
        price: resolvePrice(config, llm.model, log),
        maxOutputTokens: llm.maxOutputTokens,
        errors: {
          ...errorsBase,
          provider: "Amazon Bedrock",
          credential: "the AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or AWS_BEARER_TOKEN_BEDROCK)",
        },
      });
    }
    case "openai-compatible": {
      if (!llm.baseUrl) {
        throw new LoopsmithError("config_invalid", "LOOPSMITH_BASE_URL is not set: the openai-compatible provider needs the server's base URL");
      }
      // Local servers need no key; the SDK insists on one, so a placeholder stands in.
      const client = new OpenAI({ ...common, apiKey: llm.apiKey ?? "no-key", baseURL: llm.baseUrl });
      const errors = {
        ...errorsBase,
        provider: `the OpenAI-compatible server at ${llm.baseUrl}`,
        credential: "the API key (LOOPSMITH_API_KEY or OPENAI_API_KEY)",
      };
      return createOpenAIBackend({
        client,
        model: llm.model,
        price: resolvePrice(config, llm.model, log),
        maxOutputTokens: llm.maxOutputTokens,
        log,
        errors,
        verify: verifier(() => client.models.list(), (err) => mapOpenAIError(err, errors), log),
      });
    }
    case "scripted": {
      if (!llm.scriptPath) {
        throw new LoopsmithError("config_invalid", "LOOPSMITH_SCRIPT is not set: the scripted provider needs a script file");
      }
      return createScriptedBackend(loadScript(llm.scriptPath), llm.scriptPath);
    }
  }
}

/**
 * Builds the configured provider (`config.llm.provider`: "anthropic" | "openai-compatible"
 * | "bedrock" | "scripted"). Reads the script file now for the scripted provider.
 * @throws LoopsmithError `config_invalid` with one sentence: the Anthropic API key is
 *   missing, the openai-compatible base URL is missing, the script file is missing,
 *   unreadable or malformed
 */
export function createProvider(deps: CreateProviderDeps): LlmProvider {
  const { config } = deps;
  const log = deps.log.child({ component: "llm" });
  const backend = backendFor(config, log);
  return createEngineProvider(backend, {
    log,
    meter: deps.meter ?? new SpendMeter(),
    transcript: createTranscriptWriter(config.llm.transcriptPath, log),
    maxOutputTokens: config.llm.maxOutputTokens,
    processCeilingUsd: config.llm.processCeilingUsd,
  });
}
