import { describe, expect, it } from "vitest";
import { loadConfig, maskConfig } from "./config.js";

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
    const env = { ANTHROPIC_API_KEY: "sk-ant-secret", OPENAI_API_KEY: "sk-openai", OPENAI_BASE_URL: "http://127.0.0.1:1/v1" };
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
    expect(() => loadConfig({ env: { LOOPSMITH_PROVIDER: "scripted" } })).toThrow(/scriptPath/);
    expect(() => loadConfig({ env: { LOOPSMITH_EXECUTOR_CONCURRENCY: "zero" } })).toThrow(/concurrency/);
  });

  it("masks secrets and URL passwords", () => {
    const cfg = loadConfig({ env: { ANTHROPIC_API_KEY: "sk-ant-0123456789", DATABASE_URL: "postgres://u:hunter2@db/x" } });
    const text = JSON.stringify(maskConfig(cfg));
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("0123456789");
    expect(text).toContain("[masked]");
    const tokenOnly = maskConfig(loadConfig({ env: { NATS_URL: "nats://s3cr3t@host:4222", DATABASE_URL: "postgres://db/x?sslmode=require&password=pw123" } }));
    expect(JSON.stringify(tokenOnly)).not.toMatch(/s3cr3t|pw123/);
    expect(tokenOnly.natsUrl).toBe("nats://[masked]@host:4222");
  });
});
