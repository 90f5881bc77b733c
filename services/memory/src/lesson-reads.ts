/**
 * Memory's reports on lessons and measured use: what a task's recalls showed it, the stored
 * lessons, every memory's utility and the recall-use statistics. Pure queries over an open
 * database (the estimator and the rules are in `lessons.ts`; docs/MEMORY.md).
 */
import type { RecalledFailure } from "@loopsmith/shared/contracts";
import type { RecallUse, StoredLesson, UtilityRow, UtilityStats, MemoryKind } from "@loopsmith/shared/llm";
import type { Database } from "./db.js";
import { withDb } from "./errors.js";
import { lessonFields, lessonUses, memoryUses, type MeasuredMemory } from "./lessons.js";

type Row = Record<string, unknown>;
const str = (v: unknown): string => (typeof v === "string" ? v : String(v ?? ""));

/**
 * What the recalls of `taskId` showed it, oldest first, with what happened next; nothing when the
 * task is not `owner`'s (its record's owner, or while it runs, its stored failures').
 * @throws LoopsmithError `db_error`
 */
export async function readUses(db: Database, taskId: string, owner: string): Promise<RecallUse[]> {
  const { rows } = await withDb("read the task's recall uses", () =>
    db.pool.query<Row>(
      `SELECT u.kind, u.memory_id::text AS id, u.task_id, u.iteration, u.created_at,
              CASE WHEN EXISTS (SELECT 1 FROM loopsmith.successes s WHERE s.task_id = u.task_id AND s.iteration = u.iteration + 1) THEN true
                   WHEN EXISTS (SELECT 1 FROM loopsmith.failures f WHERE f.task_id = u.task_id AND f.iteration = u.iteration + 1) THEN false
              END AS next_passed,
              t.status, t.iterations
         FROM loopsmith.recall_uses u LEFT JOIN loopsmith.tasks t ON t.task_id = u.task_id
        WHERE u.task_id = $1
          AND (t.owner = $2 OR (t.task_id IS NULL AND EXISTS (
                SELECT 1 FROM loopsmith.failures f WHERE f.task_id = u.task_id AND f.owner = $2)))
        ORDER BY u.id`,
      [taskId, owner],
    ),
  );
  return rows.map((r) => ({
    kind: str(r.kind) as MemoryKind,
    memoryId: str(r.id),
    taskId: str(r.task_id),
    iteration: Number(r.iteration),
    nextPassed: typeof r.next_passed === "boolean" ? r.next_passed : null,
    taskPassed: r.status === null || r.status === undefined ? null : r.status === "passed",
    taskIterations: r.iterations === null || r.iterations === undefined ? null : Number(r.iterations),
    createdAt: new Date(r.created_at as string).toISOString(),
  }));
}

/**
 * Recalled failures with their measured use (`use`: the finished tasks shown each, how many of
 * them passed, its utility), as a recalled lesson carries; a failure no finished task was shown
 * gets a use of zero tasks.
 * @throws LoopsmithError `db_error`
 */
export async function withFailureUses(db: Database, failures: RecalledFailure[]): Promise<RecalledFailure[]> {
  if (failures.length === 0) return failures;
  const ids = failures.map((f) => f.id).filter((id) => /^\d{1,18}$/.test(id));
  // The common case, failures no recall showed yet, costs one index lookup, not the estimator.
  const { rows } = await withDb("read which recalled failures were shown before", () =>
    db.pool.query<{ id: string }>(
      `SELECT DISTINCT memory_id::text AS id FROM loopsmith.recall_uses WHERE kind = 'failure' AND memory_id = ANY($1::bigint[])`,
      [ids.map(Number)],
    ),
  );
  const uses = rows.length
    ? await memoryUses(
        db,
        "failure",
        rows.map((r) => r.id),
      )
    : new Map<string, MeasuredMemory>();
  return failures.map((f) => {
    const u = uses.get(`failure:${f.id}`);
    return {
      ...f,
      use: {
        recalledIn: u?.recalledIn ?? 0,
        passedAfter: u?.passedAfter ?? 0,
        utility: u?.utility ?? null,
        stderr: u?.stderr ?? null,
        demoted: u?.demoted ?? false,
      },
    };
  });
}

/**
 * Stored lessons: one task's, or the most recent of all `owner`'s, newest first, each with its use.
 * @throws LoopsmithError `db_error`
 */
export async function readLessons(
  db: Database,
  taskId: string | undefined,
  limit: number,
  owner: string,
): Promise<StoredLesson[]> {
  const { rows } = await withDb("read the lessons", () =>
    db.pool.query<Row>(
      `SELECT l.id::text AS id, l.task_id, l.signature, l.rule, l.source, l.prompt_version, l.created_at,
              v.demoted, v.reason
         FROM loopsmith.lessons l
         LEFT JOIN loopsmith.memory_verdicts v ON v.kind = 'lesson' AND v.memory_id = l.id
        WHERE l.owner = $3 AND ($1::text IS NULL OR l.task_id = $1)
        ORDER BY l.id DESC LIMIT $2`,
      [taskId ?? null, limit, owner],
    ),
  );
  const uses = await lessonUses(db, rows);
  return rows.map((r) => {
    const use = uses.get(`lesson:${str(r.id)}`);
    return {
      ...lessonFields(r),
      promptVersion: Number(r.prompt_version),
      createdAt: new Date(r.created_at as string).toISOString(),
      use: {
        recalledIn: use?.recalledIn ?? 0,
        passedAfter: use?.passedAfter ?? 0,
        utility: use?.utility ?? null,
        stderr: use?.stderr ?? null,
        demoted: r.demoted === true,
        ...(typeof r.reason === "string" ? { reason: r.reason } : {}),
      },
    };
  });
}

/**
 * Every recalled memory of `owner`'s tasks with its measured use, lowest utility first
 * (unmeasured last), at most `limit`.
 * @throws LoopsmithError `db_error`
 */
export async function utilityRows(db: Database, limit: number, owner: string): Promise<UtilityRow[]> {
  const all = [...(await memoryUses(db, null, null, owner)).values()];
  all.sort((a, b) => (a.utility ?? Infinity) - (b.utility ?? Infinity) || Number(a.id) - Number(b.id));
  return all
    .slice(0, limit)
    .map(({ counts: _counts, byHand: _byHand, ...u }) => ({ ...u, label: u.label.replace(/\s+/g, " ").slice(0, 160) }));
}

/** The value at quantile `q` of sorted numbers (nearest rank). */
function nearestRank(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

/**
 * Recall use of the window's tasks (`taskIds`): memories shown, of which lessons, tasks shown
 * any, the share of shown memories whose next iteration passed; and over every measured memory,
 * how many are demoted and the quartiles of their utility.
 * @throws LoopsmithError `db_error`
 */
export async function utilityStats(db: Database, windowSql: string, params: unknown[]): Promise<UtilityStats> {
  const { rows } = await withDb("count the recall uses", () =>
    db.pool.query<Row>(
      `${windowSql},
       u AS (SELECT r.*,
                    CASE WHEN EXISTS (SELECT 1 FROM loopsmith.successes s WHERE s.task_id = r.task_id AND s.iteration = r.iteration + 1) THEN 1
                         WHEN EXISTS (SELECT 1 FROM loopsmith.failures f WHERE f.task_id = r.task_id AND f.iteration = r.iteration + 1) THEN 0
                    END AS next
               FROM loopsmith.recall_uses r WHERE r.task_id IN (SELECT task_id FROM w))
       SELECT count(*) AS shown, count(*) FILTER (WHERE kind = 'lesson') AS lessons,
              count(DISTINCT task_id) AS tasks, count(next) AS known, coalesce(sum(next), 0) AS passed
         FROM u`,
      params,
    ),
  );
  const r = rows[0] ?? {};
  const uses = [...(await memoryUses(db, null, null)).values()];
  const measured = uses
    .filter((u) => u.utility !== null)
    .map((u) => u.utility as number)
    .sort((a, b) => a - b);
  const known = Number(r.known ?? 0);
  return {
    shown: Number(r.shown ?? 0),
    lessonsShown: Number(r.lessons ?? 0),
    tasksShown: Number(r.tasks ?? 0),
    nextPassRate: known ? Number(r.passed) / known : null,
    measured: measured.length,
    demoted: uses.filter((u) => u.demoted).length,
    quartiles: measured.length
      ? [
          measured[0] as number,
          nearestRank(measured, 0.25),
          nearestRank(measured, 0.5),
          nearestRank(measured, 0.75),
          measured[measured.length - 1] as number,
        ]
      : null,
  };
}
