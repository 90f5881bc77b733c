/**
 * Bulk inserts on real PostgreSQL + pgvector (the configured image, started with
 * testcontainers): the COPY path stores exactly the rows the INSERT path and `rememberFailure`
 * store, and keeps the idempotency rules, including a key stored by another writer meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import pino from "pino";
import { loadConfig } from "@loopsmith/shared/runtime";
import { type FailureRecord } from "@loopsmith/shared/contracts";
import { startPostgres, type Started } from "../fixtures/containers.js";
import { insertFailures } from "../../services/memory/src/bulk.js";
import { openDatabase, type Database } from "../../services/memory/src/db.js";
import { createHashingEmbedder } from "../../services/memory/src/embedder.js";
import { copyBinary, vectorArrayParam, vectorTypeOid } from "../../services/memory/src/pg-binary.js";
import { createMemoryStore, type MemoryStore } from "../../services/memory/src/store.js";

const log = pino({ level: "silent" });
const embedder = createHashingEmbedder();
let postgres: Started;
let db: Database;
let store: MemoryStore;

beforeAll(async () => {
  postgres = await startPostgres();
  db = await openDatabase({ config: loadConfig({ env: { DATABASE_URL: postgres.url } }), log, embedders: [embedder] });
  store = createMemoryStore(db, embedder, log);
}, 180_000);
afterAll(async () => {
  await db?.close();
  await postgres?.stop();
}, 60_000);

/**
 * Varied records: tabs, newlines, backslashes, quotes and non-ASCII text; with and without code,
 * reflection and owner. Nothing but the key depends on `taskId`, so rows of two tasks compare.
 */
function failure(taskId: string, i: number): FailureRecord {
  return {
    v: 1,
    taskId,
    iteration: i,
    idempotencyKey: `${taskId}/${i}/remember_failure`,
    language: i % 2 === 0 ? "python" : "javascript",
    goal: `Write f_${i}(xs):\treturn the "sum" of xs — ünïcode ${"\\"}n ${i}`,
    errorText: `Traceback (most recent call last):\n  File "/workspace/task/solution.py", line ${i}, in f_${i}\nNameError: name 'v_${i}' is not defined\r\n`,
    failingTests: [`test_solution.py::test_${i}`, `tab\there "q" ${"\\"}`],
    outputTail: `1 failed\n\\N ${i}`,
    status: "failed",
    ...(i % 3 === 0 ? { reflection: { rootCause: "r\tc", hypothesis: "h", fixPlan: "p" } } : {}),
    ...(i % 4 === 0 ? { code: `def f_${i}(xs):\n    return sum(xs) <= ${i}  # why\n` } : {}),
    ...(i % 5 === 0 ? { owner: "alice" } : {}),
  };
}

/** Every stored column except the row's id, key, task and time, as text, by iteration. */
async function storedRows(taskId: string): Promise<Map<number, string>> {
  const { rows } = await db.pool.query<{ iteration: number; row: string }>(
    `SELECT iteration, (language, goal, signature, error_type, error_text, failing_tests, output_tail, status, reflection,
             embedder, embedding::text, embedding::real[]::text, code, signature_key, recall_goal, recall_error, recall_code,
             fts_goal, fts_error, fts_code, owner, fixed_at)::text AS row
       FROM loopsmith.failures WHERE task_id = $1`,
    [taskId],
  );
  return new Map(rows.map((r) => [r.iteration, r.row]));
}

type Query = (this: pg.Client, ...args: unknown[]) => unknown;

/**
 * Watches every query any `pg` client runs (the pool's included) until `stop`: records its text
 * (to tell COPY from INSERT) and lets `around` wrap its result.
 */
function watchQueries(around?: (client: pg.Client, text: string, result: unknown) => unknown): {
  texts: string[];
  stop: () => void;
} {
  const texts: string[] = [];
  const original = pg.Client.prototype.query as unknown as Query;
  (pg.Client.prototype as unknown as { query: Query }).query = function (this: pg.Client, ...args: unknown[]) {
    const first = args[0] as { text?: string } | string;
    const text = typeof first === "string" ? first : (first.text ?? "");
    texts.push(text);
    const result = original.apply(this, args);
    return around ? around(this, text, result) : result;
  };
  return { texts, stop: () => ((pg.Client.prototype as unknown as { query: Query }).query = original) };
}

describe("insertFailures on PostgreSQL", () => {
  it("stores by COPY exactly the rows INSERT … unnest and rememberFailure store", async () => {
    const records = (taskId: string): FailureRecord[] => Array.from({ length: 24 }, (_, i) => failure(taskId, i + 1));
    const seen = watchQueries();
    let copied;
    try {
      copied = await insertFailures(db, embedder, records("pg-copy"), { batchSize: 10 });
    } finally {
      seen.stop();
    }
    expect(seen.texts.filter((t) => t.startsWith("COPY loopsmith.failures")).length).toBe(3);
    expect(seen.texts.some((t) => t.startsWith("INSERT INTO loopsmith.failures"))).toBe(false);
    const inserted = await insertFailures(db, embedder, records("pg-insert"), { batchSize: 10, copy: false });
    expect([copied.stored, inserted.stored]).toEqual([24, 24]);
    for (const rec of records("pg-single")) await store.rememberFailure(rec);

    const [viaCopy, viaInsert, viaStore] = await Promise.all(["pg-copy", "pg-insert", "pg-single"].map(storedRows));
    expect(viaCopy?.size).toBe(24);
    expect(viaCopy).toEqual(viaInsert);
    expect(viaCopy).toEqual(viaStore);
    // Results name the rows COPY stored, in input order.
    const { rows } = await db.pool.query<{ id: string; iteration: number; signature: string }>(
      "SELECT id::text AS id, iteration, signature FROM loopsmith.failures WHERE task_id = 'pg-copy' ORDER BY iteration",
    );
    expect(copied.results).toEqual(rows.map((r) => ({ id: r.id, signature: r.signature })));
  });

  it("sends a vector's floats as PostgreSQL parses their text, halfway numbers included (vector[] and COPY)", async () => {
    // 1 + 2^-24 is halfway between two 4-byte floats: Math.fround gives 1, PostgreSQL's parse
    // of its text "1.0000000596046448" gives 1 + 2^-23. Random numbers besides.
    let seed = 7;
    const random = (): number => ((seed = (Math.imul(seed, 48271) >>> 0) % 2147483647) / 2147483647) * 2 - 1;
    const vectors = [
      [1 + 2 ** -24, -(0.5 + 2 ** -25), -0, 0.1],
      ...Array.from({ length: 50 }, () => Array.from({ length: 4 }, random)),
    ];
    const texts = vectors.map((v) => JSON.stringify(v)); // what pgvector's toSql sends
    const oid = await vectorTypeOid(db.pool);
    const { rows } = await db.pool.query<{ same: boolean }>(
      "SELECT b::text = t::vector::text AND b = t::vector AS same FROM unnest($1::vector[], $2::text[]) AS u(b, t)",
      [vectorArrayParam(vectors, 4, oid), texts],
    );
    expect(rows.map((r) => r.same)).toEqual(vectors.map(() => true));
    const client = await db.pool.connect();
    try {
      await client.query("CREATE TEMP TABLE copied (n int, e vector)");
      const data = copyBinary(
        ["int4", "vector"],
        vectors.map((v, i) => [i, v]),
        4,
      );
      await pipeline(Readable.from([data]), client.query(copyFrom("COPY copied (n, e) FROM STDIN (FORMAT binary)")));
      const { rows: copied } = await client.query<{ same: boolean }>(
        "SELECT e::text = (($1::text[])[n + 1])::vector::text AS same FROM copied ORDER BY n",
        [texts],
      );
      expect(copied.map((r) => r.same)).toEqual(vectors.map(() => true));
      // The naive conversion would differ on the halfway number.
      expect(Math.fround(1 + 2 ** -24)).not.toBe(
        (await client.query<{ x: number }>("SELECT ('[1.0000000596046448]'::vector::real[])[1]::float8 AS x")).rows[0]
          ?.x,
      );
    } finally {
      client.release(true);
    }
  });

  it("leaves out keys already stored and gets their rows; a key stored meanwhile falls back to INSERT", async () => {
    const first = await store.rememberFailure(failure("pg-keys", 2));
    const records = Array.from({ length: 6 }, (_, i) => failure("pg-keys", i + 1));
    const res = await insertFailures(db, embedder, records);
    expect(res.stored).toBe(5);
    expect(res.results[1]).toEqual(first);

    // Another writer stores key 3 between the look-up of stored keys and the COPY: the COPY
    // fails with a unique violation, and the batch goes by INSERT … ON CONFLICT DO NOTHING.
    const other = new pg.Client({ connectionString: postgres.url });
    await other.connect();
    const raced = Array.from({ length: 6 }, (_, i) => failure("pg-race", i + 1));
    let raceDone = false;
    const seen = watchQueries((client, text, result) => {
      if (raceDone || client === other || !text.startsWith("SELECT id::text AS id, idempotency_key")) return result;
      raceDone = true;
      return (result as Promise<unknown>).then(async (r) => {
        await other.query(
          `INSERT INTO loopsmith.failures (idempotency_key, task_id, iteration, language, goal, signature, error_type, error_text,
             failing_tests, output_tail, status, embedder, embedding)
           VALUES ('pg-race/3/remember_failure', 'pg-race', 3, 'python', 'g', 's', 'e', 't', '[]', '', 'failed', $1, $2)`,
          [embedder.id, JSON.stringify(Array.from({ length: embedder.dimensions }, (_, i) => (i === 0 ? 1 : 0)))],
        );
        return r;
      });
    });
    let res2;
    try {
      res2 = await insertFailures(db, embedder, raced);
    } finally {
      seen.stop();
      await other.end();
    }
    expect(raceDone).toBe(true);
    expect(seen.texts.some((t) => t.startsWith("INSERT INTO loopsmith.failures"))).toBe(true);
    expect(res2.stored).toBe(5);
    const { rows } = await db.pool.query<{ id: string; signature: string; goal: string }>(
      "SELECT id::text AS id, signature, goal FROM loopsmith.failures WHERE idempotency_key = 'pg-race/3/remember_failure'",
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.goal).toBe("g"); // the other writer's row won
    expect(res2.results[2]).toEqual({ id: rows[0]?.id, signature: "s" });
    expect(new Set(res2.results.map((r) => r.id)).size).toBe(6);
  });
});
