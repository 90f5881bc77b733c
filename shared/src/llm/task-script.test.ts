import pino from "pino";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { emptyUsage } from "../contracts/common.js";
import { Plan } from "../contracts/plan.js";
import type { ScriptFile, Simulation, TaskScript } from "../contracts/script.js";
import { SpendMeter } from "./cost.js";
import type { TranscriptLine } from "./transcript.js";
import { withTaskScripts } from "./task-script.js";
import type { Completion, CompletionRequest, LlmProvider } from "./types.js";

const log = pino({ level: "silent" });

const plan = (n: number): Plan => ({
  summary: `plan ${n}`,
  acceptanceCriteria: [],
  steps: [`step ${n}`],
  files: ["solution.py"],
});

const script: ScriptFile = { v: 1, kind: "loopsmith-script", replies: { plan: [plan(1), plan(2)] } };
const simulation: Simulation = {
  v: 1,
  kind: "loopsmith-simulation",
  source: "HumanEval/7",
  path: "solution.py",
  solution: "x = 1\n",
  wrong: [{ content: "x = 2\n", cause: "1 -> 2", description: "line 1: `1` changed to `2`" }],
  findRate: 0.3,
  seed: 1,
};

/** A model stand-in that records what reaches it. */
function fakeInner() {
  const seen: string[] = [];
  let verified = 0;
  const inner: LlmProvider = {
    info: { name: "anthropic", model: "claude-sonnet-4-6", scripted: false },
    async complete<T>(request: CompletionRequest<T>): Promise<Completion<T>> {
      seen.push(request.context.taskId);
      return {
        value: request.schema.parse(plan(99)),
        usage: { ...emptyUsage(), calls: 1, inputTokens: 10, costUsd: 0.01 },
        provider: this.info,
      };
    },
    async verify() {
      verified += 1;
    },
  };
  return { inner, seen, verified: () => verified };
}

function wrap(inner: LlmProvider, lines: TranscriptLine[] = [], max?: number): LlmProvider {
  return withTaskScripts(inner, {
    log,
    meter: new SpendMeter(),
    transcript: async (line) => {
      lines.push(line);
    },
    maxOutputTokens: 4_096,
    ...(max !== undefined ? { max } : {}),
  });
}

const req = (taskId: string, taskScript?: TaskScript, callsBefore?: number): CompletionRequest<Plan> => ({
  role: "plan",
  system: "plan the task",
  messages: [{ role: "user", content: "## Task\nLanguage: python\n\nWrite x." }],
  schema: Plan,
  schemaName: "plan",
  context: {
    taskId,
    iteration: 1,
    ...(callsBefore !== undefined ? { callsBefore } : {}),
    ...(taskScript ? { script: taskScript } : {}),
  },
});

describe("withTaskScripts", () => {
  it("answers a task that carries a script from it, and a task without one from the inner provider", async () => {
    const { inner, seen } = fakeInner();
    const lines: TranscriptLine[] = [];
    const p = wrap(inner, lines);
    const a = await p.complete(req("task-a", script));
    expect(a.value).toEqual(plan(1));
    expect(a.provider).toEqual({ name: "scripted", model: "script:task", scripted: true });
    expect(a.usage).toMatchObject({
      calls: 1,
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0,
    });
    const b = await p.complete(req("task-b"));
    expect(b.value).toEqual(plan(99));
    expect(b.provider).toEqual(inner.info);
    expect(seen).toEqual(["task-b"]);
    // The script's call went through the engine: one transcript line, named after the script.
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      provider: "scripted",
      model: "script:task",
      taskId: "task-a",
      role: "plan",
      attempt: 1,
    });
  });

  it("keeps a task's provider between calls (its count goes on) and honours callsBefore", async () => {
    const p = wrap(fakeInner().inner);
    expect((await p.complete(req("task-a", script))).value).toEqual(plan(1));
    expect((await p.complete(req("task-a", script))).value).toEqual(plan(2));
    expect((await p.complete(req("task-c", script))).value).toEqual(plan(1));
    expect((await p.complete(req("task-d", script, 1))).value).toEqual(plan(2));
  });

  it("answers a task that carries a simulation as simulated, with zero usage", async () => {
    const { inner, seen } = fakeInner();
    const done = await wrap(inner).complete(req("task-s", simulation));
    expect(done.provider).toEqual({ name: "simulated", model: "simulated:HumanEval/7", scripted: true });
    expect(done.usage).toMatchObject({ calls: 1, inputTokens: 0, outputTokens: 0, costUsd: 0 });
    expect(Plan.parse(done.value).summary).toContain("HumanEval/7");
    expect(seen).toEqual([]);
  });

  it("validates scripted replies like a model's: one re-ask, then llm_bad_reply", async () => {
    const p = wrap(fakeInner().inner);
    const garbageFirst: ScriptFile = {
      v: 1,
      kind: "loopsmith-script",
      replies: { plan: ["not json at all", plan(3)] },
    };
    const done = await p.complete(req("task-r", garbageFirst));
    expect(done.value).toEqual(plan(3));
    expect(done.usage.calls).toBe(2);
    const neverValid: ScriptFile = { v: 1, kind: "loopsmith-script", replies: { plan: [{ summary: "" }] } };
    await expect(p.complete(req("task-bad", neverValid))).rejects.toMatchObject({ code: "llm_bad_reply" });
  });

  it("refuses a script that is neither a loopsmith script nor a simulation", async () => {
    const p = wrap(fakeInner().inner);
    const bogus = { v: 1, kind: "loopsmith-script", replies: { plann: [] } } as unknown as TaskScript;
    await expect(p.complete(req("task-x", bogus))).rejects.toMatchObject({
      code: "bad_request",
      message: expect.stringContaining("task-x"),
    });
  });

  it("applies a simulation's defaults when the task's script was not parsed", async () => {
    const raw = { ...simulation } as Partial<Simulation>;
    delete raw.findRate;
    delete raw.seed;
    const done = await wrap(fakeInner().inner).complete(req("task-raw", raw as TaskScript));
    expect(done.provider).toMatchObject({ name: "simulated" });
  });

  it("a changed script for the same task is a new provider (the cache key holds the script's hash)", async () => {
    const p = wrap(fakeInner().inner);
    expect((await p.complete(req("task-h", script))).value).toEqual(plan(1));
    const other: ScriptFile = { v: 1, kind: "loopsmith-script", replies: { plan: [plan(5)] } };
    expect((await p.complete(req("task-h", other))).value).toEqual(plan(5));
  });

  it("evicts the least recently used task beyond max", async () => {
    const p = wrap(fakeInner().inner, [], 1);
    expect((await p.complete(req("task-1", script))).value).toEqual(plan(1));
    expect((await p.complete(req("task-2", script))).value).toEqual(plan(1));
    // task-1's provider (and this process's count) was evicted: it starts over.
    expect((await p.complete(req("task-1", script))).value).toEqual(plan(1));
  });

  it("keeps the inner provider's info and verify", async () => {
    const { inner, verified } = fakeInner();
    const p = wrap(inner);
    expect(p.info).toBe(inner.info);
    await p.verify?.();
    expect(verified()).toBe(1);
    const { verify: _v, ...noVerify } = inner;
    expect(wrap(noVerify as LlmProvider).verify).toBeUndefined();
  });

  it("passes the schema through: a schema the script does not satisfy fails", async () => {
    const p = wrap(fakeInner().inner);
    const strict = {
      ...req("task-z", script),
      schema: z.object({ other: z.string() }),
    } as unknown as CompletionRequest<Plan>;
    await expect(p.complete(strict)).rejects.toMatchObject({ code: "llm_bad_reply" });
  });
});
