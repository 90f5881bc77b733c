/**
 * The memory store: remembers failures (with their normalised signature and an embedding),
 * fixes, successes and finished tasks, and recalls the nearest past failures (hybrid: pgvector
 * and full-text rankings fused by reciprocal rank, see `recall.ts`) and successes (cosine
 * distance on pgvector HNSW indexes), same language and same embedder only.
 *
 * The embedder is the configured one (`configuredEmbedder`: the hashing embedder by default,
 * or an embeddings API). When an embedder that can fail (any but a hashing one) fails, after
 * its own retries, nothing is lost: the failure or success is stored with the offline hashing
 * embedder's vector instead, and a recall is made with the hashing embedder (over the rows
 * it made); the reply's `embedder` says which. Rows of another embedder than the configured
 * one (the fallback's, or every row after a switch) are re-embedded in the background
 * (`reembed.ts`): once when memory opens, and again after the configured embedder, having
 * failed, answers again.
 */
import { z } from "zod";
import pgvector from "pgvector/pg";
import type { Logger } from "pino";
import {
  FailureFix,
  FailureRecord,
  FailuresRequest,
  HistoryRequest,
  RecallRequest,
  RunRecord,
  StatsRequest,
  SuccessRecord,
  TaskId,
  TaskRecord,
  type Failures,
  type History,
  type MemoryStats,
  type Recall,
  type Remembered,
} from "@loopsmith/shared/contracts";
import { DEFAULT_OWNER } from "@loopsmith/shared/bus";
import { LoopsmithError, type Config } from "@loopsmith/shared/runtime";
import { LessonsRecord, MemoryVerdict, type LessonsStored } from "@loopsmith/shared/llm";
import { checkEmbedder, createHashingEmbedder, type Embedder } from "./embedder.js";
import { configuredEmbedder } from "./api-embedder.js";
import type { ReembedResult } from "./reembed.js";
import { embedderSwitch, type EmbedderSwitchOptions } from "./embedder-switch.js";
import { openDatabase, type Backend, type Database } from "./db.js";
import { withDb } from "./errors.js";
import { buildEmbedText, embedParts } from "./embed-text.js";
import { insertFailures } from "./bulk.js";
import { hybridRecall } from "./recall.js";
import { readFailures, readHistory } from "./reads.js";
import { computeStats, logRecall } from "./stats.js";
import { readRun, saveRun } from "./runs.js";
import {
  demotedFailures,
  judgeShown,
  LESSON_POOL,
  logUses,
  recallLessons,
  setVerdict,
  storeLessons,
} from "./lessons.js";
import { readLessons, readUses, utilityRows, withFailureUses } from "./lesson-reads.js";

/** Memory's operations. Every method validates its input against its contract first. */
export interface MemoryStore {
  /** `postgres` or `pglite`. */
  readonly backend: Backend;
  /** The embedder that makes and compares this store's vectors. */
  readonly embedder: Embedder;
  /**
   * The k nearest past failures (with their reflection, when attached, and `fixedBy`: the
   * success that followed in their task) and successes of the same language, made by the same
   * embedder, leaving out the request's own task (failures and successes) when
   * `excludeSameTask`. Failures are ranked by reciprocal rank fusion of the vector ranking and
   * the full-text rankings of goal, error and code (see `recall.ts`); the request's `text` is
   * the goal, `errorText`, `failingTests` and `code` the failure's (see `embed-text.ts`).
   * `similarity` is 1 − cosine distance. Successes are matched on `text` against their goal.
   * @throws LoopsmithError `bad_request` for input that fails {@link RecallRequest}; `db_error`
   */
  recall(request: z.input<typeof RecallRequest>): Promise<Recall>;
  /**
   * Stores a failure. The signature is computed from `errorText` (entities decoded) when
   * absent. The goal, the error's full signature with the failing tests, and the code are
   * embedded and indexed for full-text search, as `embed-text.ts` builds them. The same
   * `idempotencyKey` twice returns the first row and stores nothing new.
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
  run(taskId: string, owner?: string): Promise<RunRecord>;
  /**
   * One page of recent tasks, newest `finishedAt` first (`limit` after the `offset` newest);
   * `finishedAt` comes back as ISO-8601 UTC, each goal cut to `HISTORY_GOAL_CHARS`.
   * @throws LoopsmithError `bad_request`; `db_error`
   */
  history(request: z.input<typeof HistoryRequest>, owner?: string): Promise<History>;
  /**
   * Stored failures: one task's, oldest first, or the most recent of all, newest first;
   * `createdAt` as ISO-8601 UTC, the error text cut to 2 000 characters.
   * @throws LoopsmithError `bad_request`; `db_error`
   */
  failures(request: z.input<typeof FailuresRequest>, owner?: string): Promise<Failures>;
  /**
   * Statistics over a window of tasks (see `computeStats` in stats.ts): pass rate, stop
   * reasons, iterations, tokens, USD, recall hit rate; absent request: every task.
   * @throws LoopsmithError `bad_request` for input that fails {@link StatsRequest}; `db_error`
   */
  stats(request?: z.input<typeof StatsRequest>, owner?: string): Promise<MemoryStats>;
  /**
   * Logs a failure recall of `taskId` for the recall hit rate of {@link stats} (see
   * `logRecall` in stats.ts); a recall without a signature is not logged.
   * @returns whether a row was written
   * @throws LoopsmithError `db_error`
   */
  logRecall(taskId: string, recall: Recall): Promise<boolean>;
  /**
   * Logs every memory (lesson, failure) `recall` showed `req.taskId` at `req.iteration` (0 when
   * absent), for each memory's measured use (see `lessons.ts`).
   * @returns the rows written (a memory logged before for the same task and iteration is not again)
   * @throws LoopsmithError `db_error`
   */
  logUses(req: Pick<RecallRequest, "taskId" | "iteration">, recall: Recall): Promise<number>;
  /**
   * Stores the lessons of a task that passed after failing (one per task and signature; again
   * replaces the rule), embedded on its goal.
   * @returns the lessons' ids in the record's order
   * @throws LoopsmithError `bad_request` for a record that fails {@link LessonsRecord}; `db_error`
   */
  rememberLessons(record: z.input<typeof LessonsRecord>): Promise<LessonsStored>;
  /**
   * Judges again the memories `taskId` was shown (call once it ended): the rule of `lessons.ts`
   * demotes those never followed by a pass in `DEMOTE_AFTER` tasks or reliably harmful.
   * @returns the memories demoted now, as `<kind>:<id>`
   * @throws LoopsmithError `db_error`
   */
  judge(taskId: string): Promise<string[]>;
  /**
   * A person's verdict on a memory of `owner`'s tasks: demoted (left out of recall, for every
   * owner: memory is shared) or promoted (recalled again).
   * @throws LoopsmithError `not_found` for a memory `owner`'s tasks did not make; `bad_request`; `db_error`
   */
  verdict(verdict: z.input<typeof MemoryVerdict>, owner?: string): Promise<void>;
  /**
   * Re-embeds every row another embedder made with this store's embedder (see `reembed.ts`);
   * joins the pass already running, if any (memory starts one when it opens, and after its
   * embedder answers again following a failure). Never started by itself when
   * `memory.embedder.reembed` is false; this call runs one all the same.
   * @returns the rows re-embedded, and the embedder's error when one stopped the pass
   * @throws LoopsmithError `db_error`
   */
  reembed(): Promise<ReembedResult>;
  /** Waits for a re-embedding pass to stop, then closes the pool, the socket server and PGlite (in that order). Safe to call twice. */
  close(): Promise<void>;
}

/** Dependencies of {@link openMemoryStore}. */
export interface MemoryStoreDeps {
  config: Config;
  log: Logger;
  /** @defaultValue the embedder `config.memory.embedder` names (`configuredEmbedder`; `hash-v1-256` by default) */
  embedder?: Embedder;
  /**
   * What stores and recalls with when `embedder` fails; null: nothing (the call fails with
   * the embedder's error). @defaultValue the hashing embedder (`hash-v1-256`) unless
   * `embedder` is a hashing embedder (ids `hash-…`: offline, they do not fail)
   */
  fallback?: Embedder | null;
}

/** Options of {@link createMemoryStore}: the embedder's fallback, re-embedding and cool-down (`embedder-switch.ts`). */
export type StoreOptions = EmbedderSwitchOptions;

function parse<S extends z.ZodType>(schema: S, input: unknown, what: string): z.infer<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    throw new LoopsmithError("bad_request", `invalid ${what}: ${z.prettifyError(parsed.error)}`, {
      details: parsed.error.issues,
    });
  }
  return parsed.data;
}

/** The row stored under an idempotency key already, if any. */
async function existing(db: Database, table: "failures" | "successes", key: string): Promise<Remembered | null> {
  const cols = table === "failures" ? "id::text AS id, signature" : "id::text AS id";
  const { rows } = await db.pool.query<{ id: string; signature?: string }>(
    `SELECT ${cols} FROM loopsmith.${table} WHERE idempotency_key = $1`,
    [key],
  );
  const row = rows[0];
  if (!row) return null;
  return row.signature === undefined ? { id: row.id } : { id: row.id, signature: row.signature };
}

/** Inserts a success with `e`'s vector; the first row of its key when one is stored already. */
async function insertSuccess(db: Database, rec: SuccessRecord, e: Embedder, embedding: number[]): Promise<Remembered> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO loopsmith.successes
         (idempotency_key, task_id, iteration, language, goal, files, embedder, embedding)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::vector(${e.dimensions}))
       ON CONFLICT (idempotency_key) DO NOTHING
       RETURNING id::text AS id`,
    [
      rec.idempotencyKey,
      rec.taskId,
      rec.iteration,
      rec.language,
      rec.goal,
      JSON.stringify(rec.files),
      e.id,
      pgvector.toSql(embedding),
    ],
  );
  const id = rows[0]?.id;
  if (id !== undefined) return { id };
  const first = await existing(db, "successes", rec.idempotencyKey);
  if (!first) throw new LoopsmithError("db_error", "memory could not store the success: the row vanished");
  return first;
}

/**
 * A recall: the nearest failures and successes, and the lessons that fit, which come from the
 * tasks of the nearest failures with the query's signature (looked for among the LESSON_POOL
 * nearest; the reply keeps k of them). Lessons first; the raw failures only when no lesson
 * fits, never a demoted one, each with its measured use.
 */
async function recallWithLessons(db: Database, e: Embedder, req: RecallRequest): Promise<Recall> {
  const wide = await hybridRecall(db, e, { ...req, k: Math.max(req.k, LESSON_POOL) });
  const recall = { ...wide, failures: wide.failures.slice(0, req.k), successes: wide.successes.slice(0, req.k) };
  const sig = recall.signature;
  const fromTasks = wide.failures.filter((f) => f.signature === sig).map((f) => f.taskId);
  const lessons = await recallLessons(db, e, req, sig, fromTasks);
  if (lessons.length > 0) return { ...recall, lessons, failures: [] };
  const demoted = await demotedFailures(
    db,
    recall.failures.map((f) => f.id),
  );
  const kept = demoted.size ? recall.failures.filter((f) => !demoted.has(f.id)) : recall.failures;
  return { ...recall, failures: await withFailureUses(db, kept) };
}

/**
 * Attaches a fix (the reflection) to a stored failure.
 * @throws LoopsmithError `not_found` for an id no stored failure has
 */
async function attachFixRow(db: Database, fix: FailureFix): Promise<Remembered> {
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
}

/**
 * Records a finished task (its history row), replacing an earlier record of the same task by
 * the same owner.
 * @throws LoopsmithError `bad_request` when `finishedAt` is not an ISO-8601 date
 */
async function recordTaskRow(db: Database, rec: TaskRecord): Promise<void> {
  if (Number.isNaN(Date.parse(rec.finishedAt))) {
    throw new LoopsmithError(
      "bad_request",
      `finishedAt ${JSON.stringify(rec.finishedAt.slice(0, 40))} is not an ISO-8601 date`,
    );
  }
  await withDb("record the task", () =>
    db.pool.query(
      `INSERT INTO loopsmith.tasks
         (task_id, goal, language, status, stop_reason, iterations, usage, cost_usd, duration_ms, scripted, finished_at, usage_by_role, owner)
       VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11::timestamptz, $12::jsonb, $13)
       ON CONFLICT (task_id) DO UPDATE SET
         goal = EXCLUDED.goal, language = EXCLUDED.language, status = EXCLUDED.status,
         stop_reason = EXCLUDED.stop_reason, iterations = EXCLUDED.iterations, usage = EXCLUDED.usage,
         cost_usd = EXCLUDED.cost_usd, duration_ms = EXCLUDED.duration_ms, scripted = EXCLUDED.scripted,
         finished_at = EXCLUDED.finished_at, usage_by_role = EXCLUDED.usage_by_role, recorded_at = now()
       WHERE loopsmith.tasks.owner = EXCLUDED.owner`,
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
        rec.owner ?? rec.task?.owner ?? DEFAULT_OWNER,
      ],
    ),
  );
}

/** The failures a client asked for, with the lessons, the recall record of a task and the utility table (`--utility`); a verdict given with it is set first. */
async function failuresReply(db: Database, req: FailuresRequest, owner: string): Promise<Failures> {
  if (req.verdict) await setVerdict(db, req.verdict, owner);
  const failures = await readFailures(db, req, owner);
  const lessons = await readLessons(db, req.taskId, req.limit, owner);
  return {
    ...failures,
    lessons,
    ...(req.taskId ? { uses: await readUses(db, req.taskId, owner) } : {}),
    ...(req.utility ? { utility: await utilityRows(db, req.limit, owner) } : {}),
  };
}

/** Builds a store over an open database. Exposed for tests; use {@link openMemoryStore}. */
export function createMemoryStore(
  db: Database,
  configured: Embedder,
  log: Logger,
  opts: StoreOptions = {},
): MemoryStore {
  const embedders = embedderSwitch(db, configured, log, opts);
  const withEmbedder = embedders.withEmbedder;

  return {
    backend: db.backend,
    embedder: configured,

    async recall(input) {
      const req = parse(RecallRequest, input, "recall request");
      return withEmbedder("embed the recall", (e) => recallWithLessons(db, e, req));
    },

    async rememberFailure(input) {
      const rec = parse(FailureRecord, input, "failure record");
      const found = await withDb("look up the failure", () => existing(db, "failures", rec.idempotencyKey));
      if (found) return found;
      // One row of the bulk insert: one INSERT statement for both paths (a race with the same
      // key is settled there: the first row wins).
      const { results } = await withEmbedder("embed the failure", (e) =>
        insertFailures(db, e, [rec], { batchSize: 1, analyse: false }),
      );
      const first = results[0];
      if (!first) throw new LoopsmithError("db_error", "memory could not store the failure: the row vanished");
      return first;
    },

    attachFix: async (input) => attachFixRow(db, parse(FailureFix, input, "fix")),

    async rememberSuccess(input) {
      const rec = parse(SuccessRecord, input, "success record");
      const found = await withDb("look up the success", () => existing(db, "successes", rec.idempotencyKey));
      if (found) return found;
      const parts = { goal: buildEmbedText({ goal: rec.goal }).goal, error: "", code: "" };
      return withEmbedder("embed the success", async (e) => {
        const embedding = await embedParts(e, parts);
        return withDb("store the success", () => insertSuccess(db, rec, e, embedding));
      });
    },

    async recordTask(input) {
      const rec = parse(TaskRecord, input, "task record");
      await recordTaskRow(db, rec);
      return { id: rec.taskId };
    },

    async saveRun(input) {
      const run = parse(RunRecord, input, "run");
      await saveRun(db, run);
      return { id: run.taskId };
    },

    async run(taskId, owner = DEFAULT_OWNER) {
      return readRun(db, parse(TaskId, taskId, "task id"), owner);
    },

    async history(input, owner = DEFAULT_OWNER) {
      return readHistory(db, parse(HistoryRequest, input, "history request"), owner);
    },

    failures: async (input, owner = DEFAULT_OWNER) =>
      failuresReply(db, parse(FailuresRequest, input, "failures request"), owner),

    stats: async (input = { v: 1 }, owner = DEFAULT_OWNER) =>
      computeStats(db, parse(StatsRequest, input, "stats request"), owner),

    logRecall: (taskId, recall) => logRecall(db, taskId, recall),

    logUses: (req, recall) => logUses(db, req, recall),

    async rememberLessons(input) {
      const rec = parse(LessonsRecord, input, "lessons record");
      return withEmbedder("embed the lessons", (e) => storeLessons(db, e, rec));
    },

    judge: (taskId) => judgeShown(db, parse(TaskId, taskId, "task id")),

    async verdict(input, owner = DEFAULT_OWNER) {
      const { v: _v, ...verdict } = parse(MemoryVerdict, input, "memory verdict");
      await setVerdict(db, verdict, owner);
    },

    reembed: () => embedders.reembed(),

    async close() {
      log.debug({ backend: db.backend }, "closing memory");
      await embedders.close();
      await db.close();
    },
  };
}

/**
 * Opens memory: PostgreSQL + pgvector when `config.databaseUrl` is set, else embedded PGlite
 * under `<config.dataDir>/memory`; applies migrations and the HNSW indexes of the embedder and
 * its fallback. Then, unless `config.memory.embedder.reembed` is false, starts re-embedding
 * the rows of other embedders in the background ({@link MemoryStore.reembed}).
 *
 * @throws LoopsmithError `config_invalid` for a bad embedder or DATABASE_URL; `db_error` when
 *   the database cannot be opened or migrated
 */
export async function openMemoryStore(deps: MemoryStoreDeps): Promise<MemoryStore> {
  const embedder = deps.embedder ?? configuredEmbedder(deps.config);
  checkEmbedder(embedder);
  const fallback =
    deps.fallback === null
      ? undefined
      : (deps.fallback ?? (embedder.id.startsWith("hash-") ? undefined : createHashingEmbedder()));
  if (fallback) checkEmbedder(fallback);
  const embedders = fallback && fallback.id !== embedder.id ? [embedder, fallback] : [embedder];
  const db = await openDatabase({ config: deps.config, log: deps.log, embedders });
  const reembed = deps.config.memory.embedder.reembed;
  deps.log.info(
    { backend: db.backend, location: db.location, embedder: embedder.id, fallback: fallback?.id ?? null },
    "memory open",
  );
  const store = createMemoryStore(db, embedder, deps.log, {
    fallback,
    reembed,
    cooldownMs: deps.config.memory.embedder.cooldownMs,
  });
  if (reembed) {
    store.reembed().catch((err: unknown) => deps.log.warn({ err, embedder: embedder.id }, "re-embedding failed"));
  }
  return store;
}
