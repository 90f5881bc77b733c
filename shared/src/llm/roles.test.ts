import { describe, expect, it } from "vitest";
import { loadConfig } from "../runtime/config.js";
import { effectiveRoles, resolveRoutes } from "./roles.js";

const load = (env: Record<string, string>, flags?: Record<string, unknown>) =>
  loadConfig({ env, ...(flags ? { flags } : {}) });

describe("per-role configuration", () => {
  it("reads LOOPSMITH_{PROVIDER,MODEL,BASE_URL,API_KEY}_<ROLE>; roles left alone use the llm defaults", () => {
    const config = load({
      ANTHROPIC_API_KEY: "sk-ant",
      OPENAI_API_KEY: "sk-oai",
      LOOPSMITH_MODEL_PLAN: "claude-opus-4-1",
      LOOPSMITH_PROVIDER_BUILD: "openai-compatible",
      LOOPSMITH_MODEL_BUILD: "qwen2.5-coder:14b",
      LOOPSMITH_BASE_URL_BUILD: "http://localhost:11434/v1",
      LOOPSMITH_API_KEY_REVIEW: "sk-ant-review",
    });
    expect(config.llm.roles.build).toEqual({
      provider: "openai-compatible",
      model: "qwen2.5-coder:14b",
      baseUrl: "http://localhost:11434/v1",
      apiKey: "sk-oai",
    });
    const routes = resolveRoutes(config);
    expect(routes.plan.primary).toMatchObject({ provider: "anthropic", model: "claude-opus-4-1", apiKey: "sk-ant" });
    expect(routes.build.primary).toMatchObject({
      provider: "openai-compatible",
      apiKey: "sk-oai",
      baseUrl: "http://localhost:11434/v1",
    });
    expect(routes.review.primary).toMatchObject({
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      apiKey: "sk-ant-review",
    });
    // spec writes the plan of an inline task without tests: it takes plan's model.
    expect(routes.spec.primary).toMatchObject({
      provider: "anthropic",
      model: "claude-opus-4-1",
      apiKey: "sk-ant",
      source: "llm.roles.plan",
    });
  });

  it("never sends one provider's key or URL to another", () => {
    const config = load(
      { ANTHROPIC_API_KEY: "sk-ant", ANTHROPIC_BASE_URL: "http://anthropic-proxy" },
      {
        llm: {
          roles: {
            build: {
              provider: "openai-compatible",
              model: "llama3.1",
              baseUrl: "http://127.0.0.1:8080/v1",
              fallback: [{ provider: "bedrock", model: "us.anthropic.claude-haiku-4-5-20251001-v1:0" }],
            },
          },
        },
      },
    );
    const build = resolveRoutes(config).build;
    expect(build.primary.apiKey).toBeUndefined();
    expect(build.fallbacks[0]).toMatchObject({ provider: "bedrock", apiKey: undefined, baseUrl: undefined });
  });

  it("a role with fallbacks of its own replaces llm.fallback; [] turns them off; duplicates of the primary are dropped", () => {
    const config = load(
      { ANTHROPIC_API_KEY: "sk-ant" },
      {
        llm: {
          fallback: [{ provider: "anthropic", model: "claude-haiku-4-5" }],
          roles: {
            plan: {
              model: "claude-opus-4-1",
              maxTokens: 4000,
              fallback: [{ provider: "anthropic", model: "claude-sonnet-4-6" }],
            },
            build: { model: "claude-haiku-4-5" },
            review: { fallback: [] },
          },
        },
      },
    );
    const r = resolveRoutes(config);
    expect(r.plan.fallbacks.map((f) => [f.model, f.apiKey, f.maxOutputTokens, f.source])).toEqual([
      ["claude-sonnet-4-6", "sk-ant", 4000, "llm.roles.plan.fallback[0]"],
    ]);
    expect(r.build.fallbacks).toEqual([]);
    expect(r.review.fallbacks).toEqual([]);
    expect(r.reflect.fallbacks.map((f) => [f.model, f.source])).toEqual([["claude-haiku-4-5", "llm.fallback[0]"]]);
  });

  it("refuses what cannot work, naming the key: a provider switch without a model, an openai-compatible role without a URL, an unknown role", () => {
    expect(() => resolveRoutes(load({ LOOPSMITH_PROVIDER_BUILD: "bedrock" }))).toThrow(
      expect.objectContaining({ code: "config_invalid", message: expect.stringContaining("LOOPSMITH_MODEL_BUILD") }),
    );
    expect(() =>
      resolveRoutes(load({ LOOPSMITH_PROVIDER_REVIEW: "openai-compatible", LOOPSMITH_MODEL_REVIEW: "m" })),
    ).toThrow(
      expect.objectContaining({
        code: "config_invalid",
        message: expect.stringContaining("LOOPSMITH_BASE_URL_REVIEW"),
      }),
    );
    expect(() => load({}, { llm: { roles: { planner: { model: "x" } } } })).toThrow(
      expect.objectContaining({ code: "config_invalid" }),
    );
    expect(() => load({}, { llm: { fallback: [{ provider: "bedrock" }] } })).toThrow(
      expect.objectContaining({ code: "config_invalid" }),
    );
  });

  it("effectiveRoles: what config show prints, without secrets", () => {
    const config = load(
      { ANTHROPIC_API_KEY: "sk-ant-secret" },
      {
        llm: {
          roles: {
            plan: {
              model: "claude-opus-4-1",
              fallback: [{ provider: "bedrock", model: "us.anthropic.claude-opus-4-1-20250805-v1:0" }],
            },
            build: { model: "claude-haiku-4-5", temperature: 0 },
          },
        },
      },
    );
    const roles = effectiveRoles(config);
    expect(roles.plan).toEqual({
      provider: "anthropic",
      model: "claude-opus-4-1",
      maxOutputTokens: 8192,
      fallback: [{ provider: "bedrock", model: "us.anthropic.claude-opus-4-1-20250805-v1:0" }],
      price: expect.objectContaining({ source: "@pydantic/genai-prices anthropic/claude-opus-4-1" }),
      plans: expect.stringContaining("repository tasks"),
    });
    expect(roles.build).toMatchObject({ model: "claude-haiku-4-5", temperature: 0, fallback: [] });
    expect(roles.spec).toMatchObject({ model: "claude-opus-4-1", sameAs: "plan" });
    expect(JSON.stringify(roles)).not.toContain("sk-ant-secret");
  });
});
