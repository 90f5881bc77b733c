/**
 * The bedrock provider against a fake Bedrock runtime (`POST /model/<id>/invoke`, which
 * takes and returns the Anthropic Messages shapes), so the real `@anthropic-ai/bedrock-sdk`
 * runs with its URL rewriting and SigV4 signing. The fake recomputes every signature with
 * the test credentials and answers 403 as AWS does when it is missing or wrong. Credentials
 * come from the standard AWS environment variables; no real AWS is involved.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { lookupPricing, createProvider } from "@loopsmith/shared/llm";
import {
  FAST_RETRY,
  anthropicToolReply,
  bedrockError,
  startFakeLlm,
  type FakeLlm,
  type FakeResponse,
} from "../fixtures/fake-llm.js";
import {
  AWS_TEST_CREDS as CREDS,
  GOOD,
  awsEnv,
  log,
  planRequest,
  rejection,
  testConfig,
  type Wire,
} from "./helpers.js";

const MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
let fake: FakeLlm | undefined;

beforeEach(() => awsEnv({ AWS_ACCESS_KEY_ID: CREDS.accessKeyId, AWS_SECRET_ACCESS_KEY: CREDS.secretAccessKey }));
afterEach(async () => {
  vi.unstubAllEnvs();
  await fake?.close();
  fake = undefined;
});

async function bedrock(responses: FakeResponse[], llm: Record<string, unknown> = {}) {
  fake = await startFakeLlm(responses, { sigv4: CREDS });
  const config = testConfig({ provider: "bedrock", model: MODEL, awsRegion: "eu-west-1", baseUrl: fake.url, ...llm });
  return createProvider({ config, log });
}

describe("bedrock provider (real Bedrock SDK, fake signed runtime)", () => {
  it("invokes the model with a valid SigV4 signature from the AWS env vars, a forced tool call, the AWS price of its profile", async () => {
    const provider = await bedrock([
      bedrockError(429, "ThrottlingException", "Too many requests, please wait before trying again.", FAST_RETRY),
      { body: anthropicToolReply("plan", GOOD, { usage: { input_tokens: 1000, output_tokens: 100 } }) },
    ]);
    const { value, usage } = await provider.complete(planRequest());
    expect(value).toEqual(GOOD);
    expect(fake!.count).toBe(2);
    expect(fake!.requests.map((r) => r.signature)).toEqual(["valid", "valid"]);
    const req = fake!.requests[1]!;
    expect(req.method).toBe("POST");
    expect(decodeURIComponent(req.path)).toBe(`/model/${MODEL}/invoke`);
    expect(String(req.headers.authorization)).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDFAKEFORTESTS\/\d{8}\/eu-west-1\/bedrock\/aws4_request, ?SignedHeaders=[^,]*host[^,]*x-amz-date[^,]*, ?Signature=[0-9a-f]{64}$/,
    );
    expect(req.headers["x-amz-date"]).toMatch(/^\d{8}T\d{6}Z$/);
    const body = req.body as Wire;
    expect(body.model).toBeUndefined();
    expect(typeof body.anthropic_version).toBe("string");
    expect(body.tool_choice).toEqual({ type: "tool", name: "plan" });
    expect(body.tools[0].input_schema).toMatchObject({ type: "object", required: ["steps", "done"] });
    // The Bedrock id is priced by @pydantic/genai-prices' `aws` provider (a `us.` profile is
    // regional: Sonnet 4.5 at $3.30 / $16.50 per MTok there, 10 % over the base price).
    // (shared/src/llm/prices.test.ts checks lookupPricing against the package's own calcPrice.)
    const aws = lookupPricing({ provider: "bedrock", model: MODEL, prices: {} });
    expect(aws.source).toMatchObject({ kind: "genai-prices", provider: "aws" });
    const tokens = { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 0, cacheWriteTokens: 0 };
    expect(usage.costUsd).toBeCloseTo(aws.costOf(tokens), 12);
    expect(usage.costUsd).toBeGreaterThan((1000 * 3 + 100 * 15) / 1e6);
    expect(provider.info).toEqual({ name: "bedrock", model: MODEL, scripted: false });
  });

  it("temporary credentials: AWS_SESSION_TOKEN is sent as x-amz-security-token and signed", async () => {
    awsEnv({
      AWS_ACCESS_KEY_ID: CREDS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: CREDS.secretAccessKey,
      AWS_SESSION_TOKEN: "session-token-for-tests",
    });
    const provider = await bedrock([{ body: anthropicToolReply("plan", GOOD) }]);
    await expect(provider.complete(planRequest())).resolves.toMatchObject({ value: GOOD });
    const req = fake!.requests[0]!;
    expect(req.signature).toBe("valid");
    expect(req.headers["x-amz-security-token"]).toBe("session-token-for-tests");
    expect(String(req.headers.authorization)).toMatch(/SignedHeaders=[^,]*x-amz-security-token/);
  });

  it("the fake is a real check: a wrong secret is rejected as AWS would, and that is llm_auth after one call", async () => {
    awsEnv({ AWS_ACCESS_KEY_ID: CREDS.accessKeyId, AWS_SECRET_ACCESS_KEY: "not-the-secret" });
    const provider = await bedrock([{ body: anthropicToolReply("plan", GOOD) }]);
    const err = await rejection(provider.complete(planRequest()));
    expect(fake!.requests[0]!.signature).toBe("invalid");
    expect(err.code).toBe("llm_auth");
    expect(err.message).toContain("AWS credentials");
    expect(fake!.count).toBe(1);
  });

  it("no AWS credentials anywhere: llm_auth naming the AWS variables, nothing sent", async () => {
    awsEnv({});
    const provider = await bedrock([{ body: anthropicToolReply("plan", GOOD) }], { maxRetries: 0 });
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_auth");
    expect(err.message).toMatch(/no credentials found for Amazon Bedrock.*AWS_ACCESS_KEY_ID/);
    expect(fake!.count).toBe(0);
  });

  it("403 AccessDeniedException: llm_auth after one call, naming the AWS credentials", async () => {
    const provider = await bedrock([bedrockError(403, "AccessDeniedException", "not authorized to invoke")]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_auth");
    expect(err.message).toContain("AWS credentials");
    expect(fake!.count).toBe(1);
  });

  it("503 ServiceUnavailableException on every try: unavailable after maxRetries + 1 signed calls", async () => {
    const down = bedrockError(503, "ServiceUnavailableException", "Service unavailable", FAST_RETRY);
    const provider = await bedrock([down, down, down]);
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("unavailable");
    expect((err as { retryable?: boolean }).retryable).toBe(true);
    expect(fake!.requests.map((r) => r.signature)).toEqual(["valid", "valid", "valid"]);
  });
});
