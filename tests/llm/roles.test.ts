/**
 * A model per role: one provider from `createProvider`, the calls of one
 * task as the services make them, each role's model on its own fake server (a strong
 * planner on an Anthropic fake, a fast builder and reviewer on an OpenAI-compatible fake),
 * so the real SDKs run.
 */
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { addUsage, emptyUsage, type Usage } from "@loopsmith/shared/contracts";
import { createProvider, type Completion, type Role } from "@loopsmith/shared/llm";
import { anthropicToolReply, openaiReply, startFakeLlm, type FakeLlm } from "../fixtures/fake-llm.js";
import { GOOD, Plan, log, testConfig, type Wire } from "./helpers.js";

const fakes: FakeLlm[] = [];
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

const Candidate = z.object({ code: z.string() });
const Review = z.object({ approved: z.boolean() });
const Reflection = z.object({ lesson: z.string() });
const schemas = {
  plan: [Plan, "plan"],
  build: [Candidate, "candidate"],
  review: [Review, "review"],
  reflect: [Reflection, "reflection"],
} as const;

// USD per million tokens: opus-4-1 $15/$75 from @pydantic/genai-prices (the anthropic provider
// is Anthropic's prices whatever its base URL); gpt-4o-mini $0.15/$0.60 set in the role's
// `prices`: a fake server's URL is not OpenAI's, so the price source cannot know it.
const OPUS = { in: 15, out: 75 };
const MINI = { in: 0.15, out: 0.6 };
const cost = (p: { in: number; out: number }, input: number, output: number): number =>
  (input * p.in + output * p.out) / 1e6;

describe("a model per role", () => {
  it("two roles on two fake servers in one task: each server gets only its role's calls, each priced at its role's model", async () => {
    const strong = await startFakeLlm([
      { body: anthropicToolReply("plan", GOOD, { usage: { input_tokens: 1000, output_tokens: 200 } }) },
      {
        body: anthropicToolReply(
          "reflection",
          { lesson: "off by one" },
          { usage: { input_tokens: 800, output_tokens: 100 } },
        ),
      },
    ]);
    const fast = await startFakeLlm([
      {
        body: openaiReply(JSON.stringify({ code: "def add(a, b): return a - b" }), {
          promptTokens: 2000,
          completionTokens: 500,
        }),
      },
      { body: openaiReply(JSON.stringify({ approved: true }), { promptTokens: 1500, completionTokens: 50 }) },
      {
        body: openaiReply(JSON.stringify({ code: "def add(a, b): return a + b" }), {
          promptTokens: 2500,
          completionTokens: 600,
        }),
      },
    ]);
    fakes.push(strong, fast);
    const builder = {
      provider: "openai-compatible",
      model: "gpt-4o-mini",
      baseUrl: `${fast.url}/v1`,
      apiKey: "sk-fast-test",
      prices: { "gpt-4o-mini": { inputPerMTok: 0.15, outputPerMTok: 0.6 } },
    } as const;
    const config = testConfig({
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      apiKey: "sk-ant-test",
      baseUrl: strong.url,
      roles: {
        plan: { model: "claude-opus-4-1" },
        reflect: { model: "claude-opus-4-1" },
        build: builder,
        review: { ...builder, maxTokens: 300, temperature: 0 },
      },
    });
    const provider = createProvider({ config, log });

    // One task, as the services call it: plan, build, review, reflect, build again.
    const seq: Array<[Exclude<Role, "spec" | "improve" | "agent">, number]> = [
      ["plan", 0],
      ["build", 1],
      ["review", 1],
      ["reflect", 1],
      ["build", 2],
    ];
    const done: Array<[Role, Completion<unknown>]> = [];
    for (const [role, iteration] of seq) {
      const [schema, schemaName] = schemas[role];
      const completion = await provider.complete<unknown>({
        role,
        system: `You are the ${role} role.`,
        messages: [{ role: "user", content: "Write add(a, b) in Python." }],
        schema,
        schemaName,
        context: { taskId: "task-roles", iteration },
      });
      done.push([role, completion]);
    }

    // Each server received only its roles' calls, for its roles' model.
    expect(strong.requests.map((r) => (r.body as Wire).tool_choice.name)).toEqual(["plan", "reflection"]);
    expect(strong.requests.map((r) => (r.body as Wire).model)).toEqual(["claude-opus-4-1", "claude-opus-4-1"]);
    // The Anthropic SDK sends the key as x-api-key or as a bearer token, depending on its version.
    expect(
      strong.requests.map((r) => [
        r.path,
        `${r.headers["x-api-key"] ?? ""} ${r.headers.authorization ?? ""}`.includes("sk-ant-test"),
      ]),
    ).toEqual([
      ["/v1/messages", true],
      ["/v1/messages", true],
    ]);
    expect(fast.requests.map((r) => (r.body as Wire).response_format.json_schema.name)).toEqual([
      "candidate",
      "review",
      "candidate",
    ]);
    expect(fast.requests.map((r) => (r.body as Wire).model)).toEqual(["gpt-4o-mini", "gpt-4o-mini", "gpt-4o-mini"]);
    // The Anthropic key never reaches the other server, and per-role limits go on the wire.
    expect(fast.requests.map((r) => r.headers.authorization)).toEqual(Array(3).fill("Bearer sk-fast-test"));
    expect(fast.requests.map((r) => [(r.body as Wire).max_tokens, (r.body as Wire).temperature])).toEqual([
      [1000, undefined],
      [300, 0],
      [1000, undefined],
    ]);
    expect(done.map(([role, c]) => [role, c.provider?.name, c.provider?.model])).toEqual([
      ["plan", "anthropic", "claude-opus-4-1"],
      ["build", "openai-compatible", "gpt-4o-mini"],
      ["review", "openai-compatible", "gpt-4o-mini"],
      ["reflect", "anthropic", "claude-opus-4-1"],
      ["build", "openai-compatible", "gpt-4o-mini"],
    ]);

    // Cost by role, as the conductor sums it (usage.byRole), at each role's own price ...
    const byRole: Partial<Record<Role, Usage>> = {};
    let total = emptyUsage();
    for (const [role, c] of done) {
      byRole[role] = addUsage(byRole[role] ?? emptyUsage(), c.usage);
      total = addUsage(total, c.usage);
    }
    expect(byRole.plan!.costUsd).toBeCloseTo(cost(OPUS, 1000, 200), 12);
    expect(byRole.reflect!.costUsd).toBeCloseTo(cost(OPUS, 800, 100), 12);
    expect(byRole.build!.costUsd).toBeCloseTo(cost(MINI, 2000, 500) + cost(MINI, 2500, 600), 12);
    expect(byRole.review!.costUsd).toBeCloseTo(cost(MINI, 1500, 50), 12);
    expect(byRole.build!.calls).toBe(2);
    // ... adds up to the task's total, in USD and in tokens.
    const roles = Object.values(byRole);
    expect(roles.reduce((s, u) => s + u.costUsd, 0)).toBeCloseTo(total.costUsd, 12);
    expect(total.costUsd).toBeCloseTo(cost(OPUS, 1800, 300) + cost(MINI, 6000, 1150), 12);
    expect(roles.reduce((s, u) => s + u.inputTokens + u.outputTokens, 0)).toBe(1800 + 300 + 6000 + 1150);
    expect(roles.reduce((s, u) => s + u.calls, 0)).toBe(5);
  });

  it("a role without its own model uses the llm defaults on the default server", async () => {
    const server = await startFakeLlm([{ body: anthropicToolReply("plan", GOOD) }]);
    fakes.push(server);
    const config = testConfig({
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      apiKey: "sk-ant-test",
      baseUrl: server.url,
      roles: { build: { model: "claude-haiku-4-5" } },
    });
    const provider = createProvider({ config, log });
    const c = await provider.complete({
      role: "spec",
      system: "spec",
      messages: [{ role: "user", content: "x" }],
      schema: Plan,
      schemaName: "plan",
      context: { taskId: "t", iteration: 0 },
    });
    expect(c.provider).toEqual({ name: "anthropic", model: "claude-sonnet-4-6", scripted: false });
    expect((server.requests[0]!.body as Wire).model).toBe("claude-sonnet-4-6");
    expect(provider.info).toEqual({ name: "anthropic", model: "claude-sonnet-4-6", scripted: false });
  });
});
