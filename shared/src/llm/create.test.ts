import pino from "pino";
import { describe, expect, it } from "vitest";
import { Config } from "../config.js";
import { basePriceKey, createProvider, resolvePrice } from "./create.js";

const log = pino({ level: "silent" });

describe("createProvider", () => {
  it("refuses an anthropic provider without an API key, naming ANTHROPIC_API_KEY", () => {
    const config = Config.parse({ llm: { provider: "anthropic" } });
    expect(() => createProvider({ config, log })).toThrow(
      expect.objectContaining({ code: "config_invalid", message: expect.stringContaining("ANTHROPIC_API_KEY") }),
    );
  });

  it("builds each real provider with its info", () => {
    const a = createProvider({ config: Config.parse({ llm: { provider: "anthropic", apiKey: "k" } }), log });
    expect(a.info).toEqual({ name: "anthropic", model: "claude-sonnet-4-6", scripted: false });
    const o = createProvider({
      config: Config.parse({ llm: { provider: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1", model: "llama3" } }),
      log,
    });
    expect(o.info).toEqual({ name: "openai-compatible", model: "llama3", scripted: false });
  });
});

describe("createProvider with per-role models", () => {
  it("info names the llm default; a role's anthropic model without a key is refused naming the role", () => {
    const routed = createProvider({
      config: Config.parse({
        llm: { provider: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1", model: "llama3", roles: { plan: { model: "qwen3" } } },
      }),
      log,
    });
    expect(routed.info).toEqual({ name: "openai-compatible", model: "llama3", scripted: false });
    const config = Config.parse({
      llm: { provider: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1", roles: { plan: { provider: "anthropic", model: "claude-opus-4-1" } } },
    });
    expect(() => createProvider({ config, log })).toThrow(
      expect.objectContaining({ code: "config_invalid", message: expect.stringContaining("llm.roles.plan") }),
    );
  });
});

describe("prices", () => {
  it("maps Bedrock and dated ids to the base model", () => {
    expect(basePriceKey("us.anthropic.claude-sonnet-4-5-20250929-v1:0")).toBe("claude-sonnet-4-5");
    expect(basePriceKey("anthropic.claude-haiku-4-5-20251001-v1:0")).toBe("claude-haiku-4-5");
    expect(basePriceKey("claude-opus-4-1-20250805")).toBe("claude-opus-4-1");
    expect(basePriceKey("gpt-4o")).toBe("gpt-4o");
  });

  it("prefers configured prices, then defaults, else free", () => {
    const config = Config.parse({ llm: { prices: { "my-model": { inputPerMTok: 7, outputPerMTok: 9 } } } });
    expect(resolvePrice(config, "my-model", log)).toMatchObject({ inputPerMTok: 7, outputPerMTok: 9 });
    expect(resolvePrice(config, "claude-haiku-4-5-20251001", log)).toMatchObject({ inputPerMTok: 1, outputPerMTok: 5 });
    expect(resolvePrice(config, "unknown", log)).toMatchObject({ inputPerMTok: 0, outputPerMTok: 0 });
  });
});
