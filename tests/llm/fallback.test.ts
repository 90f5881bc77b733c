/**
 * Fallbacks: a role's primary on an Anthropic fake, its fallback on a
 * fake Bedrock runtime that checks SigV4 signatures (or another Anthropic fake), so the real
 * SDKs and their own retries run. Each test asserts which server saw how many calls.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type ConfigInput } from "@loopsmith/shared/runtime";
import { lookupPricing, createProvider } from "@loopsmith/shared/llm";
import {
  FAST_RETRY,
  anthropicError,
  anthropicToolReply,
  bedrockError,
  startFakeLlm,
  type FakeLlm,
  type FakeResponse,
} from "../fixtures/fake-llm.js";
import { AWS_TEST_CREDS, GOOD, awsEnv, log, planRequest, rejection, testConfig, type Wire } from "./helpers.js";

const BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
/** USD of a call to the Bedrock fallback, at @pydantic/genai-prices' AWS price of its profile. */
const bedrockCost = (input: number, output: number): number =>
  lookupPricing({ provider: "bedrock", model: BEDROCK_MODEL, prices: {} }).costOf({
    inputTokens: input,
    outputTokens: output,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  });
const overloaded: FakeResponse = {
  status: 529,
  headers: FAST_RETRY,
  body: anthropicError("overloaded_error", "Overloaded"),
};
const reply = (tokens = { input_tokens: 1000, output_tokens: 100 }): FakeResponse => ({
  body: anthropicToolReply("plan", GOOD, { usage: tokens }),
});

let primary: FakeLlm;
let fallback: FakeLlm;
beforeEach(() =>
  awsEnv({ AWS_ACCESS_KEY_ID: AWS_TEST_CREDS.accessKeyId, AWS_SECRET_ACCESS_KEY: AWS_TEST_CREDS.secretAccessKey }),
);
afterEach(async () => {
  vi.unstubAllEnvs();
  await Promise.all([primary?.close(), fallback?.close()]);
});

type LlmInput = NonNullable<ConfigInput["llm"]>;

/** Anthropic opus as the plan role's primary (`plan` overrides it), Claude on Bedrock as its fallback. */
async function setup(
  primaryReplies: FakeResponse[],
  fallbackReplies: FakeResponse[],
  llm: LlmInput = {},
  plan: NonNullable<LlmInput["roles"]>["plan"] = {},
) {
  primary = await startFakeLlm(primaryReplies, { repeatLast: true });
  fallback = await startFakeLlm(fallbackReplies, { sigv4: AWS_TEST_CREDS });
  const config = testConfig({
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    apiKey: "sk-ant-test",
    baseUrl: primary.url,
    awsRegion: "us-east-1",
    roles: {
      plan: {
        model: "claude-opus-4-1",
        fallback: [{ provider: "bedrock", model: BEDROCK_MODEL, baseUrl: fallback.url }],
        ...plan,
      },
    },
    ...llm,
  });
  return createProvider({ config, log });
}

describe("fallbacks", () => {
  it("a 529 storm on the primary moves to the fallback after the configured retries, and the switch is reported", async () => {
    const provider = await setup([overloaded], [reply(), reply()], { maxRetries: 2 });
    const c = await provider.complete(planRequest());
    expect(c.value).toEqual(GOOD);
    // maxRetries 2: the SDK's first call and its 2 retries, all 529; then one signed Bedrock call.
    expect(primary.count).toBe(3);
    expect(fallback.count).toBe(1);
    expect(fallback.requests[0]!.signature).toBe("valid");
    expect(decodeURIComponent(fallback.requests[0]!.path)).toBe(`/model/${BEDROCK_MODEL}/invoke`);
    expect(c.provider).toMatchObject({
      name: "bedrock",
      model: BEDROCK_MODEL,
      scripted: false,
      fallbackFrom: { name: "anthropic", model: "claude-opus-4-1", code: "llm_overloaded" },
    });
    // Only the answering call is billed, at the fallback's price (its AWS profile's price).
    expect(c.usage).toMatchObject({ calls: 1, inputTokens: 1000, outputTokens: 100 });
    expect(c.usage.costUsd).toBeCloseTo(bedrockCost(1000, 100), 12);

    // While the primary cools down, the next call goes straight to the fallback (no retries spent).
    const again = await provider.complete(planRequest());
    expect(primary.count).toBe(3);
    expect(fallback.count).toBe(2);
    expect(again.provider?.fallbackFrom).toMatchObject({
      name: "anthropic",
      code: "llm_overloaded",
      message: expect.stringMatching(/^skipped while cooling down/),
    });
  });

  it("with fallbackCooldownMs 0 the primary is tried first again and answers once it is back", async () => {
    const provider = await setup([overloaded, overloaded, overloaded, reply()], [reply()], {
      maxRetries: 2,
      fallbackCooldownMs: 0,
    });
    expect((await provider.complete(planRequest())).provider?.name).toBe("bedrock");
    const back = await provider.complete(planRequest());
    expect(back.provider).toEqual({ name: "anthropic", model: "claude-opus-4-1", scripted: false });
    expect([primary.count, fallback.count]).toEqual([4, 1]);
  });

  it("a 401 on the primary does not fall back and fails in < 5 s (default timeouts)", async () => {
    const provider = await setup(
      [{ status: 401, body: anthropicError("authentication_error", "invalid x-api-key") }],
      [reply()],
      {
        maxRetries: 2,
        timeoutMs: 120_000,
      },
    );
    const started = performance.now();
    const err = await rejection(provider.complete(planRequest()));
    const ms = performance.now() - started;
    expect(err.code).toBe("llm_auth");
    expect(err.message).toContain("ANTHROPIC_API_KEY");
    expect(ms).toBeLessThan(5_000);
    expect(primary.count).toBe(1);
    expect(fallback.count).toBe(0);
    console.info(`401 on the primary: failed in ${ms.toFixed(0)} ms`);
  });

  it.each([
    [400, "invalid_request_error", "bad_request"],
    [403, "permission_error", "llm_auth"],
    [404, "not_found_error", "config_invalid"],
  ])("a %i on the primary does not fall back (%s → %s)", async (status, type, code) => {
    const provider = await setup([{ status, body: anthropicError(type, "no") }], [reply()]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe(code);
    expect([primary.count, fallback.count]).toEqual([1, 0]);
  });

  it("the budget is reserved against the model actually called: a dearer fallback that would pass it is not called", async () => {
    // Primary haiku ($1 / $5): its estimate (≈ $0.005 with 1,000 output tokens) fits in $0.02;
    // the fallback priced at opus ($15 / $75) would need ≈ $0.075, so it is refused before any call.
    const routed = await setup(
      [overloaded],
      [reply()],
      {},
      {
        model: "claude-haiku-4-5",
        prices: { [BEDROCK_MODEL]: { inputPerMTok: 15, outputPerMTok: 75 } },
      },
    );
    const err = await rejection(routed.complete(planRequest({ budget: { remainingUsd: 0.02 } })));
    expect(err.code).toBe("budget_exceeded");
    expect(err.message).toMatch(
      /^the task's USD budget would be passed \(\$0\.0200 left\): the next LLM call could cost up to \$0\.07\d+ \(estimated before it is made\); anthropic:claude-haiku-4-5 failed first \(llm_overloaded\)/,
    );
    expect(primary.count).toBe(3);
    expect(fallback.count).toBe(0);
    // With room for it, the same fallback is called.
    await expect(routed.complete(planRequest({ budget: { remainingUsd: 0.1 } }))).resolves.toMatchObject({
      value: GOOD,
    });
    expect(fallback.count).toBe(1);
  });

  it("usage the primary paid before failing over is kept, at its own price", async () => {
    // The primary answers with the wrong shape (paid), then its re-ask meets a 529 storm.
    const wrong: FakeResponse = {
      body: anthropicToolReply("plan", { steps: "nope" }, { usage: { input_tokens: 2000, output_tokens: 100 } }),
    };
    const provider = await setup([wrong, overloaded], [reply({ input_tokens: 500, output_tokens: 50 })], {
      maxRetries: 1,
    });
    const c = await provider.complete(planRequest());
    expect([primary.count, fallback.count]).toEqual([3, 1]);
    expect(c.usage).toMatchObject({ calls: 2, inputTokens: 2500, outputTokens: 150 });
    // opus ($15 / $75) for the primary's paid call, the Bedrock profile's price for the fallback's.
    expect(c.usage.costUsd).toBeCloseTo((2000 * 15 + 100 * 75) / 1e6 + bedrockCost(500, 50), 12);
    // The fallback starts afresh: its request carries no re-ask of the primary's conversation.
    expect((fallback.requests[0]!.body as Wire).messages).toHaveLength(1);
  });

  it("the fallback gets only what is left of the budget after the primary's paid calls", async () => {
    const wrong: FakeResponse = {
      body: anthropicToolReply("plan", { steps: "nope" }, { usage: { input_tokens: 2000, output_tokens: 100 } }),
    };
    const bedrock = (maxTokens: number) => ({
      fallback: [{ provider: "bedrock" as const, model: BEDROCK_MODEL, baseUrl: fallback.url, maxTokens }],
    });
    // 5,000 tokens: the primary's call (≈1,010 estimated) and its re-ask (≈1,100 of the 2,900
    // left after the 2,100 paid) are admitted; a fallback estimating ≈4,010 (maxTokens 4,000)
    // would fit in 5,000 but not in the 2,900 left, so it is refused before any call.
    const provider = await setup([wrong, overloaded], [reply()], { maxRetries: 0 }, bedrock(4000));
    const err = await rejection(provider.complete(planRequest({ budget: { remainingTokens: 5_000 } })));
    expect(err.code).toBe("budget_exceeded");
    expect(err.message).toContain("the task's token budget would be passed (2900 tokens left)");
    expect((err.details as { usage: { inputTokens: number } }).usage.inputTokens).toBe(2000);
    expect([primary.count, fallback.count]).toEqual([2, 0]);
  });

  it("primary and fallback both down: the fallback's error, naming the primary's, with every attempt in details", async () => {
    const down = bedrockError(503, "ServiceUnavailableException", "Service unavailable", FAST_RETRY);
    const provider = await setup([overloaded], [down], { maxRetries: 1 });
    fallback.push(down);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("unavailable");
    expect(err.message).toContain("anthropic:claude-opus-4-1 failed first (llm_overloaded)");
    expect(
      (err.details as { attempts: Array<{ name: string; code: string }> }).attempts.map((a) => [a.name, a.code]),
    ).toEqual([
      ["anthropic", "llm_overloaded"],
      ["bedrock", "unavailable"],
    ]);
    expect([primary.count, fallback.count]).toEqual([2, 2]);
  });

  it("verify(): a rejected key on any model fails the pre-flight check; an unreachable primary with a healthy fallback passes", async () => {
    const models: FakeResponse = { body: { data: [], has_more: false, first_id: null, last_id: null } };
    primary = await startFakeLlm([{ status: 401, body: anthropicError("authentication_error", "invalid x-api-key") }], {
      repeatLast: true,
    });
    fallback = await startFakeLlm([models], { repeatLast: true });
    const config = (primaryUrl: string, defaultUrl: string) =>
      testConfig({
        provider: "anthropic",
        apiKey: "sk-ant-test",
        maxRetries: 0,
        baseUrl: defaultUrl,
        roles: {
          plan: {
            model: "claude-opus-4-1",
            baseUrl: primaryUrl,
            fallback: [{ provider: "anthropic", model: "claude-haiku-4-5", baseUrl: fallback.url }],
          },
        },
      });
    // The plan role's primary rejects the key: that fails however healthy its fallback is.
    await expect(createProvider({ config: config(primary.url, fallback.url), log }).verify?.()).rejects.toMatchObject({
      code: "llm_auth",
    });
    // The plan role's primary is unreachable, its fallback answers: the check passes.
    const gone = primary.url;
    await primary.close();
    await expect(createProvider({ config: config(gone, fallback.url), log }).verify?.()).resolves.toBeUndefined();
    // Unreachable and without a fallback that answers: it fails.
    await expect(createProvider({ config: config(gone, gone), log }).verify?.()).rejects.toMatchObject({
      code: "unavailable",
    });
  });
});
