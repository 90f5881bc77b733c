/** Shared bits of the LLM provider tests: a config builder, a schema, a request builder. */
import pino from "pino";
import { z } from "zod";
import { Config, type Budget, type ChatMessage, type CompletionRequest, type ConfigInput } from "@loopsmith/shared";

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
export function planRequest(opts: { budget?: Budget; messages?: ChatMessage[]; taskId?: string } = {}): CompletionRequest<Plan> {
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
