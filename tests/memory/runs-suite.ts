/**
 * Recorded runs in memory's store, run against each back end (PostgreSQL + pgvector and
 * embedded PGlite) by `pglite.test.ts` and `postgres.test.ts`: a run recorded with its task,
 * events and result reads back whole; recording again replaces it (one row, same content);
 * a task without a run is `not_found`; capped runs and text jsonb refuses survive.
 */
import { expect } from "vitest";
import { Task, TaskRecord, type TaskEvent, type TaskResult } from "@loopsmith/shared/contracts";
import { type LoopsmithError } from "@loopsmith/shared/runtime";
import { assembleRun, openDatabase, openMemoryStore, type MemoryStore } from "@loopsmith/memory";
import { GOAL_A, log, type TestWithFresh } from "./suite.js";

const usage = {
  calls: 2,
  inputTokens: 100,
  outputTokens: 50,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0.25,
  latencyMs: 900,
};
const reflection = {
  rootCause: "The table lacks subtractive pairs.",
  hypothesis: "Add them.",
  fixPlan: "Extend _VALUES with (900, 'CM') and the rest.",
};

/** A finished task `taskId`: its record (with task and result) and the events the stream held. */
export function finishedTask(taskId: string, repo = false) {
  const task = Task.parse({
    v: 1,
    taskId,
    goal: GOAL_A,
    language: "python",
    submittedAt: "2026-01-01T00:00:00.000Z",
    files: [{ path: "solution.py", content: "pass\n" }],
    acceptanceTests: [{ path: "test_solution.py", content: "def test(): pass\n" }],
    ...(repo ? { repo: { baseCommit: "a".repeat(40), snapshot: `tree-${"a".repeat(40)}.tar`, name: "demo" } } : {}),
  });
  const result: TaskResult = {
    v: 1,
    taskId,
    status: "passed",
    stopReason: "passed",
    iterations: 2,
    files: [{ path: "solution.py", content: "def f():\n    return 1\n" }],
    tests: [],
    lastExecution: {
      status: "passed",
      tests: [{ name: "test", classname: "test_solution", status: "passed", durationMs: 1 }],
      durationMs: 20,
    },
    hidden: null,
    failureIds: ["1"],
    usage: { total: usage, byRole: { build: usage }, byIteration: [usage, usage] },
    scripted: true,
    providers: ["scripted:script:s.json"],
    durationMs: 4_000,
    message: "passed after 2 iterations",
    ...(repo
      ? {
          repo: {
            baseCommit: "a".repeat(40),
            patch: "--- a/x\n+++ b/x\n",
            summary: "fix x",
            changed: ["x"],
            deleted: [],
          },
        }
      : {}),
  };
  const at = "2026-01-01T00:00:01.000Z";
  const ev = (seq: number, iteration: number, kind: TaskEvent["kind"], extra: Partial<TaskEvent> = {}): TaskEvent => ({
    v: 1,
    taskId,
    seq,
    at,
    iteration,
    kind,
    message: `${kind} ${seq}`,
    ...extra,
  });
  const build = (seq: number, iteration: number, callsBefore: number, content: string) =>
    ev(seq, iteration, "step", {
      phase: "build",
      data: {
        llm: {
          role: "build",
          callsBefore,
          calls: 1,
          value: { files: [{ path: "solution.py", content }], tests: [], notes: "" },
          provider: { name: "scripted", model: "script:s.json", scripted: true },
        },
      },
    });
  const events: TaskEvent[] = [
    ev(0, 0, "accepted"),
    ev(1, 1, "phase", { phase: "build" }),
    build(2, 1, 0, "def f():\n    return 0\n"),
    ev(3, 1, "step", { phase: "execute", data: { status: "failed", failingTests: ["test_solution.py::test"] } }),
    ev(4, 1, "step", { phase: "remember", data: { failureId: "1", signature: "AssertionError: assert <n> == <n>" } }),
    ev(5, 1, "step", { phase: "reflect", data: { reflection } }),
    build(6, 2, 1, "def f():\n    return 1\n"),
    ev(7, 2, "step", { phase: "execute", data: { status: "passed", failingTests: [] } }),
  ];
  const record = TaskRecord.parse({
    v: 1,
    taskId,
    goal: GOAL_A,
    language: "python",
    status: "passed",
    stopReason: "passed",
    iterations: 2,
    usage,
    usageByRole: { build: usage },
    durationMs: 4_000,
    scripted: true,
    finishedAt: "2026-01-01T00:00:05.000Z",
    task,
    result,
  });
  return { task, result, events, record };
}

async function errorOf(p: Promise<unknown>): Promise<LoopsmithError> {
  return p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e as LoopsmithError,
  );
}

/** Registers the recorded-run tests with `test`, which gives each an empty database. */
export function runsSuite(test: TestWithFresh): void {
  const withStore = async (
    f: Parameters<Parameters<TestWithFresh>[1]>[0],
    fn: (store: MemoryStore) => Promise<void>,
  ): Promise<void> => {
    const store = await openMemoryStore({ config: f.config, log });
    try {
      await fn(store);
    } finally {
      await store.close();
    }
  };

  test("records a run with its task, events and result, reads it back whole, and replaces it when recorded again", async (f) => {
    await withStore(f, async (store) => {
      const { task, result, events, record } = finishedTask("run-a", true);
      await store.recordTask(record);
      expect(await store.saveRun(assembleRun(record, { events, complete: true }, new Date().toISOString()))).toEqual({
        id: "run-a",
      });
      const run = await store.run("run-a");
      expect(run).toMatchObject({ v: 1, taskId: "run-a", task, result, eventsTruncated: false, eventsTotal: 9 });
      expect(run.events.slice(0, 8)).toEqual(events);
      expect(run.events[8]).toMatchObject({ seq: 8, kind: "result", result });
      expect(new Date(run.recordedAt).getTime()).not.toBeNaN();
      // The history still lists the task once, without the run's bulk.
      expect((await store.history({ v: 1 })).tasks.map((t) => [t.taskId, t.task])).toEqual([["run-a", undefined]]);

      // Recorded again with the same content: the same run, one row.
      await store.saveRun(assembleRun(record, { events, complete: true }, new Date().toISOString()));
      const again = await store.run("run-a");
      expect({ ...again, recordedAt: "" }).toEqual({ ...run, recordedAt: "" });
      // Recorded again with another result (a conductor that finished it again): replaced.
      const changed = { ...record, result: { ...result, message: "passed again" } };
      await store.saveRun(assembleRun(changed, { events, complete: true }, new Date().toISOString()));
      expect((await store.run("run-a")).result?.message).toBe("passed again");
      // One row, counted where a second opener is allowed (PostgreSQL; PGlite's data
      // directory lock refuses one while the store is open).
      const db = await openDatabase({ config: f.config, log, embedders: [] }).catch(() => undefined);
      if (db) {
        try {
          expect((await db.pool.query("SELECT count(*)::int AS n FROM loopsmith.runs")).rows[0]).toEqual({ n: 1 });
        } finally {
          await db.close();
        }
      }
    });
  });

  test("answers not_found for a task without a recorded run and bad_request for a bad id or run", async (f) => {
    await withStore(f, async (store) => {
      const { record } = finishedTask("only-record");
      const { task: _task, result: _result, ...plain } = record;
      await store.recordTask(plain);
      const missing = await errorOf(store.run("only-record"));
      expect(missing.code).toBe("not_found");
      expect(missing.message).toContain("only-record");
      expect((await errorOf(store.run("bad id!"))).code).toBe("bad_request");
      expect((await errorOf(store.saveRun({ v: 1, taskId: "x" } as never))).code).toBe("bad_request");
    });
  });

  test("keeps a capped run's flag and count, and text jsonb refuses (NUL) as U+FFFD", async (f) => {
    await withStore(f, async (store) => {
      const { events, record } = finishedTask("run-big");
      const many = [
        ...events,
        ...Array.from({ length: 30 }, (_, i) => ({ ...events[3]!, seq: 8 + i, message: `note ${i}\u0000` })),
      ];
      const run = assembleRun(record, { events: many, complete: true }, new Date().toISOString(), 20);
      await store.saveRun(run);
      const back = await store.run("run-big");
      expect(back).toMatchObject({ eventsTruncated: true, eventsTotal: 39 });
      expect(back.events).toHaveLength(20);
      expect(back.events.at(-1)?.kind).toBe("result");
      expect(back.events.map((e) => e.kind)).not.toContain("phase"); // dropped first
      expect(back.events.find((e) => e.message.startsWith("note "))?.message).toBe("note 0\uFFFD");
    });
  });
}
