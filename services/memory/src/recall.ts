/**
 * Hybrid recall of past failures: four rankings fused by reciprocal rank fusion (RRF) in one
 * SQL statement, and the nearest past successes.
 *
 * The rankings, each over the failures of the request's language and embedder (leaving out
 * the request's own task when asked), each cut to {@link CANDIDATES} rows; the full-text ones
 * rank within the {@link FTS_POOL} nearest rows by vector:
 * - `vec`: cosine distance of the embeddings (pgvector, HNSW), goal + error + code;
 * - `goal`, `err`, `code`: PostgreSQL full-text rank of the goal, error and code words (the
 *   generated `fts_*` columns) against a query matching any of the request's words;
 * - `same`: the failures whose full signature key equals the request's (all at rank 1): the
 *   full-text rank says how much of the query a row holds, not that it holds nothing else.
 * A failure's score is the sum over the rankings it appears in of `weight / (K + rank)`; ties
 * in one ranking share a rank (`rank()`), so a ranking that cannot tell rows apart (the same
 * goal, the same error) favours none of them. Ties in the score go to the higher cosine
 * similarity, then to the newer row.
 */
import pgvector from "pgvector/pg";
import type { Recall, RecallRequest } from "@loopsmith/shared/contracts";
import type { Database } from "./db.js";
import { embeddingExpr } from "./db.js";
import { anyWordQuery, buildEmbedText, embedParts } from "./embed-text.js";
import type { Embedder } from "./embedder.js";
import { withDb } from "./errors.js";
import { rowToRecalledFailure, rowToRecalledSuccess } from "./rows.js";
import { CAUSE_WEIGHT, RERANK_POOL, causeOrder, causeWords } from "./rerank.js";

/** Rows each ranking keeps before fusion. */
export const CANDIDATES = 100;
/** RRF's constant: a row's contribution is weight / (K + rank). */
export const RRF_K = 60;
/** Weight of each ranking in the fusion. */
export const RANKING_WEIGHTS = { vec: 1, goal: 1, err: 1, code: 1, same: 1 } as const;

/**
 * Rows the full-text rankings look at: the nearest by vector (HNSW). An any-word query
 * matches most of a large table, and ranking every match costs 0.6–0.8 s a recall at 100,000
 * failures; a pool of 500 takes a whole recall at 22,300 failures on PGlite from p50 177 ms
 * (every match ranked) to 22 ms. At 100,000 failures on PostgreSQL (512 MB of shared buffers),
 * walking the index to 500 rows is most of a recall: p50 22 ms with 500, 11–13 ms with 200 (`npm run
 * bench:memory`); `npm run bench:recall` scored the same with pools of 100, 200 and 500
 * (recall@1 1.000; without the code 0.784). The exact-key ranking still searches every row.
 * Below this many rows of a language and embedder, the pool is all of them.
 */
export const FTS_POOL = 200;

/**
 * The order (indices into `rows`, best first) of the fused rows once their cause ranking
 * (`rerank.ts`, weight {@link CAUSE_WEIGHT}) is added; the fused order when the request has
 * no cause words. Rows need `score`, `error_text` and `code`.
 */
function causeRerank(req: RecallRequest, rows: readonly Record<string, unknown>[]): number[] {
  const query = causeWords(req.errorText ?? "", req.code ?? "", req.language);
  if (query.length === 0) return rows.map((_, i) => i);
  const scored = rows.map((r) => ({
    score: Number(r.score),
    words: causeWords(String(r.error_text ?? ""), String(r.code ?? ""), req.language),
  }));
  return causeOrder(query, scored, RRF_K, CAUSE_WEIGHT);
}

/** One full-text ranking: the pool's rows of `column` matching `query`, best first, ranked. */
function ftsRanking(name: string, column: string, query: string): string {
  return `${name} AS (
    SELECT id, rank() OVER (ORDER BY s DESC) AS r FROM (
      SELECT f.id, ts_rank(f.${column}, q.${query}) AS s
        FROM pool f, q
       WHERE q.${query} IS NOT NULL AND f.${column} @@ q.${query}
       ORDER BY s DESC LIMIT $9) x)`;
}

/**
 * The fused recall of failures as SQL over its 12 parameters (the query vector, the embedder,
 * the language, the task to leave out, the goal, error and code queries, the row limit, the
 * rankings' depth, the signature key, the pool's size and the scope): each ranking of the
 * nearest pool, summed as reciprocal ranks ({@link RANKING_WEIGHTS}), best first.
 * @param dimensions - the embedder's vector size
 */
function fusedFailuresSql(dimensions: number): string {
  const vec = embeddingExpr(dimensions);
  const param = `$1::vector(${dimensions})`;
  // A scope (a benchmark arm's task-id prefix) keeps recall to that run's own tasks.
  const filters =
    "f.embedder = $2 AND f.language = $3 AND ($4::text IS NULL OR f.task_id <> $4::text) AND ($12::text IS NULL OR starts_with(f.task_id, $12::text))";
  const w = RANKING_WEIGHTS;
  return `
    WITH q AS (
      SELECT CASE WHEN $5 <> '' THEN to_tsquery('simple', $5) END AS goal,
             CASE WHEN $6 <> '' THEN to_tsquery('simple', $6) END AS err,
             CASE WHEN $7 <> '' THEN to_tsquery('simple', $7) END AS code),
    pool AS MATERIALIZED (
      SELECT f.id, f.fts_goal, f.fts_error, f.fts_code, ${vec} <=> ${param} AS d
        FROM loopsmith.failures f
       WHERE ${filters}
       ORDER BY d LIMIT $11),
    vec AS (
      SELECT id, rank() OVER (ORDER BY d) AS r FROM (
        SELECT id, d FROM pool ORDER BY d LIMIT $9) x),
    ${ftsRanking("goal_r", "fts_goal", "goal")},
    ${ftsRanking("err_r", "fts_error", "err")},
    ${ftsRanking("code_r", "fts_code", "code")},
    same_r AS (
      SELECT f.id, 1 AS r FROM loopsmith.failures f
       WHERE $10 <> '' AND md5(f.signature_key) = md5($10) AND f.signature_key = $10 AND ${filters}
       LIMIT $9),
    fused AS (
      SELECT id, sum(w / (${RRF_K} + r)) AS score FROM (
        SELECT id, r, ${w.vec}::float8 AS w FROM vec
        UNION ALL SELECT id, r, ${w.goal}::float8 FROM goal_r
        UNION ALL SELECT id, r, ${w.err}::float8 FROM err_r
        UNION ALL SELECT id, r, ${w.code}::float8 FROM code_r
        UNION ALL SELECT id, r, ${w.same}::float8 FROM same_r) u
      GROUP BY id)
    SELECT f.id::text AS id, f.task_id, f.goal, f.signature, f.signature_key, f.failing_tests, f.reflection,
           f.error_text, f.code, fused.score, 1 - (${vec} <=> ${param}) AS similarity,
           fix.id::text AS fix_id, fix.iteration AS fix_iteration, fix.files AS fix_files
      FROM fused
      JOIN loopsmith.failures f ON f.id = fused.id
      LEFT JOIN LATERAL (
        SELECT s.id, s.iteration, s.files FROM loopsmith.successes s
         WHERE s.task_id = f.task_id AND s.iteration > f.iteration
         ORDER BY s.iteration LIMIT 1) fix ON true
     ORDER BY fused.score DESC, similarity DESC, f.id DESC
     LIMIT $8`;
}

/**
 * Recalls the failures and successes nearest to a request (already validated).
 * @returns the recalled rows, the signature of the request's error text, and the embedder
 * @throws LoopsmithError `db_error` when the database fails; `internal` for a broken embedder
 */
export async function hybridRecall(db: Database, embedder: Embedder, req: RecallRequest): Promise<Recall> {
  const parts = buildEmbedText({
    goal: req.text,
    language: req.language,
    ...(req.errorText !== undefined ? { errorText: req.errorText } : {}),
    ...(req.failingTests ? { failingTests: req.failingTests } : {}),
    ...(req.code !== undefined ? { code: req.code } : {}),
  });
  const failureVec = await embedParts(embedder, parts);
  const goalVec = await embedParts(embedder, { goal: parts.goal, error: "", code: "" });
  const exclude = req.excludeSameTask ? req.taskId : null;
  const vec = embeddingExpr(embedder.dimensions);
  const param = `$1::vector(${embedder.dimensions})`;
  const sql = fusedFailuresSql(embedder.dimensions);
  return withDb("recall past failures", async () => {
    const failures = await db.pool.query(sql, [
      pgvector.toSql(failureVec),
      embedder.id,
      req.language,
      exclude,
      anyWordQuery(parts.goal),
      anyWordQuery(parts.error),
      anyWordQuery(parts.code),
      Math.max(req.k, RERANK_POOL),
      CANDIDATES,
      parts.signature?.key ?? "",
      FTS_POOL,
      req.scope ?? null,
    ]);
    const successes = await db.pool.query(
      `SELECT id::text AS id, task_id, goal, files, 1 - (${vec} <=> ${param}) AS similarity
         FROM loopsmith.successes
        WHERE embedder = $2 AND language = $3 AND ($4::text IS NULL OR task_id <> $4::text)
          AND ($6::text IS NULL OR starts_with(task_id, $6::text))
        ORDER BY ${vec} <=> ${param}
        LIMIT $5`,
      [pgvector.toSql(goalVec), embedder.id, req.language, exclude, req.k, req.scope ?? null],
    );
    const order = causeRerank(req, failures.rows);
    return {
      failures: order.slice(0, req.k).map((i) => rowToRecalledFailure(failures.rows[i])),
      successes: successes.rows.map(rowToRecalledSuccess),
      ...(parts.signature ? { signature: parts.signature.signature } : {}),
      embedder: embedder.id,
    };
  });
}
