import { describe, expect, it } from "vitest";
import { childTaskId, type TaskRecord } from "@loopsmith/shared/contracts";
import { childIdParts, historyRows } from "./history-rows.js";
import { historyText } from "./output.js";

const usage = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  calls: 0,
  costUsd: 0.01,
  latencyMs: 0,
};
let minute = 59;
/** A record finished a minute before the previous one made (the list is newest first). */
function rec(taskId: string, goal = `goal of ${taskId}`): TaskRecord {
  const finishedAt = `2026-03-01T10:${String(minute--).padStart(2, "0")}:00Z`;
  return {
    v: 1,
    taskId,
    goal,
    language: "python",
    status: "passed",
    stopReason: "passed",
    iterations: 1,
    usage,
    usageByRole: {},
    durationMs: 1,
    scripted: false,
    finishedAt,
  };
}
const ids = (tasks: TaskRecord[]): string[] => historyRows(tasks).map((r) => `${"  ".repeat(r.depth)}${r.task.taskId}`);

describe("childIdParts", () => {
  it("reads <parent>--<subtask>-a<N>, the last -- first", () => {
    expect(childIdParts("dag-1--storage-a2")).toEqual([{ parent: "dag-1", subtaskId: "storage", attempt: 2 }]);
    expect(childIdParts("p--x--api-a1")).toEqual([
      { parent: "p--x", subtaskId: "api", attempt: 1 },
      { parent: "p", subtaskId: "x--api", attempt: 1 },
    ]);
    for (const plain of [
      "task-1",
      "dag-1--storage",
      "dag-1--storage-a0",
      "dag-1--Storage-a1",
      "--storage-a1",
      "dag-1-storage-a1",
    ])
      expect(childIdParts(plain), plain).toEqual([]);
  });
});

describe("history rows", () => {
  it("puts a DAG task's children on the page under its row, by subtask then attempt, though they finished before it", () => {
    // Newest first, as memory lists them: children end before their parent does.
    const tasks = [
      rec("task-9"),
      rec("dag-1"),
      rec("dag-1--validation-a1"),
      rec("dag-1--storage-a2"),
      rec("task-8"),
      rec("dag-1--api-a10"),
      rec("dag-1--storage-a1"),
      rec("dag-1--api-a2"),
      rec("task-7"),
    ];
    expect(ids(tasks)).toEqual([
      "task-9",
      "dag-1",
      "  dag-1--api-a2",
      "  dag-1--api-a10",
      "  dag-1--storage-a1",
      "  dag-1--storage-a2",
      "  dag-1--validation-a1",
      "task-8",
      "task-7",
    ]);
  });

  it("children whose parent is not on the page keep their place, unindented", () => {
    // The parent is still running (not in memory yet) or on the next page.
    const tasks = [rec("task-3"), rec("dag-2--lib-a1"), rec("task-2"), rec("dag-2--app-a1"), rec("dag-1")];
    expect(ids(tasks)).toEqual(["task-3", "dag-2--lib-a1", "task-2", "dag-2--app-a1", "dag-1"]);
  });

  it("a parent whose id holds -- and a shortened child id (long parent) find their parent", () => {
    const long = `project-${"x".repeat(50)}`;
    const shortened = childTaskId(long, "storage", 1);
    expect(shortened).toHaveLength(64);
    expect(shortened.startsWith(long)).toBe(false);
    const tasks = [
      rec("a--b"),
      rec(long),
      rec(shortened),
      rec("a--b--lib-a1"),
      rec(`${long.slice(0, 20)}--storage-a1`),
    ];
    expect(ids(tasks)).toEqual(["a--b", "  a--b--lib-a1", long, `  ${shortened}`, `${long.slice(0, 20)}--storage-a1`]);
  });

  it("history text indents the children under their parent; the rows are otherwise as before", () => {
    const tasks = [rec("dag-1"), rec("dag-1--storage-a1"), rec("task-1")];
    const [parent, storage, plain] = tasks.map((t) => t.finishedAt);
    expect(historyText({ tasks })).toBe(
      [
        `${parent}  passed     1 it     $0.01  dag-1  goal of dag-1`,
        `  ${storage}  passed     1 it     $0.01  dag-1--storage-a1  goal of dag-1--storage-a1`,
        `${plain}  passed     1 it     $0.01  task-1  goal of task-1`,
        "",
      ].join("\n"),
    );
  });
});
