/**
 * The memory store: remembers failures (with their normalised signature and an embedding),
 * fixes, successes and finished tasks, and recalls the nearest past failures and successes
 * by cosine distance on pgvector HNSW indexes, same language and same embedder only.
 */
import { z } from "zod";
import pgvector from "pgvector/pg";
import type { Logger } from "pino";
import {
  FailureFix,
  FailureRecord,
  FailuresRequest,
  HistoryRequest,
  LoopsmithError,
  RecallRequest,
  RunRecord,
  StatsRequest,
  SuccessRecord,
  TaskId,
  TaskRecord,
  type Config,
  type Failures,
  type History,
  type MemoryStats,
  type Recall,
  type Remembered,
} from "@loopsmith/shared";
import { checkEmbedder, combine, createHashingEmbedder, type Embedder } from "./embedder.js";
import { openDatabase, embeddingExpr, type Backend, type Database } from "./db.js";
import { withDb } from "./errors.js";
import { signature as signatureOf } from "./signature.js";
import { readFailures, readHistory } from "./reads.js";
import { computeStats, logRecall } from "./stats.js";
import { readRun, saveRun } from "./runs.js";
import { rowToRecalledFailure, rowToRecalledSuccess } from "./rows.js";

/** Weights of a failure's signature vector and of its context vector in its embedding. */
export const SIGNATURE_WEIGHT = 0.75;
export const CONTEXT_WEIGHT = 0.25;
/** Characters of the goal kept in a failure's embedded context. */
const GOAL_CONTEXT_CHARS = 2_000;

/** Memory's operations. Every method validates its input against its contract first. */
export interface MemoryStore {
  /** `postgres` or `pglite`. */
  readonly backend: Backend;
  /** The embedder that makes and compares this store's vectors. */
  readonly embedder: Embedder;
  /**
   * The k nearest past failures (with their fix, when attached) and successes of the same
   * language, made by the same embedder, leaving out the same task when `excludeSameTask`.
   * `similarity` is 1 − cosine distance. Failures are matched on the signature of `errorText`
   * (weight 0.75) plus `text` (0.25); without `errorText`, on `text` alone. Successes are
   * matched on `text` against their goal.
   * @throws LoopsmithError `bad_request` for input that fails {@link RecallRequest}; `db_error`
   */
  recall(request: z.input<typeof RecallRequest>): Promise<Recall>;
  /**
   * Stores a failure. The signature is computed from `errorText` when absent. The embedded
   * text is the signature (weight 0.75) and, as context (0.25), the failing test names and
   * the trimmed goal (first 2,000 characters). The same `idempotencyKey` twice returns the
   * first row and stores nothing new.
   * @returns the row id (a decimal string) and the signature
   * @throws LoopsmithError `bad_request`; `db_error`
   */
  rememberFailure(record: z.input<typeof FailureRecord>): Promise<Remembered>;
  /**
   * Sets the reflection (the fix plan) of a stored failure; attaching again replaces it.
   * @throws LoopsmithError `not_found` when no failure has `failureId`; `bad_request`; `db_error`
   */
  attachFix(fix: z.input<typeof FailureFix>): Promise<Remembered>;
  /**
   * Stores a success (goal and passing files), embedded on its trimmed goal. Idempotent on
   * `idempotencyKey` like {@link rememberFailure}.
   * @throws LoopsmithError `bad_request`; `db_error`
   */
  rememberSuccess(record: z.input<typeof SuccessRecord>): Promise<Remembered>;
  /**
   * Records (or replaces) a finished task; `id` in the reply is the task id. The run itself
   * (task, events, result) is stored by {@link saveRun}.
   * @throws LoopsmithError `bad_request` (also for a `finishedAt` that is not a date); `db_error`
   */
  recordTask(record: z.input<typeof TaskRecord>): Promise<Remembered>;
  /**
   * Stores (or replaces: one run per task) a recorded run; `id` in the reply is the task id.
   * @throws LoopsmithError `bad_request` for a run that fails {@link RunRecord}; `db_error`
   */
  saveRun(run: z.input<typeof RunRecord>): Promise<Remembered>;
  /**
   * The recorded run of a task; `recordedAt` as ISO-8601 UTC.
   * @throws LoopsmithError `not_found` when none was recorded; `bad_request` for an invalid
   *   task id; `db_error`
   */
  run(taskId: string): Promise<RunRecord>;
  /**
   * One page of recent tasks, newest `finishedAt` first (`limit` after the `offset` newest);
   * `finishedAt` comes back as ISO-8601 UTC, each goal cut to `HISTORY_GOAL_CHARS`.
   * @throws LoopsmithError `bad_request`; `db_error`
   */
  history(request: z.input<typeof HistoryRequest>): Promise<History>;
  /**
   * Stored failures: one task's, oldest first, or the most recent of all, newest first;
   * `createdAt` as ISO-8601 UTC, the error text cut to 2 000 characters.
   * @throws LoopsmithError `bad_request`; `db_error`
   */
  failures(request: z.input<typeof FailuresRequest>): Promise<Failures>;
  /**
   * Statistics over a window of tasks (see `computeStats` in stats.ts): pass rate, stop
   * reasons, iterations, tokens, USD, recall hit rate; absent request: every task.
   * @throws LoopsmithError `bad_request` for input that fails {@link StatsRequest}; `db_error`
   */
  stats(request?: z.input<typeof StatsRequest>): Promise<MemoryStats>;
  /**
   * Logs a failure recall of `taskId` for the recall hit rate of {@link stats} (see
   * `logRecall` in stats.ts); a recall without a signature is not logged.
   * @returns whether a row was written
   * @throws LoopsmithError `db_error`
   */
  logRecall(taskId: string, recall: Recall): Promise<boolean>;
  /** Closes the pool, the socket server and PGlite (in that order). Safe to call twice. */
  close(): Promise<void>;
}

/** Dependencies of {@link openMemoryStore}. */
export interface MemoryStoreDeps {
  config: Config;
  log: Logger;
  /** @defaultValue createHashingEmbedder() (`hash-v1-256`, offline) */
  embedder?: Embedder;
}

function parse<S extends z.ZodType>(schema: S, input: unknown, what: string): z.infer<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    throw new LoopsmithError("bad_request", `invalid ${what}: ${z.prettifyError(parsed.error)}`, {
      details: parsed.error.issues,
    });
  }
  return parsed.data;
}

/** Builds a store over an open database. Exposed for tests; use {@link openMemoryStore}. */
export function createMemoryStore(db: Database, embedder: Embedder, log: Logger): MemoryStore {
  const vec = embeddingExpr(embedder.dimensions);
  const param = (n: number): string => `$${n}::vector(${embedder.dimensions})`;

  const embedOne = async (text: string): Promise<number[]> => {
    const [v] = await embedder.embed([text]);
    if (!v || v.length !== embedder.dimensions) {
      throw new LoopsmithError("internal", `embedder ${embedder.id} returned a vector of the wrong size`);
    }
    return v;
  };
  const embedFailure = async (sig: string, context: string): Promise<number[]> => {
    const [s, c] = await embedder.embed([sig, context]);
    if (!s || !c || s.length !== embedder.dimensions || c.length !== embedder.dimensions) {
      throw new LoopsmithError("internal", `embedder ${embedder.id} returned a vector of the wrong size`);
    }
    return combine([s, c], [SIGNATURE_WEIGHT, CONTEXT_WEIGHT]);
  };

  const existing = async (table: "failures" | "successes", key: string): Promise<Remembered | null> => {
    const cols = table === "failures" ? "id::text AS id, signature" : "id::text AS id";
    const { rows } = await db.pool.query<{ id: string; signature?: string }>(
      `SELECT ${cols} FROM loopsmith.${table} WHERE idempotency_key = $1`,
      [key],
    );
    const row = rows[0];
    if (!row) return null;
    return row.signature === undefined ? { id: row.id } : { id: row.id, signature: row.signature };
  };

  return {
    backend: db.backend,
    embedder,

    async recall(input) {
      const req = parse(RecallRequest, input, "recall request");
      const sig = req.errorText !== undefined && req.errorText.trim() !== "" ? signatureOf(req.errorText).signature : undefined;
      const textVec = await embedOne(req.text);
      const failureVec = sig === undefined ? textVec : await embedFailure(sig, req.text);
      const exclude = req.excludeSameTask ? req.taskId : null;
      return withDb("recall past failures", async () => {
        const failures = await db.pool.query(
          `SELECT id::text AS id, task_id, goal, signature, failing_tests, reflection,
                  1 - (${vec} <=> ${param(1)}) AS similarity
             FROM loopsmith.failures
            WHERE embedder = $2 AND language = $3 AND ($4::text IS NULL OR task_id <> $4::text)
            ORDER BY ${vec} <=> ${param(1)}
            LIMIT $5`,
          [pgvector.toSql(failureVec), embedder.id, req.language, exclude, req.k],
        );
        const successes = await db.pool.query(
          `SELECT id::text AS id, task_id, goal, files, 1 - (${vec} <=> ${param(1)}) AS similarity
             FROM loopsmith.successes
            WHERE embedder = $2 AND language = $3 AND ($4::text IS NULL OR task_id <> $4::text)
            ORDER BY ${vec} <=> ${param(1)}
            LIMIT $5`,
          [pgvector.toSql(textVec), embedder.id, req.language, exclude, req.k],
        );
        return {
          failures: failures.rows.map(rowToRecalledFailure),
          successes: successes.rows.map(rowToRecalledSuccess),
          ...(sig !== undefined ? { signature: sig } : {}),
          embedder: embedder.id,
        };
      });
    },

    async rememberFailure(input) {
      const rec = parse(FailureRecord, input, "failure record");
      const found = await withDb("look up the failure", () => existing("failures", rec.idempotencyKey));
      if (found) return found;
      const normalised = signatureOf(rec.errorText);
      const sig = rec.signature?.trim() ? rec.signature.trim() : normalised.signature;
      const context = `${rec.failingTests.join(" ")}\n${rec.goal.trim().slice(0, GOAL_CONTEXT_CHARS)}`;
      const embedding = await embedFailure(sig, context);
      return withDb("store the failure", async () => {
        const { rows } = await db.pool.query<{ id: string }>(
          `INSERT INTO loopsmith.failures
             (idempotency_key, task_id, iteration, language, goal, signature, error_type, error_text,
              failing_tests, output_tail, status, reflection, embedder, embedding)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12::jsonb, $13, ${param(14)})
           ON CONFLICT (idempotency_key) DO NOTHING
           RETURNING id::text AS id`,
          [
            rec.idempotencyKey,
            rec.taskId,
            rec.iteration,
            rec.language,
            rec.goal,
            sig,
            normalised.errorType,
            rec.errorText,
            JSON.stringify(rec.failingTests),
            rec.outputTail,
            rec.status,
            rec.reflection ? JSON.stringify(rec.reflection) : null,
            embedder.id,
            pgvector.toSql(embedding),
          ],
        );
        const id = rows[0]?.id;
        if (id !== undefined) return { id, signature: sig };
        // Lost a race with the same key: the first row wins.
        const first = await existing("failures", rec.idempotencyKey);
        if (!first) throw new LoopsmithError("db_error", "memory could not store the failure: the row vanished");
        return first;
      });
    },

    async attachFix(input) {
      const fix = parse(FailureFix, input, "fix");
      if (!/^\d{1,18}$/.test(fix.failureId)) {
        throw new LoopsmithError("not_found", `no stored failure has id ${JSON.stringify(fix.failureId.slice(0, 40))}`);
      }
      const { rows } = await withDb("attach the fix", () =>
        db.pool.query<{ id: string; signature: string }>(
          `UPDATE loopsmith.failures SET reflection = $2::jsonb, fixed_at = now()
            WHERE id = $1::bigint RETURNING id::text AS id, signature`,
          [fix.failureId, JSON.stringify(fix.reflection)],
        ),
      );
      const row = rows[0];
      if (!row) throw new LoopsmithError("not_found", `no stored failure has id ${fix.failureId}`);
      return { id: row.id, signature: row.signature };
    },

    async rememberSuccess(input) {
      const rec = parse(SuccessRecord, input, "success record");
      const found = await withDb("look up the success", () => existing("successes", rec.idempotencyKey));
      if (found) return found;
      const embedding = await embedOne(rec.goal.trim().slice(0, GOAL_CONTEXT_CHARS * 4));
      return withDb("store the success", async () => {
        const { rows } = await db.pool.query<{ id: string }>(
          `INSERT INTO loopsmith.successes
             (idempotency_key, task_id, iteration, language, goal, files, embedder, embedding)
           VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, ${param(8)})
           ON CONFLICT (idempotency_key) DO NOTHING
           RETURNING id::text AS id`,
          [rec.idempotencyKey, rec.taskId, rec.iteration, rec.language, rec.goal, JSON.stringify(rec.files), embedder.id, pgvector.toSql(embedding)],
        );
        const id = rows[0]?.id;
        if (id !== undefined) return { id };
        const first = await existing("successes", rec.idempotencyKey);
        if (!first) throw new LoopsmithError("db_error", "memory could not store the success: the row vanished");
        return first;
      });
    },

    async recordTask(input) {
      const rec = parse(TaskRecord, input, "task record");
      if (Number.isNaN(Date.parse(rec.finishedAt))) {
        throw new LoopsmithError("bad_request", `finishedAt ${JSON.stringify(rec.finishedAt.slice(0, 40))} is not an ISO-8601 date`);
      }
      await withDb("record the task", () =>
        db.pool.query(
          `INSERT INTO loopsmith.tasks
             (task_id, goal, language, status, stop_reason, iterations, usage, cost_usd, duration_ms, scripted, finished_at, usage_by_role)
           VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11::timestamptz, $12::jsonb)
           ON CONFLICT (task_id) DO UPDATE SET
             goal = EXCLUDED.goal, language = EXCLUDED.language, status = EXCLUDED.status,
             stop_reason = EXCLUDED.stop_reason, iterations = EXCLUDED.iterations, usage = EXCLUDED.usage,
             cost_usd = EXCLUDED.cost_usd, duration_ms = EXCLUDED.duration_ms, scripted = EXCLUDED.scripted,
             finished_at = EXCLUDED.finished_at, usage_by_role = EXCLUDED.usage_by_role, recorded_at = now()`,
          [
            rec.taskId,
            rec.goal,
            rec.language,
            rec.status,
            rec.stopReason,
            rec.iterations,
            JSON.stringify(rec.usage),
            rec.usage.costUsd,
            rec.durationMs,
            rec.scripted,
            new Date(rec.finishedAt).toISOString(),
            JSON.stringify(rec.usageByRole),
          ],
        ),
      );
      return { id: rec.taskId };
    },

    async saveRun(input) {
      const run = parse(RunRecord, input, "run");
      await saveRun(db, run);
      return { id: run.taskId };
    },

    async run(taskId) {
      return readRun(db, parse(TaskId, taskId, "task id"));
    },

    async history(input) {
      return readHistory(db, parse(HistoryRequest, input, "history request"));
    },

    async failures(input) {
      return readFailures(db, parse(FailuresRequest, input, "failures request"));
    },

    stats: async (input = { v: 1 }) => computeStats(db, parse(StatsRequest, input, "stats request")),

    logRecall: (taskId, recall) => logRecall(db, taskId, recall),

    async close() {
      log.debug({ backend: db.backend }, "closing memory");
      await db.close();
    },
  };
}

/**
 * Opens memory: PostgreSQL + pgvector when `config.databaseUrl` is set, else embedded PGlite
 * under `<config.dataDir>/memory`; applies migrations and the embedder's HNSW indexes.
 *
 * @throws LoopsmithError `config_invalid` for a bad embedder or DATABASE_URL; `db_error` when
 *   the database cannot be opened or migrated
 */
export async function openMemoryStore(deps: MemoryStoreDeps): Promise<MemoryStore> {
  const embedder = deps.embedder ?? createHashingEmbedder();
  checkEmbedder(embedder);
  const db = await openDatabase({ config: deps.config, log: deps.log, embedders: [embedder] });
  deps.log.info({ backend: db.backend, location: db.location, embedder: embedder.id }, "memory open");
  return createMemoryStore(db, embedder, deps.log);
}
