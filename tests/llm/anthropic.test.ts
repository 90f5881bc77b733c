/**
 * Fault tests of the anthropic provider against a fake Messages API over local HTTP, so the
 * real `@anthropic-ai/sdk` runs. Each asserts the outcome and the number
 * of HTTP calls the fake saw.
 */
import { afterEach, describe, expect, it } from "vitest";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { REASK_INSTRUCTION, costOf, createProvider, SpendMeter } from "@loopsmith/shared/llm";
import {
  FAST_RETRY,
  anthropicError,
  anthropicTextReply,
  anthropicToolReply,
  startFakeLlm,
  type FakeLlm,
  type FakeResponse,
} from "../fixtures/fake-llm.js";
import { GOOD, log, planRequest, rejection, testConfig, type Wire } from "./helpers.js";

let fake: FakeLlm | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function anthropic(responses: FakeResponse[], llm: Record<string, unknown> = {}, meter?: SpendMeter) {
  fake = await startFakeLlm(responses);
  const config = testConfig({
    provider: "anthropic",
    model: "claude-sonnet-4-6",
    prices: { "claude-sonnet-4-6": sonnet },
    apiKey: "sk-ant-test",
    baseUrl: fake.url,
    ...llm,
  });
  return createProvider({ config, log, ...(meter ? { meter } : {}) });
}

const overloaded: FakeResponse = {
  status: 529,
  headers: FAST_RETRY,
  body: anthropicError("overloaded_error", "Overloaded"),
};
// Sonnet's public price, configured for the model the tests name (the price table is configuration).
const sonnet = { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 };

describe("anthropic provider (real SDK, fake server)", () => {
  it("sends a forced tool call with the zod-generated schema and prompt caching", async () => {
    const provider = await anthropic([{ body: anthropicToolReply("plan", GOOD) }]);
    const { value } = await provider.complete(planRequest());
    expect(value).toEqual(GOOD);
    expect(fake!.count).toBe(1);
    const req = fake!.requests[0]!;
    expect(req.path).toBe("/v1/messages");
    // The SDK sends the key as x-api-key or as a bearer token, depending on its version.
    expect([req.headers["x-api-key"], req.headers.authorization]).toContainEqual(
      expect.stringContaining("sk-ant-test"),
    );
    const body = req.body as Wire;
    expect(body.tool_choice).toEqual({ type: "tool", name: "plan" });
    expect(body.tools[0].name).toBe("plan");
    expect(body.tools[0].input_schema).toMatchObject({
      type: "object",
      required: ["steps", "done"],
      properties: { steps: { type: "array", items: { type: "string" } }, done: { type: "boolean" } },
    });
    expect(body.max_tokens).toBe(1000);
    expect(body.system).toEqual([
      { type: "text", text: "You plan small coding tasks.", cache_control: { type: "ephemeral" } },
    ]);
    expect(body.messages[0].content[0].cache_control).toEqual({ type: "ephemeral" });
    expect(provider.info).toEqual({ name: "anthropic", model: "claude-sonnet-4-6", scripted: false });
  });

  it("529 twice then success: succeeds, and usage counts only the successful call", async () => {
    const ok = anthropicToolReply("plan", GOOD, {
      usage: {
        input_tokens: 1200,
        output_tokens: 300,
        cache_read_input_tokens: 1000,
        cache_creation_input_tokens: 200,
      },
    });
    const provider = await anthropic([overloaded, overloaded, { body: ok }]);
    const { value, usage } = await provider.complete(planRequest());
    expect(value).toEqual(GOOD);
    expect(fake!.count).toBe(3);
    expect(usage).toMatchObject({
      calls: 1,
      inputTokens: 1200,
      outputTokens: 300,
      cacheReadTokens: 1000,
      cacheWriteTokens: 200,
    });
    const expected = (1200 * 3 + 300 * 15 + 1000 * 0.3 + 200 * 3.75) / 1e6;
    expect(usage.costUsd).toBeCloseTo(expected, 12);
    expect(usage.costUsd).toBeCloseTo(costOf(sonnet, usage), 12);
    expect(usage.latencyMs).toBeGreaterThanOrEqual(0);
  });

  it("429 then success: the SDK retries once", async () => {
    const provider = await anthropic([
      { status: 429, headers: FAST_RETRY, body: anthropicError("rate_limit_error", "slow down") },
      { body: anthropicToolReply("plan", GOOD) },
    ]);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD, usage: { calls: 1 } });
    expect(fake!.count).toBe(2);
  });

  it("529 on every try: llm_overloaded after maxRetries + 1 calls", async () => {
    const provider = await anthropic([overloaded, overloaded, overloaded, { body: anthropicToolReply("plan", GOOD) }]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err).toBeInstanceOf(LoopsmithError);
    expect(err.code).toBe("llm_overloaded");
    expect(fake!.count).toBe(3);
  });

  it("500 on every try: unavailable after maxRetries + 1 calls", async () => {
    const e500: FakeResponse = { status: 500, headers: FAST_RETRY, body: anthropicError("api_error", "boom") };
    const provider = await anthropic([e500, e500, e500]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("unavailable");
    expect(fake!.count).toBe(3);
  });

  it("a reply slower than the timeout: timeout, after the SDK's retries", async () => {
    const slow: FakeResponse = { delayMs: 2_000, body: anthropicToolReply("plan", GOOD) };
    const provider = await anthropic([slow, slow], { timeoutMs: 150, maxRetries: 1 });
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("timeout");
    expect(err.message).toContain("150 ms");
    expect(fake!.count).toBe(2);
  });

  it("401: llm_auth after exactly one HTTP call, naming the API key", async () => {
    const provider = await anthropic([
      { status: 401, body: anthropicError("authentication_error", "invalid x-api-key") },
      { body: anthropicToolReply("plan", GOOD) },
    ]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_auth");
    expect((err as LoopsmithError).retryable).toBe(false);
    expect(err.message).toContain("API key (ANTHROPIC_API_KEY)");
    expect(fake!.count).toBe(1);
  });

  it("403: llm_auth after one call, naming permissions", async () => {
    const provider = await anthropic([{ status: 403, body: anthropicError("permission_error", "no access to model") }]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_auth");
    expect(err.message).toContain("permission");
    expect(fake!.count).toBe(1);
  });

  it("a tool input that fails the schema is re-asked once with the errors, then succeeds", async () => {
    const provider = await anthropic([
      { body: anthropicToolReply("plan", { steps: [], done: "no" }) },
      { body: anthropicToolReply("plan", GOOD) },
    ]);
    const { value, usage } = await provider.complete(planRequest());
    expect(value).toEqual(GOOD);
    expect(fake!.count).toBe(2);
    expect(usage.calls).toBe(2);
    expect(usage.inputTokens).toBe(200);
    const second = fake!.requests[1]!.body as Wire;
    const [assistant, user] = second.messages.slice(-2);
    expect(assistant.content[0].type).toBe("tool_use");
    const result = user.content[0];
    expect(result).toMatchObject({ type: "tool_result", tool_use_id: assistant.content[0].id, is_error: true });
    expect(result.content).toContain("`done`");
    expect(result.content).toContain("`steps`");
    expect(result.content).toContain(REASK_INSTRUCTION);
    expect(second.tool_choice).toEqual({ type: "tool", name: "plan" });
  });

  it("a tool input that fails twice: llm_bad_reply carrying the raw reply, issues and usage", async () => {
    const bad = { body: anthropicToolReply("plan", { steps: "one" }) };
    const provider = await anthropic([bad, bad, bad]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_bad_reply");
    expect(fake!.count).toBe(2);
    const details = err.details as { raw: string; issues: Array<{ path: string }>; usage: { calls: number } };
    expect(details.raw).toBe(JSON.stringify({ steps: "one" }));
    expect(details.issues.map((i) => i.path)).toEqual(expect.arrayContaining(["steps", "done"]));
    expect(details.usage.calls).toBe(2);
  });

  it("fenced and prose-wrapped JSON in a text reply is read tolerantly", async () => {
    const text = "Sure! Here is the plan:\n```json\n" + JSON.stringify(GOOD, null, 2) + "\n```\nLet me know.";
    const provider = await anthropic([{ body: anthropicTextReply(text) }]);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD });
    expect(fake!.count).toBe(1);
  });

  it("an empty reply is re-asked; empty twice is llm_bad_reply", async () => {
    const empty = { body: anthropicTextReply("") };
    let provider = await anthropic([empty, { body: anthropicToolReply("plan", GOOD) }]);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD, usage: { calls: 2 } });
    expect(fake!.count).toBe(2);
    const reask = (fake!.requests[1]!.body as Wire).messages.at(-1);
    expect(reask.role).toBe("user");
    expect(reask.content[0].text).toContain("empty");
    await fake!.close();

    provider = await anthropic([empty, empty, empty]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_bad_reply");
    expect(err.message).toContain("empty");
    expect(fake!.count).toBe(2);
  });

  it("a reply cut off at max_tokens is re-asked with a note, then fails with llm_bad_reply", async () => {
    const cut = { body: anthropicToolReply("plan", { steps: ["a"] }, { stopReason: "max_tokens" }) };
    const provider = await anthropic([cut, cut, cut]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_bad_reply");
    expect(err.message).toContain("cut off");
    expect((err.details as { truncated: boolean }).truncated).toBe(true);
    expect(fake!.count).toBe(2);
    const reask = (fake!.requests[1]!.body as Wire).messages.at(-1).content[0].content as string;
    expect(reask).toContain("output limit of 1000 tokens");
  });

  it("a call whose budget is below its estimate is refused with budget_exceeded before any HTTP call", async () => {
    const provider = await anthropic([{ body: anthropicToolReply("plan", GOOD) }]);
    // Estimate: 1000 output tokens at $15/MTok alone is $0.015.
    let err = await rejection(provider.complete(planRequest({ budget: { remainingUsd: 0.01 } })));
    expect(err.code).toBe("budget_exceeded");
    err = await rejection(provider.complete(planRequest({ budget: { remainingTokens: 900 } })));
    expect(err.code).toBe("budget_exceeded");
    expect(fake!.count).toBe(0);
    await expect(
      provider.complete(planRequest({ budget: { remainingUsd: 1, remainingTokens: 5_000 } })),
    ).resolves.toBeDefined();
    expect(fake!.count).toBe(1);
  });

  it("the re-ask is refused when the first call used up the budget", async () => {
    const provider = await anthropic([
      { body: anthropicToolReply("plan", { steps: [] }, { usage: { input_tokens: 3_500, output_tokens: 100 } }) },
      { body: anthropicToolReply("plan", GOOD) },
    ]);
    const err = await rejection(provider.complete(planRequest({ budget: { remainingTokens: 4_500 } })));
    expect(err.code).toBe("budget_exceeded");
    expect((err.details as { usage: { calls: number; inputTokens: number } }).usage).toMatchObject({
      calls: 1,
      inputTokens: 3_500,
    });
    expect(fake!.count).toBe(1);
  });

  it("the per-process ceiling stops calls once the process has spent it", async () => {
    const meter = new SpendMeter();
    const ok = { body: anthropicToolReply("plan", GOOD, { usage: { input_tokens: 10_000, output_tokens: 1_000 } }) };
    // First call costs 0.03 + 0.015 = $0.045; the next estimate is ~$0.015; ceiling $0.05.
    const provider = await anthropic([ok, ok], { processCeilingUsd: 0.05 }, meter);
    await provider.complete(planRequest());
    expect(meter.spentUsd).toBeCloseTo(0.045, 9);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("budget_exceeded");
    expect(err.message).toContain("ceiling");
    expect(fake!.count).toBe(1);
  });

  it("verify(): a bad key fails at once with llm_auth; a good one passes; no tokens spent", async () => {
    let provider = await anthropic([
      { status: 401, body: anthropicError("authentication_error", "invalid x-api-key") },
    ]);
    await expect(provider.verify?.()).rejects.toMatchObject({ code: "llm_auth" });
    expect(fake!.count).toBe(1);
    expect(fake!.requests[0]!.path).toMatch(/^\/v1\/models/);
    await fake!.close();
    provider = await anthropic([{ body: { data: [], has_more: false, first_id: null, last_id: null } }]);
    await expect(provider.verify?.()).resolves.toBeUndefined();
    expect(fake!.count).toBe(1);
  });
});
