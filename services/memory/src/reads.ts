/**
 * Memory's read-only reports: the stored failures and the task history. Pure queries over an
 * open database; the store (`store.ts`) validates requests and calls these. Statistics are in
 * `stats.ts`.
 */
import {
  HISTORY_GOAL_CHARS,
  Reflection,
  type Failures,
  type FailuresRequest,
  type History,
  type HistoryRequest,
} from "@loopsmith/shared/contracts";
import type { Database } from "./db.js";
import { withDb } from "./errors.js";
import { rowToTaskRecord } from "./rows.js";

/**
 * One page of `owner`'s task history, newest first: `req.limit` tasks after the `req.offset`
 * newest, each goal cut to {@link HISTORY_GOAL_CHARS} characters (an ellipsis marks a cut).
 * @throws LoopsmithError `db_error`
 */
export async function readHistory(db: Database, req: HistoryRequest, owner: string): Promise<History> {
  const { rows } = await withDb("read the task history", () =>
    db.pool.query(
      `SELECT task_id, CASE WHEN char_length(goal) > $3 THEN left(goal, $3 - 1) || '…' ELSE goal END AS goal,
              language, status, stop_reason, iterations, usage, usage_by_role, duration_ms, scripted, finished_at
         FROM loopsmith.tasks WHERE owner = $4 ORDER BY finished_at DESC, recorded_at DESC, task_id LIMIT $1 OFFSET $2`,
      [req.limit, req.offset, HISTORY_GOAL_CHARS, owner],
    ),
  );
  return { tasks: rows.map(rowToTaskRecord) };
}

/**
 * `owner`'s stored failures: one task's (`req.taskId`), oldest first, or the most recent of
 * all its tasks, newest first; `createdAt` as ISO-8601 UTC, the error text cut to 2 000 characters.
 * @throws LoopsmithError `db_error`
 */
export async function readFailures(db: Database, req: FailuresRequest, owner: string): Promise<Failures> {
  const { rows } = await withDb("read the stored failures", () =>
    db.pool.query<{
      id: string;
      task_id: string;
      iteration: number;
      status: string;
      signature: string;
      failing_tests: string[];
      error_text: string;
      reflection: unknown;
      created_at: Date;
    }>(
      `SELECT id::text, task_id, iteration, status, signature, failing_tests, left(error_text, 2000) AS error_text, reflection, created_at
           FROM loopsmith.failures
          WHERE owner = $3 AND ($1::text IS NULL OR task_id = $1)
          ORDER BY CASE WHEN $1::text IS NULL THEN 0 ELSE id END ASC, created_at DESC, id DESC
          LIMIT $2`,
      [req.taskId ?? null, req.limit, owner],
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
      reflection: Reflection.nullable()
        .catch(null)
        .parse(r.reflection ?? null),
      createdAt: new Date(r.created_at).toISOString(),
    })),
  };
}
