/**
 * History pages and windowed statistics, run against each back end (PostgreSQL + pgvector
 * and embedded PGlite) by `pglite.test.ts` and `postgres.test.ts`: `history` reads past 500
 * tasks in pages with goals cut to fit one NATS message; `stats` covers a window (`since`,
 * `last`) with pass rate, stop reasons, iterations (mean, p90), tokens, USD and the recall
 * hit rate read from the recall log.
 */
import { expect } from "vitest";
import { HISTORY_GOAL_CHARS, HISTORY_PAGE_MAX, type Recall, type TaskRecord } from "@loopsmith/shared/contracts";
import { openMemoryStore, type MemoryStore } from "@loopsmith/memory";
import { GOAL_A, log, nameErrorFailure, type TestWithFresh } from "./suite.js";

const usage = (costUsd: number, inputTokens: number, outputTokens: number) => ({
  calls: 1,
  inputTokens,
  outputTokens,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd,
  latencyMs: 10,
});

/** A finished task `i` minutes after a fixed start. */
function taskAt(i: number, over: Partial<TaskRecord> = {}): TaskRecord {
  return {
    v: 1,
    taskId: `t-${String(i).padStart(5, "0")}`,
    goal: `goal of task ${i}`,
    language: "python",
    status: "passed",
    stopReason: "passed",
    iterations: 1,
    usage: usage(0.01, 100, 10),
    usageByRole: {},
    durationMs: 1_000,
    scripted: true,
    finishedAt: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString(),
    ...over,
  };
}

/** Registers the history and statistics tests over `test`. */
export function statsSuite(test: TestWithFresh): void {
  test("history reads 1,000 tasks in pages, newest first, each goal cut to fit one message", async ({ config }) => {
    const store: MemoryStore = await openMemoryStore({ config, log });
    try {
      const long = "x".repeat(50_000);
      for (let i = 0; i < 1_000; i++) await store.recordTask(taskAt(i, i === 999 ? { goal: long } : {}));
      const first = await store.history({ v: 1, limit: HISTORY_PAGE_MAX });
      expect(first.tasks).toHaveLength(HISTORY_PAGE_MAX);
      expect(first.tasks[0]?.taskId).toBe("t-00999");
      expect(first.tasks[0]?.goal).toHaveLength(HISTORY_GOAL_CHARS);
      expect(first.tasks[0]?.goal.endsWith("…")).toBe(true);
      // A full page of the longest goals stays under NATS's default 1 MiB max_payload.
      expect(JSON.stringify(first).length).toBeLessThan(1024 * 1024);
      const second = await store.history({ v: 1, limit: HISTORY_PAGE_MAX, offset: HISTORY_PAGE_MAX });
      const third = await store.history({ v: 1, limit: HISTORY_PAGE_MAX, offset: 2 * HISTORY_PAGE_MAX });
      expect(second.tasks[0]?.taskId).toBe("t-00499");
      expect(second.tasks.at(-1)?.taskId).toBe("t-00000");
      expect(third.tasks).toHaveLength(0);
      const ids = new Set([...first.tasks, ...second.tasks].map((t) => t.taskId));
      expect(ids.size).toBe(1_000);
      await expect(store.history({ v: 1, limit: HISTORY_PAGE_MAX + 1 })).rejects.toMatchObject({ code: "bad_request" });
    } finally {
      await store.close();
    }
  });

  test("stats cover a window: pass rate, stop reasons, iterations, tokens, cost and the recall hit rate", async ({
    config,
  }) => {
    const store: MemoryStore = await openMemoryStore({ config, log });
    try {
      const empty = await store.stats({ v: 1 });
      expect(empty).toMatchObject({
        tasks: 0,
        passRate: null,
        meanIterations: null,
        p90Iterations: null,
        meanCostUsd: null,
        recall: { recalls: 0, hitRate: null },
      });
      // Ten tasks, a minute apart: iterations 1..10; the even ones pass, 3 and 7 end in an error.
      for (let i = 1; i <= 10; i++) {
        const passed = i % 2 === 0;
        await store.recordTask(
          taskAt(i, {
            iterations: i,
            status: passed ? "passed" : i === 3 || i === 7 ? "error" : "failed",
            stopReason: passed ? "passed" : i === 3 || i === 7 ? "error" : "max_iterations",
            usage: usage(0.1 * i, 1_000 * i, 100 * i),
            usageByRole: { build: usage(0.1 * i, 1_000 * i, 100 * i) },
          }),
        );
      }
      const all = await store.stats();
      expect(all).toMatchObject({
        tasks: 10,
        passed: 5,
        passRate: 0.5,
        stopReasons: { passed: 5, error: 2, max_iterations: 3 },
        p90Iterations: 9,
        inputTokens: 55_000,
        outputTokens: 5_500,
      });
      expect(all.meanIterations).toBeCloseTo(5.5);
      expect(all.meanIterationsToPass).toBeCloseTo(6);
      expect(all.totalCostUsd).toBeCloseTo(5.5);
      expect(all.meanCostUsd).toBeCloseTo(0.55);
      expect(all.usageByRole.build?.inputTokens).toBe(55_000);
      // The last 4 tasks (7..10); then those finished from task 9's minute on.
      const last = await store.stats({ v: 1, last: 4 });
      expect(last).toMatchObject({
        tasks: 4,
        passed: 2,
        stopReasons: { error: 1, max_iterations: 1, passed: 2 },
        inputTokens: 34_000,
        window: { last: 4 },
      });
      const since = await store.stats({ v: 1, since: taskAt(9).finishedAt });
      expect(since).toMatchObject({ tasks: 2, passed: 1, p90Iterations: 10 });
      await expect(store.stats({ v: 1, since: "last tuesday" })).rejects.toMatchObject({ code: "bad_request" });

      // Recall log: task 10 made three failure recalls (one hit with its fix, one hit, one miss), task 1 one hit.
      const failure = (signature: string, fixed: boolean): Recall["failures"][number] => ({
        id: "1",
        taskId: "t-other",
        goal: "g",
        signature,
        failingTests: [],
        similarity: 0.9,
        reflection: fixed ? { rootCause: "r", hypothesis: "h", fixPlan: "p" } : null,
      });
      const sig = "NameError: name <id> is not defined";
      const recall = (failures: Recall["failures"], signature: string | null = sig): Recall => ({
        failures,
        successes: [],
        embedder: "hash-v1-256",
        ...(signature ? { signature } : {}),
      });
      expect(await store.logRecall("t-00010", recall([failure("TypeError: x", false), failure(sig, true)]))).toBe(true);
      await store.logRecall("t-00010", recall([failure(sig, false)]));
      await store.logRecall("t-00010", recall([failure("TypeError: x", true)]));
      await store.logRecall("t-00001", recall([failure(sig, false)]));
      // A goal-only recall (no signature) is not a failure recall: not logged.
      expect(await store.logRecall("t-00010", recall([failure(sig, true)], null))).toBe(false);
      expect((await store.stats()).recall).toEqual({ recalls: 4, hits: 3, withFix: 1, hitRate: 0.75 });
      expect((await store.stats({ v: 1, last: 1 })).recall).toEqual({
        recalls: 3,
        hits: 2,
        withFix: 1,
        hitRate: 2 / 3,
      });
    } finally {
      await store.close();
    }
  });

  test("reads history, runs, failures and stats per owner: one client never sees another's tasks", async ({
    config,
  }) => {
    const store: MemoryStore = await openMemoryStore({ config, log });
    try {
      await store.recordTask(taskAt(1, { taskId: "t-alice", owner: "alice" }));
      await store.recordTask(
        taskAt(2, { taskId: "t-bob", owner: "bob", status: "failed", stopReason: "max_iterations" }),
      );
      // Recorded before owners existed (no owner): the default client's.
      await store.recordTask(taskAt(3, { taskId: "t-old" }));
      // Another owner's record under a taken id does not replace the first one's.
      await store.recordTask(taskAt(4, { taskId: "t-alice", owner: "bob", goal: "bob's overwrite" }));
      expect((await store.history({ v: 1 }, "alice")).tasks.map((t) => [t.taskId, t.goal])).toEqual([
        ["t-alice", "goal of task 1"],
      ]);
      expect((await store.history({ v: 1 }, "bob")).tasks.map((t) => t.taskId)).toEqual(["t-bob"]);
      expect((await store.history({ v: 1 })).tasks.map((t) => t.taskId)).toEqual(["t-old"]);
      expect(await store.stats({ v: 1 }, "bob")).toMatchObject({ tasks: 1, passed: 0 });
      expect(await store.stats({ v: 1 }, "alice")).toMatchObject({ tasks: 1, passed: 1 });

      await store.rememberFailure({ ...nameErrorFailure("t-alice", GOAL_A, "numbrs"), owner: "alice" });
      expect((await store.failures({ v: 1 }, "alice")).failures.map((f) => f.taskId)).toEqual(["t-alice"]);
      expect((await store.failures({ v: 1, taskId: "t-alice" }, "bob")).failures).toEqual([]);

      const result = null;
      const task = {
        v: 1 as const,
        taskId: "t-alice",
        goal: "g",
        language: "python" as const,
        submittedAt: new Date().toISOString(),
        owner: "alice",
      };
      await store.saveRun({ v: 1, taskId: "t-alice", task, result, events: [], recordedAt: new Date().toISOString() });
      expect((await store.run("t-alice", "alice")).task.owner).toBe("alice");
      await expect(store.run("t-alice", "bob")).rejects.toMatchObject({ code: "not_found" });
      await expect(store.run("t-alice")).rejects.toMatchObject({ code: "not_found" });
    } finally {
      await store.close();
    }
  });
}
