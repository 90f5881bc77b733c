/**
 * The scripted provider (replays a file) and the transcript every provider writes.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoopsmithError } from "@loopsmith/shared/runtime";
import { createProvider, type TranscriptLine } from "@loopsmith/shared/llm";
import { anthropicToolReply, startFakeLlm } from "../fixtures/fake-llm.js";
import { GOOD, log, planRequest, rejection, testConfig } from "./helpers.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "loopsmith-llm-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function scripted(replies: Record<string, unknown[]>, extra: Record<string, unknown> = {}) {
  const file = join(dir, `script-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(file, JSON.stringify({ v: 1, kind: "loopsmith-script", description: "test", replies }));
  return {
    provider: createProvider({ config: testConfig({ provider: "scripted", scriptPath: file, ...extra }), log }),
    file,
  };
}

const step = (n: number) => ({ steps: [`step ${n}`], done: n > 1 });

describe("scripted provider", () => {
  it("replays replies per role and task in order, then repeats the last", async () => {
    const { provider, file } = await scripted({ plan: [step(1), step(2)] });
    expect(provider.info).toEqual({ name: "scripted", model: `script:${file.split("/").at(-1)}`, scripted: true });
    const values = [];
    for (let i = 0; i < 3; i++) values.push((await provider.complete(planRequest())).value);
    expect(values).toEqual([step(1), step(2), step(2)]);
    // Another task starts from the first entry again.
    await expect(provider.complete(planRequest({ taskId: "task-2" }))).resolves.toMatchObject({ value: step(1) });
  });

  it("takes a task's replies from its entry under tasks (by id or id suffix), other roles and tasks from replies", async () => {
    const file = join(dir, "script-tasks.json");
    await writeFile(
      file,
      JSON.stringify({
        v: 1,
        kind: "loopsmith-script",
        replies: { plan: [step(0)] },
        tasks: { "gen-2": { plan: [step(2)] }, "exact-id": { plan: [step(3)] } },
      }),
    );
    const provider = createProvider({ config: testConfig({ provider: "scripted", scriptPath: file }), log });
    const valueFor = async (taskId: string) => (await provider.complete(planRequest({ taskId }))).value;
    expect(await valueFor("run7-gen-2")).toEqual(step(2));
    expect(await valueFor("exact-id")).toEqual(step(3));
    expect(await valueFor("run7-gen-12")).toEqual(step(0)); // "-gen-12" does not end with "-gen-2"
    expect(await valueFor("run7-gen-1")).toEqual(step(0));
  });

  it("replays by the task's own call count: a step retried on another replica or after a restart gets the same reply", async () => {
    // Two processes (a restart, or two replicas) over the same script, serving one task's calls.
    const { provider: first, file } = await scripted({ plan: ["not json", step(1), step(2), step(3)] });
    const second = createProvider({ config: testConfig({ provider: "scripted", scriptPath: file }), log });
    const at = (callsBefore: number) => ({
      ...planRequest(),
      context: { taskId: "t-topology", iteration: 1, callsBefore },
    });
    // Call 0 is garbage, so the first step re-asks: it pays two calls and gets entry 1.
    const a = await first.complete(at(0));
    expect(a.value).toEqual(step(1));
    expect(a.usage.calls).toBe(2);
    // The step is retried before its usage was recorded (the conductor resumed it): the same
    // reply again, on the same process (a per-process count would move on to entry 3)...
    await expect(first.complete(at(0))).resolves.toMatchObject({ value: step(1) });
    // ...and a fresh process that starts mid-task answers the task's third call with entry 2
    // (a per-process count would start over at the garbage entry).
    await expect(second.complete(at(2))).resolves.toMatchObject({ value: step(2), usage: { calls: 1 } });
    await expect(second.complete(at(3))).resolves.toMatchObject({ value: step(3) });
  });

  it("counts calls with zero tokens and zero cost", async () => {
    const { provider } = await scripted({ plan: [GOOD] });
    const { usage } = await provider.complete(planRequest());
    expect(usage).toMatchObject({
      calls: 1,
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0,
    });
  });

  it("garbage then valid: the re-ask takes the next entry", async () => {
    const fenced = "```json\n" + JSON.stringify(GOOD) + "\n```";
    const { provider } = await scripted({ plan: ["I cannot produce JSON today.", fenced] });
    const { value, usage } = await provider.complete(planRequest());
    expect(value).toEqual(GOOD);
    expect(usage.calls).toBe(2);
  });

  it("garbage twice: llm_bad_reply carrying the raw text", async () => {
    const { provider } = await scripted({ plan: ["no json here", "still none"] });
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_bad_reply");
    expect((err.details as { raw: string; usage: { calls: number } }).raw).toBe("still none");
    expect((err.details as { usage: { calls: number } }).usage.calls).toBe(2);
  });

  it("a role with no entries throws llm_bad_reply naming the role", async () => {
    const { provider } = await scripted({ build: [GOOD] });
    const err = await rejection(provider.complete(planRequest()));
    expect(err.code).toBe("llm_bad_reply");
    expect(err.message).toContain('"plan"');
  });

  it("a malformed script file is config_invalid with one sentence", async () => {
    const bad = join(dir, "bad.json");
    await writeFile(bad, "{ not json");
    expect(() => createProvider({ config: testConfig({ provider: "scripted", scriptPath: bad }), log })).toThrow(
      expect.objectContaining({ code: "config_invalid", message: expect.stringContaining("not valid JSON") }),
    );
    await writeFile(bad, JSON.stringify({ v: 1, kind: "loopsmith-script", replies: { bulid: [] } }));
    const err = (() => {
      try {
        createProvider({ config: testConfig({ provider: "scripted", scriptPath: bad }), log });
      } catch (e) {
        return e as LoopsmithError;
      }
      return undefined;
    })();
    expect(err?.code).toBe("config_invalid");
    expect(err?.message).toContain("not a loopsmith script");
    expect(() =>
      createProvider({ config: testConfig({ provider: "scripted", scriptPath: join(dir, "missing.json") }), log }),
    ).toThrow(expect.objectContaining({ code: "config_invalid" }));
  });

  it("a tokens budget smaller than the estimate is refused even for the scripted provider", async () => {
    const { provider } = await scripted({ plan: [GOOD] });
    const err = await rejection(provider.complete(planRequest({ budget: { remainingTokens: 10 } })));
    expect(err.code).toBe("budget_exceeded");
  });

  it("writes one transcript line per call, re-ask included", async () => {
    const transcriptPath = join(dir, "scripted.jsonl");
    const { provider } = await scripted({ plan: ["garbage", GOOD] }, { transcriptPath });
    await provider.complete(planRequest());
    const lines = (await readFile(transcriptPath, "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as TranscriptLine);
    expect(lines).toHaveLength(2);
    expect(lines.map((l) => l.attempt)).toEqual([1, 2]);
    expect(lines[0]).toMatchObject({
      provider: "scripted",
      role: "plan",
      taskId: "task-1",
      iteration: 0,
      reply: "garbage",
    });
    expect(lines[0]!.system).toBe("You plan small coding tasks.");
    expect(lines[1]!.messages.at(-2)).toEqual({ role: "assistant", content: "garbage" });
    expect(lines[1]!.messages.at(-1)!.content).toContain("Reply with only valid JSON");
    expect(JSON.parse(lines[1]!.reply!)).toEqual(GOOD);
    expect(Date.parse(lines[0]!.at)).not.toBeNaN();
  });
});

describe("transcript of a real provider", () => {
  it("records failed HTTP calls with their error and successful ones with their usage", async () => {
    const fake = await startFakeLlm([
      { status: 400, body: { type: "error", error: { type: "invalid_request_error", message: "bad" } } },
      { body: anthropicToolReply("plan", GOOD) },
    ]);
    try {
      const transcriptPath = join(dir, "anthropic.jsonl");
      const config = testConfig({
        provider: "anthropic",
        model: "claude-haiku-4-5",
        apiKey: "k",
        baseUrl: fake.url,
        transcriptPath,
      });
      const provider = createProvider({ config, log });
      expect((await rejection(provider.complete(planRequest()))).code).toBe("bad_request");
      await provider.complete(planRequest());
      const lines = (await readFile(transcriptPath, "utf8"))
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as TranscriptLine);
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatchObject({
        provider: "anthropic",
        reply: null,
        error: { code: "bad_request" },
        usage: { calls: 0 },
      });
      expect(lines[1]).toMatchObject({
        model: "claude-haiku-4-5",
        usage: { calls: 1, inputTokens: 100, outputTokens: 50 },
      });
      expect(fake.count).toBe(2);
    } finally {
      await fake.close();
    }
  });
});
