/**
 * The layers of the configuration before the schema sees them (config.ts): the environment
 * variables and where each goes ({@link ENV_KEYS}), the deep merge of two layers, and the
 * provider-specific credentials filled in once the provider is known.
 */
import { ROLES } from "../llm/types.js";

/** A configuration layer before validation: plain JSON objects. */
export type Json = { [k: string]: unknown };

/** Environment variables and where they go. */
export const ENV_KEYS: ReadonlyArray<[string, string[], "string" | "number"]> = [
  ["NATS_URL", ["natsUrl"], "string"],
  ["NATS_USER", ["nats", "user"], "string"],
  ["NATS_PASSWORD", ["nats", "password"], "string"],
  ["NATS_TOKEN", ["nats", "token"], "string"],
  ["NATS_CREDS", ["nats", "credsFile"], "string"],
  ["NATS_INBOX_PREFIX", ["nats", "inboxPrefix"], "string"],
  ["NATS_REPLICAS", ["nats", "replicas"], "number"],
  ["LOOPSMITH_OWNER", ["nats", "owner"], "string"],
  ["NATS_CA", ["nats", "tls", "caFile"], "string"],
  ["NATS_CERT", ["nats", "tls", "certFile"], "string"],
  ["NATS_KEY", ["nats", "tls", "keyFile"], "string"],
  ["DATABASE_URL", ["databaseUrl"], "string"],
  ["LOOPSMITH_DATA_DIR", ["dataDir"], "string"],
  ["LOOPSMITH_NATS_IMAGE", ["images", "nats"], "string"],
  ["LOOPSMITH_POSTGRES_IMAGE", ["images", "postgres"], "string"],
  ["LOOPSMITH_SANDBOX_PYTHON_IMAGE", ["images", "python"], "string"],
  ["LOOPSMITH_SANDBOX_NODE_IMAGE", ["images", "node"], "string"],
  ["LOOPSMITH_PROVIDER", ["llm", "provider"], "string"],
  ["LOOPSMITH_MODEL", ["llm", "model"], "string"],
  ["LOOPSMITH_API_KEY", ["llm", "apiKey"], "string"],
  ["LOOPSMITH_BASE_URL", ["llm", "baseUrl"], "string"],
  ["LOOPSMITH_SCRIPT", ["llm", "scriptPath"], "string"],
  ["LOOPSMITH_TRANSCRIPT", ["llm", "transcriptPath"], "string"],
  ["LOOPSMITH_LLM_MAX_RETRIES", ["llm", "maxRetries"], "number"],
  ["LOOPSMITH_LLM_TIMEOUT_MS", ["llm", "timeoutMs"], "number"],
  ["LOOPSMITH_MAX_OUTPUT_TOKENS", ["llm", "maxOutputTokens"], "number"],
  ["LOOPSMITH_PROCESS_CEILING_USD", ["llm", "processCeilingUsd"], "number"],
  ["AWS_REGION", ["llm", "awsRegion"], "string"],
  // Per role: LOOPSMITH_PROVIDER_PLAN, LOOPSMITH_MODEL_BUILD, LOOPSMITH_BASE_URL_REVIEW, LOOPSMITH_API_KEY_REFLECT, …
  ...ROLES.flatMap((role): Array<[string, string[], "string"]> =>
    (["provider", "model", "baseUrl", "apiKey"] as const).map((key) => [
      `LOOPSMITH_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}_${role.toUpperCase()}`,
      ["llm", "roles", role, key],
      "string",
    ]),
  ),
  ["LOOPSMITH_EXECUTOR_CONCURRENCY", ["executor", "concurrency"], "number"],
  ["LOOPSMITH_EXECUTOR_QUEUE_LIMIT", ["executor", "queueLimit"], "number"],
  ["LOOPSMITH_CONDUCTOR_CONCURRENCY", ["conductor", "concurrency"], "number"],
  ["LOOPSMITH_WARM_POOL_SIZE", ["executor", "warmPoolSize"], "number"],
  ["LOOPSMITH_SANDBOX_IMAGES", ["executor", "imageArchive"], "string"],
  ["LOOPSMITH_OCI_RUNTIME", ["executor", "runtime"], "string"],
  ["LOOPSMITH_SECCOMP_PROFILE", ["executor", "seccompProfile"], "string"],
  ["LOOPSMITH_HNSW_EF_SEARCH", ["memory", "efSearch"], "number"],
  ["LOOPSMITH_HNSW_M", ["memory", "hnswM"], "number"],
  ["LOOPSMITH_HNSW_EF_CONSTRUCTION", ["memory", "hnswEfConstruction"], "number"],
];

function setPath(target: Json, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== "object" || next === null) node[key] = {};
    node = node[key] as Json;
  }
  node[path[path.length - 1] as string] = value;
}

/** Deep merge of plain objects; arrays and scalars from `over` replace. */
export function mergeConfig(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === undefined) continue;
    const b = out[k];
    out[k] =
      typeof v === "object" &&
      v !== null &&
      !Array.isArray(v) &&
      typeof b === "object" &&
      b !== null &&
      !Array.isArray(b)
        ? mergeConfig(b as Json, v as Json)
        : v;
  }
  return out;
}

/** The environment layer as a partial configuration. */
export function configFromEnv(env: NodeJS.ProcessEnv): Json {
  const out: Json = {};
  for (const [name, path, kind] of ENV_KEYS) {
    const raw = env[name];
    if (raw === undefined || raw === "") continue;
    setPath(out, path, kind === "number" ? Number(raw) : raw);
  }
  return out;
}

/**
 * Provider-specific variables, resolved once the provider is known (after every layer):
 * an explicit `llm.apiKey`/`llm.baseUrl` (file, LOOPSMITH_API_KEY/LOOPSMITH_BASE_URL, flags)
 * wins; else `ANTHROPIC_*` for anthropic and `OPENAI_*` for openai-compatible. A role or a
 * fallback whose provider differs from the level it would inherit from (the role, then
 * `llm`) gets its own provider's variables the same way. A key meant for one provider is
 * never sent to another.
 */
export function withProviderCredentials(layered: Json, env: NodeJS.ProcessEnv): Json {
  const vars: Record<string, [string, string]> = {
    anthropic: ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"],
    "openai-compatible": ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
  };
  const fill = (target: Json, provider: string): Json => {
    const names = vars[provider];
    if (!names) return target;
    const out = { ...target };
    if (out.apiKey === undefined && env[names[0]]) out.apiKey = env[names[0]];
    if (out.baseUrl === undefined && env[names[1]]) out.baseUrl = env[names[1]];
    return out;
  };
  const obj = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {});
  const fallbacks = (list: unknown, inherits: string[]): unknown =>
    Array.isArray(list)
      ? list.map((f: unknown) =>
          inherits.includes(obj(f).provider as string) ? f : fill(obj(f), obj(f).provider as string),
        )
      : list;
  const llm = obj(layered.llm);
  const provider = (llm.provider as string | undefined) ?? "anthropic";
  const out: Json = { ...fill(llm, provider), fallback: fallbacks(llm.fallback, [provider]) };
  if (llm.roles !== undefined) {
    out.roles = Object.fromEntries(
      Object.entries(obj(llm.roles)).map(([name, raw]) => {
        const role = obj(raw);
        const own = (role.provider as string | undefined) ?? provider;
        const filled = own === provider ? { ...role } : fill(role, own);
        if (role.fallback !== undefined) filled.fallback = fallbacks(role.fallback, [own, provider]);
        return [name, raw === undefined ? raw : filled];
      }),
    );
  }
  if (llm.fallback === undefined) delete out.fallback;
  return { ...layered, llm: out };
}
