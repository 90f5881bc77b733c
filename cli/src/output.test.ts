import { describe, expect, it } from "vitest";
import {
  MemoryStats,
  type DagProgress,
  type ExecutionResult,
  type Failures,
  type History,
  type TaskEvent,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { eventLine, failuresText, historyText, resultSummary, resultText, statsText } from "./output.js";

const ESC = "\u001b";
const OSC_TITLE = `${ESC}]0;owned${ESC}\\`;
const CLEAR = `${ESC}[2J`;
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

const usage = {
  calls: 1,
  inputTokens: 10,
  outputTokens: 5,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0.001,
  latencyMs: 5,
};

function result(over: Partial<TaskResult> = {}): TaskResult {
  return {
    v: 1,
    taskId: "task-1",
    status: "failed",
    stopReason: "max_iterations",
    iterations: 2,
    files: [{ path: `solution${CLEAR}.py`, content: `print("${OSC_TITLE}")\n` }],
    tests: [],
    lastExecution: null,
    hidden: null,
    failureIds: ["0b7c1d2e-aaaa-bbbb-cccc-000000000001", "0b7c1d2e-aaaa-bbbb-cccc-000000000002"],
    usage: { total: usage, byRole: { build: usage }, byIteration: [usage] },
    scripted: false,
    providers: ["anthropic"],
    durationMs: 1200,
    error: { code: "internal", message: `boom ${CLEAR}`, retryable: false },
    message: `tests still fail ${OSC_TITLE}`,
    ...over,
  } as TaskResult;
}

describe("what people see is neutralised", () => {
  it("event messages and warnings", () => {
    const event = {
      v: 1,
      taskId: "task-1",
      seq: 3,
      at: "2026-01-01T00:00:00Z",
      iteration: 1,
      kind: "step",
      phase: "execute",
      message: `FAILED test_${CLEAR}x`,
    } as TaskEvent;
    expect(eventLine(event)).not.toMatch(RAW_CONTROL);
    expect(eventLine(event)).toContain("\\x1b[2J");
    expect(eventLine({ ...event, kind: "warning" })).not.toMatch(RAW_CONTROL);
  });

  it("the result: message, error, file names and contents", () => {
    const text = resultText(result());
    expect(text).not.toMatch(RAW_CONTROL);
    expect(text).toContain("\\x1b]0;owned");
  });

  it("sandbox run output, reasons and test names", () => {
    const r: ExecutionResult = {
      status: "failed",
      exitCode: 1,
      durationMs: 300,
      tests: [{ name: `test_${OSC_TITLE}`, classname: `mod${CLEAR}`, status: "failed", durationMs: 1 }],
      stdout: `out ${OSC_TITLE}`,
      stderr: `Traceback ${CLEAR}\r\n`,
      truncated: false,
      reason: `why ${CLEAR}`,
    };
    const text = resultSummary(r);
    expect(text).not.toMatch(RAW_CONTROL);
    expect(text).toContain("test_\\x1b]0;owned");
  });

  it("history goals", () => {
    const history: History = {
      tasks: [
        {
          v: 1,
          taskId: "task-1",
          goal: `a goal ${OSC_TITLE}`,
          language: "python",
          status: "passed",
          stopReason: "passed",
          iterations: 1,
          usage,
          usageByRole: {},
          durationMs: 1,
          scripted: false,
          finishedAt: "2026-01-01T00:00:00Z",
        },
      ],
    };
    expect(historyText(history)).not.toMatch(RAW_CONTROL);
  });

  it("stored failures: signature, failing tests and fix", () => {
    const failures: Failures = {
      failures: [
        {
          id: "7",
          taskId: "task-1",
          iteration: 1,
          status: "failed",
          signature: `AssertionError ${OSC_TITLE}`,
          failingTests: [`test_x ${OSC_TITLE}`],
          errorText: "",
          reflection: { rootCause: "r", hypothesis: "h", fixPlan: `use + ${OSC_TITLE}` },
          createdAt: "2026-01-01T00:00:00Z",
        },
      ],
    };
    const text = failuresText(failures);
    expect(text).not.toMatch(RAW_CONTROL);
    expect(text).toContain("task task-1 · iteration 1 · failed · failure 7");
    expect(text).toContain("fix: use +");
    expect(failuresText({ failures: [] })).toBe("no failures stored\n");
    expect(failuresText({ failures: [], lessons: [] })).toBe("no failures stored\nno lessons stored\n");
  });
});

describe("the result names failures by count and where to see them", () => {
  it("prints no bare failure id", () => {
    const text = resultText(result({ error: undefined }));
    expect(text).not.toContain("0b7c1d2e");
    expect(text).toMatch(/2 failures of this task stored in memory/);
    expect(text).toMatch(/see them with `loopsmith failures --task [\w-]+`/);
  });

  it("says nothing about failures when none were stored", () => {
    expect(resultText(result({ failureIds: [], error: undefined }))).not.toMatch(/failure/);
  });
});

describe("stats for people", () => {
  it("names the window and shows pass rate, iterations, tokens, cost and the recall hit rate", () => {
    const stats = MemoryStats.parse({
      window: { since: "2026-11-18T12:00:00.000Z", last: 50 },
      tasks: 4,
      passed: 3,
      passRate: 0.75,
      stopReasons: { passed: 3, error: 1 },
      failures: 9,
      successes: 3,
      meanIterationsToPass: 2,
      meanIterations: 2.5,
      p90Iterations: 5,
      inputTokens: 1200,
      outputTokens: 300,
      totalCostUsd: 0.4,
      meanCostUsd: 0.1,
      recall: { recalls: 8, hits: 6, withFix: 2, hitRate: 0.75 },
      backend: "pglite",
    });
    const text = statsText(stats);
    expect(text).toContain("window: last 50 tasks since 2026-11-18T12:00:00.000Z");
    expect(text).toContain("tasks: 4 (3 passed, 75%); stop reasons: passed 3, error 1");
    expect(text).toContain("iterations: mean 2.50, p90 5, mean to pass 2.00");
    expect(text).toContain("tokens: 1200 in, 300 out");
    expect(text).toContain("8 failure recalls, 6 found the same failure (hit rate 75%), 2 with its fix");
    const none = statsText(
      MemoryStats.parse({
        tasks: 0,
        passed: 0,
        failures: 0,
        successes: 0,
        meanIterationsToPass: null,
        totalCostUsd: 0,
        backend: "postgres",
      }),
    );
    expect(none).toContain("window: all tasks");
    expect(none).toContain("hit rate n/a");
  });
});

describe("a DAG task's result", () => {
  const sub = (id: string, extra: Partial<DagProgress["subtasks"][number]>): DagProgress["subtasks"][number] => ({
    id,
    goal: `build ${id}`,
    status: "passed",
    dependsOn: [],
    attempt: 1,
    iteration: 0,
    iterations: 1,
    tokens: 0,
    costUsd: 0,
    ...extra,
  });
  const dag: DagProgress = {
    reopened: [],
    subtasks: [
      sub("lib", {
        iterations: 2,
        tokens: 2_000,
        costUsd: 0.02,
        startedAt: "2026-01-01T00:00:00Z",
        finishedAt: "2026-01-01T00:00:30Z",
      }),
      sub("app", {
        dependsOn: ["lib"],
        attempt: 2,
        iterations: 3,
        tokens: 3_500,
        costUsd: 0.03,
        startedAt: "2026-01-01T00:00:30Z",
        finishedAt: "2026-01-01T00:01:30Z",
      }),
    ],
  };

  it("shows the totals, then each subtask with its attempt, iterations, tokens, USD, time and goal, before the change", () => {
    const text = resultText(result({ status: "passed", stopReason: "passed", error: undefined, failureIds: [] }), dag);
    const lines = text.split("\n");
    const at = lines.indexOf(
      "  2 subtasks: 2 passed · 5 iterations · 5.5k tokens · $0.05 · 1 min 30 s of subtask time in 1 min 30 s",
    );
    expect(at).toBeGreaterThan(0);
    expect(lines.slice(at + 1, at + 3)).toEqual([
      "    ✔ lib     passed · attempt 1 · 2 iterations · 2.0k tokens · $0.02 · 30.0 s — build lib",
      "    └─ ✔ app  passed · attempt 2 · 3 iterations · 3.5k tokens · $0.03 · 1 min 00 s — build app",
    ]);
    expect(text.indexOf("subtasks")).toBeLessThan(text.indexOf("--- solution"));
    expect(resultText(result())).not.toContain("subtask");
  });
});
