/**
 * Which model each role calls (issue #14): `llm.roles.<role>` over the `llm` defaults, and
 * the fallbacks tried after the primary's retryable failures. Pure functions of the
 * configuration; `createProvider` builds one provider per distinct target from them.
 */
import { basename } from "node:path";
import type { Config, FallbackTarget, ModelPrice, ProviderName, RoleLlm, ToolCallMode } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
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
  /** `llm.prices` with the role's `prices` merged over it (`DEFAULT_PRICES` still underneath). */
  prices: Record<string, ModelPrice>;
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
  const { source: _s, modelVar: _m, ...rest } = t;
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
    source,
  };
}

/**
 * The route of every role: `llm.roles.<role>` over `llm`, and `llm.roles.<role>.fallback`
 * (else `llm.fallback`) with each fallback inheriting the role's values. A fallback equal to
 * the primary, or to an earlier fallback, is dropped.
 * @throws LoopsmithError `config_invalid` naming the key: an openai-compatible target
 *   without a base URL, a role that switches provider without naming a model, a scripted
 *   target without a script
 */
export function resolveRoutes(config: Config): Record<Role, RoleRoute> {
  const out = {} as Record<Role, RoleRoute>;
  for (const role of ROLES) {
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
  return out;
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
    };
  }
  return out;
}
