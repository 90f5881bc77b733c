/**
 * Agent mode's scripted turns: the scripted provider replays `replies.agent` by
 * `callsBefore`, a task's own script answers whatever the provider, a simulation has no
 * agent mode.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { TaskScript } from "@loopsmith/shared/contracts";
import { agentToolSpecs, createProvider, type ConverseRequest, type LlmProvider } from "@loopsmith/shared/llm";
import { startFakeLlm, type FakeLlm } from "../fixtures/fake-llm.js";
import { log, rejection, testConfig } from "./helpers.js";

let fake: FakeLlm | undefined;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "loopsmith-agent-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

function converseRequest(o: Partial<ConverseRequest> = {}): ConverseRequest {
  return {
    role: "agent",
    system: "You are the agent.",
    messages: [{ role: "user", content: "Fix the bulk discount." }],
    tools: agentToolSpecs(),
    context: { taskId: "task-agent", iteration: 1 },
    ...o,
  };
}

/** An Anthropic provider on a fake server that has no answers: a call to it would fail. */
async function anthropic(): Promise<LlmProvider> {
  fake = await startFakeLlm([]);
  return createProvider({
    config: testConfig({ provider: "anthropic", model: "claude-sonnet-4-6", apiKey: "sk-ant-test", baseUrl: fake.url }),
    log,
  });
}

describe("agent mode: the scripted provider", () => {
  const turns = [
    { content: "look first", toolCalls: [{ name: "search", args: { pattern: "x" } }] },
    {
      toolCalls: [
        { id: "mine", name: "run", args: { command: "true" } },
        { name: "read", args: { path: "a.py" } },
      ],
    },
    { toolCalls: [{ name: "submit", args: { summary: "done" } }] },
  ];

  it("replays the agent turns by callsBefore, the last repeating, ids defaulting to call_<n>_<i>", async () => {
    const file = join(dir, "agent-script.json");
    await writeFile(file, JSON.stringify({ v: 1, kind: "loopsmith-script", replies: { agent: turns } }));
    const provider = createProvider({ config: testConfig({ provider: "scripted", scriptPath: file }), log });
    const at = (callsBefore: number) =>
      provider.converse!(converseRequest({ context: { taskId: "t", iteration: 1, callsBefore } }));
    // Out of order, as a retried step on another replica would ask.
    await expect(at(1)).resolves.toMatchObject({
      content: "",
      toolCalls: [
        { id: "mine", name: "run", args: { command: "true" } },
        { id: "call_1_1", name: "read", args: { path: "a.py" } },
      ],
    });
    const first = await at(0);
    expect(first).toMatchObject({
      content: "look first",
      toolCalls: [{ id: "call_0_0", name: "search", args: { pattern: "x" } }],
      usage: { calls: 1, inputTokens: 0, outputTokens: 0, costUsd: 0 },
      provider: { name: "scripted", model: "script:agent-script.json", scripted: true },
    });
    await expect(at(7)).resolves.toMatchObject({ toolCalls: [{ id: "call_7_0", name: "submit" }] });
  });

  it("a task's own script answers whatever the provider; a simulation has no agent mode", async () => {
    const provider = await anthropic();
    const script = TaskScript.parse({ v: 1, kind: "loopsmith-script", replies: { agent: turns } });
    const reply = await provider.converse!(
      converseRequest({ context: { taskId: "t2", iteration: 1, callsBefore: 2, script } }),
    );
    expect(reply).toMatchObject({
      toolCalls: [{ id: "call_2_0", name: "submit", args: { summary: "done" } }],
      provider: { name: "scripted", model: "script:task", scripted: true },
    });
    const simulation = TaskScript.parse({
      v: 1,
      kind: "loopsmith-simulation",
      source: "HumanEval/0",
      path: "solution.py",
      solution: "x = 1\n",
      wrong: [{ content: "x = 2\n", cause: "1 -> 2", description: "wrong constant" }],
    });
    const err = await rejection(
      provider.converse!(converseRequest({ context: { taskId: "t3", iteration: 1, script: simulation } })),
    );
    expect(err.code).toBe("bad_request");
    expect(err.message).toBe("the simulated provider has no agent mode (tool calling)");
    // A script without agent turns says so.
    const noTurns = TaskScript.parse({ v: 1, kind: "loopsmith-script", replies: { build: [] } });
    const missing = await rejection(
      provider.converse!(converseRequest({ context: { taskId: "t4", iteration: 1, script: noTurns } })),
    );
    expect(missing).toMatchObject({
      code: "llm_bad_reply",
      message: 'the script task has no replies for the role "agent"',
    });
    expect(fake!.count).toBe(0);
  });
});
