/**
 * Configuration: one zod schema, parsed once at boot. Layers, later wins:
 * defaults < the user's file (`$XDG_CONFIG_HOME/loopsmith/config.json`) < the repository's
 * file (`.loopsmith/config.json` or `loopsmith.json`) < the file named by `--config` or
 * `LOOPSMITH_CONFIG` < environment < flags (`LOOPSMITH_CONFIG_JSON` carries flags to child
 * processes); the layers themselves are built in config-layers.ts.
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { z } from "zod";
import { LoopsmithError } from "./errors.js";
import { FallbackTarget, ModelPrice, ProviderName, RoleLlm, ToolCallMode } from "../llm/config-schema.js";
import { lookupPricing, type Pricing } from "../llm/prices.js";
import { ROLES, type Role } from "../llm/types.js";
import {
  configFromEnv,
  describeSource,
  envNameOf,
  findConfigFiles,
  leavesOf,
  mergeConfig,
  readConfigFile,
  recordSources,
  sourceAt,
  withProviderCredentials,
  type ConfigSource,
  type Json,
} from "./config-layers.js";
import { DEFAULT_OWNER, OWNER_PATTERN } from "../bus/subjects.js";
import { Owner } from "../contracts/common.js";
import { ImproveSettings, QualityBenchmarks } from "../contracts/improve.js";
import { strictObject } from "./unknown-keys.js";

export { FallbackTarget, ModelPrice, ProviderName, RoleLlm, ToolCallMode } from "../llm/config-schema.js";

/** `shape` with every field optional and without its default (the defaults apply later, once). */
function withoutDefaults<S extends z.ZodRawShape>(
  shape: S,
): { [K in keyof S]: z.ZodOptional<z.ZodType<z.output<S[K]>>> } {
  return Object.fromEntries(
    Object.entries(shape).map(([key, field]) => [
      key,
      ((field instanceof z.ZodDefault ? field.removeDefault() : field) as z.ZodType).optional(),
    ]),
  ) as { [K in keyof S]: z.ZodOptional<z.ZodType<z.output<S[K]>>> };
}

/**
 * The `improve` section of a configuration file: every field of `ImproveSettings` (checked
 * as the run will check it, `benchmarks` and its metric names included), each optional and
 * left out when absent (the CLI applies flags, then the defaults: `improveSettings`), plus
 * `base` (the commit to start from) and `setupCommand`. Unknown keys are errors.
 */
export const ImproveSection = strictObject({
  ...withoutDefaults(ImproveSettings.shape),
  benchmarks: strictObject(withoutDefaults(QualityBenchmarks.shape)).optional(),
  /** The commit to start from (a ref or a commit id; `""`: HEAD). @defaultValue HEAD */
  base: z.string().optional(),
  /** The dependency install, once per tree in the sandbox (`""` for none). @defaultValue detected */
  setupCommand: z.string().max(4_000).optional(),
});
export type ImproveSection = z.infer<typeof ImproveSection>;

/**
 * Memory's embedder (`memory.embedder`): the offline hashing embedder, or a provider's
 * OpenAI-compatible embeddings API (`POST <baseUrl>/embeddings`). See docs/PROTOCOL.md
 * (Memory) for how rows of another embedder are re-embedded and what a failed call does.
 */
const EmbedderSettings = strictObject({
  /** `hashing` (offline, lexical) or `api` (an embeddings server). @defaultValue "hashing" */
  kind: z.enum(["hashing", "api"]).default("hashing"),
  /** The server's base URL, the part before `/embeddings` (e.g. `http://127.0.0.1:8080/v1`); `api` needs it. */
  baseUrl: z.url({ protocol: /^https?$/ }).optional(),
  /** The embeddings model, as the server names it; `api` needs it. */
  model: z.string().min(1).max(200).optional(),
  /** Sent as `Authorization: Bearer <key>`; a local server needs none. */
  apiKey: z.string().optional(),
  /**
   * Length of the vectors memory stores, 1 to 2000 (pgvector's HNSW limit); `api` needs it.
   * The server's vectors must have exactly this length unless `truncate`.
   */
  dimensions: z.number().int().min(1).max(2000).optional(),
  /**
   * Keep the first `dimensions` numbers of a longer vector and L2-normalise them: right only
   * for a model trained for it (Matryoshka: OpenAI's text-embedding-3-*, nomic-embed-text
   * v1.5, …). @defaultValue false
   */
  truncate: z.boolean().default(false),
  /** Timeout of one HTTP call, in ms. @defaultValue 5000 */
  timeoutMs: z.number().int().min(100).default(5_000),
  /** Retries of a call that failed on a timeout, a lost connection, 408, 429 or 5xx (p-retry). @defaultValue 2 */
  maxRetries: z.number().int().min(0).max(10).default(2),
  /**
   * After the embedder failed (its retries spent), how long memory stores and recalls with
   * the hashing embedder without trying it, in ms; 0 tries it on every call. @defaultValue 30000
   */
  cooldownMs: z.number().int().min(0).default(30_000),
  /** Texts per HTTP call (a failure is up to three texts). @defaultValue 32 */
  batchSize: z.number().int().min(1).max(2048).default(32),
  /**
   * Re-embed, in the background, the rows another embedder made (after a switch, or stored
   * with the hashing embedder while the server was down); false: such rows are never
   * recalled. @defaultValue true
   */
  reembed: z.boolean().default(true),
});
/** {@link EmbedderSettings}' defaults: the hashing embedder. */
const EMBEDDER_DEFAULTS: z.infer<typeof EmbedderSettings> = {
  kind: "hashing",
  truncate: false,
  timeoutMs: 5_000,
  maxRetries: 2,
  cooldownMs: 30_000,
  batchSize: 32,
  reembed: true,
};

/** The whole configuration. Every default is documented with `@defaultValue`. */
export const Config = strictObject({
  /** NATS server URL. When unset, `loopsmith solve` starts a NATS container itself. */
  natsUrl: z.string().optional(),
  /**
   * How this process proves who it is to NATS, and TLS: a user and password, a token, or a
   * credentials file (JWT + nkey seed, `.creds`); the CA, certificate and key files when the
   * server speaks TLS. All optional: a NATS without authentication needs none. Credentials
   * in `natsUrl` (`nats://user:pass@host`) work too. See `natsConnectOptions`.
   */
  nats: strictObject({
    user: z.string().optional(),
    password: z.string().optional(),
    token: z.string().optional(),
    credsFile: z.string().optional(),
    /**
     * Prefix of this connection's reply subjects (`NATS_INBOX_PREFIX`, NATS's default
     * `_INBOX`; `_INBOX_<name>` otherwise, as services answer only to inboxes). With the permission matrix each user gets its own (`_INBOX_<user>`) and may
     * subscribe only there, so no user reads another's replies.
     */
    inboxPrefix: z
      .string()
      .regex(
        /^_INBOX(_[A-Za-z0-9-]+)?$/,
        "_INBOX or _INBOX_<name> (letters, digits, '-'): services answer only to inboxes",
      )
      .optional(),
    tls: strictObject({
      caFile: z.string().optional(),
      certFile: z.string().optional(),
      keyFile: z.string().optional(),
    }).default({}),
    /**
     * The owner token this client submits, follows, cancels and reads tasks as
     * (`LOOPSMITH_OWNER`; default: the NATS user's name, or `client`). Under the permission
     * matrix a client user may use only its own name. See `ownerOf`.
     */
    owner: Owner.optional(),
    /**
     * Replicas of every stream, KV bucket and object store loopsmith creates
     * (`NATS_REPLICAS`): 1 on one server, 3 on a three-node JetStream cluster
     * (deploy/compose.cluster.yml). One found with fewer is raised to this; one with more
     * is left as it is (never lowered by a process configured for fewer). @defaultValue 1
     */
    replicas: z.number().int().min(1).max(5).default(1),
  }).default({ tls: {}, replicas: 1 }),
  /** PostgreSQL URL (with pgvector). When unset, memory runs embedded PGlite under `dataDir`. */
  databaseUrl: z.string().optional(),
  /** Where embedded memory and local state live. @defaultValue ~/.local/share/loopsmith */
  dataDir: z.string().default(join(process.env.XDG_DATA_HOME ?? join(homedir(), ".local", "share"), "loopsmith")),
  /** Image names; the official images where a registry answers, locally built ones where not. */
  images: strictObject({
    /** @defaultValue loopsmith/nats:local (build with deploy/build-images.sh; or nats:2.10) */
    nats: z.string().default("loopsmith/nats:local"),
    /** @defaultValue loopsmith/postgres:local (or pgvector/pgvector:pg17) */
    postgres: z.string().default("loopsmith/postgres:local"),
    /** @defaultValue loopsmith/sandbox-python:local */
    python: z.string().default("loopsmith/sandbox-python:local"),
    /** @defaultValue loopsmith/sandbox-node:local */
    node: z.string().default("loopsmith/sandbox-node:local"),
  }).default({
    nats: "loopsmith/nats:local",
    postgres: "loopsmith/postgres:local",
    python: "loopsmith/sandbox-python:local",
    node: "loopsmith/sandbox-node:local",
  }),
  llm: strictObject({
    /** @defaultValue "anthropic" */
    provider: ProviderName.default("anthropic"),
    /** Model id. @defaultValue "claude-sonnet-4-6" */
    model: z.string().default("claude-sonnet-4-6"),
    apiKey: z.string().optional(),
    baseUrl: z.string().optional(),
    /** Scripted provider: the file of replies to replay. */
    scriptPath: z.string().optional(),
    /** When set, every prompt and reply is appended to this JSONL file. */
    transcriptPath: z.string().optional(),
    /** SDK retries on 408/409/429/5xx (the SDK's own retry loop). @defaultValue 2 */
    maxRetries: z.number().int().min(0).max(10).default(2),
    /** SDK timeout of one HTTP call, in ms. @defaultValue 120000 */
    timeoutMs: z.number().int().min(100).default(120_000),
    /** Output token limit of one call. @defaultValue 8192 */
    maxOutputTokens: z.number().int().min(16).default(8192),
    /** AWS region for Bedrock. */
    awsRegion: z.string().optional(),
    /**
     * USD per million tokens per model id (or base id: `claude-sonnet-4-5` prices its dated
     * and Bedrock ids): overrides of the prices bundled with `@pydantic/genai-prices`, and
     * the only price of a model that package lacks (a local or new model; 0 is allowed). A
     * model priced in neither refuses a task with a USD budget. @defaultValue {}
     */
    prices: z.record(z.string(), ModelPrice).default({}),
    /** Ceiling on USD spent by one process, over all tasks; unlimited when absent. */
    processCeilingUsd: z.number().positive().optional(),
    /** Sampling temperature of every call; the provider's own default when absent. */
    temperature: z.number().min(0).max(2).optional(),
    /**
     * Agent mode's tool calling on an openai-compatible server: `native` (function calling,
     * JSON mode after the server rejects it) or `json` (tools in the prompt). @defaultValue "native"
     */
    toolCalls: ToolCallMode.optional(),
    /** Per-role overrides (`spec`, `plan`, `build`, `review`, `reflect`, `improve`, `agent`). @defaultValue {} */
    roles: strictObject(
      Object.fromEntries(ROLES.map((r) => [r, RoleLlm.optional()])) as Record<Role, z.ZodOptional<typeof RoleLlm>>,
    ).default({}),
    /** Fallbacks of every role that sets none. @defaultValue [] */
    fallback: z.array(FallbackTarget).default([]),
    /**
     * After a model failed over to its fallback, how long its later calls go straight to
     * the fallback, in ms; 0 tries it first every time. @defaultValue 60000
     */
    fallbackCooldownMs: z.number().int().min(0).default(60_000),
  }).default({
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    maxRetries: 2,
    timeoutMs: 120_000,
    maxOutputTokens: 8192,
    prices: {},
    roles: {},
    fallback: [],
    fallbackCooldownMs: 60_000,
  }),
  executor: strictObject({
    /** Runs at once per executor. @defaultValue 2 */
    concurrency: z.number().int().min(1).max(64).default(2),
    /**
     * Runs waiting beyond `concurrency` before new ones are refused. 0: a full executor
     * queues nothing and answers busy, so callers take the run to a replica with a free
     * slot (several executors on several engines: the cluster file sets 0). @defaultValue 32
     */
    queueLimit: z.number().int().min(0).max(10_000).default(32),
    /**
     * A `docker save` archive (gzip allowed) holding the sandbox images: an engine found
     * without them gets them loaded from it at start (an engine no registry reaches).
     * Absent: a missing image stops the executor at start with an error naming it.
     */
    imageArchive: z.string().optional(),
    /** Pre-created containers kept per image. @defaultValue 2 */
    warmPoolSize: z.number().int().min(0).max(32).default(2),
    /** OCI runtime, e.g. "runsc" for gVisor; the engine's default when absent. */
    runtime: z.string().optional(),
    /**
     * Path of the sandbox's seccomp profile (Docker's JSON format). @defaultValue the
     * profile shipped in `deploy/seccomp/sandbox.json` (Docker's default plus io_uring,
     * pidfd_getfd and the other calls no test needs, denied; docs/SANDBOX.md).
     */
    seccompProfile: z.string().optional(),
    /** Cap of stdout and of stderr, each, in bytes. @defaultValue 1048576 */
    outputLimitBytes: z.number().int().min(1024).default(1_048_576),
    /** Processes and threads per container. @defaultValue 128 */
    pidsLimit: z.number().int().min(8).default(128),
    /** CPUs per container (CPU quota). @defaultValue 1 */
    cpus: z.number().positive().max(64).default(1),
    /** Size of the writable workspace tmpfs, in MiB. @defaultValue 128 */
    tmpfsMb: z.number().int().min(8).default(128),
  }).default({
    concurrency: 2,
    queueLimit: 32,
    warmPoolSize: 2,
    outputLimitBytes: 1_048_576,
    pidsLimit: 128,
    cpus: 1,
    tmpfsMb: 128,
  }),
  /** The checks of a candidate before it runs, besides the gate. */
  review: strictObject({
    /**
     * Run the security audit on every task `loopsmith solve` submits (`--audit` for one):
     * bandit or ESLint's security plugin in the sandbox, then the audit model; a high
     * finding blocks the iteration (docs/AUDIT.md). @defaultValue false
     */
    audit: z.boolean().default(false),
  }).default({ audit: false }),
  conductor: strictObject({
    /**
     * Tasks one architect process runs at once (a DAG task gives its slot back while its
     * children run). Each task's sandbox runs are one after another, so this also caps
     * the runs in flight from one architect: keep it at least the sandbox slots of all
     * engines (`docs/CAPACITY.md`). More architect replicas share the intake. @defaultValue 4
     */
    concurrency: z.number().int().min(1).max(256).default(4),
  }).default({ concurrency: 4 }),
  bus: strictObject({
    /** Timeout of one step call, in ms (LLM steps and sandbox runs can be long). @defaultValue 300000 */
    stepTimeoutMs: z.number().int().min(100).default(300_000),
    /** Timeout of a memory call, in ms. @defaultValue 30000 */
    memoryTimeoutMs: z.number().int().min(100).default(30_000),
    /** Retries of a step call on a retryable failure. @defaultValue 2 */
    retries: z.number().int().min(0).max(10).default(2),
    /**
     * Longest silence accepted from a service working on a step, in ms: a step whose
     * service died (or whose request NATS lost) is sent again after this, to another
     * replica (services signal every 2 s while they work). @defaultValue 10000
     */
    livenessMs: z.number().int().min(3_000).default(10_000),
    /**
     * How long a sandbox run keeps asking executors that answer busy (no free slot with
     * `executor.queueLimit` 0, or their engine down), in ms, before the step fails. @defaultValue 600000
     */
    busyWaitMs: z.number().int().min(0).default(600_000),
  }).default({
    stepTimeoutMs: 300_000,
    memoryTimeoutMs: 30_000,
    retries: 2,
    livenessMs: 10_000,
    busyWaitMs: 600_000,
  }),
  /**
   * Memory's pgvector HNSW settings. The defaults were chosen by `npm run bench:memory`
   * (recall@10 against exact search, and latency, at 100,000 failures).
   */
  memory: strictObject({
    /**
     * `hnsw.ef_search`, set on every pooled connection: candidates kept while searching;
     * higher finds more of the true nearest rows, slower. 1 to 1000. @defaultValue 100
     */
    efSearch: z.number().int().min(1).max(1000).default(100),
    /** `m` of an HNSW index memory creates (links per node), 2 to 100. @defaultValue 16 */
    hnswM: z.number().int().min(2).max(100).default(16),
    /**
     * `ef_construction` of an HNSW index memory creates, 4 to 1000 and at least 2 × `hnswM`.
     * Both apply to indexes created from then on; an existing index keeps its own.
     * @defaultValue 64
     */
    hnswEfConstruction: z.number().int().min(4).max(1000).default(64),
    /** The embedder ({@link EmbedderSettings}). @defaultValue the offline hashing embedder */
    embedder: EmbedderSettings.default(EMBEDDER_DEFAULTS),
  }).default({ efSearch: 100, hnswM: 16, hnswEfConstruction: 64, embedder: EMBEDDER_DEFAULTS }),
  /**
   * `loopsmith improve`'s settings ({@link ImproveSection}: ImproveSettings' goal, check,
   * bench, repeats, alpha, …, and `base`, `setupCommand`), so `loopsmith improve` alone works
   * in a configured repository; flags override them.
   */
  improve: ImproveSection.optional(),
}).superRefine((cfg, ctx) => {
  if (cfg.llm.provider === "openai-compatible" && !cfg.llm.baseUrl) {
    ctx.addIssue({
      code: "custom",
      path: ["llm", "baseUrl"],
      message: "the openai-compatible provider needs a base URL",
    });
  }
  if (cfg.memory.hnswEfConstruction < 2 * cfg.memory.hnswM) {
    ctx.addIssue({
      code: "custom",
      path: ["memory", "hnswEfConstruction"],
      message: "must be at least 2 × memory.hnswM (pgvector's rule)",
    });
  }
  const embedder = cfg.memory.embedder;
  if (embedder.kind === "api") {
    for (const key of ["baseUrl", "model", "dimensions"] as const) {
      if (embedder[key] === undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["memory", "embedder", key],
          message: `the api embedder needs memory.embedder.${key}`,
        });
      }
    }
    // A recall or a store waits for the embedder's every try; past the bus's timeout the caller gives up first.
    const worstMs = embedder.timeoutMs * (embedder.maxRetries + 1);
    if (worstMs >= cfg.bus.memoryTimeoutMs) {
      ctx.addIssue({
        code: "custom",
        path: ["memory", "embedder", "timeoutMs"],
        message: `timeoutMs × (maxRetries + 1) is ${worstMs} ms: it must stay below bus.memoryTimeoutMs (${cfg.bus.memoryTimeoutMs} ms)`,
      });
    }
  }
});
export type Config = z.infer<typeof Config>;
export type ConfigInput = z.input<typeof Config>;

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /** A JSON configuration file named on purpose (`--config`); else `LOOPSMITH_CONFIG`. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** The flags layer (highest). */
  flags?: Json;
  /**
   * Whether to read the files found by convention (the user's and the repository's).
   * @defaultValue true
   */
  discover?: boolean;
  /** Where the repository is looked for (its root: the nearest ancestor with `.git`). @defaultValue process.cwd() */
  cwd?: string;
  /** The repository whose `.loopsmith/config.json` or `loopsmith.json` counts, when not the one holding `cwd`. */
  repoRoot?: string;
}

/** A loaded configuration, where each of its values came from, and the files read. */
export interface LoadedConfig {
  config: Config;
  /**
   * The source of every leaf of `config` (a scalar or an array; dotted path, e.g.
   * `llm.model`), in the order of the configuration.
   */
  sources: Record<string, ConfigSource>;
  /** The files read, lowest layer first. */
  files: Array<{ layer: "user" | "repo" | "explicit"; path: string }>;
}

/**
 * One problem of a configuration, as `loopsmith config validate` lists it: a file that cannot
 * be read or parsed, an unknown key, or a bad value.
 */
export interface ConfigProblem {
  /** The layer that set the bad value (a file, an environment variable, a flag); absent when no one layer did. */
  source?: ConfigSource;
  /** The key's dotted path (`llm.modle`); empty for a file as a whole. */
  path: string;
  /** What is wrong: `unknown key llm.modle; did you mean llm.model?`, or the value's problem. */
  message: string;
  /** An unknown key (`message` names its path). */
  unknownKey?: true;
  /** One line for people: where (the file's path, `env NAME`, `flag`), the key path, the problem. */
  line: string;
}

/** A configuration checked: loaded, or every problem found in it. */
export type CheckedConfig = { ok: true; loaded: LoadedConfig } | { ok: false; problems: ConfigProblem[] };

/** The layers merged, before the schema sees them, with the source of each value and the files read. */
interface Layers {
  layered: Json;
  sources: Map<string, ConfigSource>;
  files: LoadedConfig["files"];
  /** The files (or `LOOPSMITH_CONFIG_JSON`) that could not be read or parsed, left out of `layered`. */
  unreadable: Array<{ error: LoopsmithError; source?: ConfigSource }>;
}

/** Reads every layer of {@link loadConfigWithSources}; an unreadable one is recorded and left out. */
function readLayers(opts: LoadConfigOptions): Layers {
  const env = opts.env ?? process.env;
  const sources = new Map<string, ConfigSource>();
  const out: Layers = { layered: {}, sources, files: [], unreadable: [] };
  const addFile = (layer: "user" | "repo" | "explicit", path: string): void => {
    const source: ConfigSource = { kind: "file", layer, path };
    let json: Json;
    try {
      json = readConfigFile(path);
    } catch (err) {
      if (!(err instanceof LoopsmithError)) throw err;
      out.unreadable.push({ error: err, source });
      return;
    }
    out.files.push({ layer, path });
    recordSources(sources, json, () => source);
    out.layered = mergeConfig(out.layered, json);
  };
  if (opts.discover !== false) {
    let found: ReturnType<typeof findConfigFiles> = {};
    try {
      found = findConfigFiles({
        cwd: opts.cwd ?? process.cwd(),
        env,
        ...(opts.repoRoot ? { repoRoot: opts.repoRoot } : {}),
      });
    } catch (err) {
      if (!(err instanceof LoopsmithError)) throw err;
      out.unreadable.push({ error: err });
    }
    if (found.user) addFile("user", found.user);
    if (found.repo) addFile("repo", found.repo);
  }
  const file = opts.file ?? env.LOOPSMITH_CONFIG;
  if (file) addFile("explicit", resolve(file));
  const fromEnv = configFromEnv(env);
  recordSources(sources, fromEnv, (path) => ({ kind: "env", name: envNameOf(path, env) ?? "?" }));
  out.layered = mergeConfig(out.layered, fromEnv);
  if (env.LOOPSMITH_CONFIG_JSON) {
    let carried: Json | undefined;
    try {
      carried = JSON.parse(env.LOOPSMITH_CONFIG_JSON) as Json;
    } catch (err) {
      const error = new LoopsmithError("config_invalid", "LOOPSMITH_CONFIG_JSON is not valid JSON", { cause: err });
      out.unreadable.push({ error, source: { kind: "env", name: "LOOPSMITH_CONFIG_JSON" } });
    }
    if (carried) {
      recordSources(sources, carried, () => ({ kind: "flag" }));
      out.layered = mergeConfig(out.layered, carried);
    }
  }
  if (opts.flags) {
    recordSources(sources, opts.flags, () => ({ kind: "flag" }));
    out.layered = mergeConfig(out.layered, opts.flags);
  }
  out.layered = withProviderCredentials(out.layered, env);
  // The provider's own variables (ANTHROPIC_API_KEY, OPENAI_BASE_URL, …) filled in above.
  for (const [path, value] of leavesOf(out.layered)) {
    if (sourceAt(sources, path).kind !== "default" || typeof value !== "string") continue;
    const name = PROVIDER_VARIABLES.find((n) => env[n] === value);
    if (name) sources.set(path.join("."), { kind: "env", name });
  }
  return out;
}

/**
 * The problems of the schema's issues, one per bad value and one per unknown key (a zod
 * `unrecognized_keys` issue lists every unknown key of one object, its message one line per
 * key: see `unknownKeysError`), each with the layer that set it.
 */
function schemaProblems(
  issues: readonly z.core.$ZodIssue[],
  sources: ReadonlyMap<string, ConfigSource>,
): ConfigProblem[] {
  const sourceOf = (path: string[]): ConfigSource => {
    const source = sourceAt(sources, path);
    if (source.kind !== "default") return source;
    // A missing or cross-field value: the layer that set something beneath it.
    const under = [...sources.entries()].find(([k]) => path.length === 0 || k.startsWith(`${path.join(".")}.`));
    return under ? under[1] : source;
  };
  const where = (source: ConfigSource): string => (source.kind === "file" ? source.path : describeSource(source));
  return issues.flatMap((issue): ConfigProblem[] => {
    const at = issue.path.map(String);
    if (issue.code === "unrecognized_keys") {
      const lines = issue.message.split("\n");
      return issue.keys.map((key, i) => {
        const source = sourceOf([...at, key]);
        const path = [...at, key].join(".");
        const message = (lines.length === issue.keys.length && lines[i]) || `unknown key ${path}`;
        return { source, path, message, unknownKey: true, line: `${where(source)}: ${message}` };
      });
    }
    const source = sourceOf(at);
    const path = at.join(".");
    return [
      { source, path, message: issue.message, line: `${where(source)}: ${path || "(top level)"}: ${issue.message}` },
    ];
  });
}

/**
 * Checks the configuration as {@link loadConfigWithSources} loads it, collecting every problem
 * instead of stopping at the first: each file that cannot be read or parsed (left out, the
 * other layers still checked), each unknown key, each bad value, with the layer that set it.
 * @returns `{ ok: true, loaded }` (as `loadConfigWithSources` returns it), or `{ ok: false, problems }`
 *   with every problem; never throws for a bad configuration
 */
export function checkConfig(opts: LoadConfigOptions = {}): CheckedConfig {
  const layers = readLayers(opts);
  const parsed = parseLayers(layers);
  const problems: ConfigProblem[] = [
    ...layers.unreadable.map(({ error, source }) => ({
      ...(source ? { source } : {}),
      path: "",
      message: error.message,
      line: error.message,
    })),
    ...(parsed.ok ? [] : parsed.problems),
  ];
  return parsed.ok && problems.length === 0 ? parsed : { ok: false, problems };
}

/** The merged layers through the schema: the configuration with the source of each value, or the schema's problems. */
function parseLayers(layers: Layers): CheckedConfig & { issues?: z.core.$ZodIssue[] } {
  const parsed = Config.safeParse(layers.layered);
  if (!parsed.success)
    return { ok: false, problems: schemaProblems(parsed.error.issues, layers.sources), issues: parsed.error.issues };
  const ordered: Record<string, ConfigSource> = {};
  for (const [path] of leavesOf(parsed.data)) ordered[path.join(".")] = sourceAt(layers.sources, path);
  return { ok: true, loaded: { config: parsed.data, sources: ordered, files: layers.files } };
}

/**
 * Loads and validates the configuration. Layers, later wins: defaults < the user's file
 * (`$XDG_CONFIG_HOME/loopsmith/config.json`) < the repository's file (`.loopsmith/config.json`
 * or `loopsmith.json` at its root) < the file named by `--config` or `LOOPSMITH_CONFIG` <
 * environment < flags (`LOOPSMITH_CONFIG_JSON`, then `opts.flags`). Unknown keys are errors,
 * in every layer ({@link checkConfig} lists every problem).
 * @throws LoopsmithError `config_invalid` naming the file (and line and column) of a file that
 *   cannot be read or parsed, or each unknown key (`unknown key llm.modle; did you mean
 *   llm.model?`) and bad key with the layer that set it
 */
export function loadConfigWithSources(opts: LoadConfigOptions = {}): LoadedConfig {
  const layers = readLayers(opts);
  const first = layers.unreadable[0];
  if (first) throw first.error;
  const parsed = parseLayers(layers);
  if (parsed.ok) return parsed.loaded;
  throw invalidConfig(parsed.problems, parsed.issues);
}

/** The error of a configuration with `problems`: the files that set them, then each problem and its layer. */
function invalidConfig(problems: readonly ConfigProblem[], issues: unknown): LoopsmithError {
  const lines = problems.map((p) => {
    const by = ` (set by ${describeSource(p.source ?? { kind: "default" })})`;
    return p.unknownKey ? `${p.message}${by}` : `${p.path || "(top level)"}: ${p.message}${by}`;
  });
  const fileOf = new Set(problems.flatMap((p) => (p.source?.kind === "file" ? [p.source.path] : [])));
  return new LoopsmithError(
    "config_invalid",
    `invalid configuration${fileOf.size ? ` in ${[...fileOf].join(", ")}` : ""}: ${lines.join("; ")}`,
    { details: issues },
  );
}

/**
 * Checks the `improve` section of a repository's configuration file read on its own (as
 * `loopsmith improve --repo` reads the repository's `loopsmith.json`) against {@link ImproveSection}.
 * @returns the section as it is (no defaults added)
 * @throws LoopsmithError `config_invalid` naming the file and each unknown key or bad value
 */
export function checkImproveSection(section: unknown, file: string): Record<string, unknown> {
  const parsed = strictObject({ improve: ImproveSection }).safeParse({ improve: section });
  if (parsed.success) return section as Record<string, unknown>;
  const sources = new Map<string, ConfigSource>([["improve", { kind: "file", layer: "repo", path: file }]]);
  throw invalidConfig(schemaProblems(parsed.error.issues, sources), parsed.error.issues);
}

/** The provider-specific variables {@link withProviderCredentials} reads. */
const PROVIDER_VARIABLES = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"];

/**
 * Loads and validates the configuration (see {@link loadConfigWithSources} for the layers).
 * @throws LoopsmithError `config_invalid` naming the bad keys, or a file that cannot be read.
 */
export function loadConfig(opts: LoadConfigOptions = {}): Config {
  return loadConfigWithSources(opts).config;
}

/**
 * The price of `model` under the `llm` defaults' provider: `llm.prices`, then
 * `@pydantic/genai-prices`' bundled data; its `source.kind` is `unknown` (and its rates zero)
 * when neither prices it. A role's own prices: `effectiveRoles(config)[role].price`.
 */
export function priceOf(cfg: Config, model: string): Pricing {
  return lookupPricing({ provider: cfg.llm.provider, model, baseUrl: cfg.llm.baseUrl, prices: cfg.llm.prices });
}

/**
 * The owner token a client acts as: `nats.owner` (`LOOPSMITH_OWNER`) when set, else the NATS
 * user's name when it is a valid token, else {@link DEFAULT_OWNER}. Under the permission
 * matrix a client user's tasks carry its user name, so the default is right for it.
 */
export function ownerOf(config: Pick<Config, "nats">): string {
  const user = config.nats.user;
  return config.nats.owner ?? (user && OWNER_PATTERN.test(user) ? user : DEFAULT_OWNER);
}
