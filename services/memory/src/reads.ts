/**
 * Memory's read-only reports: the stored failures and the statistics. Pure queries over an
 * open database; the store (`store.ts`) validates requests and calls these.
 */
import { LoopsmithError, Reflection, Usage, type Failures, type FailuresRequest, type MemoryStats } from "@loopsmith/shared";
import type { Database } from "./db.js";
import { withDb } from "./errors.js";

/**
 * Stored failures: one task's (`req.taskId`), oldest first, or the most recent of all, newest
 * first; `createdAt` as ISO-8601 UTC, the error text cut to 2 000 characters.
 * @throws LoopsmithError `db_error`
 */
export async function readFailures(db: Database, req: FailuresRequest): Promise<Failures> {
    const { rows } = await withDb("read the stored failures", () =>
      db.pool.query<{ id: string; task_id: string; iteration: number; status: string; signature: string; failing_tests: string[]; error_text: string; reflection: unknown; created_at: Date }>(
        `SELECT id::text, task_id, iteration, status, signature, failing_tests, left(error_text, 2000) AS error_text, reflection, created_at
           FROM loopsmith.failures
          WHERE $1::text IS NULL OR task_id = $1
          ORDER BY CASE WHEN $1::text IS NULL THEN 0 ELSE id END ASC, created_at DESC, id DESC
          LIMIT $2`,
        [req.taskId ?? null, req.limit],
      ),
    );
    return {
      failures: rows.map((r) => ({
        id: r.id,
        taskId: r.task_id,
        iteration: r.iteration,
        status: r.status,
        signature: r.signature,
        failingTests: r.failing_tests,
        errorText: r.error_text,
        reflection: Reflection.nullable().catch(null).parse(r.reflection ?? null),
        createdAt: new Date(r.created_at).toISOString(),
      })),
    };
}

/**
 * Counts and totals: tasks, passed tasks, failures, successes, mean iterations of passed
 * tasks (null when none), total cost in USD, usage summed per LLM role, and the back end.
 * @throws LoopsmithError `db_error`
 */
export async function computeStats(db: Database): Promise<MemoryStats> {
    const { rows } = await withDb("compute statistics", () =>
      db.pool.query<{
        tasks: string;
        passed: string;
        mean_iterations: number | null;
        cost: number | null;
        failures: string;
        successes: string;
      }>(
        `SELECT (SELECT count(*) FROM loopsmith.tasks) AS tasks,
                (SELECT count(*) FROM loopsmith.tasks WHERE status = 'passed') AS passed,
                (SELECT avg(iterations)::float8 FROM loopsmith.tasks WHERE status = 'passed') AS mean_iterations,
                (SELECT coalesce(sum(cost_usd), 0)::float8 FROM loopsmith.tasks) AS cost,
                (SELECT count(*) FROM loopsmith.failures) AS failures,
                (SELECT count(*) FROM loopsmith.successes) AS successes`,
      ),
    );
    const r = rows[0];
    if (!r) throw new LoopsmithError("db_error", "memory could not compute statistics: no row came back");
    const byRole = await withDb("sum usage by role", () =>
      db.pool.query<{ role: string; usage: Record<string, number> }>(
        `SELECT r.key AS role,
                jsonb_build_object(
                  'calls', sum((r.value->>'calls')::bigint), 'inputTokens', sum((r.value->>'inputTokens')::bigint),
                  'outputTokens', sum((r.value->>'outputTokens')::bigint), 'cacheReadTokens', sum((r.value->>'cacheReadTokens')::bigint),
                  'cacheWriteTokens', sum((r.value->>'cacheWriteTokens')::bigint), 'costUsd', sum((r.value->>'costUsd')::float8),
                  'latencyMs', sum((r.value->>'latencyMs')::float8)) AS usage
           FROM loopsmith.tasks t, jsonb_each(t.usage_by_role) r
          GROUP BY r.key ORDER BY r.key`,
      ),
    );
    const usageByRole = Object.fromEntries(byRole.rows.map((x) => [x.role, Usage.parse(Object.fromEntries(Object.entries(x.usage).map(([k, v]) => [k, Number(v)])))]));
    return {
      tasks: Number(r.tasks),
      passed: Number(r.passed),
      failures: Number(r.failures),
      successes: Number(r.successes),
      meanIterationsToPass: r.mean_iterations,
      totalCostUsd: r.cost ?? 0,
      usageByRole,
      backend: db.backend,
    };
}
