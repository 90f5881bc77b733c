import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { AgentMessage, AgentMessagesNote, TaskEvent } from "@loopsmith/shared/contracts";
import { NO_TOOL_CALL, readTranscript, transcriptScriptTurns, transcriptSteps } from "./transcript-record.js";
import { transcriptLines, transcriptMarkdown } from "./transcript-view.js";

/** A run recorded before the transcript became the messages (`data.agentStep` events). */
const OLD_RUN = JSON.parse(
  readFileSync(new URL("../../tests/fixtures/agent-run-transcript-steps.json", import.meta.url), "utf8"),
) as { taskId: string; events: TaskEvent[] };

type Old = {
  step: number;
  thought: string;
  tool: string;
  args: Record<string, unknown>;
  observation: string;
  isError: boolean;
  tokens: number;
  costUsd: number;
  durationMs: number;
  callId?: string;
  stuck?: AgentMessagesNote["stuck"];
};

/**
 * The same run as today's loop publishes it: for each call, the messages it appended (the
 * turn's assistant message on its first call, the answer, the redirect after the turn the
 * stuck rule fired on), built from the old record's steps.
 */
function asMessages(old: readonly TaskEvent[]): TaskEvent[] {
  const out: TaskEvent[] = [];
  const steps = old.filter((e) => e.data?.agentStep !== undefined).map((e) => e.data?.agentStep as Old);
  for (const e of old) {
    const s = e.data?.agentStep as Old | undefined;
    if (!s) {
      out.push(e);
      continue;
    }
    const turn = steps.filter((x) => x.step === s.step);
    const first = turn[0] === s;
    const assistant: AgentMessage = {
      role: "assistant",
      content: turn[0]?.thought ?? "",
      toolCalls: turn.filter((x) => x.callId).map((x) => ({ id: x.callId as string, name: x.tool, args: x.args })),
    };
    const answer: AgentMessage = s.callId
      ? { role: "tool", toolCallId: s.callId, name: s.tool, content: s.observation, isError: s.isError }
      : { role: "user", content: s.observation };
    const redirect: AgentMessage[] =
      s.stuck?.action === "redirect" && turn.at(-1) === s ? [{ role: "user", content: "You have called run …" }] : [];
    const note: AgentMessagesNote = {
      iteration: 1,
      step: s.step,
      messages: [...(first ? [assistant] : []), answer, ...redirect],
      tokens: s.tokens,
      costUsd: s.costUsd,
      durationMs: s.durationMs,
      ...(s.stuck ? { stuck: s.stuck } : {}),
    };
    out.push({ ...e, data: { agentMessages: note } });
  }
  return out;
}

describe("a run recorded with TranscriptStep events", () => {
  it("still renders: every call a step, with its place in its turn, the nudge and the stuck mark", () => {
    const steps = transcriptSteps(OLD_RUN.events);
    expect(steps.map((s) => `${s.step}.${s.call} ${s.tool}`)).toEqual([
      "1.1 search",
      "1.2 read",
      "2.1 run",
      `3.1 ${NO_TOOL_CALL}`,
      "4.1 edit",
      "5.1 run",
      "6.1 run",
      "7.1 submit",
    ]);
    const lines = transcriptLines(steps);
    expect(lines[1]).toBe("    iteration 1: 7 steps (8 calls) · 12 100 tok · $0.0070 · 10.8 s · stuck");
    expect(lines[2]).toMatch(/^ {6}#1 search pattern="def answer" glob="\*\*\/\*\.py" maxResults=100 → 1 match \(/);
    expect(lines[3]).toMatch(/^ {6}#1\.2 read path="pkg\/mod\.py" → 2 lines /);
    expect(lines[4]).toMatch(/#2 run command="pytest -q" → error: exit code 1/);
    expect(lines[8]).toMatch(/STUCK repeat_call → redirect$/);
    expect(transcriptMarkdown(steps).join("\n")).toContain('#7 submit summary="answer returns 42" → submitted');
  });

  it("still replays: its model turns rebuilt from the steps, call ids kept", () => {
    const turns = transcriptScriptTurns(OLD_RUN.events);
    expect(turns).toHaveLength(7);
    expect(turns[0]).toEqual({
      content: "Where is answer defined?",
      toolCalls: [
        { id: "toolu_01", name: "search", args: { pattern: "def answer", glob: "**/*.py", maxResults: 100 } },
        { id: "toolu_02", name: "read", args: { path: "pkg/mod.py" } },
      ],
    });
    expect(turns[2]).toEqual({ content: "", toolCalls: [] });
  });
});

describe("a run whose events carry its messages", () => {
  const events = asMessages(OLD_RUN.events);

  it("shows the same transcript as the steps record of the same run", () => {
    expect(events.some((e) => e.data?.agentStep !== undefined)).toBe(false);
    const opts = { verbose: true, observationLines: 50 };
    expect(transcriptLines(transcriptSteps(events), opts)).toEqual(
      transcriptLines(transcriptSteps(OLD_RUN.events), opts),
    );
    expect(transcriptSteps(events).map((s) => s.callId)).toEqual(transcriptSteps(OLD_RUN.events).map((s) => s.callId));
  });

  it("replays the assistant messages as the model sent them, and keeps the conversation whole", () => {
    expect(transcriptScriptTurns(events)).toEqual(transcriptScriptTurns(OLD_RUN.events));
    const { turns } = readTranscript(events);
    const messages = turns.flatMap((t) => t.messages);
    // 7 assistant messages, 8 answers and the redirect: the conversation as the checkpoint keeps it.
    expect(messages.map((m) => m.role).join(" ")).toBe(
      "assistant tool tool assistant tool assistant user assistant tool assistant tool assistant tool user assistant tool",
    );
    // The redirect is part of the conversation but no step.
    expect(transcriptSteps(events)).toHaveLength(8);
  });

  it("keeps a turn's thought whole for the replay and cut for people", () => {
    const long = "why ".repeat(1_000);
    const note: AgentMessagesNote = {
      iteration: 1,
      step: 1,
      messages: [
        { role: "assistant", content: long, toolCalls: [{ id: "c1", name: "list", args: {} }] },
        { role: "tool", toolCallId: "c1", name: "list", content: "a.py", isError: false },
      ],
      tokens: 10,
      costUsd: 0,
      durationMs: 3,
    };
    const e: TaskEvent = {
      v: 1,
      taskId: "t",
      seq: 1,
      at: "t",
      iteration: 1,
      kind: "step",
      phase: "explore",
      message: "step 1: list",
      data: { agentMessages: note },
    };
    expect(transcriptScriptTurns([e])[0]?.content).toBe(long);
    expect(transcriptSteps([e])[0]?.thought).toHaveLength(2_000);
  });

  it("takes a turn published again after a resume once, from its last publication", () => {
    const usage = (seq: number): TaskEvent => ({
      v: 1,
      taskId: "t",
      seq,
      at: "t",
      iteration: 1,
      kind: "usage",
      message: "agent",
      data: { role: "agent" },
    });
    const turn = (seq: number, path: string): TaskEvent => ({
      v: 1,
      taskId: "t",
      seq,
      at: "t",
      iteration: 1,
      kind: "step",
      phase: "explore",
      message: "step 1: read",
      data: {
        agentMessages: {
          iteration: 1,
          step: 1,
          messages: [
            { role: "assistant", content: "", toolCalls: [{ id: `c-${path}`, name: "read", args: { path } }] },
            { role: "tool", toolCallId: `c-${path}`, name: "read", content: "1: x", isError: false },
          ],
          durationMs: 1,
        },
      },
    });
    const twice = [usage(1), turn(2, "a.py"), usage(3), turn(4, "b.py")];
    expect(transcriptSteps(twice).map((s) => s.args)).toEqual([{ path: "b.py" }]);
    expect(readTranscript(twice).turns).toHaveLength(1);
    expect(transcriptScriptTurns(twice)).toEqual([
      { content: "", toolCalls: [{ id: "c-b.py", name: "read", args: { path: "b.py" } }] },
    ]);
  });
});
