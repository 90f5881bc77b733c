/**
 * `loopsmith reset` against the real stores memory uses: PostgreSQL 17 + pgvector
 * (testcontainers, a fresh database per test) and embedded PGlite (a fresh data directory).
 * Memory is filled through the store as the memory service fills it; the reset runs through
 * the command's own function, reached the way the CLI reaches the store (`DATABASE_URL`, or
 * `LOOPSMITH_DATA_DIR`); what is left is read back through the store.
 */
import { afterAll, describe, expect, it as plain, vi } from "vitest";
import type { Config } from "@loopsmith/shared/runtime";
import { assembleRun, openMemoryStore, resetMemory, openDatabase } from "@loopsmith/memory";
import { resetCommand } from "../../cli/src/reset.js";
import { it } from "../fixtures/index.js";
import { freshDataDir, freshDatabase, removeFreshDirs } from "./fresh.js";
import { finishedTask } from "./runs-suite.js";
import { GOAL_A, log, nameErrorFailure } from "./suite.js";

afterAll(removeFreshDirs);

const yes = { terminal: false, ask: async () => "n" };

/** Fills memory as tasks would: two tasks recorded with their runs, a failure with its fix, a success, a recall. */
async function fill(config: Config): Promise<void> {
  const store = await openMemoryStore({ config, log });
  try {
    for (const id of ["t-reset-1", "t-reset-2"]) {
      const { record, events } = finishedTask(id);
      await store.recordTask(record);
      await store.saveRun(assembleRun(record, { events, complete: true }, new Date().toISOString()));
    }
    const failure = await store.rememberFailure(nameErrorFailure("t-reset-1", GOAL_A, "totl"));
    await store.attachFix({
      v: 1,
      taskId: "t-reset-1",
      iteration: 1,
      idempotencyKey: "t-reset-1/1/attach_fix",
      failureId: failure.id,
      reflection: { rootCause: "a misspelt name", hypothesis: "renamed once", fixPlan: "use total" },
    });
    await store.rememberSuccess({
      v: 1,
      taskId: "t-reset-1",
      iteration: 2,
      idempotencyKey: "t-reset-1/2/remember_success",
      language: "python",
      goal: GOAL_A,
      files: [{ path: "solution.py", content: "def f():\n    return 1\n" }],
    });
    const recall = await store.recall({
      v: 1,
      taskId: "t-reset-2",
      language: "python",
      text: GOAL_A,
      errorText: "NameError: name 'totl' is not defined",
      k: 3,
    });
    expect(recall.failures.length).toBeGreaterThan(0);
    expect(await store.logRecall("t-reset-2", recall)).toBe(true);
  } finally {
    await store.close();
  }
}

/** What memory holds, read through the store: what history, show, failures, recall and stats see. */
async function contents(config: Config) {
  const store = await openMemoryStore({ config, log });
  try {
    const stats = await store.stats();
    const recall = await store.recall({ v: 1, taskId: "t-other", language: "python", text: GOAL_A, k: 3 });
    return {
      tasks: (await store.history({ v: 1, limit: 10 })).tasks.map((t) => t.taskId).sort(),
      run: await store.run("t-reset-1").then(
        (r) => r.taskId,
        (e: { code?: string }) => e.code,
      ),
      failures: (await store.failures({ v: 1, limit: 10 })).failures.length,
      recalledSuccesses: recall.successes.length,
      recallLog: stats.recall.recalls,
    };
  } finally {
    await store.close();
  }
}

const full = {
  tasks: ["t-reset-1", "t-reset-2"],
  run: "t-reset-1",
  failures: 1,
  recalledSuccesses: 1,
  recallLog: 1,
};
const empty = { tasks: [], run: "not_found", failures: 0, recalledSuccesses: 0, recallLog: 0 };

/** Runs the command's function with `env` set, printing into a buffer. */
async function reset(env: Record<string, string>, flags: Parameters<typeof resetCommand>[0]) {
  for (const [k, v] of Object.entries(env)) vi.stubEnv(k, v);
  const out: string[] = [];
  const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => (out.push(String(chunk)), true));
  try {
    const code = await resetCommand({ yes: true, ...flags }, log, yes);
    return { code, out: out.join("") };
  } finally {
    write.mockRestore();
    vi.unstubAllEnvs();
  }
}

describe("reset on PostgreSQL + pgvector (DATABASE_URL)", () => {
  it("--memory empties failures, successes and the recall log and keeps the history; --history then empties that", async ({
    postgres,
  }) => {
    const { config } = await freshDatabase(postgres);
    await fill(config);
    expect(await contents(config)).toEqual(full);
    const env = { DATABASE_URL: config.databaseUrl!, LOOPSMITH_DATA_DIR: "/nonexistent-loopsmith-data" };
    const host = new URL(config.databaseUrl!);
    const where = `postgres ${host.host}${host.pathname}`;

    const memory = await reset(env, { memory: true });
    expect(memory).toEqual({
      code: 0,
      out: `removed from ${where}: memory: 1 failure, 1 success, 1 recall record\n`,
    });
    expect(memory.out).not.toContain(host.password);
    expect(await contents(config)).toEqual({ ...full, failures: 0, recalledSuccesses: 0, recallLog: 0 });

    const history = await reset(env, { history: true, json: true });
    expect(history.code).toBe(0);
    expect(JSON.parse(history.out)).toEqual({
      kind: "reset",
      store: where,
      memory: false,
      history: true,
      removed: { failures: 0, successes: 0, recalls: 0, tasks: 2, runs: 2 },
    });
    expect(await contents(config)).toEqual(empty);

    // Memory goes on working after a reset: a new task is stored and read back.
    const store = await openMemoryStore({ config, log });
    try {
      await store.recordTask(finishedTask("t-after").record);
      expect((await store.history({ v: 1, limit: 10 })).tasks.map((t) => t.taskId)).toEqual(["t-after"]);
    } finally {
      await store.close();
    }
  });

  it("removes nothing when the database refuses part of it (one of the tables is gone)", async ({ postgres }) => {
    const { config } = await freshDatabase(postgres);
    await fill(config);
    const db = await openDatabase({ config, log, embedders: [] });
    try {
      await db.pool.query("ALTER TABLE loopsmith.runs RENAME TO runs_moved");
      const err = await resetMemory(db.pool, { memory: true, history: true }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: "db_error" });
      expect((err as Error).message).toMatch(/^memory could not empty failures, successes, recalls, tasks, runs: /);
      await db.pool.query("ALTER TABLE loopsmith.runs_moved RENAME TO runs");
    } finally {
      await db.close();
    }
    expect(await contents(config)).toEqual(full);
  });
});

describe("reset on embedded PGlite (LOOPSMITH_DATA_DIR)", () => {
  plain("with neither flag empties memory and history; a second reset finds nothing left", async () => {
    const { config } = await freshDataDir();
    await fill(config);
    const env = { DATABASE_URL: "", LOOPSMITH_DATA_DIR: config.dataDir };
    const where = `${config.dataDir}/memory`;
    expect(await reset(env, {})).toEqual({
      code: 0,
      out: `removed from ${where}: memory: 1 failure, 1 success, 1 recall record; history: 2 tasks, 2 recorded runs\n`,
    });
    expect(await contents(config)).toEqual(empty);
    expect((await reset(env, {})).out).toBe(
      `removed from ${where}: memory: 0 failures, 0 successes, 0 recall records; history: 0 tasks, 0 recorded runs\n`,
    );
  });

  plain(
    "refuses while the embedded memory is open elsewhere (a running memory service), and removes nothing",
    async () => {
      const { config } = await freshDataDir();
      await fill(config);
      const holder = await openMemoryStore({ config, log });
      try {
        const err = await reset({ DATABASE_URL: "", LOOPSMITH_DATA_DIR: config.dataDir }, {}).catch((e: unknown) => e);
        expect(err).toMatchObject({ code: "bad_request" });
        expect((err as Error).message).toMatch(/is in use by .*; a loopsmith command running its own stack/);
      } finally {
        await holder.close();
      }
      expect(await contents(config)).toEqual(full);
    },
  );
});
