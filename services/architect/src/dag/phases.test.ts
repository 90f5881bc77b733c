import pino from "pino";
import { describe, expect, it } from "vitest";
import { DagPlan, Task, type DagState, type SubtaskState, type TaskEvent } from "@loopsmith/shared/contracts";
import { TaskRun } from "../run.js";
import { initialState, type TaskState } from "../state.js";
import type { LoopIO, Steps } from "../steps.js";
import { announceUnpublished, childTaskInput, childTimeLimit, recordMove } from "./phases.js";
import { startDag } from "./scheduler.js";

const plan = DagPlan.parse({
  summary: "two modules",
  subtasks: [
    { id: "model", goal: "build model", files: ["model.py"], dependsOn: [] },
    { id: "storage", goal: "build storage", files: ["storage.py"], dependsOn: ["model"] },
  ],
});

/**
 * A conductor's bus as far as recording goes: the checkpoint bucket (the last state written)
 * and the events stream; `die` makes every write after it fail, like a connection that is gone.
 */
function bus() {
  const stream: TaskEvent[] = [];
  const writes: string[] = [];
  let kv: TaskState | undefined;
  let dieAfter: "checkpoint" | "emit" | undefined;
  let dead = false;
  const io: LoopIO = {
    checkpoint: async (s) => {
      if (dead) throw new Error("connection closed");
      kv = s;
      writes.push(`checkpoint ${s.eventSeq}`);
      dead = dieAfter === "checkpoint";
    },
    emit: async (e) => {
      if (dead) throw new Error("connection closed");
      stream.push(e);
      writes.push(`event ${e.seq}`);
      dead = dieAfter === "emit";
    },
    heartbeat: () => undefined,
    cancelled: () => false,
    stopping: () => false,
    log: pino({ level: "silent" }),
  };
  /** A new conductor's run from the checkpoint, numbering events after the stream's last (as the conductor resumes). */
  const resume = (): TaskRun => {
    dead = false;
    dieAfter = undefined;
    const last = stream.at(-1)?.seq ?? -1;
    return new TaskRun({ ...kv!, eventSeq: Math.max(kv!.eventSeq, last + 1) }, {} as Steps, io);
  };
  return { io, stream, writes, resume, dieAfter: (what: "checkpoint" | "emit") => void (dieAfter = what) };
}

function start(io: LoopIO): TaskRun {
  const task = Task.parse({
    v: 1,
    taskId: "t-dag",
    goal: "an api",
    language: "python",
    submittedAt: new Date().toISOString(),
  });
  return new TaskRun({ ...initialState(task), phase: "schedule", eventSeq: 7, dag: startDag(plan) }, {} as Steps, io);
}

/** The scheduler's move of `id` to `patch` (its own state: no `moveSeq` follows). */
function move(state: DagState, id: string, patch: Partial<SubtaskState>): [DagState, SubtaskState] {
  const next = { ...state, subtasks: state.subtasks.map((s) => (s.id === id ? { ...s, ...patch } : s)) };
  return [next, next.subtasks.find((s) => s.id === id)!];
}

const running = (stream: TaskEvent[], id: string): number[] =>
  stream
    .filter((e) => e.message.startsWith(`subtask ${id}: running`))
    .map((e) => (e.data?.subtask as SubtaskState).attempts);

describe("DAG moves: checkpoint, then event, announced once across a conductor that dies", () => {
  it("checkpoints a move with the seq its event takes before publishing it; the event's subtask has no moveSeq", async () => {
    const b = bus();
    const run = start(b.io);
    let dag = run.s.dag!;
    let changed: SubtaskState;
    [dag, changed] = move(dag, "model", { status: "running", attempts: 1 });
    await recordMove(run, dag, changed);
    [dag, changed] = move(dag, "model", { status: "passed", reason: "passed" });
    await recordMove(run, dag, changed);
    [dag, changed] = move(dag, "storage", { status: "running", attempts: 1 });
    await recordMove(run, dag, changed);
    expect(b.writes).toEqual(["checkpoint 7", "event 7", "checkpoint 8", "event 8", "checkpoint 9", "event 9"]);
    expect(b.stream.map((e) => e.message)).toEqual([
      "subtask model: running, attempt 1",
      "subtask model: passed",
      "subtask storage: running, attempt 1",
    ]);
    expect(b.stream.every((e) => (e.data?.subtask as SubtaskState).moveSeq === undefined)).toBe(true);
    // Each subtask keeps the seq of its own last move, though the scheduler's state does not carry it.
    expect(run.s.dag!.subtasks.map((s) => [s.id, s.moveSeq])).toEqual([
      ["model", 8],
      ["storage", 9],
    ]);
  });

  it("a move checkpointed whose event was lost is announced once when the run resumes", async () => {
    const b = bus();
    const run = start(b.io);
    const [dag, changed] = move(run.s.dag!, "storage", { status: "running", attempts: 1 });
    b.dieAfter("checkpoint");
    await recordMove(run, dag, changed).catch(() => undefined);
    expect(b.stream).toHaveLength(0);
    const again = b.resume();
    expect(again.s.dag!.subtasks.find((s) => s.id === "storage")).toMatchObject({ status: "running", attempts: 1 });
    await announceUnpublished(again);
    expect(b.stream.map((e) => [e.seq, e.message])).toEqual([[7, "subtask storage: running, attempt 1"]]);
    expect(b.stream[0]).toMatchObject({ kind: "step", phase: "schedule", subtaskId: "storage" });
    // Announced: resumed once more (before any later checkpoint), nothing is published again.
    await announceUnpublished(b.resume());
    expect(running(b.stream, "storage")).toEqual([1]);
  });

  it("a move whose event was published is not announced again when the run resumes", async () => {
    const b = bus();
    const run = start(b.io);
    const [dag, changed] = move(run.s.dag!, "storage", { status: "running", attempts: 1 });
    b.dieAfter("emit");
    await recordMove(run, dag, changed);
    const again = b.resume();
    expect(again.s.eventSeq).toBe(8);
    await announceUnpublished(again);
    expect(running(b.stream, "storage")).toEqual([1]);
  });

  it("a run entering SCHEDULE anew announces nothing (every move's event came before)", async () => {
    const b = bus();
    const run = start(b.io);
    const [dag, changed] = move(run.s.dag!, "model", { status: "running", attempts: 1 });
    await recordMove(run, dag, changed);
    await announceUnpublished(run);
    expect(b.stream).toHaveLength(1);
  });
});

describe("a subtask's wall-clock limit", () => {
  it("is the subtask's own, never more than the parent has left, and at least 1 s", () => {
    expect(childTimeLimit(undefined, undefined)).toBeUndefined();
    expect(childTimeLimit(60_000, undefined)).toBe(60_000);
    expect(childTimeLimit(undefined, 42_500.2)).toBe(42_501);
    expect(childTimeLimit(60_000, 42_500)).toBe(42_500);
    expect(childTimeLimit(10_000, 42_500)).toBe(10_000);
    expect(childTimeLimit(60_000, 200)).toBe(1_000);
  });
});

describe("a subtask's child task", () => {
  const task = Task.parse({
    v: 1,
    taskId: "t-dag-repo",
    goal: "an api",
    language: "python",
    review: true,
    audit: true,
    repo: {
      baseCommit: "a".repeat(40),
      snapshot: "snap-a",
      testCommand: "pytest -q",
      dependencies: "ask",
      approvals: {
        interactive: true,
        allowed: [{ source: "/r/.loopsmith/allowed-dependencies", packages: ["requests"] }],
      },
    },
    limits: { maxCostUsd: 1 },
    submittedAt: new Date().toISOString(),
  });
  const s: TaskState = { ...initialState(task), dag: startDag(plan) };
  const req = {
    subtask: plan.subtasks[1]!,
    attempt: 2,
    childTaskId: "t-dag-repo-storage-2",
    base: [],
    signal: new AbortController().signal,
  };
  const child = Task.parse(
    childTaskInput(s, req, { commit: "b".repeat(40), snapshot: "snap-b" }, { remainingUsd: 0.25 }, 60_000),
  );

  it("carries the DAG's review, audit, dependency policy and allowlists, never a person's answer", () => {
    expect(child.review).toBe(true);
    expect(child.audit).toBe(true);
    expect(child.repo?.dependencies).toBe("ask");
    expect(child.repo?.approvals?.allowed).toEqual(task.repo?.approvals?.allowed);
    expect(child.repo?.approvals?.interactive).toBe(false);
  });

  it("starts from the subtask's tree with what is left of the budget and the clock", () => {
    expect(child.repo?.baseCommit).toBe("b".repeat(40));
    expect(child.repo?.snapshot).toBe("snap-b");
    expect(child.limits.maxCostUsd).toBe(0.25);
    expect(child.limits.timeLimitMs).toBe(60_000);
    expect(child.parent).toEqual({ taskId: "t-dag-repo", subtaskId: "storage", attempt: 2 });
  });
});
