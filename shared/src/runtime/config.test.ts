import { describe, expect, it } from "vitest";
import { loadConfig } from "./config.js";
import { maskConfig, maskUrl } from "./mask.js";

describe("configuration", () => {
  it("layers defaults < file < environment < flags", () => {
    const cfg = loadConfig({
      env: { LOOPSMITH_MODEL: "from-env", LOOPSMITH_EXECUTOR_CONCURRENCY: "3" },
      flags: { llm: { model: "from-flags" } },
    });
    expect(cfg.llm.model).toBe("from-flags");
    expect(cfg.executor.concurrency).toBe(3);
    expect(cfg.executor.warmPoolSize).toBe(2);
  });

  it("never sends one provider's key to another", () => {
    const env = {
      ANTHROPIC_API_KEY: "sk-ant-secret",
      OPENAI_API_KEY: "sk-openai",
      OPENAI_BASE_URL: "http://127.0.0.1:1/v1",
    };
    const openai = loadConfig({ env, flags: { llm: { provider: "openai-compatible" } } });
    expect(openai.llm.apiKey).toBe("sk-openai");
    expect(openai.llm.baseUrl).toBe("http://127.0.0.1:1/v1");
    const anthropic = loadConfig({ env });
    expect(anthropic.llm.apiKey).toBe("sk-ant-secret");
    expect(anthropic.llm.baseUrl).toBeUndefined();
    const explicit = loadConfig({ env: { ...env, LOOPSMITH_API_KEY: "mine" } });
    expect(explicit.llm.apiKey).toBe("mine");
  });

  it("rejects an invalid configuration with the key named", () => {
    // A scripted stack needs no script file: each task may carry its own replies (Task.script).
    expect(loadConfig({ env: { LOOPSMITH_PROVIDER: "scripted" } }).llm.scriptPath).toBeUndefined();
    expect(() => loadConfig({ env: { LOOPSMITH_EXECUTOR_CONCURRENCY: "zero" } })).toThrow(/concurrency/);
  });

  it("several engines: the executor's queue limit and image archive, the conductor's concurrency, the busy wait", () => {
    const defaults = loadConfig({ env: {} });
    expect([
      defaults.executor.queueLimit,
      defaults.executor.imageArchive,
      defaults.conductor.concurrency,
      defaults.bus.busyWaitMs,
    ]).toEqual([32, undefined, 4, 600_000]);
    const cfg = loadConfig({
      env: {
        LOOPSMITH_EXECUTOR_QUEUE_LIMIT: "0",
        LOOPSMITH_SANDBOX_IMAGES: "/images/sandbox.tar",
        LOOPSMITH_CONDUCTOR_CONCURRENCY: "12",
      },
    });
    expect([cfg.executor.queueLimit, cfg.executor.imageArchive, cfg.conductor.concurrency]).toEqual([
      0,
      "/images/sandbox.tar",
      12,
    ]);
    expect(() => loadConfig({ env: { LOOPSMITH_CONDUCTOR_CONCURRENCY: "0" } })).toThrow(/concurrency/);
  });

  it("memory's HNSW settings: defaults, file < environment, and pgvector's limits", () => {
    expect(loadConfig({ env: {} }).memory).toMatchObject({ efSearch: 100, hnswM: 16, hnswEfConstruction: 64 });
    const cfg = loadConfig({
      env: {
        LOOPSMITH_HNSW_EF_SEARCH: "200",
        LOOPSMITH_HNSW_M: "24",
        LOOPSMITH_CONFIG_JSON: JSON.stringify({ memory: { hnswEfConstruction: 100 } }),
      },
    });
    expect(cfg.memory).toMatchObject({ efSearch: 200, hnswM: 24, hnswEfConstruction: 100 });
    expect(() => loadConfig({ env: { LOOPSMITH_HNSW_EF_SEARCH: "1001" } })).toThrow(/efSearch/);
    expect(() => loadConfig({ env: { LOOPSMITH_HNSW_M: "40", LOOPSMITH_HNSW_EF_CONSTRUCTION: "64" } })).toThrow(
      /memory\.hnswEfConstruction: must be at least 2 × memory\.hnswM/,
    );
  });

  it("memory's embedder: the hashing one by default; the api one from the file or the environment, with what it needs", () => {
    const hashing = {
      kind: "hashing",
      truncate: false,
      timeoutMs: 5_000,
      maxRetries: 2,
      cooldownMs: 30_000,
      batchSize: 32,
      reembed: true,
    };
    expect(loadConfig({ env: {} }).memory.embedder).toEqual(hashing);
    // Another memory setting given: the embedder's defaults still apply.
    expect(loadConfig({ env: { LOOPSMITH_HNSW_M: "8" } }).memory.embedder).toEqual(hashing);
    const fromEnv = loadConfig({
      env: {
        LOOPSMITH_EMBEDDER: "api",
        LOOPSMITH_EMBEDDINGS_BASE_URL: "http://127.0.0.1:8080/v1",
        LOOPSMITH_EMBEDDINGS_MODEL: "text-embedding-3-small",
        LOOPSMITH_EMBEDDINGS_API_KEY: "sk-embeddings-0123456789abcdef",
        LOOPSMITH_EMBEDDINGS_DIMENSIONS: "512",
        LOOPSMITH_EMBEDDINGS_TRUNCATE: "true",
        LOOPSMITH_EMBEDDINGS_REEMBED: "0",
        LOOPSMITH_EMBEDDINGS_TIMEOUT_MS: "2000",
        LOOPSMITH_EMBEDDINGS_MAX_RETRIES: "1",
        LOOPSMITH_EMBEDDINGS_COOLDOWN_MS: "0",
        LOOPSMITH_EMBEDDINGS_BATCH_SIZE: "8",
      },
    }).memory.embedder;
    expect(fromEnv).toEqual({
      kind: "api",
      baseUrl: "http://127.0.0.1:8080/v1",
      model: "text-embedding-3-small",
      apiKey: "sk-embeddings-0123456789abcdef",
      dimensions: 512,
      truncate: true,
      reembed: false,
      timeoutMs: 2_000,
      maxRetries: 1,
      cooldownMs: 0,
      batchSize: 8,
    });
    const fromFile = loadConfig({
      env: {
        LOOPSMITH_CONFIG_JSON: JSON.stringify({
          memory: { embedder: { kind: "api", baseUrl: "https://api.openai.com/v1", model: "m", dimensions: 1536 } },
        }),
      },
    }).memory.embedder;
    expect(fromFile).toMatchObject({ kind: "api", model: "m", dimensions: 1536, truncate: false, reembed: true });
    expect(() => loadConfig({ env: { LOOPSMITH_EMBEDDER: "api" } })).toThrow(
      /memory\.embedder\.baseUrl: the api embedder needs memory\.embedder\.baseUrl.*memory\.embedder\.model.*memory\.embedder\.dimensions/,
    );
    const api = {
      LOOPSMITH_EMBEDDER: "api",
      LOOPSMITH_EMBEDDINGS_BASE_URL: "http://127.0.0.1:8080/v1",
      LOOPSMITH_EMBEDDINGS_MODEL: "m",
    };
    expect(() => loadConfig({ env: { ...api, LOOPSMITH_EMBEDDINGS_DIMENSIONS: "3072" } })).toThrow(
      /memory\.embedder\.dimensions/,
    );
    expect(() =>
      loadConfig({ env: { ...api, LOOPSMITH_EMBEDDINGS_DIMENSIONS: "8", LOOPSMITH_EMBEDDINGS_TRUNCATE: "maybe" } }),
    ).toThrow(/memory\.embedder\.truncate/);
    expect(() =>
      loadConfig({
        env: { ...api, LOOPSMITH_EMBEDDINGS_DIMENSIONS: "8", LOOPSMITH_EMBEDDINGS_BASE_URL: "ftp://x/v1" },
      }),
    ).toThrow(/memory\.embedder\.baseUrl/);
    // Every try of a recall must fit in the caller's wait for memory.
    expect(() =>
      loadConfig({ env: { ...api, LOOPSMITH_EMBEDDINGS_DIMENSIONS: "8", LOOPSMITH_EMBEDDINGS_TIMEOUT_MS: "10000" } }),
    ).toThrow(/timeoutMs × \(maxRetries \+ 1\) is 30000 ms: it must stay below bus\.memoryTimeoutMs \(30000 ms\)/);
    expect(() =>
      loadConfig({
        env: { LOOPSMITH_CONFIG_JSON: JSON.stringify({ memory: { embedder: { kind: "hashing", modle: "x" } } }) },
      }),
    ).toThrow(/unknown key memory\.embedder\.modle; did you mean memory\.embedder\.model\?/);
    // The key is a secret where the configuration is shown.
    expect(
      JSON.stringify(
        maskConfig(
          loadConfig({
            env: { ...api, LOOPSMITH_EMBEDDINGS_DIMENSIONS: "8", LOOPSMITH_EMBEDDINGS_API_KEY: "local-key-1" },
          }),
        ),
      ),
    ).not.toContain("local-key-1");
  });

  it("masks secrets and URL passwords", () => {
    const cfg = loadConfig({
      env: { ANTHROPIC_API_KEY: "sk-ant-0123456789", DATABASE_URL: "postgres://u:hunter2@db/x" },
    });
    const text = JSON.stringify(maskConfig(cfg));
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("0123456789");
    expect(text).toContain("[masked]");
    const tokenOnly = maskConfig(
      loadConfig({
        env: { NATS_URL: "nats://s3cr3t@host:4222", DATABASE_URL: "postgres://db/x?sslmode=require&password=pw123" },
      }),
    );
    expect(JSON.stringify(tokenOnly)).not.toMatch(/s3cr3t|pw123/);
    expect(tokenOnly.natsUrl).toBe("nats://[masked]@host:4222");
  });

  describe("config show masks every secret wherever it sits", () => {
    const shown = (env: NodeJS.ProcessEnv, flags?: Record<string, unknown>): string =>
      JSON.stringify(maskConfig(loadConfig({ env, ...(flags ? { flags } : {}) })));

    it("URL user info: user:password, a token alone, a password holding @ / :, every URL of a server list", () => {
      expect(maskUrl("postgres://app:hunter2@db:5432/x")).toBe("postgres://[masked]@db:5432/x");
      expect(maskUrl("nats://s3cr3t@host:4222")).toBe("nats://[masked]@host:4222");
      expect(maskUrl("postgres://app:p@ss/w:rd@db/x")).toBe("postgres://[masked]@db/x");
      expect(maskUrl("nats://a:pw1@h1:4222,nats://b:pw2@h2:4222")).toBe(
        "nats://[masked]@h1:4222,nats://[masked]@h2:4222",
      );
      expect(maskUrl("https://api.example.com/v1")).toBe("https://api.example.com/v1");
    });

    it("query, fragment and libpq parameters named like secrets; other parameters kept", () => {
      const url = "postgres://db/x?sslmode=require&sslpassword=pw1&password=pw2&application_name=loopsmith";
      expect(maskUrl(url)).toBe(
        "postgres://db/x?sslmode=require&sslpassword=[masked]&password=[masked]&application_name=loopsmith",
      );
      expect(maskUrl("https://gw.example.com/v1?key=k1&api_key=k2&api-key=k3&token=t1&access_token=t2&model=x")).toBe(
        "https://gw.example.com/v1?key=[masked]&api_key=[masked]&api-key=[masked]&token=[masked]&access_token=[masked]&model=x",
      );
      expect(maskUrl("https://h/cb#access_token=t3&state=s")).toBe("https://h/cb#access_token=[masked]&state=s");
      expect(maskUrl("host=db user=app password=pw4 sslmode=require")).toBe(
        "host=db user=app password=[masked] sslmode=require",
      );
    });

    it("every URL-valued field: databaseUrl, natsUrl (also without a scheme), llm.baseUrl, a role's baseUrl", () => {
      const text = shown({
        DATABASE_URL: "postgres://u:dbpass1@db/x?sslpassword=dbpass2",
        NATS_URL: "natsuser:natspass@127.0.0.1:4222",
        LOOPSMITH_PROVIDER: "openai-compatible",
        LOOPSMITH_BASE_URL: "https://proxy.example.com/v1?key=basekey1",
      });
      for (const secret of ["dbpass1", "dbpass2", "natsuser", "natspass", "basekey1"])
        expect(text).not.toContain(secret);
      expect(text).toContain("127.0.0.1:4222");
      expect(text).toContain("proxy.example.com/v1");
    });

    it("keys named like secrets anywhere in the tree, in objects and arrays, from env, file or flags", () => {
      const masked = maskConfig({
        llm: {
          apiKey: "sk-ant-api03-abcdefghijklmnop",
          fallback: [{ provider: "openai-compatible", apiKey: "fallbackkey1", baseUrl: "http://u:fbpass@h/v1" }],
        },
        executor: { env: { GITHUB_TOKEN: "ghtoken1", DB_PASSWORD: "dbpw1", CLIENT_SECRET: "cs1", HOME: "/home/x" } },
        tokens: ["tok1", "tok2"],
        maxTokens: 100,
      });
      const text = JSON.stringify(masked);
      for (const secret of ["abcdefghijklmnop", "fallbackkey1", "fbpass", "ghtoken1", "dbpw1", "cs1", "tok1", "tok2"])
        expect(text).not.toContain(secret);
      expect(text).toContain("/home/x");
      expect((masked as { maxTokens: number }).maxTokens).toBe(100);
    });

    it("values that look like API keys, wherever they sit (a key in a URL path)", () => {
      expect(maskUrl("https://gw.example.com/sk-ant-api03-0123456789abcdef/v1")).toBe(
        "https://gw.example.com/[masked]/v1",
      );
      expect(JSON.stringify(maskConfig({ note: "ghp_0123456789abcdefghij0123" }))).not.toContain(
        "0123456789abcdefghij",
      );
      expect(maskConfig({ dataDir: "/tmp/loopsmith-task-0123456789abcdef" })).toEqual({
        dataDir: "/tmp/loopsmith-task-0123456789abcdef",
      });
    });
  });
});
