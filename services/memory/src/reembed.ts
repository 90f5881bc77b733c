/**
 * Re-embedding: rows another embedder made (every row, after the user switched embedders;
 * the rows stored with the hashing embedder while the configured one failed) get a vector of
 * the current embedder, made from the text stored with them, as they would have been made
 * when stored: a failure from its `recall_goal`, `recall_error` and `recall_code` parts (what
 * `embed-text.ts` built when it was stored), a success from its goal. Until then recall never
 * sees them: it compares only vectors of one embedder.
 *
 * One row's embedder and vector change together, in one UPDATE that applies only while the
 * row still has the embedder it was read with, so a row is never left with one embedder's id
 * and another's vector, and two processes re-embedding at once do no harm. Rows go newest
 * first, a page at a time, by id (each row is read once per pass).
 */
import type { Logger } from "pino";
import { buildEmbedText, embedPartsMany } from "./embed-text.js";
import type { Embedder } from "./embedder.js";
import type { Database } from "./db.js";
import { vectorArrayParam, vectorTypeOid } from "./pg-binary.js";
import { withDb } from "./errors.js";

/** Rows per page: one embedder call (up to 3 texts a failure) and one UPDATE. */
export const REEMBED_PAGE = 100;

/** Rows changed in one table past which it is analysed again (the embedder column's statistics moved). */
const ANALYZE_AFTER = 50;

/** What one pass of {@link reembedRows} did. */
export interface ReembedResult {
  /** Failures and successes given the current embedder's vector. */
  failures: number;
  successes: number;
  /**
   * The embedder's error that stopped the pass (the rest waits for the next pass); absent
   * when every row of another embedder was re-embedded, or the pass was asked to stop.
   */
  stoppedBy?: unknown;
}

/** Options of {@link reembedRows}. */
export interface ReembedOptions {
  log: Logger;
  /** Rows per page. @defaultValue {@link REEMBED_PAGE} */
  page?: number;
  /** Asked between pages; true ends the pass there (memory is closing). */
  stop?: () => boolean;
}

interface StaleRow {
  id: string;
  embedder: string;
  goal: string;
  error: string;
  code: string;
}

/** Whether `table` holds a row of an embedder other than `id` (two range scans of the `(embedder, language)` index). */
async function anyStale(db: Database, table: "failures" | "successes", id: string): Promise<boolean> {
  const { rows } = await db.pool.query<{ stale: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM loopsmith.${table} WHERE embedder < $1)
         OR EXISTS (SELECT 1 FROM loopsmith.${table} WHERE embedder > $1) AS stale`,
    [id],
  );
  return rows[0]?.stale === true;
}

/** The next page of rows of other embedders, newest first, below id `below` (null: from the newest). */
async function page(
  db: Database,
  table: "failures" | "successes",
  embedderId: string,
  below: string | null,
  size: number,
): Promise<StaleRow[]> {
  const cols =
    table === "failures"
      ? "recall_goal AS goal, recall_error AS error, recall_code AS code"
      : "goal, '' AS error, '' AS code";
  const { rows } = await db.pool.query<StaleRow>(
    `SELECT id::text AS id, embedder, ${cols} FROM loopsmith.${table}
      WHERE embedder <> $1 AND ($2::bigint IS NULL OR id < $2::bigint)
      ORDER BY id DESC LIMIT $3`,
    [embedderId, below, size],
  );
  // A success's vector is made from its goal as `rememberSuccess` makes it.
  return table === "failures" ? rows : rows.map((r) => ({ ...r, goal: buildEmbedText({ goal: r.goal }).goal }));
}

/**
 * Gives every row of `table` made by another embedder a vector of `embedder`, a page at a
 * time.
 * @returns the rows changed, and the embedder's error when one stopped the pass
 * @throws LoopsmithError `db_error` when the database fails
 */
async function reembedTable(
  db: Database,
  embedder: Embedder,
  table: "failures" | "successes",
  opts: ReembedOptions,
): Promise<{ changed: number; stoppedBy?: unknown }> {
  if (!(await withDb(`look for rows of other embedders (${table})`, () => anyStale(db, table, embedder.id)))) {
    return { changed: 0 };
  }
  const size = opts.page ?? REEMBED_PAGE;
  const oid = await withDb("look up the vector type", () => vectorTypeOid(db.pool));
  let below: string | null = null;
  let changed = 0;
  for (;;) {
    if (opts.stop?.()) return { changed };
    const rows = await withDb(`read rows of other embedders (${table})`, () =>
      page(db, table, embedder.id, below, size),
    );
    if (rows.length === 0) break;
    below = rows[rows.length - 1]?.id ?? null;
    let vectors: number[][];
    try {
      vectors = await embedPartsMany(embedder, rows);
    } catch (err) {
      return { changed, stoppedBy: err };
    }
    const { rowCount } = await withDb(`re-embed ${table}`, () =>
      db.pool.query(
        `UPDATE loopsmith.${table} t SET embedder = $1, embedding = u.e::vector(${embedder.dimensions})
           FROM unnest($2::bigint[], $3::text[], $4::vector[]) AS u(id, old, e)
          WHERE t.id = u.id AND t.embedder = u.old`,
        [
          embedder.id,
          rows.map((r) => r.id),
          rows.map((r) => r.embedder),
          vectorArrayParam(vectors, embedder.dimensions, oid),
        ],
      ),
    );
    changed += rowCount ?? 0;
    if (rows.length < size) break;
  }
  if (changed >= ANALYZE_AFTER) await withDb(`analyse ${table}`, () => db.pool.query(`ANALYZE loopsmith.${table}`));
  return { changed };
}

/**
 * One pass of re-embedding: every failure, then every success, made by another embedder than
 * `embedder` gets `embedder`'s vector (see the top of this file). The pass ends early, keeping
 * what it did, when the embedder fails (`stoppedBy`) or `opts.stop()` says so.
 * @returns how many rows of each table it re-embedded
 * @throws LoopsmithError `db_error` when the database fails
 */
export async function reembedRows(db: Database, embedder: Embedder, opts: ReembedOptions): Promise<ReembedResult> {
  const failures = await reembedTable(db, embedder, "failures", opts);
  if (failures.stoppedBy !== undefined)
    return { failures: failures.changed, successes: 0, stoppedBy: failures.stoppedBy };
  const successes = await reembedTable(db, embedder, "successes", opts);
  const result: ReembedResult = { failures: failures.changed, successes: successes.changed };
  if (successes.stoppedBy !== undefined) result.stoppedBy = successes.stoppedBy;
  if (result.failures + result.successes > 0) {
    opts.log.info({ embedder: embedder.id, ...result }, "memory re-embedded rows of other embedders");
  }
  return result;
}
