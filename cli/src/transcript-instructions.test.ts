import { describe, expect, it } from "vitest";
import { RunRecord, Task, type TaskEvent } from "@loopsmith/shared/contracts";
import { runText } from "./run-view.js";
import { instructionsLine } from "./transcript-view.js";

const event = (seq: number, over: Partial<TaskEvent>): TaskEvent => ({
  v: 1,
  taskId: "repo1",
  seq,
  at: "2026-01-01T00:00:00.000Z",
  iteration: 0,
  kind: "step",
  phase: "prepare",
  message: "",
  ...over,
});

/** A repo run's PREPARE events: the commands, then (when given) the project instructions it used. */
function events(instructions?: Record<string, unknown>): TaskEvent[] {
  return [
    event(0, { message: "12 files; tests: python3 -m pytest -q", data: { files: 12 } }),
    ...(instructions ? [event(1, { message: "project instructions", data: { instructions } })] : []),
  ];
}

function record(evts: TaskEvent[]): RunRecord {
  const task = Task.parse({
    v: 1,
    taskId: "repo1",
    goal: "fix foo",
    language: "python",
    submittedAt: "2026-01-01T00:00:00.000Z",
    files: [{ path: "a.py", content: "x" }],
  });
  return RunRecord.parse({ v: 1, taskId: "repo1", task, result: null, events: evts, recordedAt: "t" });
}

describe("instructionsLine", () => {
  it("names the file and its size, or how much of it the prompts showed", () => {
    expect(instructionsLine(events({ path: "AGENTS.md", bytes: 1234, truncated: false, shownBytes: 1234 }))).toBe(
      "project instructions: AGENTS.md, 1 234 bytes, in every prompt",
    );
    expect(
      instructionsLine(events({ path: "CONVENTIONS.md", bytes: 40_000, truncated: true, shownBytes: 32_724 })),
    ).toBe("project instructions: CONVENTIONS.md, cut to 32 724 of 40 000 bytes, in every prompt");
  });

  it("is undefined for a run that recorded none, or a record it cannot read", () => {
    expect(instructionsLine(events())).toBeUndefined();
    expect(instructionsLine(events({ path: "AGENTS.md" }))).toBeUndefined();
  });

  it("keeps control characters of the path off the terminal", () => {
    const line = instructionsLine(events({ path: "AGENTS.md\u001b[2J", bytes: 1, truncated: false }));
    expect(line).not.toContain("\u001b");
  });

  it("is in `show -v` (--transcript) on one line, not in plain `show`", () => {
    const r = record(events({ path: "AGENTS.md", bytes: 1234, truncated: false, shownBytes: 1234 }));
    expect(runText(r, { transcript: true })).toContain(
      "\n  project instructions: AGENTS.md, 1 234 bytes, in every prompt\n",
    );
    expect(runText(r)).not.toContain("project instructions");
  });
});
