import { afterEach, describe, expect, it, vi } from "vitest";
import type { DagProgress, SubtaskProgress, TaskEvent } from "@loopsmith/shared/contracts";
import { renderDagTree } from "./dag-view.js";
import { LOG_PREFIX, solveProgress } from "./solve-progress.js";

const ESC = "\u001b";
const T0 = Date.parse("2026-03-01T10:00:00.000Z");
const at = (s: number): string => new Date(T0 + s * 1000).toISOString();

function sub(
  id: string,
  status: SubtaskProgress["status"],
  dependsOn: string[] = [],
  extra: Partial<SubtaskProgress> = {},
): SubtaskProgress {
  return {
    id,
    goal: `build ${id}`,
    status,
    dependsOn,
    attempt: 0,
    iteration: 0,
    iterations: 0,
    tokens: 0,
    costUsd: 0,
    ...extra,
  };
}

let seq = 0;
function event(message: string, extra: Partial<TaskEvent> = {}): TaskEvent {
  return {
    v: 1,
    taskId: "dag-1",
    seq: seq++,
    at: at(0),
    iteration: 0,
    kind: "step",
    phase: "schedule",
    message,
    ...extra,
  };
}

const started: DagProgress = {
  reopened: [],
  subtasks: [sub("lib", "running", [], { attempt: 1, startedAt: at(0) }), sub("app", "pending", ["lib"])],
};
const libPassed: DagProgress = {
  reopened: [],
  subtasks: [
    sub("lib", "passed", [], {
      attempt: 1,
      iterations: 2,
      tokens: 1_500,
      costUsd: 0.01,
      startedAt: at(0),
      finishedAt: at(20),
    }),
    sub("app", "running", ["lib"], { attempt: 1, startedAt: at(20) }),
  ],
};

function capture(): { writes: string[]; stream: { write: (t: string) => number; columns: number; rows: number } } {
  const writes: string[] = [];
  return { writes, stream: { write: (t: string) => writes.push(t), columns: 100, rows: 40 } };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("solve's progress on a terminal", () => {
  it("event lines scroll above the DAG tree, which is redrawn in place when an event carries data.dag (a progress tick has no line)", () => {
    const { writes, stream } = capture();
    let now = T0 + 5_000;
    const view = solveProgress(stream, { tty: true, now: () => now });
    view.event(event("plan: 2 subtasks", { phase: "plan" }));
    view.event(event("running 2 of 2 subtasks", { kind: "phase", data: { dag: started } }));
    now = T0 + 6_000;
    const tick = { ...started, subtasks: [{ ...started.subtasks[0]!, iteration: 2 }, started.subtasks[1]!] };
    view.event(event("subtask progress", { data: { dag: tick } }));
    now = T0 + 30_000;
    view.event(event("subtask lib: passed", { subtaskId: "lib", data: { dag: libPassed } }));
    view.stop({ clear: true });
    const tree1 = renderDagTree(started, T0 + 5_000, { width: 99 });
    const tree2 = renderDagTree(tick, T0 + 6_000, { width: 99 });
    const tree3 = renderDagTree(libPassed, T0 + 30_000, { width: 99 });
    expect(tree1).toEqual(["▶ lib     running · attempt 1 · 5.0 s", "└─ ○ app  pending · waiting for lib"]);
    expect(tree2[0]).toBe("▶ lib     running · attempt 1 · iteration 2 · 6.0 s");
    expect(writes).toEqual([
      "[start] plan: plan: 2 subtasks\n",
      `${tree1.join("\n")}\n`,
      `\r${ESC}[2A${ESC}[J${tree2.join("\n")}\n`,
      `\r${ESC}[2A${ESC}[J[start] schedule: subtask lib: passed\n${tree3.join("\n")}\n`,
      `\r${ESC}[2A${ESC}[J`,
    ]);
  });

  it("while a subtask runs the tree is redrawn every tick (its time goes on); the clock stops when none runs", () => {
    vi.useFakeTimers();
    const { writes, stream } = capture();
    let now = T0 + 1_000;
    const view = solveProgress(stream, { tty: true, now: () => now, tickMs: 1_000 });
    view.event(event("started", { data: { dag: started } }));
    now = T0 + 2_000;
    vi.advanceTimersByTime(1_000);
    expect(writes.at(-1)).toBe(
      `\r${ESC}[2A${ESC}[J▶ lib     running · attempt 1 · 2.0 s\n└─ ○ app  pending · waiting for lib\n`,
    );
    const ended: DagProgress = {
      reopened: [],
      subtasks: [{ ...libPassed.subtasks[0]! }, sub("app", "cancelled", ["lib"], { reason: "cancelled" })],
    };
    view.event(event("done", { data: { dag: ended } }));
    const count = writes.length;
    vi.advanceTimersByTime(5_000);
    expect(writes).toHaveLength(count);
    view.stop({ clear: false });
    expect(writes).toHaveLength(count);
  });

  it("a write to stderr goes between an erase and a redraw; a colour terminal colours the marks", () => {
    const { writes, stream } = capture();
    const view = solveProgress(stream, { tty: true, color: true, now: () => T0 });
    view.event(event("started", { data: { dag: started } }));
    expect(writes[0]).toContain(`${ESC}[36m▶${ESC}[39m lib`);
    view.aside(() => writes.push("<stderr>"));
    expect(writes.slice(1)).toEqual([
      `\r${ESC}[2A${ESC}[J`,
      "<stderr>",
      writes[0]?.replace("[start] schedule: started\n", ""),
    ]);
    view.stop({ clear: false });
  });
});

describe("solve's progress in a log (not a terminal)", () => {
  it("prints each event's line, then the lines of the subtasks that changed, never the whole tree again", () => {
    const { writes, stream } = capture();
    const view = solveProgress(stream, { tty: false, color: true, now: () => T0 + 30_000 });
    view.event(event("running 2 of 2 subtasks", { kind: "phase", data: { dag: started } }));
    view.event(event("subtask progress", { data: { dag: started } }));
    view.event(event("subtask lib: passed", { subtaskId: "lib", data: { dag: libPassed } }));
    view.event(event("integrating", { phase: "integrate", kind: "phase" }));
    view.event(event("done", { kind: "result", data: { dag: libPassed } }));
    view.stop({ clear: true });
    expect(writes.join("")).toBe(
      [
        `${LOG_PREFIX}▶ lib  running · attempt 1 · 30.0 s`,
        `${LOG_PREFIX}○ app  pending · waiting for lib`,
        "[start] schedule: subtask lib: passed",
        `${LOG_PREFIX}✔ lib  passed · attempt 1 · 2 iterations · 1.5k tokens · $0.01 · 20.0 s`,
        `${LOG_PREFIX}▶ app  running · attempt 1 · 10.0 s`,
        "",
      ].join("\n"),
    );
  });
});
