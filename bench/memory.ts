/**
 * `npm run bench:memory -- [--rows N] [--backend postgres|pglite|both] [--queries Q]
 *   [--ef 40,100,200] [--batch B] [--index m:efc,...]`: memory at scale, on real PostgreSQL +
 * pgvector (the configured image, loopsmith/postgres:local, started here with testcontainers
 * and removed at the end) and on embedded PGlite (a temp dir, removed at the end).
 *
 * 1. Fills `failures` with N synthetic failures (HumanEval-like goals, Python and JavaScript
 *    errors of ~30 kinds with varied names, numbers and paths, 1-3 failing tests), embedded by
 *    the default hashing embedder, through the bulk insert (`insertFailures`, B rows per
 *    batch, `rebuildIndex`: the full-text and HNSW indexes built once at the end): rows/s of
 *    the inserts (validation, embedding and the full-text indexes' build included), the HNSW
 *    build's time, and rows/s of both; on PostgreSQL the batches go by binary COPY, on PGlite
 *    by INSERT … unnest. Then N/10 (at most 2,000) more in batches with the index maintained,
 *    and 300 one at a time (`rememberFailure`), for comparison.
 * 2. Q recall-shaped queries (new synthetic failures; recall's vector ranking: same embedder
 *    and language, other tasks, k = 10): latency p50/p95 of exact search (index scans off: a
 *    sequential or bitmap scan and a sort) and of the HNSW index at each ef_search, recall@10
 *    against exact; and the store's whole hybrid recall at the configured ef_search. Recall@10
 *    counts ties: a returned row at a distance no greater than the exact
 *    10th row's is a hit (synthetic failures share signatures, so equal distances are common).
 * 3. PGlite: the same latency before and after ANALYZE, to show why memory analyses.
 * 4. With --index, the HNSW index is rebuilt with each m:ef_construction and measured again.
 * 5. PostgreSQL: the fill again, emptied first, with INSERT … unnest then with COPY (both with
 *    the code compiled by then, the HNSW index dropped): the insert figures side by side.
 *
 * Percentiles from Node's HDR histogram (`perf_hooks.createHistogram`).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHistogram } from "node:perf_hooks";
import pino from "pino";
import { loadavg } from "node:os";
import type pg from "pg";
import pgvector from "pgvector/pg";
import { loadConfig, type Config } from "@loopsmith/shared/runtime";
import { type FailureRecord } from "@loopsmith/shared/contracts";
import {
  createHashingEmbedder,
  createMemoryStore,
  embeddingExpr,
  hnswIndexName,
  insertFailures,
  openDatabase,
  type Database,
  type InsertFailuresResult,
  type MemoryStore,
} from "@loopsmith/memory";
import { buildEmbedText, embedParts } from "../services/memory/src/embed-text.js";
import { seeded } from "./seeded.js";
import { formatTable } from "@loopsmith/cli/ui";

const argOf = (name: string, def: string): string => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? def) : def;
};
const ROWS = Number(argOf("--rows", "20000"));
const BACKEND = argOf("--backend", "both");
const QUERIES = Math.max(200, Number(argOf("--queries", "200")));
const EF = argOf("--ef", "40,100,200").split(",").map(Number);
const BATCH = Number(argOf("--batch", "1000"));
const INDEXES = argOf("--index", "")
  .split(",")
  .filter(Boolean)
  .map((s) => s.split(":").map(Number) as [number, number]);
const K = 10;
const log = pino({ level: "silent" });
const embedder = createHashingEmbedder();

const VERBS = [
  "return",
  "count",
  "find",
  "sort",
  "merge",
  "parse",
  "filter",
  "sum",
  "reverse",
  "group",
  "flatten",
  "encode",
  "decode",
  "rotate",
  "split",
  "validate",
  "compress",
  "rank",
  "match",
  "normalise",
];
const NOUNS = [
  "numbers",
  "words",
  "intervals",
  "digits",
  "vowels",
  "brackets",
  "primes",
  "matrix",
  "string",
  "list",
  "pairs",
  "tokens",
  "dates",
  "scores",
  "balance",
  "palindromes",
  "anagrams",
  "fractions",
  "coordinates",
  "triangles",
  "paths",
  "nodes",
  "edges",
  "colours",
  "letters",
];
const QUALIFIERS = [
  "in ascending order",
  "without duplicates",
  "that are even",
  "closer than threshold",
  "below zero",
  "greater than the mean",
  "in a sliding window of size k",
  "ignoring case",
  "modulo 1000000007",
  "with the largest product",
  "that appear exactly once",
  "after removing spaces",
  "in reverse order",
  "by frequency",
  "starting with a vowel",
];
const TYPES = ["int", "str", "list", "dict", "NoneType", "float", "tuple"];
const MODULES = ["numpy", "pandas", "sortedcontainers", "regex", "more_itertools"];

type Template = (p: { id: string; f: string; n: number; m: number; t1: string; t2: string; mod: string }) => string;
const PY: Template[] = [
  (p) => `NameError: name '${p.id}' is not defined`,
  (p) => `TypeError: unsupported operand type(s) for +: '${p.t1}' and '${p.t2}'`,
  (p) => `TypeError: ${p.f}() takes ${p.n} positional arguments but ${p.m} were given`,
  (p) => `TypeError: '${p.t1}' object is not subscriptable`,
  (p) => `TypeError: '${p.t1}' object is not iterable`,
  (p) => `AssertionError: assert ${p.n} == ${p.m}`,
  (p) => `AssertionError: assert [${p.n}, ${p.m}] == [${p.m}, ${p.n}]`,
  () => "IndexError: list index out of range",
  () => "IndexError: string index out of range",
  (p) => `KeyError: '${p.id}'`,
  (p) => `AttributeError: '${p.t1}' object has no attribute '${p.id}'`,
  () => "ZeroDivisionError: division by zero",
  (p) => `ValueError: invalid literal for int() with base 10: '${p.id}'`,
  (p) => `ValueError: not enough values to unpack (expected ${p.n}, got ${p.m})`,
  () => "RecursionError: maximum recursion depth exceeded in comparison",
  (p) => `ModuleNotFoundError: No module named '${p.mod}'`,
  (p) => `UnboundLocalError: cannot access local variable '${p.id}' where it is not associated with a value`,
  () => "SyntaxError: invalid syntax",
  () => "IndentationError: unexpected indent",
];
const JS: Template[] = [
  (p) => `TypeError: Cannot read properties of undefined (reading '${p.id}')`,
  (p) => `ReferenceError: ${p.id} is not defined`,
  (p) => `AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n\n${p.n} !== ${p.m}`,
  () => "RangeError: Maximum call stack size exceeded",
  (p) => `TypeError: ${p.id}.map is not a function`,
  () => "TypeError: Assignment to constant variable.",
  (p) => `SyntaxError: Unexpected token '${p.id.slice(0, 1)}'`,
  (p) => `TypeError: ${p.f} is not a function`,
];

/** One synthetic failure; `salt` keeps keys of query records apart from stored ones. */
function failure(i: number, rand: () => number, salt = ""): FailureRecord {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const verb = pick(VERBS);
  const noun = pick(NOUNS);
  const f = `${verb}_${noun}`;
  const language = rand() < 0.7 ? "python" : "javascript";
  const id = `${pick(NOUNS).slice(0, 5)}${pick(["", "_count", "_idx", "s", "_list", "Total"])}`;
  const p = {
    id,
    f,
    n: Math.floor(rand() * 10),
    m: Math.floor(rand() * 10),
    t1: pick(TYPES),
    t2: pick(TYPES),
    mod: pick(MODULES),
  };
  const taskId = `bench${salt}-${Math.floor(i / 3)}`;
  const line = 2 + Math.floor(rand() * 40);
  const error =
    language === "python"
      ? `Traceback (most recent call last):\n  File "/workspace/${taskId}/solution.py", line ${line}, in ${f}\n    return ${id}\n${pick(PY)(p)}`
      : `/workspace/${taskId}/solution.js:${line}\n${pick(JS)(p)}\n    at ${f} (/workspace/${taskId}/solution.js:${line}:7)`;
  const tests = Array.from({ length: 1 + Math.floor(rand() * 3) }, (_, k) =>
    language === "python" ? `test_solution.py::test_${f}_${k}` : `solution.test.js > ${f} case ${k}`,
  );
  return {
    v: 1,
    taskId,
    iteration: (i % 3) + 1,
    idempotencyKey: `${taskId}/${(i % 3) + 1}/remember_failure`,
    language,
    goal: `Write ${f}(${noun}${rand() < 0.5 ? ", k" : ""}): ${verb} the ${noun} ${pick(QUALIFIERS)}, and ${pick(VERBS)} the ${pick(NOUNS)} ${pick(QUALIFIERS)}.`,
    errorText: error,
    failingTests: tests,
    outputTail: `${tests.length} failed, ${Math.floor(rand() * 5)} passed`,
    status: "failed",
  };
}

/** A query vector as recall builds it (services/memory/src/recall.ts): goal, error and tests. */
async function queryOf(
  rec: FailureRecord,
): Promise<{ vec: string; language: string; taskId: string; rec: FailureRecord }> {
  const parts = buildEmbedText({
    goal: rec.goal,
    errorText: rec.errorText,
    failingTests: rec.failingTests,
    language: rec.language,
  });
  return { vec: pgvector.toSql(await embedParts(embedder, parts)), language: rec.language, taskId: rec.taskId, rec };
}

/** Latency (ms) of the store's whole recall (hybrid failures query and successes query). */
async function storeRecall(
  store: MemoryStore,
  queries: Array<{ rec: FailureRecord }>,
): Promise<{ p50: number; p95: number }> {
  const h = createHistogram();
  for (const { rec } of queries) {
    const t = process.hrtime.bigint();
    await store.recall({
      v: 1,
      taskId: rec.taskId,
      language: rec.language,
      text: rec.goal,
      errorText: rec.errorText,
      failingTests: rec.failingTests,
      k: 10,
    });
    h.record(Math.max(1, Number(process.hrtime.bigint() - t)));
  }
  return { p50: h.percentile(50) / 1e6, p95: h.percentile(95) / 1e6 };
}

const VEC = embeddingExpr(embedder.dimensions);
/** The vector ranking of recall (services/memory/src/recall.ts), k = 10, with the distance. */
const RECALL_SQL = `SELECT id::text AS id, ${VEC} <=> $1::vector(${embedder.dimensions}) AS distance
  FROM loopsmith.failures
 WHERE embedder = $2 AND language = $3 AND ($4::text IS NULL OR task_id <> $4::text)
 ORDER BY ${VEC} <=> $1::vector(${embedder.dimensions}) LIMIT ${K}`;

type Hit = { id: string; distance: number };
type Query = { vec: string; language: string; taskId: string };
interface Way {
  name: string;
  p50: number;
  p95: number;
  recall: number;
  plan: string;
}

/** Runs every query once on `client` as it is set; latency (ms) percentiles and the rows. */
async function measure(
  client: pg.PoolClient,
  queries: Query[],
): Promise<{ p50: number; p95: number; hits: Hit[][]; plan: string }> {
  const h = createHistogram();
  const hits: Hit[][] = [];
  for (const q of queries) {
    const t = process.hrtime.bigint();
    const { rows } = await client.query<{ id: string; distance: number }>(RECALL_SQL, [
      q.vec,
      embedder.id,
      q.language,
      q.taskId,
    ]);
    h.record(Math.max(1, Number(process.hrtime.bigint() - t)));
    hits.push(rows.map((r) => ({ id: r.id, distance: Number(r.distance) })));
  }
  const q0 = queries[0];
  const explain = q0
    ? await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${RECALL_SQL}`, [
        q0.vec,
        embedder.id,
        q0.language,
        q0.taskId,
      ])
    : { rows: [] };
  const plan =
    explain.rows
      .map((r) => r["QUERY PLAN"])
      .find((l) => /Scan/.test(l))
      ?.trim()
      .replace(/\s+\(cost.*$/, "") ?? "?";
  return { p50: h.percentile(50) / 1e6, p95: h.percentile(95) / 1e6, hits, plan };
}

/** Recall@K against exact, ties counted (a row no farther than exact's K-th is a hit). */
function recallAt(exact: Hit[][], approx: Hit[][]): number {
  let found = 0;
  let wanted = 0;
  exact.forEach((ex, i) => {
    const kth = ex[ex.length - 1]?.distance ?? 0;
    wanted += ex.length;
    found += Math.min(ex.length, (approx[i] ?? []).filter((a) => a.distance <= kth + 1e-6).length);
  });
  return wanted === 0 ? 1 : found / wanted;
}

async function ways(db: Database, queries: Query[], label: string): Promise<Way[]> {
  const client = await db.pool.connect();
  try {
    await client.query("SET enable_indexscan = off");
    const exact = await measure(client, queries);
    await client.query("SET enable_indexscan = on");
    const out: Way[] = [{ name: `${label} exact`, p50: exact.p50, p95: exact.p95, recall: 1, plan: exact.plan }];
    for (const ef of EF) {
      await client.query(`SET hnsw.ef_search = ${Math.trunc(ef)}`);
      const m = await measure(client, queries);
      out.push({
        name: `${label} hnsw ef_search=${ef}`,
        p50: m.p50,
        p95: m.p95,
        recall: recallAt(exact.hits, m.hits),
        plan: m.plan,
      });
    }
    return out;
  } finally {
    client.release(true); // its settings were changed: do not return it to the pool
  }
}

/** One bulk load into the empty table and its wall time, in s. */
interface Load {
  result: InsertFailuresResult;
  seconds: number;
}

/** Loads `records` with `insertFailures` as an import does (`rebuildIndex`), by COPY or not. */
async function load(db: Database, records: FailureRecord[], copy: boolean): Promise<Load> {
  const t = performance.now();
  const result = await insertFailures(db, embedder, records, {
    batchSize: BATCH,
    analyse: false,
    rebuildIndex: true,
    copy,
  });
  return { result, seconds: (performance.now() - t) / 1000 };
}

/** Empties the failures table, then {@link load}s `records`. */
async function emptyThenLoad(db: Database, records: FailureRecord[], copy: boolean): Promise<Load> {
  await db.pool.query("TRUNCATE loopsmith.failures");
  return load(db, records, copy);
}

/**
 * The insert figure (rows/s of everything but the HNSW build: validation, embedding, sending,
 * the full-text indexes' build), the HNSW build, and both.
 */
function describeLoad({ result, seconds }: Load): string {
  const insertS = seconds - result.buildMs / 1000;
  return (
    `insert ${(result.stored / insertS).toFixed(0)} rows/s (${insertS.toFixed(1)} s, of which full-text index build ${(result.textIndexMs / 1000).toFixed(1)} s), ` +
    `HNSW index build ${(result.buildMs / 1000).toFixed(1)} s, both ${(result.stored / seconds).toFixed(0)} rows/s (${seconds.toFixed(1)} s)`
  );
}

async function bench(backend: "postgres" | "pglite", config: Config): Promise<void> {
  const db = await openDatabase({ config, log, embedders: [embedder] });
  try {
    const rand = seeded(42);
    const records = Array.from({ length: ROWS }, (_, i) => failure(i, rand));
    // The fill is an import into an empty memory: the indexes are built once at the end.
    const fill = await load(db, records, true);
    const ins = fill.result;
    let t: number;
    // Then live inserts into the full table, the HNSW index maintained row by row.
    const more = Array.from({ length: Math.min(2_000, Math.ceil(ROWS / 10)) }, (_, i) => failure(i, rand, "more"));
    t = performance.now();
    const live = await insertFailures(db, embedder, more, { batchSize: BATCH, analyse: false });
    const liveS = (performance.now() - t) / 1000;
    const store = createMemoryStore(db, embedder, log);
    const single = Array.from({ length: 300 }, (_, i) => failure(i, rand, "single"));
    t = performance.now();
    for (const r of single) await store.rememberFailure(r);
    const singleS = (performance.now() - t) / 1000;
    const qrand = seeded(7);
    const queries = await Promise.all(Array.from({ length: QUERIES }, (_, i) => queryOf(failure(i, qrand, "query"))));

    const rows: Way[] = [];
    if (backend === "pglite") {
      // As memory was before it analysed: statistics of the empty table from opening.
      const before = await ways(db, queries.slice(0, 20), "not analysed,");
      rows.push(...before.filter((w) => w.name.includes(`ef_search=${config.memory.efSearch}`)));
    }
    t = performance.now();
    await db.pool.query("ANALYZE loopsmith.failures");
    const analyseMs = performance.now() - t;
    rows.push(...(await ways(db, queries, "")));
    const whole = await storeRecall(store, queries);
    for (const [m, efc] of INDEXES) {
      const name = hnswIndexName("failures", embedder.id);
      t = performance.now();
      await db.pool.query(`DROP INDEX loopsmith.${name}`);
      // The pool's 20 s query timeout is too short for a build at 100,000 rows.
      await db.pool.query({
        text: `CREATE INDEX ${name} ON loopsmith.failures USING hnsw (${VEC} vector_cosine_ops) WITH (m = ${m}, ef_construction = ${efc}) WHERE embedder = '${embedder.id}'`,
        query_timeout: 3_600_000,
      } as pg.QueryConfig);
      console.log(
        `  rebuilt the index with m=${m} ef_construction=${efc} in ${((performance.now() - t) / 1000).toFixed(1)} s`,
      );
      rows.push(...(await ways(db, queries, `m=${m} efc=${efc}`)).slice(1));
    }

    const idx = config.memory;
    console.log(
      `\n== ${backend}: ${ins.stored + live.stored + single.length} failures (index m=${idx.hnswM} ef_construction=${idx.hnswEfConstruction}), ${queries.length} queries, k=${K}`,
    );
    const way = backend === "postgres" ? "COPY (FORMAT binary)" : "INSERT … unnest";
    console.log(
      `bulk load into the empty table (${BATCH} rows a batch, ${way}; embedding and the full-text index build included, HNSW index built after): ${describeLoad(fill)}`,
    );
    console.log(
      `batched inserts into the full table, index maintained (${live.stored} rows): ${(live.stored / liveS).toFixed(0)} rows/s`,
    );
    console.log(
      `insert, one row at a time (rememberFailure, ${single.length} rows): ${(single.length / singleS).toFixed(0)} rows/s`,
    );
    console.log(
      `ANALYZE loopsmith.failures: ${analyseMs.toFixed(0)} ms; load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`,
    );
    console.log(
      `store.recall (hybrid failures query + successes, ef_search=${config.memory.efSearch}): p50 ${whole.p50.toFixed(2)} ms, p95 ${whole.p95.toFixed(2)} ms`,
    );
    const table = [
      ["way", "p50 ms", "p95 ms", "recall@10", "plan"],
      ...rows.map((w) => [w.name.trim(), w.p50.toFixed(2), w.p95.toFixed(2), w.recall.toFixed(3), w.plan]),
    ];
    for (const line of formatTable(table, { align: ["left", "right", "right", "right"] })) console.log(line);
    if (backend === "postgres") {
      // INSERT … unnest (PGlite's way) against COPY, on the same rows, both with the code
      // already compiled (the first fill above was the first in this process): the table
      // emptied before each, and its HNSW index dropped (no build: only the inserts compare).
      await db.pool.query(`DROP INDEX loopsmith.${hnswIndexName("failures", embedder.id)}`);
      const viaInsert = await emptyThenLoad(db, records, false);
      const viaCopy = await emptyThenLoad(db, records, true);
      console.log(`bulk load again (emptied first, HNSW index dropped), INSERT … unnest: ${describeLoad(viaInsert)}`);
      console.log(`bulk load again (emptied first, HNSW index dropped), COPY:            ${describeLoad(viaCopy)}`);
    }
  } finally {
    await db.close();
  }
}

async function main(): Promise<void> {
  process.env.TESTCONTAINERS_RYUK_DISABLED ??= "true";
  const base = loadConfig({ env: { ...process.env, NATS_URL: "", DATABASE_URL: "" } });
  console.log(
    `bench:memory: ${ROWS} rows, embedder ${embedder.id}, ef_search ${EF.join(", ")} (configured ${base.memory.efSearch})`,
  );
  if (BACKEND === "postgres" || BACKEND === "both") {
    const { startPostgres } = await import("../tests/fixtures/containers.js");
    const pgc = await startPostgres();
    try {
      await bench("postgres", loadConfig({ env: { ...process.env, NATS_URL: "", DATABASE_URL: pgc.url } }));
    } finally {
      await pgc.stop();
    }
  }
  if (BACKEND === "pglite" || BACKEND === "both") {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-bench-memory-"));
    try {
      await bench(
        "pglite",
        loadConfig({ env: { ...process.env, NATS_URL: "", DATABASE_URL: "", LOOPSMITH_DATA_DIR: dir } }),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

await main();
