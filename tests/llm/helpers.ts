/** Shared bits of the LLM provider tests: a config builder, a schema, a request builder, AWS env. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { vi } from "vitest";
import { z } from "zod";
import { Config, type ConfigInput } from "@loopsmith/shared/runtime";
import { type Budget } from "@loopsmith/shared/contracts";
import { type ChatMessage, type CompletionRequest } from "@loopsmith/shared/llm";

export const log = pino({ level: "silent" });

/** The structured output of the tests. */
export const Plan = z.object({ steps: z.array(z.string()).min(1), done: z.boolean() });
export type Plan = z.infer<typeof Plan>;
export const GOOD: Plan = { steps: ["write add()", "test it"], done: false };

/** A validated configuration with small timeouts; `llm` overrides merge over the defaults. */
export function testConfig(llm: NonNullable<ConfigInput["llm"]>): Config {
  return Config.parse({ llm: { maxRetries: 2, timeoutMs: 2_000, maxOutputTokens: 1_000, ...llm } });
}

/** A plan request; `budget` and `messages` optional. */
export function planRequest(
  opts: { budget?: Budget; messages?: ChatMessage[]; taskId?: string } = {},
): CompletionRequest<Plan> {
  return {
    role: "plan",
    system: "You plan small coding tasks.",
    messages: opts.messages ?? [{ role: "user", content: "Write add(a, b) in Python.", cache: true }],
    schema: Plan,
    schemaName: "plan",
    context: { taskId: opts.taskId ?? "task-1", iteration: 0 },
    ...(opts.budget ? { budget: opts.budget } : {}),
  };
}

/** Runs `p` and returns what it threw (fails the test when it resolves). */
export async function rejection(p: Promise<unknown>): Promise<Error & { code?: string; details?: unknown }> {
  try {
    await p;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error("expected a rejection");
}

/** A request body as the fake received it, for assertions on wire fields. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- arbitrary wire JSON, checked by the assertions
export type Wire = Record<string, any>;

/** Static AWS credentials of the tests; the fake Bedrock runtime checks signatures with them. */
export const AWS_TEST_CREDS = { accessKeyId: "AKIDFAKEFORTESTS", secretAccessKey: "fake-secret-for-tests" };

// An empty home for the AWS chain: no ~/.aws files, so only what a test sets is a credential.
const awsHome = mkdtempSync(join(tmpdir(), "loopsmith-aws-"));

/**
 * Stubs the AWS environment (undo with `vi.unstubAllEnvs()`): every source of the AWS
 * credential chain is cleared (env keys, profile files, container and instance metadata)
 * except the variables in `vars`.
 */
export function awsEnv(vars: Record<string, string>): void {
  for (const name of [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "ANTHROPIC_BEDROCK_BASE_URL",
  ]) {
    vi.stubEnv(name, vars[name] ?? "");
  }
  vi.stubEnv("AWS_SHARED_CREDENTIALS_FILE", join(awsHome, "credentials"));
  vi.stubEnv("AWS_CONFIG_FILE", join(awsHome, "config"));
  vi.stubEnv("AWS_EC2_METADATA_DISABLED", "true");
}
