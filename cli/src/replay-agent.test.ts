import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { RunRecord, ScriptFile, Task, type TaskEvent } from "@loopsmith/shared/contracts";
import { createProvider } from "@loopsmith/shared/llm";
import { loadConfig } from "@loopsmith/shared/runtime";
import { agentCallsNote, replayScript, replaySolveOptions } from "./replay.js";
import { agentTurns } from "./transcript-record.js";
import { flagsOf } from "./steering.js";
import { transcriptSteps } from "./transcript-view.js";

/** An agent step event (phase `explore`, `data.agentStep`), with `extra` fields beside the contract's. */
const agentStep = (
  seq: number,
  iteration: number,
  step: number,
  tool: string,
  args: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): TaskEvent => ({
  v: 1,
  taskId: "rec",
  seq,
  at: "t",
  iteration,
  kind: "step",
  phase: "explore",
  message: `step ${step}`,
  data: {
    agentStep: {
      step,
      iteration,
      thought: `thought ${iteration}.${step}`,
      tool,
      args,
      observation: "o",
      durationMs: 1,
      ...extra,
    },
  },
});

/** Arguments with what a careless copy would lose: nested edits, quotes, newlines, unicode, a null. */
const EDIT_ARGS = {
  edits: [{ path: "pkg/a.py", search: 'def foo():\n    return "x"\n', replace: "def foo():\n    return 'ÿ→'\n" }],
  note: null,
};

describe("agentTurns", () => {
  it("makes one turn per step number, in the order taken, with the arguments exactly as recorded", () => {
    const events = [
      agentStep(3, 1, 2, "edit", EDIT_ARGS),
      agentStep(2, 1, 1, "search", { pattern: "def foo\\(", glob: "**/*.py", maxResults: 5 }),
      agentStep(4, 2, 1, "run", { command: "pytest -q tests/test_a.py" }),
      agentStep(5, 2, 2, "submit", { summary: "fix foo" }),
    ];
    const turns = agentTurns(transcriptSteps(events));
    expect(turns).toEqual([
      {
        content: "thought 1.1",
        toolCalls: [{ name: "search", args: { pattern: "def foo\\(", glob: "**/*.py", maxResults: 5 } }],
      },
      { content: "thought 1.2", toolCalls: [{ name: "edit", args: EDIT_ARGS }] },
      { content: "thought 2.1", toolCalls: [{ name: "run", args: { command: "pytest -q tests/test_a.py" } }] },
      { content: "thought 2.2", toolCalls: [{ name: "submit", args: { summary: "fix foo" } }] },
    ]);
    expect(JSON.stringify(turns[1]?.toolCalls[0]?.args)).toBe(JSON.stringify(EDIT_ARGS));
  });

  it("groups the calls of one model turn (the steps that share a step number), in the order made", () => {
    const events = [
      agentStep(1, 1, 1, "read", { path: "a.py" }, { callId: "toolu_1" }),
      agentStep(2, 1, 1, "read", { path: "b.py" }, { callId: "toolu_2", thought: "" }),
      agentStep(3, 1, 1, "search", { pattern: "x" }, { thought: "" }),
      agentStep(4, 1, 2, "edit", EDIT_ARGS),
      agentStep(5, 2, 1, "submit", { summary: "done" }),
    ];
    expect(agentTurns(transcriptSteps(events))).toEqual([
      {
        content: "thought 1.1",
        toolCalls: [
          { id: "toolu_1", name: "read", args: { path: "a.py" } },
          { id: "toolu_2", name: "read", args: { path: "b.py" } },
          { name: "search", args: { pattern: "x" } },
        ],
      },
      { content: "thought 1.2", toolCalls: [{ name: "edit", args: EDIT_ARGS }] },
      { content: "thought 2.1", toolCalls: [{ name: "submit", args: { summary: "done" } }] },
    ]);
  });

  it("replays a turn the loop re-ran after a restart once, as published last", () => {
    const usageEvent = (seq: number): TaskEvent => ({
      v: 1,
      taskId: "rec",
      seq,
      at: "t",
      iteration: 1,
      kind: "usage",
      message: "agent call",
      data: { role: "agent" },
    });
    const events = [
      usageEvent(1),
      agentStep(2, 1, 1, "read", { path: "a.py" }),
      usageEvent(3), // the architect died before the turn's checkpoint: the turn is asked again
      agentStep(4, 1, 1, "read", { path: "a.py" }),
      agentStep(5, 1, 1, "read", { path: "c.py" }, { thought: "" }),
    ];
    expect(agentTurns(transcriptSteps(events))).toEqual([
      {
        content: "thought 1.1",
        toolCalls: [
          { name: "read", args: { path: "a.py" } },
          { name: "read", args: { path: "c.py" } },
        ],
      },
    ]);
  });

  it("keeps a turn without a tool call (the loop nudged the model) as a turn without calls", () => {
    const events = [
      agentStep(1, 1, 1, "(no tool call)", {}, { thought: "I think it is done", isError: true }),
      agentStep(2, 1, 2, "submit", { summary: "done" }),
    ];
    expect(agentTurns(transcriptSteps(events))).toEqual([
      { content: "I think it is done", toolCalls: [] },
      { content: "thought 1.2", toolCalls: [{ name: "submit", args: { summary: "done" } }] },
    ]);
  });
});

describe("replayScript in agent mode", () => {
  const usage = (calls: number) => ({
    calls,
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    costUsd: 0,
    latencyMs: 0,
  });
  const plan = { summary: "s", acceptanceCriteria: [], steps: ["x"], files: ["roman.py"] };
  /** A repo-less run: one plan reply, then an agent loop of two turns; the result counts `agentCalls`. */
  function agentRecord(agentCalls: number, withSteps = true): RunRecord {
    const task = Task.parse({
      v: 1,
      taskId: "rec",
      goal: "to_roman",
      language: "python",
      submittedAt: "2026-01-01T00:00:00.000Z",
      files: [{ path: "roman.py", content: "x" }],
    });
    const planEvent: TaskEvent = {
      v: 1,
      taskId: "rec",
      seq: 1,
      at: "t",
      iteration: 1,
      kind: "step",
      phase: "plan",
      message: "plan",
      data: { llm: { role: "plan", callsBefore: 0, calls: 1, value: plan } },
    };
    const steps = [
      agentStep(10, 2, 1, "read", { path: "roman.py", startLine: 1 }),
      agentStep(11, 2, 2, "submit", { summary: "pairs" }),
    ];
    const result = {
      v: 1,
      taskId: "rec",
      status: "passed",
      stopReason: "passed",
      iterations: 2,
      files: [],
      tests: [],
      lastExecution: null,
      hidden: null,
      failureIds: [],
      usage: { total: usage(1 + agentCalls), byRole: { plan: usage(1), agent: usage(agentCalls) }, byIteration: [] },
      scripted: false,
      providers: ["anthropic:claude-sonnet-4-6"],
      durationMs: 1,
      message: "passed",
    };
    const events = [planEvent, ...(withSteps ? steps : [])];
    return RunRecord.parse({ v: 1, taskId: "rec", task, result, events, recordedAt: "t" });
  }

  it("adds the transcript's turns as the agent replies, beside the other roles' recorded replies", () => {
    const script = ScriptFile.parse(replayScript(agentRecord(2)));
    expect(script.replies.agent).toEqual([
      { content: "thought 2.1", toolCalls: [{ name: "read", args: { path: "roman.py", startLine: 1 } }] },
      { content: "thought 2.2", toolCalls: [{ name: "submit", args: { summary: "pairs" } }] },
    ]);
    expect(script.replies.plan).toEqual([plan]);
    expect(replayScript(agentRecord(0, false)).replies.agent).toBeUndefined();
  });

  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("is served by the scripted provider turn by turn, the calls and their arguments as recorded", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-replay-agent-"));
    dirs.push(dir);
    const scriptFile = join(dir, "replay-rec.json");
    await writeFile(scriptFile, JSON.stringify(replayScript(agentRecord(2))));
    const config = loadConfig({ env: {}, flags: flagsOf(replaySolveOptions(join(dir, "task.json"), scriptFile)) });
    const llm = createProvider({ config, log: pino({ level: "silent" }) });
    const turn = (callsBefore: number) =>
      llm.converse!({
        role: "agent",
        system: "s",
        messages: [{ role: "user", content: "go" }],
        tools: [],
        context: { taskId: "rec-replay", iteration: 2, callsBefore },
      });
    const first = await turn(0);
    expect([first.content, first.toolCalls]).toEqual([
      "thought 2.1",
      [{ id: "call_0_0", name: "read", args: { path: "roman.py", startLine: 1 } }],
    ]);
    expect((await turn(1)).toolCalls).toEqual([{ id: "call_1_0", name: "submit", args: { summary: "pairs" } }]);
  });

  it("warns when the turns are not as many as the agent calls the run made", () => {
    const r = agentRecord(3);
    expect(agentCallsNote(r, replayScript(r))).toBe(
      "the run of rec made 3 agent calls but its transcript gives 2 turns; the replay serves them in order, and may take its steps differently",
    );
    const same = agentRecord(2);
    expect(agentCallsNote(same, replayScript(same))).toBeUndefined();
  });
});
