import { describe, expect, it } from "vitest";
import { RunRecord, Task, type TaskEvent, type TranscriptStep } from "@loopsmith/shared/contracts";
import { reportHtml } from "./bench/report.js";
import type { BenchResult, BenchSummary } from "./bench/types.js";
import { reportMarkdown, runText } from "./run-view.js";
import {
  formatArgs,
  groupDigits,
  stepOutcome,
  stepText,
  transcriptHtml,
  transcriptLines,
  transcriptSteps,
} from "./transcript-view.js";

type StepInput = Partial<TranscriptStep> & Pick<TranscriptStep, "step" | "tool" | "args" | "observation">;

const stepEvent = (seq: number, s: StepInput, iteration = s.iteration ?? 1): TaskEvent => ({
  v: 1,
  taskId: "agent1",
  seq,
  at: "2026-01-01T00:00:00.000Z",
  iteration,
  kind: "step",
  phase: "explore",
  message: `step ${s.step}: ${s.tool}`,
  data: { agentStep: { iteration, thought: "", isError: false, tokens: 0, costUsd: 0, durationMs: 5, ...s } },
});

const SEARCH_OUT = [
  "pkg/a.py:3: def foo():",
  "pkg/b.py:10: def foo(x):",
  "pkg/c.py:1: def foo",
  "d.py:7: def foo",
].join("\n");

/** An agent run: iteration 1 lists, searches and reads; iteration 2 runs the tests twice, the second stuck. */
function events(): TaskEvent[] {
  return [
    { v: 1, taskId: "agent1", seq: 0, at: "t", iteration: 0, kind: "accepted", message: "accepted" },
    stepEvent(1, { step: 1, tool: "list", args: { path: "." }, observation: "pkg/\nsetup.py\nREADME.md", tokens: 800 }),
    // Recorded out of order and one event that is not a step: the view sorts by seq and skips it.
    stepEvent(3, {
      step: 3,
      tool: "read",
      args: { path: "pkg/a.py", startLine: 1, endLine: 3 },
      observation: "1: import os\n2: \n3: def foo():",
    }),
    stepEvent(2, {
      step: 2,
      tool: "search",
      args: { pattern: "def foo", glob: "*.py" },
      observation: SEARCH_OUT,
      tokens: 1234,
      costUsd: 0.0042,
      durationMs: 12,
      thought: "Find where foo is defined.",
    }),
    { ...stepEvent(4, { step: 4, tool: "read", args: {}, observation: "" }), data: { agentStep: { step: "four" } } },
    stepEvent(
      5,
      {
        step: 1,
        tool: "run",
        args: { command: "pytest -q" },
        observation: "exit code 1\nFAILED test_a",
        isError: false,
      },
      2,
    ),
    stepEvent(
      6,
      {
        step: 2,
        tool: "run",
        args: { command: "pytest -q" },
        observation: "exit code 1\nFAILED test_a",
        stuck: { rule: "repeat_call", action: "stop" },
      },
      2,
    ),
  ];
}

describe("transcriptSteps", () => {
  it("reads the explore steps in order, skipping events that are not valid steps", () => {
    const steps = transcriptSteps(events());
    expect(steps.map((s) => `${s.iteration}.${s.step} ${s.tool}`)).toEqual([
      "1.1 list",
      "1.2 search",
      "1.3 read",
      "2.1 run",
      "2.2 run",
    ]);
  });

  it("keeps every call of a turn, numbered in the turn, and a re-published turn once", () => {
    const agentUsage = (seq: number): TaskEvent => ({
      v: 1,
      taskId: "agent1",
      seq,
      at: "t",
      iteration: 3,
      kind: "usage",
      message: "usage",
      data: { role: "agent" },
    });
    const turn = (seq: number, path: string): TaskEvent =>
      stepEvent(seq, { step: 1, tool: "read", args: { path }, observation: "1: x" }, 3);
    const steps = transcriptSteps([
      agentUsage(20),
      turn(21, "a.py"),
      agentUsage(22),
      turn(23, "b.py"),
      turn(24, "c.py"),
    ]);
    expect(transcriptLines(steps)[1]).toBe("    iteration 3: 1 step (2 calls) · 0 tok · $0 · 10 ms");
    expect(steps.map((s) => stepText(s))).toEqual([
      '#1 read path="b.py" → 1 line (5 ms)',
      '#1.2 read path="c.py" → 1 line (5 ms)',
    ]);
    // Without the usage events (a truncated record) both publications stay.
    expect(transcriptSteps([turn(21, "a.py"), turn(23, "b.py")]).map((s) => s.call)).toEqual([1, 2]);
  });
});

describe("step lines", () => {
  it("renders the compact line of a search step", () => {
    const [, search] = transcriptSteps(events());
    expect(stepText(search as TranscriptStep)).toBe(
      '#2 search pattern="def foo" glob="*.py" → 4 matches (12 ms, 1 234 tok)',
    );
  });

  it("summarises each tool's observation", () => {
    expect(stepOutcome({ tool: "read", observation: "1: a\n2: b\n3: c", isError: false })).toBe("3 lines");
    expect(stepOutcome({ tool: "list", observation: "a/\nb.py", isError: false })).toBe("2 entries");
    expect(stepOutcome({ tool: "run", observation: "exit code 2\nboom", isError: true })).toBe("error: exit code 2");
    expect(stepOutcome({ tool: "run", observation: "ok\nexit 0", isError: false })).toBe("exit 0");
    expect(stepOutcome({ tool: "search", observation: "no match", isError: false })).toBe("0 matches");
    expect(stepOutcome({ tool: "search", observation: "250 matches\na.py:1: x\nb.py:2: x", isError: false })).toBe(
      "250 matches",
    );
    expect(stepOutcome({ tool: "run", observation: "killed: it passed its timeout\n", isError: true })).toBe(
      "error: killed: it passed its timeout",
    );
    expect(stepOutcome({ tool: "run", observation: "killed\nout", isError: false })).toBe("killed");
    const long = "1: a\n[… 1,298 lines cut …]\n1300: z";
    expect(stepOutcome({ tool: "read", observation: long, isError: false })).toBe("2 lines, cut");
    const older = "1: a\n[... 1,200 lines (34,567 bytes) cut; total 1,300 lines ...]\n1300: z";
    expect(stepOutcome({ tool: "read", observation: older, isError: false })).toBe("2 lines, cut");
    const sandboxCut = "exit code 0\nAAAA\n[… 49,000,000 bytes cut …]\nAAAA\n";
    expect(stepOutcome({ tool: "run", observation: sandboxCut, isError: false })).toBe("exit 0");
    expect(stepOutcome({ tool: "submit", observation: "", isError: false })).toBe("submitted");
    expect(stepOutcome({ tool: "symbol", observation: "", isError: false })).toBe("(no output)");
  });

  it("quotes strings with JSON escapes, cuts long ones and names the paths of edits", () => {
    expect(formatArgs({ command: 'echo "hi"\nls', timeoutMs: 500 })).toBe('command="echo \\"hi\\"\\nls" timeoutMs=500');
    expect(formatArgs({ pattern: "x".repeat(100) })).toBe(`pattern="${"x".repeat(58)}…`);
    expect(formatArgs({ edits: [{ path: "a.py", search: "x", replace: "y" }, { path: "b.py" }] })).toBe(
      "edits=[a.py, b.py]",
    );
    expect(formatArgs({ list: [1, 2, 3], opts: { a: 1 } })).toBe("list=[3 items] opts={…}");
    expect(groupDigits(1234567)).toBe("1 234 567");
  });
});

describe("transcriptLines", () => {
  it("gives per iteration its totals and one line per step, the stuck step marked", () => {
    const lines = transcriptLines(transcriptSteps(events()));
    expect(lines).toEqual([
      "  transcript (agent mode):",
      "    iteration 1: 3 steps · 2 034 tok · $0.0042 · 22 ms",
      '      #1 list path="." → 3 entries (5 ms, 800 tok)',
      '      #2 search pattern="def foo" glob="*.py" → 4 matches (12 ms, 1 234 tok)',
      '      #3 read path="pkg/a.py" startLine=1 endLine=3 → 3 lines (5 ms)',
      "    iteration 2: 2 steps · 0 tok · $0 · 10 ms · stuck",
      '      #1 run command="pytest -q" → exit 1 (5 ms)',
      '      #2 run command="pytest -q" → exit 1 (5 ms)  STUCK repeat_call → stop',
    ]);
  });

  it("shows the thought and the observation with --transcript, cut to the lines asked", () => {
    const lines = transcriptLines(transcriptSteps(events()), { verbose: true, observationLines: 2 });
    const at = lines.indexOf('      #2 search pattern="def foo" glob="*.py" → 4 matches (12 ms, 1 234 tok)');
    expect(lines.slice(at + 1, at + 7)).toEqual([
      "         thought:",
      "           Find where foo is defined.",
      "         observation:",
      "           pkg/a.py:3: def foo():",
      "           pkg/b.py:10: def foo(x):",
      "           … 2 more lines",
    ]);
  });

  it("colours only when asked, and keeps control characters from the model off the terminal", () => {
    const steps = transcriptSteps([
      stepEvent(1, { step: 1, tool: "run", args: { command: "x" }, observation: "\u001b[2Jgone", isError: true }),
    ]);
    expect(transcriptLines(steps).join("\n")).not.toContain("\u001b");
    expect(transcriptLines(steps, { verbose: true }).join("\n")).toContain("\\x1b[2Jgone");
    expect(transcriptLines(steps, { color: true }).join("\n")).toContain("\u001b[31m");
    expect(transcriptLines([])).toEqual([]);
  });
});

describe("transcriptHtml", () => {
  it("folds each iteration in a <details> and escapes everything from the run", () => {
    const steps = transcriptSteps([
      stepEvent(1, {
        step: 1,
        tool: "read",
        args: { path: "x.html" },
        thought: "a <b>bold</b> plan",
        observation: '1: <script>alert("x")</script>',
      }),
      stepEvent(2, { step: 1, tool: "<img src=x>", args: {}, observation: "" }, 2),
    ]);
    const html = transcriptHtml(steps);
    expect(html.match(/<details class="transcript">/g)).toHaveLength(2);
    expect(html).not.toContain("<script>");
    expect(html).not.toContain("<b>bold");
    expect(html).not.toContain("<img");
    expect(html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
    expect(html).toContain("<summary>iteration 2: 1 step");
  });
});

function record(): RunRecord {
  const task = Task.parse({
    v: 1,
    taskId: "agent1",
    goal: "fix foo",
    language: "python",
    submittedAt: "2026-01-01T00:00:00.000Z",
    files: [{ path: "a.py", content: "x" }],
  });
  return RunRecord.parse({ v: 1, taskId: "agent1", task, result: null, events: events(), recordedAt: "t" });
}

describe("show and report.md", () => {
  it("runText carries the transcript, and its thoughts only with the flag", () => {
    expect(runText(record())).toContain(
      '      #2 search pattern="def foo" glob="*.py" → 4 matches (12 ms, 1 234 tok)\n',
    );
    expect(runText(record())).not.toContain("Find where foo is defined.");
    expect(runText(record(), { transcript: true })).toContain("Find where foo is defined.");
  });

  it("report.md folds the transcript per iteration", () => {
    const md = reportMarkdown(record());
    expect(md).toContain("## Transcript (agent mode)");
    expect(md).toContain("<summary>iteration 2: 2 steps · 0 tok · $0 · 10 ms · stuck</summary>");
    expect(md).toContain('#2 run command="pytest -q" → exit 1 (5 ms)  STUCK repeat_call → stop');
  });
});

describe("bench report.html", () => {
  const summary: BenchSummary = {
    v: 1,
    runId: "r1",
    dataset: "d.jsonl",
    format: "humaneval",
    provider: { label: "scripted", name: "scripted", model: "script" },
    memory: "on",
    concurrency: 1,
    startedAt: "t0",
    finishedAt: "t1",
    wallMs: 10,
    tasksPerMin: 1,
    arms: {},
    skippedLines: [],
  };
  const result: BenchResult = {
    v: 1,
    runId: "r1",
    caseId: "case/1",
    arm: "on",
    taskId: "agent1",
    status: "passed",
    stopReason: "passed",
    passed: true,
    visiblePassed: true,
    hidden: null,
    iterations: 2,
    tokensIn: 0,
    tokensOut: 0,
    costUsd: 0,
    wallMs: 10,
    provider: "scripted",
    attempts: 1,
    finishedAt: "t1",
  };

  it("has a transcripts section for the tasks that took agent steps, escaped", () => {
    const steps = transcriptSteps([
      stepEvent(1, { step: 1, tool: "read", args: { path: "a.py" }, observation: "1: <script>x</script>" }),
    ]);
    const html = reportHtml(summary, [result], new Map([["agent1", steps]]));
    expect(html).toContain('<h2 id="transcripts">Transcripts (agent mode)</h2>');
    expect(html).toContain("<h3>case/1 (memory on)</h3>");
    expect(html).toContain("1: &lt;script&gt;x&lt;/script&gt;");
    expect(html).not.toContain("<script>");
    expect(reportHtml(summary, [result])).not.toContain("Transcripts");
  });
});
