/**
 * The memory store's behaviour suite, run against each back end (PostgreSQL + pgvector in a
 * container, and embedded PGlite in a temp dir). `fresh` gives each test an empty database.
 */
import { expect } from "vitest";
import pino from "pino";
import type { Config, LoopsmithError } from "@loopsmith/shared/runtime";
import {
  createHashingEmbedder,
  hnswIndexName,
  openDatabase,
  openMemoryStore,
  type Embedder,
  type MemoryStore,
} from "@loopsmith/memory";

export const log = pino({ level: "silent" });

/** What a test of the suite gets: a fresh, empty database's configuration. */
export interface Fresh {
  config: Config;
  backend: "postgres" | "pglite";
}

/**
 * Registers one test: the back end's file wraps its own `it`, makes a fresh database and
 * passes it to `fn` (so only the PostgreSQL file asks for the `postgres` fixture).
 */
export type TestWithFresh = (name: string, fn: (fresh: Fresh) => Promise<void>) => void;

const usage = {
  calls: 2,
  inputTokens: 100,
  outputTokens: 50,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0.25,
  latencyMs: 900,
};

/** HumanEval-like goals of two different tasks. */
export const GOAL_A =
  "Write has_close_elements(numbers, threshold): return True if any two numbers are closer than threshold.";
export const GOAL_B =
  "Write below_zero(operations): given deposits and withdrawals, return True if the balance falls below zero.";

/** A failure record of `taskId` whose mutant referenced an undefined name. */
export function nameErrorFailure(
  taskId: string,
  goal: string,
  name: string,
  language: "python" | "javascript" = "python",
) {
  return {
    v: 1 as const,
    taskId,
    iteration: 1,
    idempotencyKey: `${taskId}/1/remember_failure`,
    language,
    goal,
    errorText: `Traceback (most recent call last):\n  File "/workspace/${taskId}/solution.py", line 7, in f\n    return ${name} + 1\nNameError: name '${name}' is not defined`,
    failingTests: [`test_solution.py::test_${taskId}`],
    outputTail: "1 failed",
    status: "failed",
  };
}

export const fixPlan = {
  rootCause: "A variable was used before it was defined (a misspelt name).",
  hypothesis: "The loop variable was renamed in one place only.",
  fixPlan: "Use the parameter's real name everywhere; run the tests again.",
};

async function errorOf(p: Promise<unknown>): Promise<LoopsmithError> {
  return p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e as LoopsmithError,
  );
}

/** A pytest failure of below_zero as the executor reports it (JUnit entities left in), at `addr`. */
export function belowZeroAssert(addr: string): string {
  return `assert False == True&#10; +  where False = <function below_zero at ${addr}>([1, 2, -4, 5])
def test_below_zero():
>       namespace["check"](namespace["below_zero"])

test_solution.py:24: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

    def check(candidate):
>       assert candidate([1, 2, -4, 5]) == True
E       assert False == True

humaneval_check.py:12: AssertionError`;
}

/** below_zero, and three mutants of it that all fail with {@link belowZeroAssert}. */
const BELOW_ZERO =
  "def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n        if balance < 0:\n            return True\n    return False\n";
export const BELOW_ZERO_MUTANTS = {
  bound: BELOW_ZERO.replace("balance < 0", "balance < -1"),
  sub: BELOW_ZERO.replace("balance += op", "balance -= op"),
  early: BELOW_ZERO.replace("return True", "return False"),
};

/** Registers the suite's tests with `test`, which gives each an empty database. */
export function memorySuite(test: TestWithFresh): void {
  const open = async (f: Fresh, embedder?: Embedder): Promise<MemoryStore> =>
    openMemoryStore({ config: f.config, log, ...(embedder ? { embedder } : {}) });

  test("remembers a failure and recalls it, with its fix, for another task that fails the same way", async (f) => {
    const store = await open(f);
    try {
      expect(store.backend).toBe(f.backend);
      const a = await store.rememberFailure(nameErrorFailure("task-a", GOAL_A, "numbrs"));
      expect(a.signature).toBe("NameError: name <id> is not defined");
      expect(a.id).toMatch(/^\d+$/);
      await expect(
        store.attachFix({
          v: 1,
          taskId: "task-a",
          iteration: 1,
          idempotencyKey: "task-a/1/attach_fix",
          failureId: a.id,
          reflection: fixPlan,
        }),
      ).resolves.toEqual(a);
      // An unrelated failure, to be ranked below.
      await store.rememberFailure({
        ...nameErrorFailure("task-c", "Write fib(n).", "x"),
        errorText: "ZeroDivisionError: division by zero",
      });

      const b = nameErrorFailure("task-b", GOAL_B, "balanse");
      const recall = await store.recall({
        v: 1,
        taskId: "task-b",
        language: "python",
        text: `${GOAL_B}\n${b.errorText}`,
        errorText: b.errorText,
        k: 3,
      });
      expect(recall.embedder).toBe("hash-v1-256");
      expect(recall.signature).toBe("NameError: name <id> is not defined");
      expect(recall.failures.map((x) => x.taskId)).toEqual(["task-a", "task-c"]);
      const top = recall.failures[0]!;
      expect(top).toMatchObject({
        id: a.id,
        goal: GOAL_A,
        signature: a.signature,
        reflection: fixPlan,
        failingTests: ["test_solution.py::test_task-a"],
      });
      expect(top.similarity).toBeGreaterThan(recall.failures[1]!.similarity);
      expect(top.score).toBeGreaterThan(recall.failures[1]!.score!);
      expect(top.key).toBe(
        "NameError: name <id> is not defined | message name 'numbrs' is not defined | at f: return numbrs + 1",
      );
      expect(top.fixedBy).toBeNull();

      // The task's own failures are left out unless asked for.
      const own = await store.recall({
        v: 1,
        taskId: "task-a",
        language: "python",
        text: GOAL_A,
        errorText: b.errorText,
      });
      expect(own.failures.map((x) => x.taskId)).toEqual(["task-c"]);
      const all = await store.recall({
        v: 1,
        taskId: "task-a",
        language: "python",
        text: GOAL_A,
        errorText: b.errorText,
        excludeSameTask: false,
        k: 1,
      });
      expect(all.failures.map((x) => x.taskId)).toEqual(["task-a"]);
      // A scope (a benchmark arm's task-id prefix) keeps recall to those tasks only.
      const scoped = await store.recall({
        v: 1,
        taskId: "task-b",
        language: "python",
        text: `${GOAL_B}\n${b.errorText}`,
        errorText: b.errorText,
        k: 3,
        scope: "task-c",
      });
      expect(scoped.failures.map((x) => x.taskId)).toEqual(["task-c"]);
      const none = await store.recall({
        v: 1,
        taskId: "task-b",
        language: "python",
        text: GOAL_B,
        k: 3,
        scope: "bench-x-",
      });
      expect(none.failures).toEqual([]);
    } finally {
      await store.close();
    }
  });

  test("lists a task's stored failures with their fix, oldest first, and the latest of all tasks", async (f) => {
    const store = await open(f);
    try {
      const first = await store.rememberFailure(nameErrorFailure("task-a", GOAL_A, "numbrs"));
      await store.attachFix({
        v: 1,
        taskId: "task-a",
        iteration: 1,
        idempotencyKey: "task-a/1/attach_fix",
        failureId: first.id,
        reflection: fixPlan,
      });
      const second = await store.rememberFailure({
        ...nameErrorFailure("task-a", GOAL_A, "x"),
        iteration: 2,
        idempotencyKey: "task-a/2/remember_failure",
        errorText: "E".repeat(5_000),
      });
      const other = await store.rememberFailure(nameErrorFailure("task-b", GOAL_B, "y"));
      const own = await store.failures({ v: 1, taskId: "task-a" });
      expect(own.failures.map((x) => [x.id, x.iteration])).toEqual([
        [first.id, 1],
        [second.id, 2],
      ]);
      expect(own.failures[0]).toMatchObject({
        taskId: "task-a",
        status: "failed",
        signature: first.signature,
        reflection: fixPlan,
        failingTests: ["test_solution.py::test_task-a"],
      });
      expect(own.failures[1]?.reflection).toBeNull();
      expect(own.failures[1]?.errorText).toHaveLength(2_000);
      expect(new Date(own.failures[0]?.createdAt ?? "").getTime()).not.toBeNaN();
      const latest = await store.failures({ v: 1, limit: 2 });
      expect(latest.failures.map((x) => x.id)).toEqual([other.id, second.id]);
      expect((await store.failures({ v: 1, taskId: "nobody" })).failures).toEqual([]);
    } finally {
      await store.close();
    }
  });

  test("recalls only the request's language", async (f) => {
    const store = await open(f);
    try {
      await store.rememberFailure(nameErrorFailure("py-task", GOAL_A, "n"));
      const js = await store.recall({
        v: 1,
        taskId: "other",
        language: "javascript",
        text: GOAL_A,
        errorText: "NameError: name 'n' is not defined",
      });
      expect(js.failures).toEqual([]);
      const py = await store.recall({
        v: 1,
        taskId: "other",
        language: "python",
        text: GOAL_A,
        errorText: "NameError: name 'n' is not defined",
      });
      expect(py.failures).toHaveLength(1);
    } finally {
      await store.close();
    }
  });

  test("compares only rows of the same embedder", async (f) => {
    const first = await open(f);
    await first.rememberFailure(nameErrorFailure("t256", GOAL_A, "a"));
    await first.close();
    // Rows of another embedder are re-embedded unless memory.embedder.reembed is off
    // (tests/memory/api-embedder.test.ts); until then recall never compares them.
    const small = await openMemoryStore({
      config: {
        ...f.config,
        memory: { ...f.config.memory, embedder: { ...f.config.memory.embedder, reembed: false } },
      },
      log,
      embedder: createHashingEmbedder({ dimensions: 128 }),
    });
    try {
      const req = {
        v: 1 as const,
        taskId: "q",
        language: "python" as const,
        text: GOAL_A,
        errorText: "NameError: name 'a' is not defined",
      };
      expect((await small.recall(req)).failures).toEqual([]);
      await small.rememberFailure(nameErrorFailure("t128", GOAL_A, "a"));
      const r = await small.recall(req);
      expect(r.embedder).toBe("hash-v1-128");
      expect(r.failures.map((x) => x.taskId)).toEqual(["t128"]);
      expect((await small.stats()).failures).toBe(2);
    } finally {
      await small.close();
    }
  });

  test("stores nothing new for a repeated idempotency key", async (f) => {
    const store = await open(f);
    try {
      const rec = nameErrorFailure("idem", GOAL_A, "q");
      const one = await store.rememberFailure(rec);
      const two = await store.rememberFailure({ ...rec, goal: "changed", errorText: "TypeError: other" });
      expect(two).toEqual(one);
      const success = {
        v: 1 as const,
        taskId: "idem",
        iteration: 2,
        idempotencyKey: "idem/2/remember_success",
        language: "python" as const,
        goal: GOAL_A,
        files: [{ path: "solution.py", content: "def f(): pass\n" }],
      };
      const s1 = await store.rememberSuccess(success);
      const s2 = await store.rememberSuccess(success);
      expect(s2).toEqual(s1);
      const stats = await store.stats();
      expect(stats.failures).toBe(1);
      expect(stats.successes).toBe(1);
    } finally {
      await store.close();
    }
  });

  test("recalls successes, records tasks, lists history newest first and computes stats", async (f) => {
    const store = await open(f);
    try {
      const files = [{ path: "solution.py", content: "def has_close_elements(n, t):\n    return False\n" }];
      await store.rememberSuccess({
        v: 1,
        taskId: "s1",
        iteration: 3,
        idempotencyKey: "s1/3/remember_success",
        language: "python",
        goal: GOAL_A,
        files,
      });
      await store.rememberSuccess({
        v: 1,
        taskId: "s2",
        iteration: 1,
        idempotencyKey: "s2/1/remember_success",
        language: "python",
        goal: GOAL_B,
        files,
      });
      const r = await store.recall({ v: 1, taskId: "new", language: "python", text: GOAL_A, k: 1 });
      expect(r.signature).toBeUndefined();
      expect(r.successes).toHaveLength(1);
      expect(r.successes[0]).toMatchObject({ taskId: "s1", goal: GOAL_A, files });
      expect(r.successes[0]!.similarity).toBeCloseTo(1, 5);

      const plan = { ...usage, calls: 1, inputTokens: 100, outputTokens: 10, costUsd: 0.05 };
      const build = { ...usage, calls: 2, inputTokens: 300, outputTokens: 40, costUsd: 0.2 };
      const task = {
        v: 1 as const,
        goal: GOAL_A,
        language: "python" as const,
        stopReason: "passed",
        usage,
        usageByRole: { plan, build },
        durationMs: 1234,
        scripted: true,
      };
      await store.recordTask({
        ...task,
        taskId: "t1",
        status: "passed",
        iterations: 2,
        finishedAt: "2025-01-01T10:00:00Z",
      });
      await store.recordTask({
        ...task,
        taskId: "t2",
        status: "failed",
        stopReason: "max_iterations",
        iterations: 5,
        finishedAt: "2025-01-02T10:00:00Z",
      });
      await store.recordTask({
        ...task,
        taskId: "t3",
        status: "passed",
        iterations: 4,
        finishedAt: "2025-01-03T10:00:00Z",
      });
      const history = await store.history({ v: 1, limit: 2 });
      expect(history.tasks.map((t) => t.taskId)).toEqual(["t3", "t2"]);
      expect(history.tasks[1]).toEqual({
        ...task,
        taskId: "t2",
        status: "failed",
        stopReason: "max_iterations",
        iterations: 5,
        finishedAt: "2025-01-02T10:00:00.000Z",
      });
      expect((await store.history({ v: 1 })).tasks).toHaveLength(3);
      expect(await store.stats()).toMatchObject({
        tasks: 3,
        passed: 2,
        failures: 0,
        successes: 2,
        meanIterationsToPass: 3,
        totalCostUsd: 0.75,
        // Per role, summed over the three tasks.
        usageByRole: {
          build: {
            ...build,
            calls: 6,
            inputTokens: 900,
            outputTokens: 120,
            costUsd: expect.closeTo(0.6, 9),
            latencyMs: build.latencyMs * 3,
          },
          plan: {
            ...plan,
            calls: 3,
            inputTokens: 300,
            outputTokens: 30,
            costUsd: expect.closeTo(0.15, 9),
            latencyMs: plan.latencyMs * 3,
          },
        },
        backend: f.backend,
      });
    } finally {
      await store.close();
    }
  });

  test("answers bad input with bad_request and an unknown failure with not_found, losing nothing", async (f) => {
    const store = await open(f);
    try {
      await store.rememberFailure(nameErrorFailure("keep", GOAL_A, "z"));
      expect((await errorOf(store.recall({ v: 1, taskId: "bad id!", language: "python", text: "x" }))).code).toBe(
        "bad_request",
      );
      expect(
        (await errorOf(store.rememberFailure({ ...nameErrorFailure("x", GOAL_A, "y"), language: "cobol" as never })))
          .code,
      ).toBe("bad_request");
      const badDate = await errorOf(
        store.recordTask({
          v: 1,
          taskId: "d",
          goal: "g",
          language: "python",
          status: "passed",
          stopReason: "passed",
          iterations: 1,
          usage,
          durationMs: 1,
          scripted: false,
          finishedAt: "yesterday",
        }),
      );
      expect(badDate.code).toBe("bad_request");
      const fix = {
        v: 1 as const,
        taskId: "keep",
        iteration: 1,
        idempotencyKey: "keep/1/attach_fix",
        reflection: fixPlan,
      };
      expect((await errorOf(store.attachFix({ ...fix, failureId: "999999" }))).code).toBe("not_found");
      expect((await errorOf(store.attachFix({ ...fix, failureId: "1; DROP TABLE x" }))).code).toBe("not_found");
      expect(await store.stats()).toMatchObject({ failures: 1, tasks: 0 });
    } finally {
      await store.close();
    }
  });

  test("keeps memory across close and reopen, so a second run recalls the first run's failure", async (f) => {
    const run1 = await open(f);
    const { id } = await run1.rememberFailure(nameErrorFailure("humaneval-0", GOAL_A, "numbrs"));
    await run1.attachFix({
      v: 1,
      taskId: "humaneval-0",
      iteration: 1,
      idempotencyKey: "humaneval-0/1/attach_fix",
      failureId: id,
      reflection: fixPlan,
    });
    await run1.close();
    await run1.close(); // safe twice

    const run2 = await open(f);
    try {
      const err = "NameError: name 'balance_' is not defined";
      const r = await run2.recall({
        v: 1,
        taskId: "humaneval-3",
        language: "python",
        text: `${GOAL_B}\n${err}`,
        errorText: err,
      });
      expect(r.failures).toHaveLength(1);
      expect(r.failures[0]).toMatchObject({ id, taskId: "humaneval-0", reflection: fixPlan });
    } finally {
      await run2.close();
    }
  });

  test("creates cosine HNSW indexes per embedder that the recall query can use", async (f) => {
    const embedder = createHashingEmbedder();
    const db = await openDatabase({ config: f.config, log, embedders: [embedder] });
    try {
      const { rows } = await db.pool.query<{ indexname: string; indexdef: string }>(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'loopsmith' AND indexdef ILIKE '%USING hnsw%' ORDER BY indexname",
      );
      expect(rows.map((r) => r.indexname)).toEqual([
        hnswIndexName("failures", embedder.id),
        hnswIndexName("successes", embedder.id),
      ]);
      for (const r of rows) {
        expect(r.indexdef).toContain("vector_cosine_ops");
        expect(r.indexdef).toContain("hash-v1-256");
      }
      const client = await db.pool.connect();
      try {
        await client.query("SET enable_seqscan = off");
        const zero = `[${new Array(256)
          .fill(0)
          .map((_, i) => (i === 0 ? 1 : 0))
          .join(",")}]`;
        const plan = await client.query(
          `EXPLAIN SELECT id FROM loopsmith.failures WHERE embedder = 'hash-v1-256' AND language = 'python'
            ORDER BY (embedding::vector(256)) <=> '${zero}'::vector(256) LIMIT 3`,
        );
        const text = plan.rows.map((r: Record<string, string>) => Object.values(r)[0]).join("\n");
        expect(text).toContain(hnswIndexName("failures", embedder.id));
        await client.query("RESET enable_seqscan");
      } finally {
        client.release();
      }
      const migrations = await db.pool.query("SELECT name FROM loopsmith.memory_migrations ORDER BY run_on, id");
      expect(migrations.rows.map((r: { name: string }) => r.name)).toEqual([
        "1767225600000_memory-init",
        "1767312000000_usage-by-role",
        "1767398400000_runs",
        "1767571200000_recall-log",
        "1767657600000_recall-hybrid",
        "1767744000000_owners",
        "1767830400000_lessons",
      ]);
    } finally {
      await db.close();
    }
  });

  test("ranks the failure with the same cause first among failures of the same test, error and goal", async (f) => {
    const store = await open(f);
    try {
      const past = (name: keyof typeof BELOW_ZERO_MUTANTS, addr: string) => ({
        ...nameErrorFailure(`past-${name}`, GOAL_B, "x"),
        errorText: belowZeroAssert(addr),
        failingTests: ["test_below_zero"],
        code: BELOW_ZERO_MUTANTS[name],
      });
      for (const [name, addr] of [
        ["bound", "0x7f01"],
        ["sub", "0x7f02"],
        ["early", "0x7f03"],
      ] as const)
        await store.rememberFailure(past(name, `${addr}aa00`));
      // Decoys: the same code with another goal and error, and an unrelated failure.
      await store.rememberFailure({ ...nameErrorFailure("decoy-code", GOAL_A, "y"), code: BELOW_ZERO_MUTANTS.sub });
      await store.rememberFailure({
        ...nameErrorFailure("decoy-zero", "Write mean(xs).", "z"),
        errorText: "ZeroDivisionError: division by zero",
      });
      for (const name of ["bound", "sub", "early"] as const) {
        const now = past(name, "0x7fffbb00");
        const r = await store.recall({
          v: 1,
          taskId: "now",
          language: "python",
          text: GOAL_B,
          errorText: now.errorText,
          failingTests: now.failingTests,
          code: now.code,
          k: 5,
        });
        expect(r.failures[0]?.taskId).toBe(`past-${name}`);
        expect(r.signature).toBe("AssertionError: assert False == True");
        expect(r.failures[0]?.key).toBe(
          "AssertionError: assert False == True | test test_below_zero | assert candidate([1, 2, -4, 5]) == True",
        );
      }
      // Without the code, the three same-goal, same-error failures come before the decoys.
      const blind = await store.recall({
        v: 1,
        taskId: "now",
        language: "python",
        text: GOAL_B,
        errorText: belowZeroAssert("0x7fffbb00"),
        k: 5,
      });
      expect(new Set(blind.failures.slice(0, 3).map((x) => x.taskId))).toEqual(
        new Set(["past-bound", "past-sub", "past-early"]),
      );
    } finally {
      await store.close();
    }
  });

  test("never recalls the asking task's own failures or successes unless asked, and tells what fixed a failure", async (f) => {
    const store = await open(f);
    try {
      const files = [{ path: "solution.py", content: "def below_zero(ops):\n    return min(0, *ops) < 0\n" }];
      const own = await store.rememberFailure(nameErrorFailure("loop-a", GOAL_B, "balanse"));
      await store.attachFix({
        v: 1,
        taskId: "loop-a",
        iteration: 1,
        idempotencyKey: "loop-a/1/attach_fix",
        failureId: own.id,
        reflection: fixPlan,
      });
      const success = await store.rememberSuccess({
        v: 1,
        taskId: "loop-a",
        iteration: 2,
        idempotencyKey: "loop-a/2/remember_success",
        language: "python",
        goal: GOAL_B,
        files,
      });
      await store.rememberFailure({
        ...nameErrorFailure("loop-b", GOAL_A, "numbrs"),
        iteration: 3,
        idempotencyKey: "loop-b/3/remember_failure",
      });
      const err = nameErrorFailure("loop-a", GOAL_B, "balanse").errorText;
      const mine = await store.recall({
        v: 1,
        taskId: "loop-a",
        language: "python",
        text: GOAL_B,
        errorText: err,
        k: 5,
      });
      expect(mine.failures.map((x) => x.taskId)).toEqual(["loop-b"]);
      expect(mine.successes).toEqual([]);
      const asked = await store.recall({
        v: 1,
        taskId: "loop-a",
        language: "python",
        text: GOAL_B,
        errorText: err,
        k: 5,
        excludeSameTask: false,
      });
      expect(asked.failures.map((x) => x.taskId)).toEqual(["loop-a", "loop-b"]);
      expect(asked.successes.map((x) => x.id)).toEqual([success.id]);
      const other = await store.recall({
        v: 1,
        taskId: "loop-c",
        language: "python",
        text: GOAL_B,
        errorText: err,
        k: 5,
      });
      expect(other.failures[0]).toMatchObject({
        id: own.id,
        reflection: fixPlan,
        fixedBy: { successId: success.id, iteration: 2, files },
      });
      expect(other.failures[1]).toMatchObject({ taskId: "loop-b", fixedBy: null });
    } finally {
      await store.close();
    }
  });

  test("decodes JUnit entities in error text before signing, storing and recalling it", async (f) => {
    const store = await open(f);
    try {
      const encoded = belowZeroAssert("0x7f0000aa");
      const stored = await store.rememberFailure({
        ...nameErrorFailure("xml-a", GOAL_B, "q"),
        errorText: encoded,
        outputTail: "a &lt; b",
      });
      expect(stored.signature).toBe("AssertionError: assert False == True");
      const [row] = (await store.failures({ v: 1, taskId: "xml-a" })).failures;
      expect(row?.errorText).toContain("assert False == True\n +  where False = <function below_zero");
      expect(row?.errorText).not.toContain("&#10;");
      const decoded = encoded.replace("&#10;", "\n");
      const r = await store.recall({
        v: 1,
        taskId: "xml-b",
        language: "python",
        text: GOAL_B,
        errorText: decoded,
        k: 1,
      });
      expect(r.signature).toBe(stored.signature);
      expect(r.failures[0]).toMatchObject({ id: stored.id, signature: stored.signature });
    } finally {
      await store.close();
    }
  });
}
