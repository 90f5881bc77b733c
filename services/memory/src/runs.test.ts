import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { RunPart, RunRecord, Task, TaskRecord, type TaskEvent, type TaskResult } from "@loopsmith/shared/contracts";
import { assembleRun, capEvents, jsonbText, runPart } from "./runs.js";

const usage = {
  calls: 1,
  inputTokens: 10,
  outputTokens: 5,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0.01,
  latencyMs: 5,
};
const task = Task.parse({
  v: 1,
  taskId: "t1",
  goal: "Write f().",
  language: "python",
  submittedAt: "2026-01-01T00:00:00.000Z",
});
const result: TaskResult = {
  v: 1,
  taskId: "t1",
  status: "passed",
  stopReason: "passed",
  iterations: 1,
  files: [{ path: "f.py", content: "def f(): pass\n" }],
  tests: [],
  lastExecution: null,
  hidden: null,
  failureIds: [],
  usage: { total: usage, byRole: { build: usage }, byIteration: [usage] },
  scripted: true,
  providers: ["scripted:script:s.json"],
  durationMs: 1234,
  message: "passed after 1 iteration",
};
const record = TaskRecord.parse({
  v: 1,
  taskId: "t1",
  goal: task.goal,
  language: "python",
  status: "passed",
  stopReason: "passed",
  iterations: 1,
  usage,
  durationMs: 1234,
  scripted: true,
  finishedAt: "2026-01-01T00:00:05.000Z",
  task,
  result,
});

function ev(seq: number, kind: TaskEvent["kind"], extra: Partial<TaskEvent> = {}): TaskEvent {
  return {
    v: 1,
    taskId: "t1",
    seq,
    at: "2026-01-01T00:00:01.000Z",
    iteration: 1,
    kind,
    message: `${kind} ${seq}`,
    ...extra,
  };
}

describe("assembleRun", () => {
  it("orders and deduplicates the events, and adds the result event the stream does not hold yet", () => {
    const events = [
      ev(2, "step"),
      ev(0, "accepted"),
      ev(1, "phase"),
      ev(2, "step", { message: "a duplicate" }),
      { ...ev(3, "step"), taskId: "other" },
    ];
    const run = assembleRun(record, { events, complete: true }, "2026-01-01T00:00:06.000Z");
    expect(run.events.map((e) => [e.seq, e.kind])).toEqual([
      [0, "accepted"],
      [1, "phase"],
      [2, "step"],
      [3, "result"],
    ]);
    expect(run.events[2]?.message).toBe("step 2");
    expect(run.events[3]).toMatchObject({ kind: "result", phase: "done", at: record.finishedAt, iteration: 1, result });
    expect(run).toMatchObject({
      taskId: "t1",
      task,
      result,
      eventsTruncated: false,
      eventsTotal: 4,
      recordedAt: "2026-01-01T00:00:06.000Z",
    });
    expect(RunRecord.safeParse(run).success).toBe(true);
  });

  it("keeps a result event already in the stream, and says when the stream was not read completely", () => {
    const run = assembleRun(record, { events: [ev(0, "accepted"), ev(1, "result", { result })], complete: false }, "x");
    expect(run.events.filter((e) => e.kind === "result")).toHaveLength(1);
    expect(run.eventsTruncated).toBe(true);
  });

  it("records a run without a result, and refuses a record without a task", () => {
    const { result: _result, ...noResult } = record;
    expect(assembleRun(noResult, { events: [ev(0, "accepted")], complete: true }, "x")).toMatchObject({
      result: null,
      events: [{ kind: "accepted" }],
    });
    const { task: _task, ...noTask } = record;
    expect(() => assembleRun(noTask, { events: [], complete: true }, "x")).toThrow(/no task/);
    expect(() => assembleRun({ ...record, taskId: "t2" }, { events: [], complete: true }, "x")).toThrow(/another task/);
  });
});

describe("capEvents", () => {
  it("keeps model replies and the result, drops phase events first, then usage, and keeps seq order", () => {
    const events: TaskEvent[] = [];
    for (let i = 0; i < 20; i++) {
      const kind = (["phase", "usage", "step", "step"] as const)[i % 4] ?? "step";
      events.push(ev(i, kind, i % 4 === 3 ? { data: { llm: { role: "build" } } } : {}));
    }
    events.push(ev(20, "result", { result }));
    const capped = capEvents(events, 12);
    expect(capped.dropped).toBe(9);
    expect(capped.events.map((e) => e.kind)).not.toContain("phase");
    expect(capped.events.filter((e) => e.kind === "usage")).toHaveLength(1);
    expect(capped.events.filter((e) => e.data?.llm !== undefined)).toHaveLength(5);
    expect(capped.events.at(-1)?.kind).toBe("result");
    expect(capped.events.map((e) => e.seq)).toEqual([...capped.events.map((e) => e.seq)].sort((a, b) => a - b));
    expect(capEvents(events, 100)).toEqual({ events, dropped: 0 });
  });

  it("marks a capped run as truncated and counts every event", () => {
    const events = Array.from({ length: 30 }, (_, i) => ev(i, "phase"));
    const run = assembleRun(record, { events, complete: true }, "x", 10);
    expect(run).toMatchObject({ eventsTruncated: true, eventsTotal: 31 });
    expect(run.events).toHaveLength(10);
    expect(run.events.at(-1)?.kind).toBe("result");
  });
});

describe("jsonbText", () => {
  it("replaces NUL, which jsonb refuses, and nothing else", () => {
    expect(JSON.parse(jsonbText({ a: "x\u0000y", b: ["\u0000"], c: "é\n\u0001" }))).toEqual({
      a: "x\uFFFDy",
      b: ["\uFFFD"],
      c: "é\n\u0001",
    });
  });
});

describe("runPart", () => {
  const big = RunRecord.parse({
    ...assembleRun(record, { events: [ev(0, "accepted")], complete: true }, "2026-01-01T00:00:06.000Z"),
    // Quotes, escapes, multi-byte and astral characters: the JSON of a part is longer than its text.
    events: Array.from({ length: 40 }, (_, i) =>
      ev(i, "step", { message: `"quoted" \\ é 😀 \u0001 ${"x".repeat(3_000)} ${i}` }),
    ),
  });

  it("cuts the run's JSON into parts that each fit the payload and add up to the whole text", () => {
    const whole = JSON.stringify(big);
    const maxBytes = 64 * 1024;
    let text = "";
    let parts = 0;
    for (;;) {
      const part = RunPart.parse(runPart(big, text.length, maxBytes));
      expect(Buffer.byteLength(JSON.stringify({ ok: true, value: part }))).toBeLessThanOrEqual(maxBytes);
      expect(part).toMatchObject({
        offset: text.length,
        total: whole.length,
        sha256: createHash("sha256").update(whole).digest("hex"),
        recordedAt: big.recordedAt,
      });
      text += part.text;
      parts += 1;
      if (text.length >= part.total) break;
    }
    expect(parts).toBeGreaterThanOrEqual(3);
    expect(text).toBe(whole);
    expect(RunRecord.parse(JSON.parse(text))).toEqual(big);
  });

  it("sends a small run in one part and refuses an offset past the end", () => {
    const small = assembleRun(record, { events: [], complete: true }, "x");
    const part = runPart(small, 0, 1024 * 1024);
    expect(part.text).toBe(JSON.stringify(small));
    expect(runPart(small, part.total, 1024 * 1024).text).toBe("");
    expect(() => runPart(small, part.total + 1, 1024 * 1024)).toThrow(/past the end/);
  });
});
