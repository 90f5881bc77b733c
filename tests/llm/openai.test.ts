/**
 * Fault tests of the openai-compatible provider against a fake Chat Completions API over
 * local HTTP, so the real `openai` SDK runs. Each asserts the outcome
 * and the number of HTTP calls the fake saw.
 */
import { afterEach, describe, expect, it } from "vitest";
import { REASK_INSTRUCTION, createProvider } from "@loopsmith/shared/llm";
import {
  FAST_RETRY,
  openaiError,
  openaiReply,
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

const price = { inputPerMTok: 1, outputPerMTok: 2, cacheReadPerMTok: 0.5, cacheWritePerMTok: 0 };

async function openai(responses: FakeResponse[], llm: Record<string, unknown> = {}) {
  fake = await startFakeLlm(responses);
  const config = testConfig({
    provider: "openai-compatible",
    model: "qwen2.5-coder",
    baseUrl: `${fake.url}/v1`,
    apiKey: "sk-local-test",
    prices: { "qwen2.5-coder": price },
    ...llm,
  });
  return createProvider({ config, log });
}

type Body = { messages: Array<{ role: string; content: string }>; response_format?: Wire; max_tokens?: number };
const bodyOf = (i: number): Body => fake!.requests[i]!.body as Body;

describe("openai-compatible provider (real SDK, fake server)", () => {
  it("works against a server that wraps its JSON in prose and fences", async () => {
    const text = "Of course. Here it is:\n\n```json\n" + JSON.stringify(GOOD) + ",\n```\n\nHope this helps!";
    const provider = await openai([
      { body: openaiReply(text, { promptTokens: 400, completionTokens: 60, cachedTokens: 100 }) },
    ]);
    const { value, usage } = await provider.complete(planRequest());
    expect(value).toEqual(GOOD);
    expect(fake!.count).toBe(1);
    // prompt_tokens includes cached tokens in OpenAI's convention; loopsmith counts them apart.
    expect(usage).toMatchObject({ calls: 1, inputTokens: 300, cacheReadTokens: 100, outputTokens: 60 });
    expect(usage.costUsd).toBeCloseTo((300 * 1 + 60 * 2 + 100 * 0.5) / 1e6, 12);
    const req = fake!.requests[0]!;
    expect(req.path).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe("Bearer sk-local-test");
    const body = bodyOf(0);
    expect(body.response_format).toMatchObject({ type: "json_schema", json_schema: { name: "plan", strict: false } });
    expect(body.response_format!.json_schema.schema).toMatchObject({ type: "object", required: ["steps", "done"] });
    expect(body.messages[0]).toEqual({ role: "system", content: "You plan small coding tasks." });
    expect(body.max_tokens).toBe(1000);
  });

  it("a server without json_schema: JSON mode with the schema in the prompt, remembered for later calls", async () => {
    const provider = await openai([
      { status: 400, body: openaiError("response_format json_schema is not supported") },
      { body: openaiReply("The plan: " + JSON.stringify(GOOD)) },
      { body: openaiReply(JSON.stringify(GOOD)) },
    ]);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD, usage: { calls: 1 } });
    expect(fake!.count).toBe(2);
    expect(bodyOf(1).response_format).toEqual({ type: "json_object" });
    expect(bodyOf(1).messages[0]!.content).toContain('"required":["steps","done"]');
    // The next call goes straight to JSON mode.
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD });
    expect(fake!.count).toBe(3);
    expect(bodyOf(2).response_format).toEqual({ type: "json_object" });
  });

  it("a server without any response_format (422 twice): plain JSON, tolerant reading, one re-ask", async () => {
    const rejected = { status: 422, body: openaiError("unsupported response_format") };
    const provider = await openai([
      rejected,
      rejected,
      { body: openaiReply("Sure! Steps: write add, test it.") },
      { body: openaiReply("```json\n" + JSON.stringify(GOOD) + "\n```") },
      { body: openaiReply(JSON.stringify(GOOD)) },
    ]);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD, usage: { calls: 2 } });
    expect(fake!.count).toBe(4);
    expect(bodyOf(0).response_format).toMatchObject({ type: "json_schema" });
    expect(bodyOf(1).response_format).toEqual({ type: "json_object" });
    expect(bodyOf(2).response_format).toBeUndefined();
    expect(bodyOf(2).messages[0]!.content).toContain('"required":["steps","done"]');
    expect(bodyOf(3).messages.at(-1)!.content).toContain(REASK_INSTRUCTION);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD });
    expect(bodyOf(4).response_format).toBeUndefined();
  });

  it("401: llm_auth after exactly one HTTP call, naming the API key", async () => {
    const provider = await openai([
      { status: 401, body: openaiError("Incorrect API key provided", "invalid_request_error", "invalid_api_key") },
    ]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_auth");
    expect(err.message).toContain("API key");
    expect(fake!.count).toBe(1);
  });

  it("429 then success: the SDK retries once", async () => {
    const provider = await openai([
      { status: 429, headers: FAST_RETRY, body: openaiError("Rate limit reached", "requests", "rate_limit_exceeded") },
      { body: openaiReply(JSON.stringify(GOOD)) },
    ]);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD, usage: { calls: 1 } });
    expect(fake!.count).toBe(2);
  });

  it("429 on every try: llm_rate_limited after maxRetries + 1 calls", async () => {
    const limited: FakeResponse = { status: 429, headers: FAST_RETRY, body: openaiError("Rate limit reached") };
    const provider = await openai([limited], { maxRetries: 1 });
    fake!.push(limited);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_rate_limited");
    expect(fake!.count).toBe(2);
  });

  it("500 on every try: unavailable after maxRetries + 1 calls", async () => {
    const e500: FakeResponse = { status: 500, headers: FAST_RETRY, body: openaiError("server error", "server_error") };
    const provider = await openai([e500, e500, e500]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("unavailable");
    expect(fake!.count).toBe(3);
  });

  it("a reply slower than the timeout: timeout", async () => {
    const provider = await openai([{ delayMs: 2_000, body: openaiReply(JSON.stringify(GOOD)) }], {
      timeoutMs: 150,
      maxRetries: 0,
    });
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("timeout");
    expect(fake!.count).toBe(1);
  });

  it("an empty reply is re-asked once with the instruction, then succeeds", async () => {
    const provider = await openai([{ body: openaiReply(null) }, { body: openaiReply(JSON.stringify(GOOD)) }]);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({
      value: GOOD,
      usage: { calls: 2, inputTokens: 200 },
    });
    expect(fake!.count).toBe(2);
    const last = bodyOf(1).messages.at(-1)!;
    expect(last.role).toBe("user");
    expect(last.content).toContain("empty");
    expect(last.content).toContain(REASK_INSTRUCTION);
  });

  it("JSON of the wrong shape twice: llm_bad_reply with the raw text, after two calls", async () => {
    const wrong = { body: openaiReply('{"steps": "just do it"}') };
    const provider = await openai([wrong, wrong, wrong]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_bad_reply");
    expect((err.details as { raw: string }).raw).toBe('{"steps": "just do it"}');
    expect(fake!.count).toBe(2);
    // The re-ask quotes the bad reply as the assistant turn and lists the errors.
    const msgs = bodyOf(1).messages;
    expect(msgs.at(-2)).toEqual({ role: "assistant", content: '{"steps": "just do it"}' });
    expect(msgs.at(-1)!.content).toContain("`done`");
  });

  it("a reply cut off at max_tokens: re-asked, then llm_bad_reply", async () => {
    const cut = { body: openaiReply('{"steps": ["write add()", "te', { finishReason: "length" }) };
    const provider = await openai([cut, cut, cut]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_bad_reply");
    expect((err.details as { truncated: boolean }).truncated).toBe(true);
    expect(bodyOf(1).messages.at(-1)!.content).toContain("cut off at the output limit");
    expect(fake!.count).toBe(2);
  });

  it("a 200 that is not a completion at all (a proxy's HTML page) is a bad reply, not a crash", async () => {
    const html: FakeResponse = { body: "<html><body>502 Bad Gateway</body></html>" };
    const provider = await openai([html, html]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_bad_reply");
    expect(fake!.count).toBe(2);
  });

  it("a call whose budget is below its estimate is refused before any HTTP call", async () => {
    const provider = await openai([{ body: openaiReply(JSON.stringify(GOOD)) }]);
    const err = await rejection(provider.complete(planRequest({ budget: { remainingUsd: 0.001 } })));
    expect(err.code).toBe("budget_exceeded");
    expect(fake!.count).toBe(0);
  });

  it("verify(): passes on a server without a models endpoint, fails on an unreachable one", async () => {
    let provider = await openai([{ status: 404, body: openaiError("not found") }]);
    await expect(provider.verify?.()).resolves.toBeUndefined();
    expect(fake!.count).toBe(1);
    expect(fake!.requests[0]!.path).toBe("/v1/models");
    const url = fake!.url;
    await fake!.close();
    fake = undefined;
    provider = createProvider({
      config: testConfig({ provider: "openai-compatible", baseUrl: `${url}/v1`, maxRetries: 0 }),
      log,
    });
    await expect(provider.verify?.()).rejects.toMatchObject({ code: "unavailable" });
  });
});
