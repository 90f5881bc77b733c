/**
 * `createProvider`: builds the configured {@link LlmProvider} from `config.llm`.
 * The SDK clients get `maxRetries` and `timeout` from configuration: the SDKs' own retry
 * loops (408/409/429/5xx, connection errors, timeouts; `retry-after`/`retry-after-ms`
 * honoured) are the only retries; nothing here loops around them.
 *
 * The SDKs are loaded lazily: importing this module (and so `@loopsmith/shared/llm`) loads none
 * of `@anthropic-ai/sdk`, `@anthropic-ai/bedrock-sdk` (the AWS SDK) or `openai`; a backend
 * loads its SDK and builds its client on its first call (or `verify`). Services that never
 * call a model (executor, memory) never load them, which is most of their start-up time.
 * `createProvider` stays synchronous and still refuses a bad configuration at once.
 */
import { basename } from "node:path";
import type Anthropic from "@anthropic-ai/sdk";
import type { Logger } from "pino";
import type { Config } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
import { createAnthropicBackend, type AnthropicMessagesClient } from "./anthropic.js";
import { SpendMeter } from "./cost.js";
import { createEngineProvider, type Backend } from "./engine.js";
import { createOpenAIBackend, type OpenAIChatClient } from "./openai.js";
import { createScriptedBackend, createScriptlessBackend, loadScript, SCRIPTLESS_MODEL } from "./scripted.js";
import type { ErrorContext } from "./sdk-errors.js";
import { createTranscriptWriter } from "./transcript.js";
import { lookupPricing, ZERO_PRICE, type Pricing } from "./prices.js";
import { resolveRoutes, targetKey, type LlmTarget } from "./roles.js";
import { createRoutingProvider } from "./router.js";
import { withTaskScripts } from "./task-script.js";
import { ROLES, type LlmProvider, type Role } from "./types.js";
import type { ProviderInfo } from "../contracts/steps.js";

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
 * The price of `model` under the `llm` defaults' provider and prices (see `prices.ts`): the
 * configuration, then `@pydantic/genai-prices`, else `unknown`. An unknown price is logged
 * at `info` (the user is told by `solve` and the architect's log, at `warn`).
 */
export function resolvePrice(config: Config, model: string, log: Logger): Pricing {
  const pricing = lookupPricing({
    provider: config.llm.provider,
    model,
    baseUrl: config.llm.baseUrl,
    prices: config.llm.prices,
  });
  if (pricing.source.kind === "unknown") warnUnpriced(log, model);
  return pricing;
}

/** The provider's own line about an unpriced model (`info`: `solve` and the architect warn the user). */
function warnUnpriced(log: Logger, model: string): void {
  log.info(
    { model },
    `no price is known for model ${model} (not in llm.prices nor in @pydantic/genai-prices): its calls count as $0, and a task or process with a USD limit refuses to call it; set llm.prices["${model}"]`,
  );
}

/** `make` once, on the first call; a failed attempt is retried by the next call. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => {
    made ??= make().catch((err: unknown) => {
      made = undefined;
      throw err;
    });
    return made;
  };
}

/** An Anthropic SDK error mapped to a {@link LoopsmithError} (the mapping module is loaded on first use). */
async function anthropicError(err: unknown, ctx: ErrorContext): Promise<LoopsmithError> {
  const { mapAnthropicError } = await import("./sdk-errors.js");
  return mapAnthropicError(err, ctx);
}

/** An OpenAI SDK error mapped to a {@link LoopsmithError} (the mapping module is loaded on first use). */
async function openAIError(err: unknown, ctx: ErrorContext): Promise<LoopsmithError> {
  const { mapOpenAIError } = await import("./sdk-errors.js");
  return mapOpenAIError(err, ctx);
}

/**
 * A pre-flight check around one cheap request: it fails on `llm_auth`, `unavailable` and
 * `timeout` and lets anything else pass (a server without `GET /v1/models` still works).
 */
function verifier(
  run: () => PromiseLike<unknown>,
  map: (err: unknown) => Promise<LoopsmithError>,
  log: Logger,
): () => Promise<void> {
  return async () => {
    try {
      await run();
    } catch (err) {
      const e = await map(err);
      if (e.code === "llm_auth" || e.code === "unavailable" || e.code === "timeout") throw e;
      log.debug({ code: e.code }, "the provider check was inconclusive; going on");
    }
  };
}

/**
 * The backend of a provider that lacks what it needs to call a model (an API key, a base
 * URL): the service still starts (a stack without a key serves scripted tasks, whose replies
 * travel with them), and every call, and `verify`, fails with `provider_unconfigured` and the
 * sentence that says what to set.
 */
function createUnconfiguredBackend(info: ProviderInfo, message: string): Backend {
  const refuse = (): never => {
    throw new LoopsmithError("provider_unconfigured", message);
  };
  return {
    info,
    price: ZERO_PRICE,
    open: refuse,
    converse: async () => refuse(),
    verify: async () => refuse(),
  };
}

/** A messages client whose SDK client is built on the first call. */
function lazyMessages(
  client: () => Promise<{
    messages: { create(p: Anthropic.MessageCreateParamsNonStreaming): PromiseLike<Anthropic.Message> };
  }>,
): AnthropicMessagesClient {
  return { messages: { create: async (params) => (await client()).messages.create(params) } };
}

/** What every backend of a target shares: the SDK client's options, the error context, the model's settings. */
function partsOf(config: Config, llm: LlmTarget, pricing: Pricing) {
  const common = { maxRetries: config.llm.maxRetries, timeout: config.llm.timeoutMs };
  const errorsBase = {
    model: llm.model,
    maxRetries: config.llm.maxRetries,
    timeoutMs: config.llm.timeoutMs,
    modelSetting: llm.modelVar ?? `${llm.source}.model`,
  };
  const shared = {
    model: llm.model,
    price: pricing.rates,
    maxOutputTokens: llm.maxOutputTokens,
    temperature: llm.temperature,
  };
  return { common, errorsBase, shared };
}

/** The parts {@link partsOf} returns. */
type BackendParts = ReturnType<typeof partsOf>;

/** The anthropic provider's backend; without an API key, one that refuses every call. */
function anthropicBackend(llm: LlmTarget, { common, errorsBase, shared }: BackendParts, log: Logger): Backend {
  if (!llm.apiKey) {
    return createUnconfiguredBackend(
      { name: "anthropic", model: llm.model, scripted: false },
      llm.source === "llm"
        ? "ANTHROPIC_API_KEY is not set: the anthropic provider needs an API key (or choose another provider with LOOPSMITH_PROVIDER)"
        : `ANTHROPIC_API_KEY is not set: ${llm.source} uses the anthropic provider, which needs an API key (or set ${llm.source}.apiKey)`,
    );
  }
  const errors = { ...errorsBase, provider: "Anthropic", credential: "the API key (ANTHROPIC_API_KEY)" };
  const apiKey = llm.apiKey;
  const client = once(async () => {
    const { default: AnthropicSdk } = await import("@anthropic-ai/sdk");
    return new AnthropicSdk({
      ...common,
      apiKey,
      authToken: null,
      ...(llm.baseUrl ? { baseURL: llm.baseUrl } : {}),
    });
  });
  return createAnthropicBackend({
    client: lazyMessages(client),
    name: "anthropic",
    ...shared,
    errors,
    verify: verifier(
      async () => (await client()).models.list({ limit: 1 }),
      (err) => anthropicError(err, errors),
      log,
    ),
  });
}

/** The bedrock provider's backend. */
function bedrockBackend(llm: LlmTarget, { common, errorsBase, shared }: BackendParts): Backend {
  // Credentials come from the AWS chain the SDK resolves itself: AWS_BEARER_TOKEN_BEDROCK,
  // AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO, instance roles.
  const client = once(async () => {
    const { AnthropicBedrock } = await import("@anthropic-ai/bedrock-sdk");
    return new AnthropicBedrock({
      ...common,
      ...(llm.awsRegion ? { awsRegion: llm.awsRegion } : {}),
      ...(llm.baseUrl ? { baseURL: llm.baseUrl } : {}),
    });
  });
  return createAnthropicBackend({
    client: lazyMessages(client),
    name: "bedrock",
    ...shared,
    errors: {
      ...errorsBase,
      provider: "Amazon Bedrock",
      credential:
        "the AWS credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or AWS_BEARER_TOKEN_BEDROCK)",
    },
  });
}

/** The openai-compatible provider's backend; without a base URL, one that refuses every call. */
function openAICompatibleBackend(llm: LlmTarget, { common, errorsBase, shared }: BackendParts, log: Logger): Backend {
  if (!llm.baseUrl) {
    return createUnconfiguredBackend(
      { name: "openai-compatible", model: llm.model, scripted: false },
      `LOOPSMITH_BASE_URL is not set: the openai-compatible provider (${llm.source}) needs the server's base URL`,
    );
  }
  // Local servers need no key; the SDK insists on one, so a placeholder stands in.
  const baseURL = llm.baseUrl;
  const client = once(async () => {
    const { default: OpenAI } = await import("openai");
    return new OpenAI({ ...common, apiKey: llm.apiKey ?? "no-key", baseURL });
  });
  const errors = {
    ...errorsBase,
    provider: `the OpenAI-compatible server at ${llm.baseUrl}`,
    credential: "the API key (LOOPSMITH_API_KEY or OPENAI_API_KEY)",
  };
  return createOpenAIBackend({
    client: {
      chat: { completions: { create: async (params) => (await client()).chat.completions.create(params) } },
    } satisfies OpenAIChatClient,
    ...shared,
    toolCalls: llm.toolCalls,
    log,
    errors,
    verify: verifier(
      async () => (await client()).models.list(),
      (err) => openAIError(err, errors),
      log,
    ),
  });
}

/** The backend of one target (a role's primary or a fallback). */
function backendFor(config: Config, llm: LlmTarget, pricing: Pricing, log: Logger): Backend {
  const parts = partsOf(config, llm, pricing);
  switch (llm.provider) {
    case "anthropic":
      return anthropicBackend(llm, parts, log);
    case "bedrock":
      return bedrockBackend(llm, parts);
    case "openai-compatible":
      return openAICompatibleBackend(llm, parts, log);
    case "scripted": {
      // Without a file the scripted provider serves only tasks that carry their own replies
      // (Task.script, answered by withTaskScripts before a call gets here); others are refused.
      const path = config.llm.scriptPath;
      return path ? createScriptedBackend(loadScript(path), path) : createScriptlessBackend();
    }
  }
}

/**
 * Builds the configured provider. Every role calls its own model (`llm.roles.<role>` over
 * the `llm` defaults; see `resolveRoutes`), with its fallbacks (`llm.roles.<role>.fallback`,
 * else `llm.fallback`) tried after retryable failures. One provider object serves every
 * role with the same target. The result is always wrapped by `withTaskScripts`: a request
 * whose task carries its own replies (`context.script`, from `Task.script`) is answered
 * from them whatever the configured provider, and the completion's `provider` names the
 * script (`scripted`, `script:task`) or the simulation (`simulated`, `simulated:<source>`).
 *
 * Reads the script file now for the scripted provider. Without one (`LOOPSMITH_SCRIPT`
 * unset) the scripted provider is still built (model `script:none`): it serves the tasks
 * that carry replies, and a call from a task without any is refused with
 * `provider_unconfigured`. So is every call (and `verify`) of a provider that lacks what it
 * needs (the Anthropic API key, an openai-compatible base URL): a service without a key
 * starts, serves scripted tasks, and ends any other task with that typed error.
 * @throws LoopsmithError `config_invalid` with one sentence: a role switches provider without a
 *   model or names an openai-compatible server without a URL, the script file is unreadable
 *   or malformed
 */
export function createProvider(deps: CreateProviderDeps): LlmProvider {
  const { config } = deps;
  const log = deps.log.child({ component: "llm" });
  const meter = deps.meter ?? new SpendMeter();
  const transcript = createTranscriptWriter(config.llm.transcriptPath, log);
  const built = new Map<string, LlmProvider>();
  const routes = resolveRoutes(config);
  const providerFor = (target: LlmTarget): LlmProvider => {
    const key = targetKey(target);
    let provider = built.get(key);
    if (!provider) {
      const pricing = lookupPricing(target);
      if (pricing.source.kind === "unknown") warnUnpriced(log, target.model);
      provider = createEngineProvider(backendFor(config, target, pricing, log), {
        log,
        meter,
        transcript,
        maxOutputTokens: target.maxOutputTokens,
        processCeilingUsd: config.llm.processCeilingUsd,
        pricing,
        ...(pricing.source.kind === "unknown"
          ? {
              unpriced: {
                model: target.model,
                provider: target.provider,
                roles: rolesOf(target),
                source: target.source,
                priceKey: `${target.pricesKey}[${JSON.stringify(target.model)}]`,
              },
            }
          : {}),
      });
      built.set(key, provider);
    }
    return provider;
  };
  const rolesOf = (t: LlmTarget): Role[] =>
    ROLES.filter((r) => [routes[r].primary, ...routes[r].fallbacks].some((x) => targetKey(x) === targetKey(t)));
  const chains = Object.fromEntries(
    ROLES.map((role) => [role, [routes[role].primary, ...routes[role].fallbacks].map(providerFor)]),
  ) as Record<Role, LlmProvider[]>;
  const single = [...built.values()];
  const inner =
    single.length === 1 && ROLES.every((r) => chains[r].length === 1)
      ? (single[0] as LlmProvider)
      : createRoutingProvider({
          info: { ...defaultInfo(config), scripted: single.some((p) => p.info.scripted) },
          chains,
          log,
          cooldownMs: config.llm.fallbackCooldownMs,
        });
  return withTaskScripts(inner, {
    log,
    meter,
    transcript,
    maxOutputTokens: config.llm.maxOutputTokens,
    processCeilingUsd: config.llm.processCeilingUsd,
  });
}

/** `info` of the `llm` defaults, as the engine names them. */
function defaultInfo(config: Config): ProviderInfo {
  const { provider, model, scriptPath } = config.llm;
  const scriptModel = scriptPath ? `script:${basename(scriptPath)}` : SCRIPTLESS_MODEL;
  return { name: provider, model: provider === "scripted" ? scriptModel : model, scripted: provider === "scripted" };
}
