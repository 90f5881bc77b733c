/** Bulk inserts of failures, on embedded PGlite (no container needed). */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { loadConfig } from "@loopsmith/shared/runtime";
import { type FailureRecord } from "@loopsmith/shared/contracts";
import { insertFailures } from "./bulk.js";
import { embeddingExpr, FAILURES_TEXT_INDEXES, hnswIndexName, openDatabase, type Database } from "./db.js";
import { createHashingEmbedder } from "./embedder.js";
import { createMemoryStore, type MemoryStore } from "./store.js";

const log = pino({ level: "silent" });
const embedder = createHashingEmbedder();
let dir: string;
let db: Database;
let store: MemoryStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "loopsmith-bulk-"));
  db = await openDatabase({ config: loadConfig({ env: { LOOPSMITH_DATA_DIR: dir } }), log, embedders: [embedder] });
  store = createMemoryStore(db, embedder, log);
}, 60_000);
afterAll(async () => {
  await db.close();
  await rm(dir, { recursive: true, force: true });
});

function failure(taskId: string, i: number, name = `value_${i}`): FailureRecord {
  return {
    v: 1,
    taskId,
    iteration: i,
    idempotencyKey: `${taskId}/${i}/remember_failure`,
    language: i % 2 === 0 ? "python" : "javascript",
    goal: `Write sum_${i}(numbers): return the sum of the numbers below ${i}.`,
    errorText: `Traceback (most recent call last):\n  File "/workspace/${taskId}/solution.py", line ${i}, in f\nNameError: name '${name}' is not defined`,
    failingTests: [`test_solution.py::test_${i}`],
    outputTail: "1 failed",
    status: "failed",
    ...(i === 3
      ? {
          reflection: { rootCause: "r", hypothesis: "h", fixPlan: "p" },
          code: `def sum_${i}(numbers):\n    return ${name} <= 3  # why\n`,
        }
      : {}),
  };
}

const count = async (taskId: string): Promise<number> =>
  Number(
    (
      await db.pool.query<{ n: string }>("SELECT count(*)::text AS n FROM loopsmith.failures WHERE task_id = $1", [
        taskId,
      ])
    ).rows[0]?.n,
  );

describe("insertFailures", () => {
  it("stores every row over several statements, each as rememberFailure would store it", async () => {
    const records = Array.from({ length: 20 }, (_, i) => failure("bulk-a", i + 1));
    const res = await insertFailures(db, embedder, records, { batchSize: 7 });
    expect(res.stored).toBe(20);
    expect(res.results).toHaveLength(20);
    expect(new Set(res.results.map((r) => r.id)).size).toBe(20);
    expect(res.results[0]?.signature).toBe("NameError: name <id> is not defined");
    expect(await count("bulk-a")).toBe(20);

    // The same record through the store, under another key: same columns, same embedding.
    const one = await store.rememberFailure({
      ...failure("bulk-a", 3),
      taskId: "bulk-b",
      idempotencyKey: "bulk-b/3/remember_failure",
    });
    const { rows } = await db.pool.query<Record<string, unknown>>(
      `SELECT a.signature = b.signature AND a.error_type = b.error_type AND a.error_text = b.error_text
              AND a.failing_tests = b.failing_tests AND a.reflection = b.reflection AND a.embedder = b.embedder
              AND a.language = b.language AND a.output_tail = b.output_tail AND a.code = b.code
              AND a.signature_key = b.signature_key AND a.recall_goal = b.recall_goal
              AND a.recall_error = b.recall_error AND a.recall_code = b.recall_code AND a.fts_code = b.fts_code
              AND a.recall_code <> '' AS same,
              ${embeddingExpr(256).replace("embedding", "a.embedding")} <=> ${embeddingExpr(256).replace("embedding", "b.embedding")} AS distance
         FROM loopsmith.failures a, loopsmith.failures b WHERE a.id = $1::bigint AND b.id = $2::bigint`,
      [res.results[2]?.id, one.id],
    );
    expect(rows[0]?.same).toBe(true);
    expect(Number(rows[0]?.distance)).toBeLessThan(1e-6);
  });

  it("stores a key once: repeats in a call and keys stored before get the first row", async () => {
    const before = await store.rememberFailure(failure("bulk-c", 1, "stored_first"));
    const records = [
      failure("bulk-c", 1, "ignored"),
      failure("bulk-c", 2),
      failure("bulk-c", 2, "repeat"),
      failure("bulk-c", 3),
    ];
    const first = await insertFailures(db, embedder, records);
    expect(first.stored).toBe(2);
    expect(first.results[0]).toEqual(before);
    expect(first.results[2]).toEqual(first.results[1]);
    expect(await count("bulk-c")).toBe(3);
    // The whole call again stores nothing and answers the same.
    const again = await insertFailures(db, embedder, records);
    expect(again).toMatchObject({ stored: 0, analysed: false });
    expect(again.results).toEqual(first.results);
    // rememberFailure agrees with what the bulk insert stored.
    await expect(store.rememberFailure(failure("bulk-c", 3, "other"))).resolves.toEqual(first.results[3]);
  });

  it("refuses an invalid record or batch size before storing anything", async () => {
    const bad = { ...failure("bulk-d", 2), language: "cobol" };
    const err = await insertFailures(db, embedder, [failure("bulk-d", 1), bad as FailureRecord]).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: "bad_request" });
    expect((err as Error).message).toContain("index 1");
    await expect(insertFailures(db, embedder, [failure("bulk-d", 1)], { batchSize: 0 })).rejects.toMatchObject({
      code: "bad_request",
    });
    expect(await count("bulk-d")).toBe(0);
    await expect(insertFailures(db, embedder, [])).resolves.toEqual({
      results: [],
      stored: 0,
      analysed: false,
      buildMs: 0,
      textIndexMs: 0,
    });
  });

  it("rebuildIndex drops the HNSW and full-text indexes for the load and builds them again as they were", async () => {
    const def = async (): Promise<string | undefined> =>
      (
        await db.pool.query<{ def: string }>("SELECT indexdef AS def FROM pg_indexes WHERE indexname = $1", [
          hnswIndexName("failures", embedder.id),
        ])
      ).rows[0]?.def;
    const textDefs = async (): Promise<string[]> =>
      (
        await db.pool.query<{ def: string }>(
          "SELECT indexdef AS def FROM pg_indexes WHERE indexname = ANY($1::text[]) ORDER BY indexname",
          [FAILURES_TEXT_INDEXES.map((i) => i.name)],
        )
      ).rows.map((r) => r.def);
    const textBefore = await textDefs();
    expect(textBefore).toHaveLength(3);
    expect(textBefore.every((d) => d.includes("USING gin (fts_"))).toBe(true);
    const settings = async (): Promise<string> =>
      (
        await db.pool.query<{ s: string }>(
          "SELECT current_setting('maintenance_work_mem') || ' ' || current_setting('max_parallel_maintenance_workers') AS s",
        )
      ).rows[0]?.s ?? "";
    const before = await def();
    const settingsBefore = await settings();
    expect(before).toContain("ef_construction");
    const res = await insertFailures(
      db,
      embedder,
      Array.from({ length: 30 }, (_, i) => failure("bulk-g", i + 1)),
      { rebuildIndex: true, batchSize: 10 },
    );
    expect(res.stored).toBe(30);
    expect(res.buildMs).toBeGreaterThan(0);
    expect(res.textIndexMs).toBeGreaterThan(0);
    expect(await def()).toBe(before);
    expect(await textDefs()).toEqual(textBefore);
    // Full-text search finds the loaded rows through the rebuilt index.
    const { rows: found } = await db.pool.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM loopsmith.failures WHERE task_id = 'bulk-g' AND fts_goal @@ to_tsquery('simple', 'sum')",
    );
    expect(found[0]?.n).toBe("30");
    expect(await count("bulk-g")).toBe(30);
    // The build's memory and worker settings do not outlive it (PGlite shares one session).
    expect(await settings()).toBe(settingsBefore);
    const plain = await insertFailures(db, embedder, [failure("bulk-g", 31)]);
    expect(plain).toMatchObject({ buildMs: 0, textIndexMs: 0 });
  });

  it("opening builds a full-text index a bulk load dropped and never built again", async () => {
    await db.pool.query(`DROP INDEX loopsmith.${FAILURES_TEXT_INDEXES[1]?.name ?? ""}`);
    await db.close();
    db = await openDatabase({ config: loadConfig({ env: { LOOPSMITH_DATA_DIR: dir } }), log, embedders: [embedder] });
    store = createMemoryStore(db, embedder, log);
    const { rows } = await db.pool.query<{ name: string }>(
      "SELECT indexname AS name FROM pg_indexes WHERE indexname = ANY($1::text[])",
      [FAILURES_TEXT_INDEXES.map((i) => i.name)],
    );
    expect(rows.map((r) => r.name).sort()).toEqual(FAILURES_TEXT_INDEXES.map((i) => i.name).sort());
  }, 60_000);

  it("analyses the table once enough rows changed (50 + 10 %)", async () => {
    await db.pool.query("ANALYZE loopsmith.failures");
    const reltuples = async (): Promise<number> =>
      Number(
        (
          await db.pool.query<{ n: number }>(
            "SELECT reltuples::float8 AS n FROM pg_class WHERE oid = 'loopsmith.failures'::regclass",
          )
        ).rows[0]?.n,
      );
    const seen = await reltuples();
    const few = await insertFailures(
      db,
      embedder,
      Array.from({ length: 5 }, (_, i) => failure("bulk-e", i + 1)),
    );
    expect(few.analysed).toBe(false);
    expect(await reltuples()).toBe(seen);
    const many = await insertFailures(
      db,
      embedder,
      Array.from({ length: 120 }, (_, i) => failure("bulk-f", i + 1)),
    );
    expect(many.analysed).toBe(true);
    expect(await reltuples()).toBe(seen + 125);
  });
});
