/**
 * Bulk inserts of failures: many rows per statement and one embedder call per batch, for
 * imports, `bench:memory` and a `rememberFailures` batch API. Each row is what
 * `rememberFailure` stores for the same record (same columns, signature and embedding).
 */
import { z } from "zod";
import type pg from "pg";
import pgvector from "pgvector/pg";
import { DEFAULT_OWNER, FailureRecord, LoopsmithError, type Remembered } from "@loopsmith/shared";
import type { Embedder } from "./embedder.js";
import { analyseStale, hnswIndexName, type Database } from "./db.js";
import { embedPartsMany, prepareFailure, type PreparedFailure } from "./embed-text.js";
import { toDbError, withDb } from "./errors.js";

/** Most rows per INSERT statement. */
const MAX_BATCH = 5_000;

/** Options of {@link insertFailures}. */
export interface InsertFailuresOptions {
  /** Rows per INSERT statement and per embedder call, 1 to 5,000. @defaultValue 1000 */
  batchSize?: number;
  /**
   * Analyse the failures table afterwards when its statistics went stale (the rule of
   * {@link analyseStale}), so recall keeps using the HNSW index. @defaultValue true
   */
  analyse?: boolean;
  /**
   * Bulk load: drop the embedder's HNSW index on `failures` before inserting and build it
   * again after (one build is several times faster than maintaining the index row by row).
   * Worth it when the call at least doubles the embedder's rows (an import into a new or
   * small memory). Meanwhile recall of that embedder's failures stays correct but scans the
   * table. If the process dies before the build, the next {@link openDatabase} builds it.
   * @defaultValue false
   */
  rebuildIndex?: boolean;
}

/** What {@link insertFailures} did. */
export interface InsertFailuresResult {
  /** One per input record, in input order: the row's id (decimal string) and signature. */
  results: Remembered[];
  /** Rows this call stored (records whose key was already stored, or repeated, store none). */
  stored: number;
  /** Whether the failures table was analysed afterwards. */
  analysed: boolean;
  /** Time spent building the HNSW index again (`rebuildIndex`), in ms; 0 when none was built. */
  buildMs: number;
}

/** One validated record with the columns derived from it (as the store derives them). */
interface Prepared {
  rec: FailureRecord;
  derived: PreparedFailure;
}

function prepare(input: unknown, index: number): Prepared {
  const parsed = FailureRecord.safeParse(input);
  if (!parsed.success) {
    throw new LoopsmithError("bad_request", `invalid failure record at index ${index}: ${z.prettifyError(parsed.error)}`, {
      details: parsed.error.issues,
    });
  }
  return { rec: parsed.data, derived: prepareFailure(parsed.data) };
}

/**
 * One batch's INSERT: each column is one array parameter, unnested (20 parameters whatever the
 * batch size), embedded with one embedder call. Generated columns (the full-text vectors) need
 * no value.
 */
async function batchStatement(embedder: Embedder, batch: Prepared[]): Promise<pg.QueryConfig> {
  const embeddings = await embedPartsMany(embedder, batch.map((p) => p.derived.parts));
  const col = <T>(f: (p: Prepared, i: number) => T): T[] => batch.map(f);
  return {
    // One row (`rememberFailure`) keeps the pool's limit, below the bus's timeout.
    ...(batch.length > 1 ? { query_timeout: BATCH_TIMEOUT_MS } : {}),
    text: `INSERT INTO loopsmith.failures
       (idempotency_key, task_id, iteration, language, goal, signature, error_type, error_text,
        failing_tests, output_tail, status, reflection, embedder, embedding,
        code, signature_key, recall_goal, recall_error, recall_code, owner)
     SELECT k, t, i, l, g, s, et, tx, ft::jsonb, o, st, r::jsonb, $13, e::vector(${embedder.dimensions}),
            c, sk, rg, re, rc, ow
       FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                   $9::text[], $10::text[], $11::text[], $12::text[], $14::text[],
                   $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[])
            AS u(k, t, i, l, g, s, et, tx, ft, o, st, r, e, c, sk, rg, re, rc, ow)
     ON CONFLICT (idempotency_key) DO NOTHING
     RETURNING id::text AS id, idempotency_key AS key, signature`,
    values: [
      col((p) => p.rec.idempotencyKey),
      col((p) => p.rec.taskId),
      col((p) => p.rec.iteration),
      col((p) => p.rec.language),
      col((p) => p.rec.goal),
      col((p) => p.derived.signature),
      col((p) => p.derived.errorType),
      col((p) => p.derived.errorText),
      col((p) => JSON.stringify(p.rec.failingTests)),
      col((p) => p.derived.outputTail),
      col((p) => p.rec.status),
      col((p) => (p.rec.reflection ? JSON.stringify(p.rec.reflection) : null)),
      embedder.id,
      col((_, i) => pgvector.toSql(embeddings[i])),
      col((p) => p.rec.code ?? ""),
      col((p) => p.derived.key),
      col((p) => p.derived.parts.goal),
      col((p) => p.derived.parts.error),
      col((p) => p.derived.parts.code),
      col((p) => p.rec.owner ?? DEFAULT_OWNER),
    ],
  };
}

type Settled<T> = { ok: T } | { err: unknown };

/**
 * Sends a statement on a pooled client and settles (never rejects, so it can wait while the
 * next batch is embedded): the client is released as soon as the statement ends.
 */
async function send(db: Database, statement: pg.QueryConfig): Promise<Settled<Map<string, Remembered>>> {
  let client: pg.PoolClient;
  try {
    client = await db.pool.connect();
  } catch (err) {
    return { err };
  }
  return client
    .query<{ id: string; key: string; signature: string }>(statement)
    .then(
      ({ rows }) => ({ ok: new Map(rows.map((r) => [r.key, { id: r.id, signature: r.signature }])) }),
      (err: unknown) => ({ err }),
    )
    .finally(() => client.release());
}

/** A build can take minutes at 100,000s of rows: far past the pool's query timeout. */
const BUILD_TIMEOUT_MS = 3_600_000;
/**
 * Limit of one batch's INSERT, in ms: with the HNSW index maintained, 1,000 rows into a large
 * table can pass the pool's 20 s on a busy host.
 */
const BATCH_TIMEOUT_MS = 600_000;

/**
 * Drops the embedder's HNSW index on `failures`.
 * @returns the statement that builds it again (`IF NOT EXISTS`: a memory opening meanwhile may
 *   have built it), or undefined when there was no index
 */
async function dropIndex(db: Database, embedder: Embedder): Promise<string | undefined> {
  const name = hnswIndexName("failures", embedder.id);
  const { rows } = await db.pool.query<{ def: string }>(
    "SELECT indexdef AS def FROM pg_indexes WHERE schemaname = 'loopsmith' AND indexname = $1",
    [name],
  );
  const def = rows[0]?.def;
  if (def === undefined) return undefined;
  await db.pool.query(`DROP INDEX IF EXISTS loopsmith.${name}`);
  return def.replace(/^CREATE INDEX /, "CREATE INDEX IF NOT EXISTS ");
}

/**
 * Memory a bulk load's HNSW build may use (`maintenance_work_mem`; a serial build allocates
 * it as the graph grows, so this is a ceiling). With PostgreSQL's default of 64 MB the graph
 * stops fitting at a few 10,000s of rows of 256 dimensions (roughly 2 KB a row), and pgvector
 * goes on inserting into the on-disk index, much slower (50,000 rows on PostgreSQL, 2 busy
 * cores: 43.8 s with 64 MB and two parallel workers, 24.7 s with 1 GB and none).
 */
const BUILD_MEMORY = "1GB";

/**
 * Runs the index build `statement` on one pooled client with {@link BUILD_MEMORY} and no
 * parallel workers, then resets both settings (PGlite has one session for every connection).
 * Parallel workers share the graph through dynamic shared memory of that size, which a
 * container's default 64 MB `/dev/shm` cannot hold ("could not resize shared memory segment").
 */
async function buildIndex(db: Database, statement: string): Promise<void> {
  const client = await db.pool.connect();
  let broken = false;
  try {
    await client.query(`SET maintenance_work_mem = '${BUILD_MEMORY}'; SET max_parallel_maintenance_workers = 0`);
    await client.query({ text: statement, query_timeout: BUILD_TIMEOUT_MS } as pg.QueryConfig);
  } finally {
    await client.query("RESET maintenance_work_mem; RESET max_parallel_maintenance_workers").catch(() => (broken = true));
    client.release(broken);
  }
}

/** The stored rows of `keys` (the first row of each key wins). */
async function existing(db: Database, keys: string[]): Promise<Map<string, Remembered>> {
  if (keys.length === 0) return new Map();
  const { rows } = await db.pool.query<{ id: string; key: string; signature: string }>(
    "SELECT id::text AS id, idempotency_key AS key, signature FROM loopsmith.failures WHERE idempotency_key = ANY($1::text[])",
    [keys],
  );
  return new Map(rows.map((r) => [r.key, { id: r.id, signature: r.signature }]));
}

/** Inserts the batches in order, each embedded while the one before is being inserted; records each key's row in `done`. */
async function insertBatches(
  db: Database,
  embedder: Embedder,
  batches: Prepared[][],
  done: Map<string, Remembered>,
  onStored: (rows: number) => void,
): Promise<void> {
  let statement = batches[0] ? await batchStatement(embedder, batches[0]) : undefined;
  for (let b = 0; b < batches.length && statement; b++) {
    const batch = batches[b] ?? [];
    // While the database inserts this batch, the next one is embedded (PostgreSQL works in
    // another process; PGlite shares this thread, so there it simply runs in turn).
    const pending = send(db, statement);
    const following = batches[b + 1];
    statement = following ? await batchStatement(embedder, following) : undefined;
    const settled = await pending;
    if ("err" in settled) throw toDbError("store the failures", settled.err);
    const inserted = settled.ok;
    onStored(inserted.size);
    for (const [k, v] of inserted) done.set(k, v);
    const missing = batch.map((p) => p.rec.idempotencyKey).filter((k) => !inserted.has(k));
    for (const [k, v] of await withDb("look up the failures", () => existing(db, missing))) done.set(k, v);
  }
}

/**
 * Stores many failures, `batchSize` rows per INSERT and per embedder call. Every record is
 * validated first: one invalid record fails the call before anything is stored. Each row is
 * the one `rememberFailure` would store for its record: the same derived columns and
 * embedding (`prepareFailure` and `embedPartsMany` of embed-text.ts).
 *
 * Idempotency keys: as with `rememberFailure`, the first row of a key wins. A record whose key
 * is already stored, or repeats an earlier record's key in the same call, stores nothing and
 * gets the first row's id and signature (so calling again with the same records is safe and
 * stores nothing new). Batches are separate statements: when one fails, the batches before it
 * stay stored, and a retry of the whole call stores only the rest.
 *
 * Afterwards (unless `analyse: false`) the failures table is analysed when its statistics went
 * stale ({@link analyseStale}: ≥ 50 + 10 % rows changed since the last ANALYZE).
 *
 * @param records - failure records (the `FailureRecord` contract); an empty list stores nothing
 * @returns one result per record in input order, the number of rows stored, whether the
 *   table was analysed, and the index build's time (ms)
 * @throws LoopsmithError `bad_request` naming the first invalid record's index, or a
 *   `batchSize` out of range; `internal` when the embedder returns vectors of the wrong size;
 *   `db_error` when the database fails
 */
export async function insertFailures(
  db: Database,
  embedder: Embedder,
  records: ReadonlyArray<z.input<typeof FailureRecord>>,
  opts: InsertFailuresOptions = {},
): Promise<InsertFailuresResult> {
  const batchSize = opts.batchSize ?? 1_000;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH) {
    throw new LoopsmithError("bad_request", `batchSize must be an integer from 1 to ${MAX_BATCH}, not ${batchSize}`);
  }
  const prepared = records.map((r, i) => prepare(r, i));
  // The first record of each key is the one inserted; repeats take its result.
  const firsts: Prepared[] = [];
  const seen = new Set<string>();
  for (const p of prepared) {
    if (seen.has(p.rec.idempotencyKey)) continue;
    seen.add(p.rec.idempotencyKey);
    firsts.push(p);
  }
  const batches: Prepared[][] = [];
  for (let start = 0; start < firsts.length; start += batchSize) batches.push(firsts.slice(start, start + batchSize));
  const done = new Map<string, Remembered>();
  let stored = 0;
  let buildMs = 0;
  const rebuild = opts.rebuildIndex === true && firsts.length > 0 ? await withDb("drop the HNSW index", () => dropIndex(db, embedder)) : undefined;
  try {
    await insertBatches(db, embedder, batches, done, (n) => (stored += n));
  } finally {
    if (rebuild !== undefined) {
      const started = performance.now();
      await withDb("build the HNSW index", () => buildIndex(db, rebuild));
      buildMs = performance.now() - started;
    }
  }
  const results = prepared.map((p) => {
    const r = done.get(p.rec.idempotencyKey);
    if (!r) throw new LoopsmithError("db_error", `memory could not store the failures: the row of ${p.rec.idempotencyKey} vanished`);
    return r;
  });
  const analysed =
    opts.analyse !== false && stored > 0 ? (await withDb("analyse the failures", () => analyseStale(db.pool, ["failures"]))).length > 0 : false;
  return { results, stored, analysed, buildMs };
}
