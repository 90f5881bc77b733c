import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { calcPrice } from "@pydantic/genai-prices";
import pino from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Config, loadConfig, type ConfigInput } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
import { createProvider } from "./create.js";
import { lookupPricing, refuseUnpriced } from "./prices.js";
import { effectiveRoles, resolveRoutes, unpricedModels } from "./roles.js";
import type { Budget } from "../contracts/common.js";
import type { CompletionRequest } from "./types.js";

const log = pino({ level: "silent" });
const Answer = z.object({ steps: z.array(z.string()).min(1) });
const ANSWER = { steps: ["write add()"] };

/** The usage the fake server reports, Anthropic's wire names; set per test. */
let usage = { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };
/** Requests the fake server received. */
let requests: string[] = [];
let server: Server;
let base = "";

// One local server for both wire formats: Anthropic's /v1/messages (a forced tool call) and
// OpenAI's /v1/chat/completions (JSON in the message). It counts every request.
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      requests.push(req.url ?? "");
      res.setHeader("content-type", "application/json");
      if (req.url?.endsWith("/messages")) {
        res.end(
          JSON.stringify({
            id: "msg_1",
            type: "message",
            role: "assistant",
            model: "m",
            content: [{ type: "tool_use", id: "toolu_1", name: "plan", input: ANSWER }],
            stop_reason: "tool_use",
            usage,
          }),
        );
        return;
      }
      res.end(
        JSON.stringify({
          id: "c1",
          object: "chat.completion",
          created: 0,
          model: "m",
          choices: [
            { index: 0, message: { role: "assistant", content: JSON.stringify(ANSWER) }, finish_reason: "stop" },
          ],
          usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
        }),
      );
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((ok) => server.close(() => ok())));
beforeEach(() => {
  requests = [];
});

function request(budget?: Budget): CompletionRequest<z.infer<typeof Answer>> {
  return {
    role: "plan",
    system: "You plan small coding tasks.",
    messages: [{ role: "user", content: "Write add(a, b) in Python." }],
    schema: Answer,
    schemaName: "plan",
    context: { taskId: "t-1", iteration: 0 },
    ...(budget ? { budget } : {}),
  };
}

const config = (llm: NonNullable<ConfigInput["llm"]>): Config =>
  Config.parse({ llm: { maxRetries: 0, timeoutMs: 5_000, maxOutputTokens: 1_000, ...llm } });

const local = (extra: NonNullable<ConfigInput["llm"]> = {}): Config =>
  config({ provider: "openai-compatible", baseUrl: `${base}/v1`, model: "qwen2.5-coder:7b", ...extra });

describe("prices from @pydantic/genai-prices, configuration as override", () => {
  it("a priced model's cost is the package's price of the usage the API reported (tiers and cache included)", async () => {
    const provider = createProvider({
      config: config({ provider: "anthropic", apiKey: "k", baseUrl: base, model: "claude-sonnet-4-5" }),
      log,
    });
    // A recorded usage past the 200k-token tier of Claude Sonnet 4.5, with cache reads and writes.
    usage = {
      input_tokens: 150_000,
      output_tokens: 2_000,
      cache_read_input_tokens: 60_000,
      cache_creation_input_tokens: 10_000,
    };
    const done = await provider.complete(request());
    expect(done.usage).toMatchObject({
      inputTokens: 150_000,
      outputTokens: 2_000,
      cacheReadTokens: 60_000,
      cacheWriteTokens: 10_000,
    });
    // genai-prices counts input_tokens as the total input, cache included.
    const expected = calcPrice(
      { input_tokens: 220_000, output_tokens: 2_000, cache_read_tokens: 60_000, cache_write_tokens: 10_000 },
      "claude-sonnet-4-5",
      { providerId: "anthropic" },
    );
    expect(expected).not.toBeNull();
    expect(done.usage.costUsd).toBeCloseTo(expected!.total_price, 12);
    // The tier applies: more than the base rates of the same tokens would cost.
    const rates = lookupPricing({ provider: "anthropic", model: "claude-sonnet-4-5", prices: {} }).rates;
    const flat =
      (150_000 * rates.inputPerMTok +
        2_000 * rates.outputPerMTok +
        60_000 * rates.cacheReadPerMTok +
        10_000 * rates.cacheWritePerMTok) /
      1e6;
    expect(done.usage.costUsd).toBeGreaterThan(flat);
  });

  it("gpt-4o on OpenAI's API is priced from the package's own data for a fixed usage", () => {
    const pricing = lookupPricing({
      provider: "openai-compatible",
      model: "gpt-4o",
      baseUrl: "https://api.openai.com/v1",
      prices: {},
    });
    expect(pricing.source).toEqual({ kind: "genai-prices", provider: "openai", model: "gpt-4o" });
    const tokens = { inputTokens: 1_000, outputTokens: 500, cacheReadTokens: 4_000, cacheWriteTokens: 0 };
    const hit = calcPrice({ input_tokens: 5_000, output_tokens: 500, cache_read_tokens: 4_000 }, "gpt-4o", {
      providerId: "openai",
    });
    const p = hit!.model_price as Record<string, number>;
    const byHand = (1_000 * p.input_mtok! + 500 * p.output_mtok! + 4_000 * p.cache_read_mtok!) / 1e6;
    expect(pricing.costOf(tokens)).toBeCloseTo(byHand, 12);
    expect(pricing.rates).toMatchObject({ inputPerMTok: p.input_mtok, outputPerMTok: p.output_mtok });
  });

  it("llm.prices wins over the package, a role's prices win over llm.prices, and ids match by their base id", () => {
    const c = config({
      provider: "anthropic",
      apiKey: "k",
      prices: { "claude-sonnet-4-6": { inputPerMTok: 1, outputPerMTok: 2 } },
      roles: { build: { prices: { "claude-sonnet-4-6": { inputPerMTok: 5, outputPerMTok: 6 } } } },
    });
    const routes = resolveRoutes(c);
    const plan = lookupPricing(routes.plan.primary);
    expect(plan.source).toEqual({ kind: "config", key: 'llm.prices["claude-sonnet-4-6"]' });
    expect(plan.costOf({ inputTokens: 1e6, outputTokens: 1e6, cacheReadTokens: 0, cacheWriteTokens: 0 })).toBe(3);
    expect(lookupPricing(routes.build.primary)).toMatchObject({
      source: { kind: "config", key: 'llm.roles.build.prices["claude-sonnet-4-6"]' },
      rates: { inputPerMTok: 5, outputPerMTok: 6 },
    });
    const dated = lookupPricing({ ...routes.plan.primary, model: "claude-sonnet-4-6-20260101" });
    expect(dated.source).toEqual({ kind: "config", key: 'llm.prices["claude-sonnet-4-6"]' });
  });

  it("a local server's model has no price, unless the configuration sets one (0 included)", () => {
    expect(unpricedModels(local())).toEqual([
      {
        model: "qwen2.5-coder:7b",
        provider: "openai-compatible",
        roles: ["spec", "plan", "build", "review", "reflect", "agent"],
        source: "llm",
        priceKey: 'llm.prices["qwen2.5-coder:7b"]',
      },
    ]);
    const free = local({ prices: { "qwen2.5-coder:7b": { inputPerMTok: 0, outputPerMTok: 0 } } });
    expect(unpricedModels(free)).toEqual([]);
    expect(effectiveRoles(free).build.price).toMatchObject({
      inputPerMTok: 0,
      source: 'llm.prices["qwen2.5-coder:7b"]',
    });
    expect(effectiveRoles(local()).build.price).toMatchObject({
      source: "unknown",
      priceKey: 'llm.prices["qwen2.5-coder:7b"]',
    });
  });
});

describe("a USD budget with an unpriced model", () => {
  it("refuses before any call: config_invalid naming the model, the role and the key to set; the server gets no request", async () => {
    const provider = createProvider({ config: local(), log });
    const err = await provider.complete(request({ remainingUsd: 5 })).then(
      () => undefined,
      (e: unknown) => e as LoopsmithError,
    );
    expect(err).toBeInstanceOf(LoopsmithError);
    expect(err?.code).toBe("config_invalid");
    expect(err?.message).toContain("qwen2.5-coder:7b");
    expect(err?.message).toContain("qwen2.5-coder:7b (openai-compatible; role spec, plan, build");
    expect(err?.message).toContain('set llm.prices["qwen2.5-coder:7b"]');
    expect(requests).toEqual([]);
  });

  it("refuses the whole task up front (refuseUnpriced over every role), and says nothing when all are priced", () => {
    const c = config({
      provider: "anthropic",
      apiKey: "k",
      roles: { review: { provider: "openai-compatible", baseUrl: `${base}/v1`, model: "llama3.1" } },
    });
    const models = unpricedModels(c);
    expect(models.map((m) => [m.model, m.roles, m.source])).toEqual([["llama3.1", ["review"], "llm.roles.review"]]);
    expect(() => refuseUnpriced(models)).toThrow(/no price is known for llama3\.1 .*set llm\.prices\["llama3\.1"\]/);
    expect(() => refuseUnpriced(unpricedModels(config({ provider: "anthropic", apiKey: "k" })))).not.toThrow();
  });

  it("a price of 0 set on purpose is a price: the call under a USD budget is made and costs $0", async () => {
    const free = local({ prices: { "qwen2.5-coder:7b": { inputPerMTok: 0, outputPerMTok: 0 } } });
    const done = await createProvider({ config: free, log }).complete(request({ remainingUsd: 0.01 }));
    expect(done.value).toEqual(ANSWER);
    expect(done.usage).toMatchObject({ calls: 1, inputTokens: 100, outputTokens: 20, costUsd: 0 });
    expect(requests).toHaveLength(1);
  });

  it("without a USD limit the unpriced model is called and counts $0 (the user is warned elsewhere)", async () => {
    const done = await createProvider({ config: local(), log }).complete(request({ remainingTokens: 100_000 }));
    expect(done.usage).toMatchObject({ calls: 1, costUsd: 0 });
    expect(requests).toHaveLength(1);
  });

  it("a process ceiling in USD binds the same way", async () => {
    const provider = createProvider({ config: local({ processCeilingUsd: 1 }), log });
    await expect(provider.complete(request())).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringContaining("llm.processCeilingUsd"),
    });
    expect(requests).toEqual([]);
  });
});

describe("which model plans: the spec step's route", () => {
  it("the spec step takes the plan role's model unless llm.roles.spec is set", () => {
    const planOnly = loadConfig({ env: { LOOPSMITH_MODEL_PLAN: "claude-opus-4-1" }, discover: false });
    expect(resolveRoutes(planOnly).spec.primary).toMatchObject({ model: "claude-opus-4-1", source: "llm.roles.plan" });
    const shown = effectiveRoles(planOnly);
    expect(shown.spec).toMatchObject({ model: "claude-opus-4-1", sameAs: "plan" });
    expect(shown.spec.plans).toMatch(/inline tasks without acceptance tests/);
    expect(shown.plan.plans).toMatch(/repository tasks/);
    const both = Config.parse({
      llm: { roles: { plan: { model: "claude-opus-4-1" }, spec: { model: "claude-haiku-4-5" } } },
    });
    expect(resolveRoutes(both).spec.primary).toMatchObject({ model: "claude-haiku-4-5", source: "llm.roles.spec" });
    expect(effectiveRoles(both).spec.sameAs).toBeUndefined();
  });
});
