/**
 * The bedrock provider against a fake Bedrock runtime (`POST /model/<id>/invoke`, which
 * takes and returns the Anthropic Messages shapes), so the real `@anthropic-ai/bedrock-sdk`
 * runs with its URL rewriting and SigV4 signing. It shares the anthropic provider's code;
 * these tests show it needs no special case.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createProvider } from "@loopsmith/shared";
import { FAST_RETRY, anthropicToolReply, startFakeLlm, type FakeLlm, type FakeResponse } from "../fixtures/fake-llm.js";
import { GOOD, log, planRequest, rejection, testConfig, type Wire } from "./helpers.js";

const MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
let fake: FakeLlm | undefined;

beforeEach(() => {
  // Static credentials for SigV4; the fake does not check the signature, only that there is one.
  vi.stubEnv("AWS_ACCESS_KEY_ID", "AKIDFAKEFORTESTS");
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", "fake-secret-for-tests");
  vi.stubEnv("AWS_BEARER_TOKEN_BEDROCK", "");
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await fake?.close();
  fake = undefined;
});

async function bedrock(responses: FakeResponse[]) {
  fake = await startFakeLlm(responses);
  const config = testConfig({ provider: "bedrock", model: MODEL, awsRegion: "us-east-1", baseUrl: fake.url });
  return createProvider({ config, log });
}

describe("bedrock provider (real Bedrock SDK, fake runtime)", () => {
  it("invokes the model with a signed forced tool call and prices the base model", async () => {
    const provider = await bedrock([
      { status: 429, headers: FAST_RETRY, body: { message: "Too many requests" } },
      { body: anthropicToolReply("plan", GOOD, { usage: { input_tokens: 1000, output_tokens: 100 } }) },
    ]);
    const { value, usage } = await provider.complete(planRequest());
    expect(value).toEqual(GOOD);
    expect(fake!.count).toBe(2);
    const req = fake!.requests[1]!;
    expect(decodeURIComponent(req.path)).toBe(`/model/${MODEL}/invoke`);
    expect(String(req.headers.authorization)).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDFAKEFORTESTS\/\d{8}\/us-east-1\/bedrock\//);
    const body = req.body as Wire;
    expect(body.model).toBeUndefined();
    expect(typeof body.anthropic_version).toBe("string");
    expect(body.tool_choice).toEqual({ type: "tool", name: "plan" });
    // The Bedrock id is priced as its base model, claude-sonnet-4-5 ($3 / $15 per MTok).
    expect(usage.costUsd).toBeCloseTo((1000 * 3 + 100 * 15) / 1e6, 12);
    expect(provider.info).toEqual({ name: "bedrock", model: MODEL, scripted: false });
  });

  it("403 from Bedrock: llm_auth after one call, naming the AWS credentials", async () => {
    const provider = await bedrock([
      { status: 403, headers: { "x-amzn-errortype": "AccessDeniedException" }, body: { message: "not authorized to invoke" } },
    ]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_auth");
    expect(err.message).toContain("AWS credentials");
    expect(fake!.count).toBe(1);
  });
});
