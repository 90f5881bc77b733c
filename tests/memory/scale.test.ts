/**
 * Memory at scale, on both back ends: the HNSW settings of the configuration reach the
 * database (ef_search on every pooled connection, m and ef_construction on the index), and a
 * recall-shaped query uses the HNSW index once the table is analysed (PGlite has no
 * autovacuum: before memory analysed, it scanned the whole table).
 */
import { afterAll, describe, expect } from "vitest";
import { it as plainIt } from "vitest";
import pgvector from "pgvector/pg";
import type { Config } from "@loopsmith/shared/runtime";
import type { FailureRecord } from "@loopsmith/shared/contracts";
import {
  analyseStale,
  createHashingEmbedder,
  embeddingExpr,
  hnswIndexName,
  insertFailures,
  openDatabase,
  type Database,
} from "@loopsmith/memory";
import { it as pgIt } from "../fixtures/index.js";
import { freshDataDir, freshDatabase, removeFreshDirs } from "./fresh.js";
import { log } from "./suite.js";

const embedder = createHashingEmbedder();
const HNSW = hnswIndexName("failures", embedder.id);
const ROWS = 3_000;
const ERRORS = [
  (n: string) => `NameError: name '${n}' is not defined`,
  (n: string) => `TypeError: unsupported operand type(s) for +: 'int' and '${n}'`,
  (n: string) => `AttributeError: 'list' object has no attribute '${n}'`,
  (n: string) => `KeyError: '${n}'`,
  () => "ZeroDivisionError: division by zero",
  () => "IndexError: list index out of range",
  (n: string) => `AssertionError: assert ${n.length} == ${n.length + 1}`,
];
const NOUNS = [
  "numbers",
  "words",
  "intervals",
  "primes",
  "matrix",
  "balance",
  "brackets",
  "dates",
  "scores",
  "pairs",
  "tokens",
];

/** `n` varied failures (goals, errors, names, languages), the same on every run. */
function failures(n: number, salt: string): FailureRecord[] {
  return Array.from({ length: n }, (_, i) => {
    const noun = NOUNS[i % NOUNS.length] ?? "x";
    const other = NOUNS[(i * 7 + 3) % NOUNS.length] ?? "y";
    const name = `${other.slice(0, 4)}_${i % 13}`;
    const taskId = `${salt}-${Math.floor(i / 2)}`;
    return {
      v: 1,
      taskId,
      iteration: (i % 2) + 1,
      idempotencyKey: `${taskId}/${(i % 2) + 1}/remember_failure`,
      language: i % 3 === 0 ? "javascript" : "python",
      goal: `Write f_${noun}(${other}): return the ${noun} sorted by ${other}, case ${i % 29}.`,
      errorText: `  File "/workspace/${taskId}/solution.py", line ${i % 40}, in f\n${(ERRORS[i % ERRORS.length] ?? ERRORS[0])?.(name) ?? ""}`,
      failingTests: [`test_solution.py::test_${noun}_${i % 5}`],
      outputTail: "1 failed",
      status: "failed",
    };
  });
}

/** The plan of a recall-shaped query (the store's vector ranking), as one string. */
async function plan(db: Database, limit: number): Promise<string> {
  const [v] = await embedder.embed(["NameError: name <id> is not defined write f_primes"]);
  const { rows } = await db.pool.query<{ "QUERY PLAN": string }>(
    `EXPLAIN SELECT id FROM loopsmith.failures
      WHERE embedder = $2 AND language = $3 AND ($4::text IS NULL OR task_id <> $4::text)
      ORDER BY ${embeddingExpr(embedder.dimensions)} <=> $1::vector(${embedder.dimensions}) LIMIT ${limit}`,
    [pgvector.toSql(v), embedder.id, "python", "other-task"],
  );
  return rows.map((r) => r["QUERY PLAN"]).join("\n");
}

type Fresh = () => Promise<Config>;

function scaleSuite(
  backend: "pglite" | "postgres",
  test: (name: string, fn: (fresh: Fresh) => Promise<void>) => void,
): void {
  test("applies hnsw.ef_search to every pooled connection and m, ef_construction to the index", async (fresh) => {
    const config = await fresh();
    const db = await openDatabase({
      config: { ...config, memory: { ...config.memory, efSearch: 123, hnswM: 12, hnswEfConstruction: 48 } },
      log,
      embedders: [embedder],
    });
    try {
      const clients = await Promise.all(Array.from({ length: backend === "pglite" ? 1 : 3 }, () => db.pool.connect()));
      try {
        for (const c of clients) {
          const { rows } = await c.query<Record<string, string>>("SHOW hnsw.ef_search");
          expect(rows[0]?.["hnsw.ef_search"]).toBe("123");
        }
      } finally {
        for (const c of clients) c.release();
      }
      const { rows } = await db.pool.query<{ reloptions: string[] }>(
        "SELECT reloptions FROM pg_class WHERE relname = $1",
        [HNSW],
      );
      expect(rows[0]?.reloptions).toEqual(["m=12", "ef_construction=48"]);
    } finally {
      await db.close();
    }
  });

  test(`a recall-shaped query uses the HNSW index after ${ROWS} rows once analysed`, async (fresh) => {
    const db = await openDatabase({ config: await fresh(), log, embedders: [embedder] });
    try {
      // Opening analysed the empty tables; the bulk insert is told not to analyse.
      const res = await insertFailures(db, embedder, failures(ROWS, "scale"), { analyse: false });
      expect(res).toMatchObject({ stored: ROWS, analysed: false });
      if (backend === "pglite") expect(await plan(db, 10)).not.toContain(HNSW); // the measured problem
      expect(await analyseStale(db.pool)).toContain("failures");
      expect(await plan(db, 10)).toContain(`Index Scan using ${HNSW}`);
      // Nothing changed since: not analysed again.
      expect(await analyseStale(db.pool)).toEqual([]);
    } finally {
      await db.close();
    }
  });
}

afterAll(removeFreshDirs);

describe("memory at scale on embedded PGlite", () => {
  // Blank directories: the suite opens them with its own index settings (m, ef_construction).
  scaleSuite("pglite", (name, fn) => plainIt(name, () => fn(async () => (await freshDataDir({ blank: true })).config)));
});

describe("memory at scale on PostgreSQL + pgvector", () => {
  scaleSuite("postgres", (name, fn) =>
    pgIt(name, ({ postgres }) => fn(async () => (await freshDatabase(postgres)).config)),
  );
});
