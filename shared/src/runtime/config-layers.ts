/**
 * The layers of the configuration before the schema sees them (config.ts): the environment
 * variables and where each goes ({@link ENV_KEYS}), the deep merge of two layers, and the
 * provider-specific credentials filled in once the provider is known; the files found by
 * convention (the repository's, the user's) and where each value came from.
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { ROLES } from "../llm/types.js";
import { LoopsmithError } from "./errors.js";

/** A configuration layer before validation: plain JSON objects. */
export type Json = { [k: string]: unknown };

/** Environment variables and where they go. */
export const ENV_KEYS: ReadonlyArray<[string, string[], "string" | "number" | "boolean"]> = [
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
  ["LOOPSMITH_EMBEDDER", ["memory", "embedder", "kind"], "string"],
  ["LOOPSMITH_EMBEDDINGS_BASE_URL", ["memory", "embedder", "baseUrl"], "string"],
  ["LOOPSMITH_EMBEDDINGS_MODEL", ["memory", "embedder", "model"], "string"],
  ["LOOPSMITH_EMBEDDINGS_API_KEY", ["memory", "embedder", "apiKey"], "string"],
  ["LOOPSMITH_EMBEDDINGS_DIMENSIONS", ["memory", "embedder", "dimensions"], "number"],
  ["LOOPSMITH_EMBEDDINGS_TRUNCATE", ["memory", "embedder", "truncate"], "boolean"],
  ["LOOPSMITH_EMBEDDINGS_TIMEOUT_MS", ["memory", "embedder", "timeoutMs"], "number"],
  ["LOOPSMITH_EMBEDDINGS_MAX_RETRIES", ["memory", "embedder", "maxRetries"], "number"],
  ["LOOPSMITH_EMBEDDINGS_COOLDOWN_MS", ["memory", "embedder", "cooldownMs"], "number"],
  ["LOOPSMITH_EMBEDDINGS_BATCH_SIZE", ["memory", "embedder", "batchSize"], "number"],
  ["LOOPSMITH_EMBEDDINGS_REEMBED", ["memory", "embedder", "reembed"], "boolean"],
];

/** An environment variable's text as a boolean (`true`/`1`/`yes`, `false`/`0`/`no`); other text is kept for the schema to refuse. */
function envBoolean(raw: string): boolean | string {
  const v = raw.trim().toLowerCase();
  if (v === "true" || v === "1" || v === "yes") return true;
  if (v === "false" || v === "0" || v === "no") return false;
  return raw;
}

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
    setPath(out, path, kind === "number" ? Number(raw) : kind === "boolean" ? envBoolean(raw) : raw);
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

/**
 * Where one configuration value came from, as `loopsmith config show` names it: a flag
 * (`LOOPSMITH_CONFIG_JSON` carries the flags to child processes), an environment variable, a
 * configuration file (`explicit`: `--config`/`LOOPSMITH_CONFIG`; `repo`: the repository's;
 * `user`: `$XDG_CONFIG_HOME/loopsmith/config.json`), or the schema's default.
 */
export type ConfigSource =
  | { kind: "flag" }
  | { kind: "env"; name: string }
  | { kind: "file"; layer: "explicit" | "repo" | "user"; path: string }
  | { kind: "default" };

/** A {@link ConfigSource} as one phrase: `flag`, `env LOOPSMITH_MODEL`, `repo file /r/loopsmith.json`, `default`. */
export function describeSource(source: ConfigSource): string {
  switch (source.kind) {
    case "flag":
      return "flag";
    case "env":
      return `env ${source.name}`;
    case "file":
      return `${source.layer === "explicit" ? "config" : source.layer} file ${source.path}`;
    default:
      return "default";
  }
}

/** The configuration files found by convention, each absent when there is none. */
export interface ConfigFiles {
  /** `$XDG_CONFIG_HOME/loopsmith/config.json` (XDG's default `~/.config`). */
  user?: string;
  /** The repository's `.loopsmith/config.json`, else its `loopsmith.json` (one schema). */
  repo?: string;
}

/**
 * The root of the git repository holding `dir`: the nearest ancestor (itself included) with
 * a `.git` entry (a directory, or the file of a worktree or submodule); undefined outside one.
 */
export function repositoryRoot(dir: string): string | undefined {
  for (let at = resolve(dir); ;) {
    if (existsSync(join(at, ".git"))) return at;
    const up = dirname(at);
    if (up === at) return undefined;
    at = up;
  }
}

/**
 * The configuration files found by convention (XDG Base Directory Specification for the
 * user's; the repository root for the repository's). Outside a git repository no repository
 * file is read.
 * @param opts.repoRoot the repository whose file counts; else the one holding `opts.cwd`
 * @throws LoopsmithError `config_invalid` when the repository has both `.loopsmith/config.json`
 *   and `loopsmith.json` (one would silently shadow the other)
 */
export function findConfigFiles(opts: { cwd: string; env: NodeJS.ProcessEnv; repoRoot?: string }): ConfigFiles {
  const out: ConfigFiles = {};
  const configHome = opts.env.XDG_CONFIG_HOME || join(opts.env.HOME || homedir(), ".config");
  const user = join(configHome, "loopsmith", "config.json");
  if (existsSync(user)) out.user = user;
  const root = opts.repoRoot ?? repositoryRoot(opts.cwd);
  if (root) {
    const found = [join(root, ".loopsmith", "config.json"), join(root, "loopsmith.json")].filter((f) => existsSync(f));
    if (found.length > 1) {
      throw new LoopsmithError(
        "config_invalid",
        `the repository has two configuration files, ${found[0]} and ${found[1]}: keep one (they share one schema)`,
      );
    }
    if (found[0]) out.repo = found[0];
  }
  return out;
}

/** Line and column (from 1) of a UTF-16 offset into `text`. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split("\n");
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}

/**
 * Reads one configuration file: a JSON object.
 * @throws LoopsmithError `config_invalid` naming the file, and for a syntax error its line and
 *   column (from V8's `at position N`), or saying the top level is not an object
 */
export function readConfigFile(file: string): Json {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new LoopsmithError(
      "config_invalid",
      `cannot read the configuration file ${file}: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const message = (err as Error).message;
    const at = /at position (\d+)/.exec(message);
    const where = at ? lineColumn(text, Number(at[1])) : undefined;
    throw new LoopsmithError(
      "config_invalid",
      `the configuration file ${file} is not valid JSON${where ? ` (line ${where.line}, column ${where.column})` : ""}: ${message}`,
      { cause: err },
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new LoopsmithError("config_invalid", `the configuration file ${file} must hold a JSON object`);
  }
  return value as Json;
}

/**
 * Every leaf of a layer (a scalar, an array, or an empty object) with its path. Arrays are
 * leaves because {@link mergeConfig} replaces them whole.
 */
export function leavesOf(json: unknown, path: string[] = []): Array<[string[], unknown]> {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return [[path, json]];
  const entries = Object.entries(json).filter(([, v]) => v !== undefined);
  if (entries.length === 0) return path.length ? [[path, json]] : [];
  return entries.flatMap(([k, v]) => leavesOf(v, [...path, k]));
}

/**
 * Records, for each leaf a layer sets, that layer as its source (later layers overwrite):
 * `sources` maps a dotted path to its {@link ConfigSource}.
 */
export function recordSources(
  sources: Map<string, ConfigSource>,
  layer: Json,
  source: (path: string[]) => ConfigSource,
): void {
  for (const [path] of leavesOf(layer)) {
    const key = path.join(".");
    // A layer setting a whole value replaces what earlier layers set beneath it.
    for (const old of [...sources.keys()]) if (old.startsWith(`${key}.`)) sources.delete(old);
    sources.set(key, source(path));
  }
}

/** The environment variable that set `path` in {@link configFromEnv}'s layer, if any. */
export function envNameOf(path: string[], env: NodeJS.ProcessEnv): string | undefined {
  const key = path.join(".");
  for (const [name, to] of ENV_KEYS)
    if (to.join(".") === key && env[name] !== undefined && env[name] !== "") return name;
  return undefined;
}

/**
 * The source of the value at `path`: the nearest recorded path at or above it (a layer may
 * set a whole object or array), else the default.
 */
export function sourceAt(
  sources: ReadonlyMap<string, ConfigSource>,
  path: ReadonlyArray<string | number>,
): ConfigSource {
  for (let n = path.length; n > 0; n--) {
    const found = sources.get(path.slice(0, n).join("."));
    if (found) return found;
  }
  return { kind: "default" };
}
