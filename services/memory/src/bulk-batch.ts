/**
 * One batch of failures for a bulk insert (`bulk.ts`): its rows (derived columns and one
 * embedder call), their encoding, and how the batch is sent and settled: `COPY … FROM STDIN
 * (FORMAT binary)` on PostgreSQL, `INSERT … SELECT FROM unnest(…)` otherwise. Either way the
 * stored columns are {@link COLUMNS}, and vectors travel as binary 4-byte floats.
 */
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setImmediate as turn } from "node:timers/promises";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { DEFAULT_OWNER } from "@loopsmith/shared/bus";
import { type FailureRecord, type Remembered } from "@loopsmith/shared/contracts";
import type { Embedder } from "./embedder.js";
import type { Database } from "./db.js";
import { embedPartsMany, prepareFailure, type PreparedFailure } from "./embed-text.js";
import { copyBinary, vectorArrayParam, type CopyKind, type CopyValue } from "./pg-binary.js";

/**
 * Limit of one batch's INSERT, in ms: with the HNSW index maintained, 1,000 rows into a large
 * table can pass the pool's 20 s on a busy host.
 */
const BATCH_TIMEOUT_MS = 600_000;

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
  const embeddings = await embedPartsMany(
    embedder,
    derived.map((d) => d.parts),
  );
  return batch.map((rec, i) => ({ rec, derived: derived[i] as PreparedFailure, embedding: embeddings[i] as number[] }));
}

/**
 * One batch's INSERT: each column is one array parameter, unnested (20 parameters whatever the
 * batch size). The embeddings go as one binary `vector[]` (pg-binary.ts: the same floats as
 * their text form, without formatting and parsing 256 numbers a row). A key already stored is
 * skipped; RETURNING names the rows inserted.
 */
function insertStatement(embedder: Embedder, vectorOid: number, rows: Row[]): pg.QueryConfig {
  const params = COLUMNS.map(
    (c, i) => `$${i + 1}::${c.kind === "int4" ? "int" : c.kind === "vector" ? "vector" : "text"}[]`,
  );
  const values = COLUMNS.map((c) =>
    c.kind === "vector"
      ? vectorArrayParam(
          rows.map((r) => r.embedding),
          embedder.dimensions,
          vectorOid,
        )
      : rows.map((r) => c.value(r, embedder.id)),
  );
  const aliases = COLUMNS.map((_, i) => `c${i}`);
  const selected = COLUMNS.map((c, i) =>
    c.kind === "jsonb" ? `c${i}::jsonb` : c.kind === "vector" ? `c${i}::vector(${embedder.dimensions})` : `c${i}`,
  );
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
export async function payloadOf(
  embedder: Embedder,
  vectorOid: number,
  batch: FailureRecord[],
  copy: boolean,
): Promise<Payload> {
  const rows = await rowsOf(embedder, batch);
  const viaCopy = copy && rows.length > 1 && rows.every((r) => r.rec.iteration <= INT4_MAX);
  return viaCopy
    ? {
        rows,
        copy: copyBinary(
          COLUMN_KINDS,
          rows.map((r) => COLUMNS.map((c) => c.value(r, embedder.id))),
          embedder.dimensions,
        ),
      }
    : { rows, insert: insertStatement(embedder, vectorOid, rows) };
}

type Settled<T> = { ok: T } | { err: unknown };

/** Stored rows of `keys`, by key (id as a decimal string, headline signature). */
export async function rowsByKey(
  client: Pick<pg.PoolClient, "query">,
  keys: string[],
): Promise<Map<string, Remembered>> {
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
async function copyBatch(
  client: pg.PoolClient,
  embedder: Embedder,
  vectorOid: number,
  payload: Payload & { copy: Buffer },
): Promise<Map<string, Remembered>> {
  const stored = await rowsByKey(
    client,
    payload.rows.map((r) => r.rec.idempotencyKey),
  );
  const fresh = payload.rows.filter((r) => !stored.has(r.rec.idempotencyKey));
  if (fresh.length === 0) return new Map();
  const data =
    fresh.length === payload.rows.length
      ? payload.copy
      : copyBinary(
          COLUMN_KINDS,
          fresh.map((r) => COLUMNS.map((c) => c.value(r, embedder.id))),
          embedder.dimensions,
        );
  const stream = Object.assign(copyFrom(`COPY loopsmith.failures (${COLUMN_NAMES}) FROM STDIN (FORMAT binary)`), {
    query_timeout: BATCH_TIMEOUT_MS,
  });
  try {
    await pipeline(Readable.from([data]), client.query(stream));
  } catch (err) {
    if ((err as { code?: unknown }).code !== "23505") throw err;
    const { rows } = await client.query<{ id: string; key: string; signature: string }>(
      insertStatement(embedder, vectorOid, fresh),
    );
    return new Map(rows.map((r) => [r.key, { id: r.id, signature: r.signature }]));
  }
  return rowsByKey(
    client,
    fresh.map((r) => r.rec.idempotencyKey),
  );
}

/**
 * Sends a batch on a pooled client and settles (never rejects, so it can wait while the next
 * batch is prepared): the client is released as soon as the batch is stored.
 * @returns the rows this batch inserted, by key
 */
export async function send(
  db: Database,
  embedder: Embedder,
  vectorOid: number,
  payload: Payload,
): Promise<Settled<Map<string, Remembered>>> {
  let client: pg.PoolClient;
  try {
    client = await db.pool.connect();
  } catch (err) {
    return { err };
  }
  let broken = false;
  try {
    if (payload.copy) return { ok: await copyBatch(client, embedder, vectorOid, { ...payload, copy: payload.copy }) };
    const { rows } = await client.query<{ id: string; key: string; signature: string }>(
      payload.insert ?? insertStatement(embedder, vectorOid, payload.rows),
    );
    return { ok: new Map(rows.map((r) => [r.key, { id: r.id, signature: r.signature }])) };
  } catch (err) {
    // A COPY cut short (a timeout) may leave the connection mid-protocol: do not reuse it.
    broken = payload.copy !== undefined;
    return { err };
  } finally {
    client.release(broken);
  }
}
