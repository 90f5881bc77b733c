import { describe, expect, it } from "vitest";
import type { TaskEvent } from "@loopsmith/shared/contracts";
import { childTaskIdsOf, withChildEvents, type EventSource } from "./child-events.js";

/**
 * A fake of the events a client can read: each task's events are stored as published, and a
 * reader replays them from the start, then waits for more, until the task's result or until
 * it is aborted (what `watchEvents` does).
 */
class FakeBus {
  private readonly stored = new Map<string, TaskEvent[]>();
  private readonly waiting = new Set<() => void>();
  private readonly seqs = new Map<string, number>();
  /** Every task a reader was opened for, in order. */
  readonly opened: string[] = [];
  /** Readers that ended because they were aborted. */
  readonly aborted: string[] = [];
  /** Tasks whose reader fails once it has replayed what is stored. */
  readonly failing = new Set<string>();

  publish(taskId: string, e: Partial<TaskEvent> & Pick<TaskEvent, "message">): TaskEvent {
    const seq = this.seqs.get(taskId) ?? 0;
    this.seqs.set(taskId, seq + 1);
    const event: TaskEvent = { v: 1, taskId, seq, at: "2026-03-01T10:00:00.000Z", iteration: 0, kind: "step", ...e };
    this.stored.set(taskId, [...(this.stored.get(taskId) ?? []), event]);
    for (const w of [...this.waiting]) w();
    return event;
  }

  readonly source: EventSource = (taskId, signal) => {
    this.opened.push(taskId);
    return this.read(taskId, signal);
  };

  private async *read(taskId: string, signal: AbortSignal): AsyncGenerator<TaskEvent> {
    let i = 0;
    for (;;) {
      const events = this.stored.get(taskId) ?? [];
      while (i < events.length) {
        const e = events[i++]!;
        yield e;
        if (e.kind === "result") return;
      }
      if (this.failing.has(taskId)) throw new Error(`cannot read ${taskId}`);
      if (signal.aborted) {
        this.aborted.push(taskId);
        return;
      }
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.waiting.delete(done);
          signal.removeEventListener("abort", done);
          resolve();
        };
        this.waiting.add(done);
        signal.addEventListener("abort", done);
      });
    }
  }
}

/** Lets every reader and the merge run until nothing more can happen now. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));

/** Runs the merge in the background, collecting what it yields. */
function collect(gen: AsyncGenerator<TaskEvent>): { seen: TaskEvent[]; done: Promise<void> } {
  const seen: TaskEvent[] = [];
  const done = (async () => {
    for await (const e of gen) seen.push(e);
  })();
  return { seen, done };
}

const P = "dag-1";
const STORAGE_1 = `${P}--storage-a1`;
const STORAGE_2 = `${P}--storage-a2`;
const API_1 = `${P}--api-a1`;

/** A `data.dag` with these subtasks (only what the follow reads matters). */
function dag(...subtasks: Array<{ id: string; status: string; childTaskId?: string }>): Record<string, unknown> {
  return {
    dag: {
      reopened: [],
      subtasks: subtasks.map((s) => ({
        goal: s.id,
        dependsOn: [],
        attempt: 1,
        iteration: 0,
        iterations: 0,
        tokens: 0,
        costUsd: 0,
        ...s,
      })),
    },
  };
}

const child = (id: string, sub: string) => ({ parentTaskId: P, subtaskId: sub, message: "", taskId: id });
const label = (e: TaskEvent): string => `${e.taskId}#${e.seq}${e.kind === "result" ? " result" : ""}`;

describe("childTaskIdsOf", () => {
  it("names each subtask's childTaskId in data.dag and data.subtask's, once each, skipping those without one", () => {
    const e = {
      data: {
        ...dag({ id: "storage", status: "running", childTaskId: STORAGE_1 }, { id: "api", status: "pending" }),
        subtask: { id: "storage", status: "running", childTaskId: STORAGE_1 },
      },
    };
    expect(childTaskIdsOf(e)).toEqual([STORAGE_1]);
    expect(childTaskIdsOf({ data: { subtask: { id: "api", childTaskId: API_1 } } })).toEqual([API_1]);
    expect(childTaskIdsOf({ data: { dag: "not a dag", subtask: 3 } })).toEqual([]);
    expect(childTaskIdsOf({})).toEqual([]);
  });
});

describe("withChildEvents", () => {
  it("follows each child named by the parent's events from its start, interleaves its events as they come, a retry as a new child, and ends with the parent's result", async () => {
    const bus = new FakeBus();
    bus.publish(P, { message: "plan: 2 subtasks", phase: "plan" });
    const { seen, done } = collect(withChildEvents(P, bus.source, { graceMs: 1_000 }));
    await settle();
    // The child publishes before the parent's event names it: read from its start anyway.
    bus.publish(STORAGE_1, { ...child(STORAGE_1, "storage"), kind: "accepted" });
    bus.publish(P, {
      message: "subtask storage: running",
      phase: "schedule",
      subtaskId: "storage",
      data: dag({ id: "storage", status: "running", childTaskId: STORAGE_1 }, { id: "api", status: "pending" }),
    });
    await settle();
    bus.publish(STORAGE_1, { ...child(STORAGE_1, "storage"), phase: "build" });
    await settle();
    bus.publish(P, {
      message: "subtask progress",
      phase: "schedule",
      data: dag({ id: "storage", status: "running", childTaskId: STORAGE_1 }, { id: "api", status: "pending" }),
    });
    await settle();
    bus.publish(STORAGE_1, { ...child(STORAGE_1, "storage"), kind: "result" });
    await settle();
    bus.publish(P, {
      message: "storage: attempt 1 failed; trying again",
      phase: "schedule",
      subtaskId: "storage",
      data: { subtask: { id: "storage", status: "running", childTaskId: STORAGE_2 } },
    });
    await settle();
    bus.publish(STORAGE_2, { ...child(STORAGE_2, "storage"), kind: "result" });
    await settle();
    bus.publish(P, {
      message: "api running",
      phase: "schedule",
      subtaskId: "api",
      data: dag(
        { id: "storage", status: "passed", childTaskId: STORAGE_2 },
        { id: "api", status: "running", childTaskId: API_1 },
      ),
    });
    await settle();
    bus.publish(API_1, { ...child(API_1, "api"), phase: "build" });
    await settle();
    bus.publish(API_1, { ...child(API_1, "api"), kind: "result" });
    await settle();
    bus.publish(P, { message: "done", kind: "result" });
    await done;
    expect(seen.map(label)).toEqual([
      `${P}#0`,
      `${P}#1`,
      `${STORAGE_1}#0`,
      `${STORAGE_1}#1`,
      `${P}#2`,
      `${STORAGE_1}#2 result`,
      `${P}#3`,
      `${STORAGE_2}#0 result`,
      `${P}#4`,
      `${API_1}#0`,
      `${API_1}#1 result`,
      `${P}#5 result`,
    ]);
    // Each child once, each reader ended by the result, not by being stopped.
    expect(bus.opened).toEqual([P, STORAGE_1, STORAGE_2, API_1]);
    expect(bus.aborted).toEqual([]);
    const childEvent = seen.find((e) => e.taskId === API_1)!;
    expect(childEvent).toMatchObject({ parentTaskId: P, subtaskId: "api" });
  });

  it("holds the parent's result until the children still followed bring theirs", async () => {
    const bus = new FakeBus();
    const { seen, done } = collect(withChildEvents(P, bus.source, { graceMs: 5_000 }));
    bus.publish(P, {
      message: "storage running",
      phase: "schedule",
      data: dag({ id: "storage", status: "running", childTaskId: STORAGE_1 }),
    });
    await settle();
    bus.publish(P, {
      message: "cancelled",
      kind: "result",
      data: dag({ id: "storage", status: "cancelled", childTaskId: STORAGE_1 }),
    });
    await settle();
    expect(seen.map(label)).toEqual([`${P}#0`]);
    bus.publish(STORAGE_1, { ...child(STORAGE_1, "storage"), kind: "result" });
    await done;
    expect(seen.map(label)).toEqual([`${P}#0`, `${STORAGE_1}#0 result`, `${P}#1 result`]);
  });

  it("stops following a child that brings no result graceMs after the parent's result, which then comes last", async () => {
    const bus = new FakeBus();
    const { seen, done } = collect(withChildEvents(P, bus.source, { graceMs: 30 }));
    bus.publish(P, {
      message: "storage running",
      phase: "schedule",
      data: dag({ id: "storage", status: "running", childTaskId: STORAGE_1 }),
    });
    await settle();
    bus.publish(STORAGE_1, { ...child(STORAGE_1, "storage"), phase: "build" });
    bus.publish(P, {
      message: "failed",
      kind: "result",
      data: dag({ id: "storage", status: "failed", childTaskId: STORAGE_1 }),
    });
    await done;
    expect(seen.map(label)).toEqual([`${P}#0`, `${STORAGE_1}#0`, `${P}#1 result`]);
    expect(bus.aborted).toEqual([STORAGE_1]);
  });

  it("a task without children: the parent's events as they are", async () => {
    const bus = new FakeBus();
    bus.publish(P, { message: "plan", phase: "plan" });
    bus.publish(P, { message: "ok", kind: "result" });
    const { seen, done } = collect(withChildEvents(P, bus.source));
    await done;
    expect(seen.map(label)).toEqual([`${P}#0`, `${P}#1 result`]);
    expect(bus.opened).toEqual([P]);
  });

  it("stops everything, without a result, when the signal aborts", async () => {
    const bus = new FakeBus();
    const abort = new AbortController();
    const { seen, done } = collect(withChildEvents(P, bus.source, { signal: abort.signal }));
    bus.publish(P, {
      message: "storage running",
      phase: "schedule",
      data: dag({ id: "storage", status: "running", childTaskId: STORAGE_1 }),
    });
    await settle();
    abort.abort();
    await done;
    await settle();
    bus.publish(P, { message: "late", kind: "result" });
    await settle();
    expect(seen.map(label)).toEqual([`${P}#0`]);
    expect(bus.aborted.sort()).toEqual([P, STORAGE_1].sort());
  });

  it("a child whose events cannot be read is reported and dropped; the parent goes on", async () => {
    const bus = new FakeBus();
    bus.failing.add(STORAGE_1);
    const errors: string[] = [];
    const { seen, done } = collect(
      withChildEvents(P, bus.source, { onChildError: (id, err) => errors.push(`${id}: ${(err as Error).message}`) }),
    );
    bus.publish(STORAGE_1, { ...child(STORAGE_1, "storage"), phase: "build" });
    bus.publish(P, {
      message: "storage running",
      phase: "schedule",
      data: dag({ id: "storage", status: "running", childTaskId: STORAGE_1 }),
    });
    await settle();
    bus.publish(P, { message: "failed", kind: "result" });
    await done;
    expect(errors).toEqual([`${STORAGE_1}: cannot read ${STORAGE_1}`]);
    expect(seen.map(label)).toEqual([`${P}#0`, `${STORAGE_1}#0`, `${P}#1 result`]);
  });

  it("passes on an error reading the parent's events", async () => {
    const bus = new FakeBus();
    bus.failing.add(P);
    bus.publish(P, { message: "plan", phase: "plan" });
    const { seen, done } = collect(withChildEvents(P, bus.source));
    await expect(done).rejects.toThrow(`cannot read ${P}`);
    expect(seen.map(label)).toEqual([`${P}#0`]);
  });
});
