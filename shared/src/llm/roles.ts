/**
 * Which model each role calls: `llm.roles.<role>` over the `llm` defaults, and
 * the fallbacks tried after the primary's retryable failures. Pure functions of the
 * configuration; `createProvider` builds one provider per distinct target from them.
 *
 * The `spec` role writes the plan of an inline task without acceptance tests; `plan` writes
 * every other task's plan. Unless `llm.roles.spec` is set, `spec` calls the `plan` role's
 * model, so `LOOPSMITH_MODEL_PLAN` picks the planning model of every task.
 */
import { basename } from "node:path";
import type { Config, FallbackTarget, ModelPrice, ProviderName, RoleLlm, ToolCallMode } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
import { lookupPricing, describePriceSource, type UnpricedModel } from "./prices.js";
import { ROLES, type Role } from "./types.js";

/** One model as it will be called: every inherited value filled in. */
export interface LlmTarget {
  provider: ProviderName;
  model: string;
  /** Absent for bedrock (the AWS chain) and for servers that need none. */
  apiKey?: string | undefined;
  baseUrl?: string | undefined;
  awsRegion?: string | undefined;
  /** `max_tokens` of every call, and the output part of the budget estimate. */
  maxOutputTokens: number;
  temperature?: number | undefined;
  /** Agent mode's tool calling (openai-compatible only). @defaultValue "native" */
  toolCalls?: ToolCallMode | undefined;
  /** `llm.prices` with the role's `prices` merged over it (overrides of `@pydantic/genai-prices`' data). */
  prices: Record<string, ModelPrice>;
  /** Where `prices` is configured, for messages: `llm.prices` or `llm.roles.<role>.prices`. */
  pricesKey: string;
  /** Where it is configured, for messages: `llm`, `llm.roles.build`, `llm.roles.build.fallback[0]`. */
  source: string;
  /** The variable that sets its model, for messages (`LOOPSMITH_MODEL_BUILD`); absent for fallbacks. */
  modelVar?: string | undefined;
}

/** A role's chain: the primary, then its fallbacks in order. */
export interface RoleRoute {
  role: Role;
  primary: LlmTarget;
  fallbacks: LlmTarget[];
}

/** A key that is equal for targets one provider object can serve. */
export function targetKey(t: LlmTarget): string {
  const { source: _s, modelVar: _m, pricesKey: _p, ...rest } = t;
  return JSON.stringify(Object.entries(rest).sort(([a], [b]) => a.localeCompare(b)));
}

function check(t: LlmTarget): LlmTarget {
  if (t.provider === "openai-compatible" && !t.baseUrl) {
    const role = /^llm\.roles\.(\w+)$/.exec(t.source)?.[1];
    const where =
      t.source === "llm"
        ? "LOOPSMITH_BASE_URL"
        : `${t.source}.baseUrl${role ? ` (LOOPSMITH_BASE_URL_${role.toUpperCase()})` : ""}`;
    throw new LoopsmithError(
      "config_invalid",
      `${where} is not set: the openai-compatible provider needs the server's base URL (or set OPENAI_BASE_URL)`,
    );
  }
  return t;
}

function primaryOf(config: Config, role: Role, r: RoleLlm | undefined): LlmTarget {
  const llm = config.llm;
  const provider = r?.provider ?? llm.provider;
  const same = provider === llm.provider;
  const source = r ? `llm.roles.${role}` : "llm";
  if (!same && !r?.model && provider !== "scripted") {
    throw new LoopsmithError(
      "config_invalid",
      `${source} switches to the ${provider} provider but names no model: set ${source}.model (LOOPSMITH_MODEL_${role.toUpperCase()})`,
    );
  }
  return {
    provider,
    model: r?.model ?? llm.model,
    apiKey: r?.apiKey ?? (same ? llm.apiKey : undefined),
    baseUrl: r?.baseUrl ?? (same ? llm.baseUrl : undefined),
    awsRegion: r?.awsRegion ?? llm.awsRegion,
    maxOutputTokens: r?.maxTokens ?? llm.maxOutputTokens,
    temperature: r?.temperature ?? llm.temperature,
    toolCalls: r?.toolCalls ?? llm.toolCalls,
    prices: { ...llm.prices, ...r?.prices },
    pricesKey: r?.prices ? `llm.roles.${role}.prices` : "llm.prices",
    source,
    modelVar: r?.model ? `LOOPSMITH_MODEL_${role.toUpperCase()}` : "LOOPSMITH_MODEL",
  };
}

function fallbackOf(config: Config, primary: LlmTarget, f: FallbackTarget, source: string): LlmTarget {
  const llm = config.llm;
  const inherit = (key: "apiKey" | "baseUrl"): string | undefined =>
    f[key] ?? (f.provider === primary.provider ? primary[key] : f.provider === llm.provider ? llm[key] : undefined);
  return {
    provider: f.provider,
    model: f.model,
    apiKey: inherit("apiKey"),
    baseUrl: inherit("baseUrl"),
    awsRegion: f.awsRegion ?? primary.awsRegion,
    maxOutputTokens: f.maxTokens ?? primary.maxOutputTokens,
    temperature: f.temperature ?? primary.temperature,
    toolCalls: f.toolCalls ?? primary.toolCalls,
    prices: primary.prices,
    pricesKey: primary.pricesKey,
    source,
  };
}

/**
 * The role whose configuration `role` uses: `spec` uses `plan`'s unless `llm.roles.spec` is
 * set (both write a task's plan: `spec` for an inline task without tests); every other role
 * its own.
 */
export function configuredRoleOf(config: Config, role: Role): Role {
  return role === "spec" && !config.llm.roles.spec ? "plan" : role;
}

/**
 * The route of every role: `llm.roles.<role>` over `llm`, and `llm.roles.<role>.fallback`
 * (else `llm.fallback`) with each fallback inheriting the role's values. A fallback equal to
 * the primary, or to an earlier fallback, is dropped. `spec` takes `plan`'s route unless
 * `llm.roles.spec` is set ({@link configuredRoleOf}).
 * @throws LoopsmithError `config_invalid` naming the key: an openai-compatible target
 *   without a base URL, a role that switches provider without naming a model, a scripted
 *   target without a script
 */
export function resolveRoutes(config: Config): Record<Role, RoleRoute> {
  const out = {} as Record<Role, RoleRoute>;
  for (const role of ROLES) {
    const from = configuredRoleOf(config, role);
    if (from !== role) continue;
    const r = config.llm.roles[role];
    const primary = check(primaryOf(config, role, r));
    const list = r?.fallback ?? config.llm.fallback;
    const base = r?.fallback ? `llm.roles.${role}.fallback` : "llm.fallback";
    const seen = new Set([targetKey(primary)]);
    const fallbacks: LlmTarget[] = [];
    list.forEach((f, i) => {
      const t = check(fallbackOf(config, primary, f, `${base}[${i}]`));
      if (seen.has(targetKey(t))) return;
      seen.add(targetKey(t));
      fallbacks.push(t);
    });
    out[role] = { role, primary, fallbacks };
  }
  for (const role of ROLES) {
    const from = configuredRoleOf(config, role);
    if (from !== role) out[role] = { ...out[from], role };
  }
  return out;
}

/**
 * The roles a `solve` task can call: all but `improve` (the hypotheses of `loopsmith improve`,
 * a run of its own).
 */
export const TASK_ROLES: readonly Role[] = ROLES.filter((r) => r !== "improve");

/**
 * The models `roles` can call (primaries and fallbacks) that have no known price (see
 * `prices.ts`), one entry per model and provider. Scripted targets are priced at zero.
 * @throws LoopsmithError `config_invalid` as {@link resolveRoutes}
 */
export function unpricedModels(config: Config, roles: readonly Role[] = TASK_ROLES): UnpricedModel[] {
  const routes = resolveRoutes(config);
  const out = new Map<string, UnpricedModel>();
  for (const role of roles) {
    for (const t of [routes[role].primary, ...routes[role].fallbacks]) {
      if (lookupPricing(t).source.kind !== "unknown") continue;
      const key = `${t.provider} ${t.model}`;
      const seen = out.get(key);
      if (seen) {
        if (!seen.roles.includes(role)) seen.roles.push(role);
        continue;
      }
      out.set(key, {
        model: t.model,
        provider: t.provider,
        roles: [role],
        source: t.source,
        priceKey: `${t.pricesKey}[${JSON.stringify(t.model)}]`,
      });
    }
  }
  return [...out.values()];
}

/** What `loopsmith config show` prints for one role: no secrets. */
export interface EffectiveRole {
  provider: ProviderName;
  model: string;
  maxOutputTokens: number;
  temperature?: number;
  /** The server, when one is configured (credentials in it are the caller's to mask). */
  baseUrl?: string;
  fallback: Array<{ provider: ProviderName; model: string }>;
  /**
   * The primary model's price, USD per million tokens (below any context-length tier), and
   * where it comes from: a configuration key, `@pydantic/genai-prices <provider>/<model>`,
   * or `unknown` (then `priceKey` says what to set; a USD budget refuses the task).
   */
  price: ModelPrice & { source: string; priceKey?: string };
  /** Which tasks' plans this role writes (`spec` and `plan` only). */
  plans?: string;
  /** For `spec` without `llm.roles.spec`: `"plan"`, the role whose model it calls. */
  sameAs?: Role;
}

/**
 * The effective model of each role, for `config show` and reports.
 * @throws LoopsmithError `config_invalid` as {@link resolveRoutes}
 */
export function effectiveRoles(config: Config): Record<Role, EffectiveRole> {
  const routes = resolveRoutes(config);
  const out = {} as Record<Role, EffectiveRole>;
  for (const role of ROLES) {
    const { primary: p, fallbacks } = routes[role];
    out[role] = {
      provider: p.provider,
      model:
        p.provider === "scripted"
          ? config.llm.scriptPath
            ? `script:${basename(config.llm.scriptPath)}`
            : "script:none"
          : p.model,
      maxOutputTokens: p.maxOutputTokens,
      ...(p.temperature !== undefined ? { temperature: p.temperature } : {}),
      ...(p.baseUrl ? { baseUrl: p.baseUrl } : {}),
      fallback: fallbacks.map((f) => ({ provider: f.provider, model: f.model })),
      price: priceShown(p),
      ...(PLANS[role] ? { plans: PLANS[role] } : {}),
      ...(configuredRoleOf(config, role) !== role ? { sameAs: configuredRoleOf(config, role) } : {}),
    };
  }
  return out;
}

/** Which tasks' plans `spec` and `plan` write (the architect's rule in `phases.ts`). */
const PLANS: Partial<Record<Role, string>> = {
  spec: "inline tasks without acceptance tests (turns the goal into acceptance criteria and a plan)",
  plan: "inline tasks with acceptance tests, and repository tasks",
};

function priceShown(t: LlmTarget): EffectiveRole["price"] {
  const pricing = lookupPricing(t);
  const unknown = pricing.source.kind === "unknown";
  return {
    ...pricing.rates,
    source: describePriceSource(pricing.source),
    ...(unknown ? { priceKey: `${t.pricesKey}[${JSON.stringify(t.model)}]` } : {}),
  };
}
