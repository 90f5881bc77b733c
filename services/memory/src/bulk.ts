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
 * Either way vectors travel as binary 4-byte floats, not as decimal text.
 *
 * Where a bulk load's time went, 20,000 synthetic failures on PostgreSQL (bench:memory, before
 * this design: 2,500 rows/s): embedding and deriving the columns in JS about 3 s (now ~1.3 s),
 * vectors as text 1.3 s to format and 2-3 s for the server to parse, the INSERT itself about
 * 3 s (COPY: ~2.3 s). On PGlite the server's share is larger (wasm, same thread) and the
 * full-text (GIN) indexes' upkeep alone is half of it: `rebuildIndex` drops them too.
 */
import { z } from "zod";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setImmediate as turn } from "node:timers/promises";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { DEFAULT_OWNER, FailureRecord, LoopsmithError, type Remembered } from "@loopsmith/shared";
import type { Embedder } from "./embedder.js";
import { analyseStale, FAILURES_TEXT_INDEXES, hnswIndexName, type Database } from "./db.js";
import { embedPartsMany, prepareFailure, type PreparedFailure } from "./embed-text.js";
import { toDbError, withDb } from "./errors.js";
import { copyBinary, vectorArrayParam, vectorTypeOid, type CopyKind, type CopyValue } from "./pg-binary.js";

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

/** One validated record and, once its batch is prepared, the columns derived from it. */
interface Row {
  rec: FailureRecord;
  derived: PreparedFailure;
  embedding: number[];
}

/** One stored column of `failures`: its name, its COPY encoding and its value for a row. */
interface Column {
  name: string;
  kind: CopyKind;
  value: (row: Row, embedderId: string) => CopyValue;
}

/**
 * The columns a failure is stored with, in order, for both ways of sending a batch. Generated
 * columns (the full-text vectors) need no value.
 */
const COLUMNS: readonly Column[] = [
  { name: "idempotency_key", kind: "text", value: (r) => r.rec.idempotencyKey },
  { name: "task_id", kind: "text", value: (r) => r.rec.taskId },
  { name: "iteration", kind: "int4", value: (r) => r.rec.iteration },
  { name: "language", kind: "text", value: (r) => r.rec.language },
  { name: "goal", kind: "text", value: (r) => r.rec.goal },
  { name: "signature", kind: "text", value: (r) => r.derived.signature },
  { name: "error_type", kind: "text", value: (r) => r.derived.errorType },
  { name: "error_text", kind: "text", value: (r) => r.derived.errorText },
  { name: "failing_tests", kind: "jsonb", value: (r) => JSON.stringify(r.rec.failingTests) },
  { name: "output_tail", kind: "text", value: (r) => r.derived.outputTail },
  { name: "status", kind: "text", value: (r) => r.rec.status },
  { name: "reflection", kind: "jsonb", value: (r) => (r.rec.reflection ? JSON.stringify(r.rec.reflection) : null) },
  { name: "embedder", kind: "text", value: (_, embedderId) => embedderId },
  { name: "embedding", kind: "vector", value: (r) => r.embedding },
  { name: "code", kind: "text", value: (r) => r.rec.code ?? "" },
  { name: "signature_key", kind: "text", value: (r) => r.derived.key },
  { name: "recall_goal", kind: "text", value: (r) => r.derived.parts.goal },
  { name: "recall_error", kind: "text", value: (r) => r.derived.parts.error },
  { name: "recall_code", kind: "text", value: (r) => r.derived.parts.code },
  { name: "owner", kind: "text", value: (r) => r.rec.owner ?? DEFAULT_OWNER },
];
const COLUMN_NAMES = COLUMNS.map((c) => c.name).join(", ");
const COLUMN_KINDS = COLUMNS.map((c) => c.kind);
/** `COPY`'s int4 range: a batch with an iteration beyond it is inserted (and refused) as text. */
const INT4_MAX = 2 ** 31 - 1;

function validate(input: unknown, index: number): FailureRecord {
  const parsed = FailureRecord.safeParse(input);
  if (!parsed.success) {
    throw new LoopsmithError("bad_request", `invalid failure record at index ${index}: ${z.prettifyError(parsed.error)}`, {
      details: parsed.error.issues,
    });
  }
  return parsed.data;
}

/**
 * Rows derived between two turns of the event loop while a batch is prepared, so that the
 * batch being sent meanwhile keeps moving (its round trips are answered in those turns; without
 * them the database would wait for the whole next batch to be prepared).
 */
const ROWS_PER_TURN = 100;

/**
 * The batch's rows: derived columns (as the store derives them) and one embedder call. The
 * columns are derived {@link ROWS_PER_TURN} rows at a time, yielding to the event loop between.
 */
async function rowsOf(embedder: Embedder, batch: FailureRecord[]): Promise<Row[]> {
  const derived: PreparedFailure[] = [];
  for (let start = 0; start < batch.length; start += ROWS_PER_TURN) {
    if (start > 0) await turn();
    for (const rec of batch.slice(start, start + ROWS_PER_TURN)) derived.push(prepareFailure(rec));
  }
  if (batch.length > ROWS_PER_TURN) await turn();
  const embeddings = await embedPartsMany(embedder, derived.map((d) => d.parts));
  return batch.map((rec, i) => ({ rec, derived: derived[i] as PreparedFailure, embedding: embeddings[i] as number[] }));
}

/**
 * One batch's INSERT: each column is one array parameter, unnested (20 parameters whatever the
 * batch size). The embeddings go as one binary `vector[]` (pg-binary.ts: the same floats as
 * their text form, without formatting and parsing 256 numbers a row). A key already stored is
 * skipped; RETURNING names the rows inserted.
 */
function insertStatement(embedder: Embedder, vectorOid: number, rows: Row[]): pg.QueryConfig {
  const params = COLUMNS.map((c, i) => `$${i + 1}::${c.kind === "int4" ? "int" : c.kind === "vector" ? "vector" : "text"}[]`);
  const values = COLUMNS.map((c) =>
    c.kind === "vector" ? vectorArrayParam(rows.map((r) => r.embedding), embedder.dimensions, vectorOid) : rows.map((r) => c.value(r, embedder.id)),
  );
  const aliases = COLUMNS.map((_, i) => `c${i}`);
  const selected = COLUMNS.map((c, i) => (c.kind === "jsonb" ? `c${i}::jsonb` : c.kind === "vector" ? `c${i}::vector(${embedder.dimensions})` : `c${i}`));
  return {
    // One row (`rememberFailure`) keeps the pool's limit, below the bus's timeout.
    ...(rows.length > 1 ? { query_timeout: BATCH_TIMEOUT_MS } : {}),
    text: `INSERT INTO loopsmith.failures (${COLUMN_NAMES})
     SELECT ${selected.join(", ")} FROM unnest(${params.join(", ")}) AS u(${aliases.join(", ")})
     ON CONFLICT (idempotency_key) DO NOTHING
     RETURNING id::text AS id, idempotency_key AS key, signature`,
    values,
  };
}

/** A batch ready to send: its rows and, by the way it goes, its INSERT or its COPY data. */
interface Payload {
  rows: Row[];
  insert?: pg.QueryConfig;
  copy?: Buffer;
}

/** Prepares a batch: derives, embeds and encodes it (while the batch before is being sent). */
async function payloadOf(embedder: Embedder, vectorOid: number, batch: FailureRecord[], copy: boolean): Promise<Payload> {
  const rows = await rowsOf(embedder, batch);
  const viaCopy = copy && rows.length > 1 && rows.every((r) => r.rec.iteration <= INT4_MAX);
  return viaCopy
    ? { rows, copy: copyBinary(COLUMN_KINDS, rows.map((r) => COLUMNS.map((c) => c.value(r, embedder.id))), embedder.dimensions) }
    : { rows, insert: insertStatement(embedder, vectorOid, rows) };
}

type Settled<T> = { ok: T } | { err: unknown };

/** Stored rows of `keys`, by key (id as a decimal string, headline signature). */
async function rowsByKey(client: Pick<pg.PoolClient, "query">, keys: string[]): Promise<Map<string, Remembered>> {
  if (keys.length === 0) return new Map();
  const { rows } = await client.query<{ id: string; key: string; signature: string }>(
    "SELECT id::text AS id, idempotency_key AS key, signature FROM loopsmith.failures WHERE idempotency_key = ANY($1::text[])",
    [keys],
  );
  return new Map(rows.map((r) => [r.key, { id: r.id, signature: r.signature }]));
}

/**
 * COPY of a batch: the keys already stored are left out (their COPY data made again without
 * them), the rest copied in one statement, and their ids read back. A key another writer
 * stores meanwhile fails the whole COPY (unique violation, nothing stored): the batch is then
 * inserted with {@link insertStatement}, which skips it.
 * @returns the rows this batch inserted, by key
 */
async function copyBatch(client: pg.PoolClient, embedder: Embedder, vectorOid: number, payload: Payload & { copy: Buffer }): Promise<Map<string, Remembered>> {
  const stored = await rowsByKey(client, payload.rows.map((r) => r.rec.idempotencyKey));
  const fresh = payload.rows.filter((r) => !stored.has(r.rec.idempotencyKey));
  if (fresh.length === 0) return new Map();
  const data =
    fresh.length === payload.rows.length ? payload.copy : copyBinary(COLUMN_KINDS, fresh.map((r) => COLUMNS.map((c) => c.value(r, embedder.id))), embedder.dimensions);
  const stream = Object.assign(copyFrom(`COPY loopsmith.failures (${COLUMN_NAMES}) FROM STDIN (FORMAT binary)`), { query_timeout: BATCH_TIMEOUT_MS });
  try {
    await pipeline(Readable.from([data]), client.query(stream));
  } catch (err) {
    if ((err as { code?: unknown }).code !== "23505") throw err;
    const { rows } = await client.query<{ id: string; key: string; signature: string }>(insertStatement(embedder, vectorOid, fresh));
    return new Map(rows.map((r) => [r.key, { id: r.id, signature: r.signature }]));
  }
  return rowsByKey(client, fresh.map((r) => r.rec.idempotencyKey));
}

/**
 * Sends a batch on a pooled client and settles (never rejects, so it can wait while the next
 * batch is prepared): the client is released as soon as the batch is stored.
 * @returns the rows this batch inserted, by key
 */
async function send(db: Database, embedder: Embedder, vectorOid: number, payload: Payload): Promise<Settled<Map<string, Remembered>>> {
  let client: pg.PoolClient;
  try {
    client = await db.pool.connect();
  } catch (err) {
    return { err };
  }
  let broken = false;
  try {
    if (payload.copy) return { ok: await copyBatch(client, embedder, vectorOid, { ...payload, copy: payload.copy }) };
    const { rows } = await client.query<{ id: string; key: string; signature: string }>(payload.insert ?? insertStatement(embedder, vectorOid, payload.rows));
    return { ok: new Map(rows.map((r) => [r.key, { id: r.id, signature: r.signature }])) };
  } catch (err) {
    // A COPY cut short (a timeout) may leave the connection mid-protocol: do not reuse it.
    broken = payload.copy !== undefined;
    return { err };
  } finally {
    client.release(broken);
  }
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
    await client.query("RESET maintenance_work_mem; RESET max_parallel_maintenance_workers").catch(() => (broken = true));
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
    if (!r) throw new LoopsmithError("db_error", `memory could not store the failures: the row of ${rec.idempotencyKey} vanished`);
    return r;
  });
  const analysed =
    opts.analyse !== false && stored > 0 ? (await withDb("analyse the failures", () => analyseStale(db.pool, ["failures"]))).length > 0 : false;
  return { results, stored, analysed, buildMs, textIndexMs };
}
