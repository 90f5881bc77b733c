/**
 * The model providers' faults (a rejected key, overload retries, the budget, a reply wrapped
 * in prose) through the real `loopsmith solve`, with the real SDKs talking to
 * local fake servers that speak the Anthropic Messages API and OpenAI Chat Completions.
 * The rest of the stack is real (NATS container, five processes, PGlite, Docker sandbox).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  anthropicError,
  anthropicToolReply,
  FAST_RETRY,
  openaiReply,
  startFakeLlm,
  type FakeLlm,
} from "../fixtures/fake-llm.js";
import { jsonLines, loopsmith } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-providers-"));
const taskFile = join(dataDir, "task.json");
writeFileSync(
  taskFile,
  JSON.stringify({
    goal: "Write add(a, b) in solution.py returning the sum.",
    language: "python",
    acceptanceTests: [
      { path: "test_add.py", content: "from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n" },
    ],
  }),
);
const plan = {
  summary: "Implement add.",
  acceptanceCriteria: ["add(2, 3) == 5"],
  steps: ["return a + b"],
  files: ["solution.py"],
};
const candidate = {
  files: [{ path: "solution.py", content: "def add(a, b):\n    return a + b\n" }],
  tests: [],
  notes: "sum",
};
const anthropicModels = { body: { data: [], has_more: false, first_id: null, last_id: null } };
const baseEnv = {
  LOOPSMITH_DATA_DIR: dataDir,
  NATS_URL: "",
  DATABASE_URL: "",
  LOOPSMITH_PROVIDER: "",
  LOOPSMITH_API_KEY: "",
  LOOPSMITH_BASE_URL: "",
};

let fake: FakeLlm | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

function result(stdout: string): Record<string, unknown> {
  const lines = jsonLines(stdout);
  return lines[lines.length - 1] as Record<string, unknown>;
}

describe("providers through loopsmith solve", () => {
  it("a rejected API key: exits non-zero within 5 s, one sentence naming the key, one HTTP call", async () => {
    fake = await startFakeLlm([{ status: 401, body: anthropicError("authentication_error", "invalid x-api-key") }], {
      repeatLast: true,
    });
    const run = await loopsmith(["solve", "--file", taskFile, "--provider", "anthropic"], {
      ...baseEnv,
      ANTHROPIC_API_KEY: "sk-ant-wrong",
      ANTHROPIC_BASE_URL: fake.url,
    });
    expect(run.code).not.toBe(0);
    expect(run.ms).toBeLessThan(5_000);
    const lines = run.stderr
      .trim()
      .split("\n")
      .filter((l) => l.startsWith("loopsmith:"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/API key/);
    expect(fake.count).toBe(1);
  });

  it("529 twice, then a valid reply: the task goes on and usage counts only the successful calls", async () => {
    fake = await startFakeLlm([
      anthropicModels,
      { status: 529, headers: FAST_RETRY, body: anthropicError("overloaded_error", "Overloaded") },
      { status: 529, headers: FAST_RETRY, body: anthropicError("overloaded_error", "Overloaded") },
      { body: anthropicToolReply("plan", plan, { usage: { input_tokens: 1000, output_tokens: 200 } }) },
      { body: anthropicToolReply("candidate", candidate, { usage: { input_tokens: 2000, output_tokens: 300 } }) },
    ]);
    const run = await loopsmith(
      ["solve", "--file", taskFile, "--provider", "anthropic", "--model", "claude-sonnet-4-6", "--json"],
      {
        ...baseEnv,
        ANTHROPIC_API_KEY: "sk-ant-test",
        ANTHROPIC_BASE_URL: fake.url,
      },
    );
    expect(run.code, run.stderr).toBe(0);
    const r = result(run.stdout) as {
      status: string;
      scripted: boolean;
      usage: { total: { calls: number; inputTokens: number; outputTokens: number; costUsd: number } };
    };
    expect(r.status).toBe("passed");
    expect(r.scripted).toBe(false);
    expect(r.usage.total.calls).toBe(2);
    expect(r.usage.total.inputTokens).toBe(3000);
    expect(r.usage.total.outputTokens).toBe(500);
    // $3 / MTok input, $15 / MTok output (the configured price of claude-sonnet-4-6).
    expect(r.usage.total.costUsd).toBeCloseTo((3000 * 3 + 500 * 15) / 1e6, 8);
    expect(fake.requests.filter((q) => q.path.startsWith("/v1/messages"))).toHaveLength(4);
    const usageEvents = jsonLines(run.stdout).filter((l) => l.kind === "usage");
    expect(usageEvents).toHaveLength(2);
  });

  it("a budget smaller than one call's estimated cost stops with reason budget before any call", async () => {
    fake = await startFakeLlm([anthropicModels]);
    const run = await loopsmith(
      ["solve", "--file", taskFile, "--provider", "anthropic", "--budget-usd", "0.0001", "--json"],
      {
        ...baseEnv,
        ANTHROPIC_API_KEY: "sk-ant-test",
        ANTHROPIC_BASE_URL: fake.url,
      },
    );
    expect(run.code).toBe(1);
    const r = result(run.stdout) as { stopReason: string; iterations: number };
    expect(r.stopReason).toBe("budget");
    expect(fake.requests.filter((q) => q.path.startsWith("/v1/messages"))).toHaveLength(0);
  });

  it("openai-compatible against a server that wraps its JSON in prose and fences", async () => {
    const wrap = (v: unknown) =>
      `Sure! Here is what you asked for:\n\n\`\`\`json\n${JSON.stringify(v, null, 2)}\n\`\`\`\n\nLet me know if you need anything else.`;
    fake = await startFakeLlm([
      { body: { object: "list", data: [] } },
      { body: openaiReply(wrap(plan)) },
      { body: openaiReply(wrap(candidate)) },
    ]);
    const run = await loopsmith(
      [
        "solve",
        "--file",
        taskFile,
        "--provider",
        "openai-compatible",
        "--base-url",
        `${fake.url}/v1`,
        "--model",
        "local-model",
        "--json",
      ],
      { ...baseEnv, OPENAI_API_KEY: "none" },
    );
    expect(run.code, run.stderr).toBe(0);
    const r = result(run.stdout) as { status: string; iterations: number; providers: string[] };
    expect(r.status).toBe("passed");
    expect(r.iterations).toBe(1);
    expect(r.providers).toEqual(["openai-compatible:local-model"]);
  });
});
