/**
 * Bulk inserts of failures: many rows per statement and one embedder call per batch, for
 * imports, `bench:memory` and a `rememberFailures` batch API. Each row is what
 * `rememberFailure` stores for the same record (same columns, signature and embedding).
 *
 * Two ways to send a batch, storing the same rows:
 * - COPY (PostgreSQL, batches of 2 rows or more): `COPY … FROM STDIN (FORMAT binary)` through
 *   `pg-copy-streams`, rows encoded by pg-binary.ts; keys already stored are left out first
 *   and the ids read back after.
 * - INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING RETURNING: PGlite (its socket server
 *   does not support COPY FROM STDIN: "protocol synchronization was lost"), single rows
 *   (`rememberFailure`), and `copy: false`.
 * Either way vectors travel as binary 4-byte floats, not as decimal text. A batch's rows, their
 * encoding and sending are in bulk-batch.ts; this file validates, batches, and drops and
 * rebuilds the indexes around a bulk load.
 *
 * Where a bulk load's time goes, 20,000 synthetic failures on PostgreSQL (bench:memory): with
 * vectors as text and plain INSERTs (2,500 rows/s), embedding and deriving the columns in JS
 * took about 3 s (this design: ~1.3 s), the vectors 1.3 s to format and 2-3 s for the server
 * to parse, the INSERT itself about 3 s (COPY: ~2.3 s). On PGlite the server's share is larger (wasm, same thread) and the
 * full-text (GIN) indexes' upkeep alone is half of it: `rebuildIndex` drops them too.
 */
import { z } from "zod";
import type pg from "pg";
import { FailureRecord, type Remembered } from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import type { Embedder } from "./embedder.js";
import { analyseStale, FAILURES_TEXT_INDEXES, hnswIndexName, type Database } from "./db.js";
import { toDbError, withDb } from "./errors.js";
import { vectorTypeOid } from "./pg-binary.js";
import { payloadOf, rowsByKey, send } from "./bulk-batch.js";

/** Most rows per INSERT statement. */
const MAX_BATCH = 5_000;

/** Options of {@link insertFailures}. */
export interface InsertFailuresOptions {
  /** Rows per INSERT statement (or COPY) and per embedder call, 1 to 5,000. @defaultValue 1000 */
  batchSize?: number;
  /**
   * On PostgreSQL, send batches of more than one row with `COPY … FROM STDIN (FORMAT binary)`
   * (the rows stored are the same; 20,000 rows in bench:memory: 2.0 s against 3.3 s). PGlite's
   * socket server does not support COPY FROM STDIN, so there the INSERT is always used, as for
   * single rows. @defaultValue true
   */
  copy?: boolean;
  /**
   * Analyse the failures table afterwards when its statistics went stale (the rule of
   * {@link analyseStale}), so recall keeps using the HNSW index. @defaultValue true
   */
  analyse?: boolean;
  /**
   * Bulk load: drop the embedder's HNSW index and the full-text (GIN) indexes on `failures`
   * before inserting and build them again after (one build is several times faster than
   * maintaining the index row by row). Worth it when the call at least doubles the embedder's
   * rows (an import into a new or small memory). Meanwhile recall of that embedder's failures
   * stays correct but scans the table. If the process dies before the build, the next
   * {@link openDatabase} builds them.
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
  /**
   * Time spent building the full-text (GIN) indexes again (`rebuildIndex`), in ms; 0 when none
   * was built. Part of the load (they are maintained by every insert otherwise), not of `buildMs`.
   */
  textIndexMs: number;
}

function validate(input: unknown, index: number): FailureRecord {
  const parsed = FailureRecord.safeParse(input);
  if (!parsed.success) {
    throw new LoopsmithError(
      "bad_request",
      `invalid failure record at index ${index}: ${z.prettifyError(parsed.error)}`,
      {
        details: parsed.error.issues,
      },
    );
  }
  return parsed.data;
}

/** A build can take minutes at 100,000s of rows: far past the pool's query timeout. */
const BUILD_TIMEOUT_MS = 3_600_000;

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
 * Drops the full-text (GIN) indexes of `failures` ({@link FAILURES_TEXT_INDEXES}) that exist.
 * Maintaining them is most of an insert's cost on PGlite (20,000 rows: 4 of 8 s; building
 * them after, 0.3 s).
 * @returns the statements that build the dropped ones again (`IF NOT EXISTS`)
 */
async function dropTextIndexes(db: Database): Promise<string[]> {
  const { rows } = await db.pool.query<{ name: string }>(
    "SELECT indexname AS name FROM pg_indexes WHERE schemaname = 'loopsmith' AND indexname = ANY($1::text[])",
    [FAILURES_TEXT_INDEXES.map((i) => i.name)],
  );
  const dropped = FAILURES_TEXT_INDEXES.filter((i) => rows.some((r) => r.name === i.name));
  for (const i of dropped) await db.pool.query(`DROP INDEX IF EXISTS loopsmith.${i.name}`);
  return dropped.map((i) => i.create);
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
 * Runs the index builds `statements` in order on one pooled client with {@link BUILD_MEMORY}
 * and no parallel workers, then resets both settings (PGlite has one session for every
 * connection). Parallel workers share the graph through dynamic shared memory of that size,
 * which a container's default 64 MB `/dev/shm` cannot hold ("could not resize shared memory
 * segment").
 */
async function buildIndexes(db: Database, statements: readonly string[]): Promise<void> {
  if (statements.length === 0) return;
  const client = await db.pool.connect();
  let broken = false;
  try {
    await client.query(`SET maintenance_work_mem = '${BUILD_MEMORY}'; SET max_parallel_maintenance_workers = 0`);
    for (const text of statements) await client.query({ text, query_timeout: BUILD_TIMEOUT_MS } as pg.QueryConfig);
  } finally {
    await client
      .query("RESET maintenance_work_mem; RESET max_parallel_maintenance_workers")
      .catch(() => (broken = true));
    client.release(broken);
  }
}

/**
 * Inserts the batches in order, each prepared (derived, embedded, encoded) while the one before
 * is being stored; records each key's row in `done`.
 */
async function insertBatches(
  db: Database,
  embedder: Embedder,
  batches: FailureRecord[][],
  copy: boolean,
  done: Map<string, Remembered>,
  onStored: (rows: number) => void,
): Promise<void> {
  if (batches.length === 0) return;
  const vectorOid = await withDb("look up the vector type", () => vectorTypeOid(db.pool));
  let payload = batches[0] ? await payloadOf(embedder, vectorOid, batches[0], copy) : undefined;
  for (let b = 0; b < batches.length && payload; b++) {
    const batch = batches[b] ?? [];
    // While the database stores this batch, the next one is prepared (PostgreSQL works in
    // another process; PGlite shares this thread, so there it simply runs in turn).
    const pending = send(db, embedder, vectorOid, payload);
    const following = batches[b + 1];
    payload = following ? await payloadOf(embedder, vectorOid, following, copy) : undefined;
    const settled = await pending;
    if ("err" in settled) throw toDbError("store the failures", settled.err);
    const inserted = settled.ok;
    onStored(inserted.size);
    for (const [k, v] of inserted) done.set(k, v);
    const missing = batch.map((rec) => rec.idempotencyKey).filter((k) => !inserted.has(k));
    for (const [k, v] of await withDb("look up the failures", () => rowsByKey(db.pool, missing))) done.set(k, v);
  }
}

/**
 * Stores many failures, `batchSize` rows per statement and per embedder call: on PostgreSQL a
 * binary COPY per batch (unless `copy: false`), else one INSERT per batch (see
 * {@link InsertFailuresOptions.copy}). Every record is validated first: one invalid record
 * fails the call before anything is stored. Each row is the one `rememberFailure` would store
 * for its record: the same derived columns and embedding (`prepareFailure` and
 * `embedPartsMany` of embed-text.ts), whichever way it is sent.
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
 *   table was analysed, and the index builds' times (ms)
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
  const valid = records.map((r, i) => validate(r, i));
  // The first record of each key is the one inserted; repeats take its result.
  const firsts: FailureRecord[] = [];
  const seen = new Set<string>();
  for (const rec of valid) {
    if (seen.has(rec.idempotencyKey)) continue;
    seen.add(rec.idempotencyKey);
    firsts.push(rec);
  }
  const batches: FailureRecord[][] = [];
  for (let start = 0; start < firsts.length; start += batchSize) batches.push(firsts.slice(start, start + batchSize));
  const copy = opts.copy !== false && db.backend === "postgres";
  const done = new Map<string, Remembered>();
  let stored = 0;
  let buildMs = 0;
  let textIndexMs = 0;
  const bulk = opts.rebuildIndex === true && firsts.length > 0;
  const rebuild = bulk ? await withDb("drop the HNSW index", () => dropIndex(db, embedder)) : undefined;
  const rebuildText = bulk ? await withDb("drop the full-text indexes", () => dropTextIndexes(db)) : [];
  try {
    await insertBatches(db, embedder, batches, copy, done, (n) => (stored += n));
  } finally {
    let started = performance.now();
    await withDb("build the full-text indexes", () => buildIndexes(db, rebuildText));
    textIndexMs = rebuildText.length > 0 ? performance.now() - started : 0;
    if (rebuild !== undefined) {
      started = performance.now();
      await withDb("build the HNSW index", () => buildIndexes(db, [rebuild]));
      buildMs = performance.now() - started;
    }
  }
  const results = valid.map((rec) => {
    const r = done.get(rec.idempotencyKey);
    if (!r)
      throw new LoopsmithError(
        "db_error",
        `memory could not store the failures: the row of ${rec.idempotencyKey} vanished`,
      );
    return r;
  });
  const analysed =
    opts.analyse !== false && stored > 0
      ? (await withDb("analyse the failures", () => analyseStale(db.pool, ["failures"]))).length > 0
      : false;
  return { results, stored, analysed, buildMs, textIndexMs };
}
