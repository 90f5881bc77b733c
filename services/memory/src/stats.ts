/**
 * Memory's statistics over a window of tasks, and the recall log they read the hit rate
 * from. A window is the tasks finished at or after `since` and, of those, the `last` most
 * recent (both optional). Percentiles are PostgreSQL's `percentile_disc` (nearest rank).
 */
import { DEFAULT_OWNER } from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { Usage, type MemoryStats, type Recall, type StatsRequest } from "@loopsmith/shared/contracts";
import type { Database } from "./db.js";
import { withDb } from "./errors.js";
import { utilityStats } from "./lesson-reads.js";

/** The window's tasks as a CTE over `$1` (since, or null) and `$2` (last, or null: all). */
const WINDOW = `WITH w AS (
  SELECT * FROM loopsmith.tasks
   WHERE owner = $3 AND ($1::timestamptz IS NULL OR finished_at >= $1::timestamptz)
   ORDER BY finished_at DESC, recorded_at DESC
   LIMIT $2::bigint)`;

interface Totals {
  tasks: string;
  passed: string;
  mean_to_pass: number | null;
  mean_iterations: number | null;
  p90_iterations: number | null;
  cost: number | null;
  input_tokens: string | null;
  output_tokens: string | null;
  failures: string;
  successes: string;
  recalls: string;
  hits: string;
  with_fix: string;
}

/**
 * Counts and totals of the window's tasks: pass rate, stop reasons, iterations (mean over
 * passed tasks, mean and p90 over all), tokens and USD (in all, mean per task, per LLM role),
 * the recall hit rate of their failure recalls (a lesson with the query's signature is a hit
 * with its fix), and what recalls showed them with the utility distribution of the memories
 * (`utilityStats` in lessons.ts), over `owner`'s tasks; stored failures and
 * successes are counted over all of memory (the memory every task recalls from).
 * @throws LoopsmithError `db_error`
 */
export async function computeStats(
  db: Database,
  req: StatsRequest = { v: 1 },
  owner: string = DEFAULT_OWNER,
): Promise<MemoryStats> {
  const params = [req.since ?? null, req.last ?? null, owner];
  const { rows } = await withDb("compute statistics", () =>
    db.pool.query<Totals>(
      `${WINDOW},
       -- The window's failure recalls, counted in one pass over the recall log.
       rc AS (
         SELECT count(*) AS recalls, count(*) FILTER (WHERE r.hit) AS hits, count(*) FILTER (WHERE r.with_fix) AS with_fix
           FROM loopsmith.recalls r
          WHERE r.task_id IN (SELECT task_id FROM w)),
       t AS (
         SELECT count(*) AS tasks,
                count(*) FILTER (WHERE status = 'passed') AS passed,
                (avg(iterations) FILTER (WHERE status = 'passed'))::float8 AS mean_to_pass,
                avg(iterations)::float8 AS mean_iterations,
                percentile_disc(0.9) WITHIN GROUP (ORDER BY iterations) AS p90_iterations,
                coalesce(sum(cost_usd), 0)::float8 AS cost,
                coalesce(sum((usage->>'inputTokens')::bigint), 0) AS input_tokens,
                coalesce(sum((usage->>'outputTokens')::bigint), 0) AS output_tokens,
                (SELECT count(*) FROM loopsmith.failures) AS failures,
                (SELECT count(*) FROM loopsmith.successes) AS successes
           FROM w)
       SELECT t.*, rc.recalls, rc.hits, rc.with_fix FROM t, rc`,
      params,
    ),
  );
  const r = rows[0];
  if (!r) throw new LoopsmithError("db_error", "memory could not compute statistics: no row came back");
  const reasons = await withDb("count stop reasons", () =>
    db.pool.query<{ stop_reason: string; n: string }>(
      `${WINDOW} SELECT stop_reason, count(*) AS n FROM w GROUP BY stop_reason ORDER BY stop_reason`,
      params,
    ),
  );
  const byRole = await withDb("sum usage by role", () =>
    db.pool.query<{ role: string; usage: Record<string, number> }>(
      `${WINDOW}
       SELECT r.key AS role,
              jsonb_build_object(
                'calls', sum((r.value->>'calls')::bigint), 'inputTokens', sum((r.value->>'inputTokens')::bigint),
                'outputTokens', sum((r.value->>'outputTokens')::bigint), 'cacheReadTokens', sum((r.value->>'cacheReadTokens')::bigint),
                'cacheWriteTokens', sum((r.value->>'cacheWriteTokens')::bigint), 'costUsd', sum((r.value->>'costUsd')::float8),
                'latencyMs', sum((r.value->>'latencyMs')::float8)) AS usage
         FROM w, jsonb_each(w.usage_by_role) r
        GROUP BY r.key ORDER BY r.key`,
      params,
    ),
  );
  const usageByRole = Object.fromEntries(
    byRole.rows.map((x) => [
      x.role,
      Usage.parse(Object.fromEntries(Object.entries(x.usage).map(([k, v]) => [k, Number(v)]))),
    ]),
  );
  const tasks = Number(r.tasks);
  const recalls = Number(r.recalls);
  const hits = Number(r.hits);
  const cost = r.cost ?? 0;
  return {
    window: {
      ...(req.since !== undefined ? { since: req.since } : {}),
      ...(req.last !== undefined ? { last: req.last } : {}),
    },
    tasks,
    passed: Number(r.passed),
    passRate: tasks ? Number(r.passed) / tasks : null,
    stopReasons: Object.fromEntries(reasons.rows.map((x) => [x.stop_reason, Number(x.n)])),
    failures: Number(r.failures),
    successes: Number(r.successes),
    meanIterationsToPass: r.mean_to_pass,
    meanIterations: r.mean_iterations,
    p90Iterations: r.p90_iterations === null ? null : Number(r.p90_iterations),
    inputTokens: Number(r.input_tokens ?? 0),
    outputTokens: Number(r.output_tokens ?? 0),
    totalCostUsd: cost,
    meanCostUsd: tasks ? cost / tasks : null,
    usageByRole,
    recall: { recalls, hits, withFix: Number(r.with_fix), hitRate: recalls ? hits / recalls : null },
    utility: await utilityStats(db, WINDOW, params),
    backend: db.backend,
  };
}

/**
 * Logs one failure recall (one made with an error text, so `recall.signature` is set) for
 * the hit rate: a hit when a recalled failure has the query's signature, `with_fix` when that
 * failure carries its fix. A recall without a signature (the goal-only recall a task starts
 * with) is not logged.
 * @returns whether a row was written
 * @throws LoopsmithError `db_error`
 */
export async function logRecall(db: Database, taskId: string, recall: Recall): Promise<boolean> {
  const sig = recall.signature;
  if (sig === undefined) return false;
  const same = recall.failures.filter((f) => f.signature === sig);
  // A lesson learned from a failure with the same signature is a hit that carries its fix.
  const lesson = (recall.lessons ?? []).some((l) => l.signature === sig);
  await withDb("log the recall", () =>
    db.pool.query(
      `INSERT INTO loopsmith.recalls (task_id, signature, returned, hit, with_fix) VALUES ($1, $2, $3, $4, $5)`,
      [
        taskId,
        sig,
        recall.failures.length + (recall.lessons?.length ?? 0),
        same.length > 0 || lesson,
        lesson || same.some((f) => f.reflection !== null),
      ],
    ),
  );
  return true;
}
