/**
 * Lessons, the recall-use log and each memory's measured utility (docs/MEMORY.md).
 *
 * - A lesson is stored per task and signature (storing again replaces the rule), embedded on
 *   its source task's goal.
 * - A recall with an error gets the lessons with the query's signature learned by the tasks of
 *   the nearest failures with that signature ({@link LESSON_POOL});
 *   a recall without one (the goal-only recall a task starts with), the lessons whose source
 *   task's goal is at least {@link LESSON_GOAL_SIMILARITY} similar. Demoted lessons never come.
 * - Every memory a recall showed is logged (`recall_uses`: kind, id, task, iteration); what
 *   happened next is read from `successes` and `tasks` when asked.
 * - Utility: the smoothed pass rate of the finished tasks that were shown a memory minus that of
 *   comparable finished tasks that were not (same language, finished after the memory was made,
 *   failed at least once, not its source task), with its standard error. After a task ends, the
 *   memories it was shown are judged again: one shown to {@link DEMOTE_AFTER} or more finished
 *   tasks none of which passed, or whose utility is reliably negative (the upper end of its
 *   95 % interval below 0, with at least {@link DEMOTE_AFTER} tasks), is demoted: left out of
 *   recall. A verdict given by hand (promote, demote) is never changed by the rule.
 *
 * The reports (a task's recall uses, stored lessons, the utility table and statistics) are in
 * `lesson-reads.ts`.
 */
import pgvector from "pgvector/pg";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type Recall, type RecallRequest } from "@loopsmith/shared/contracts";
import {
  MemoryUse,
  type LessonsRecord,
  type LessonsStored,
  type MemoryKind,
  type MemoryVerdict,
  type RecalledLesson,
  type StoredLesson,
} from "@loopsmith/shared/llm";
import type { Database } from "./db.js";
import { embeddingExpr } from "./db.js";
import { buildEmbedText, embedParts } from "./embed-text.js";
import type { Embedder } from "./embedder.js";
import { withDb } from "./errors.js";

/** Finished tasks shown a memory, none of which passed, after which it is demoted. */
export const DEMOTE_AFTER = 3;
/**
 * Nearest failures a recall looks at for the tasks whose lessons fit (see `recall` in
 * store.ts): a lesson's source failure may rank below the k the reply keeps, behind newer
 * failures of tasks that learned nothing.
 */
export const LESSON_POOL = 10;
/** Least cosine similarity of goals for a lesson to fit a recall without an error. */
export const LESSON_GOAL_SIMILARITY = 0.5;
/** z of a two-sided 95 % interval. */
const Z95 = 1.96;

type Row = Record<string, unknown>;
const str = (v: unknown): string => (typeof v === "string" ? v : String(v ?? ""));

/**
 * The utility estimate of a memory from its counts: `(k1 + 1) / (n1 + 2) − (k0 + 1) / (n0 + 2)`
 * (Laplace-smoothed pass rates of the tasks shown it, n1 with k1 passed, and of the comparable
 * tasks not shown it, n0 with k0 passed), and the standard error of that difference
 * (`sqrt(p1 (1 − p1) / (n1 + 2) + p0 (1 − p0) / (n0 + 2))`). Null both with n1 = 0.
 */
export function utilityOf(
  n1: number,
  k1: number,
  n0: number,
  k0: number,
): { utility: number | null; stderr: number | null } {
  if (n1 <= 0) return { utility: null, stderr: null };
  const p1 = (k1 + 1) / (n1 + 2);
  const p0 = (k0 + 1) / (n0 + 2);
  return { utility: p1 - p0, stderr: Math.sqrt((p1 * (1 - p1)) / (n1 + 2) + (p0 * (1 - p0)) / (n0 + 2)) };
}

/**
 * Whether the rule demotes a memory with these counts, and why: shown to at least
 * {@link DEMOTE_AFTER} finished tasks none of which passed; or, with at least that many, a
 * utility whose 95 % interval lies below 0. Undefined: not demoted.
 */
export function demotionOf(n1: number, k1: number, n0: number, k0: number): string | undefined {
  if (n1 < DEMOTE_AFTER) return undefined;
  if (k1 === 0) return `recalled in ${n1} tasks, none of which passed`;
  const { utility, stderr } = utilityOf(n1, k1, n0, k0);
  if (utility !== null && stderr !== null && utility + Z95 * stderr < 0)
    return `utility ${utility.toFixed(2)} ± ${(Z95 * stderr).toFixed(2)} is reliably negative`;
  return undefined;
}

/**
 * Stores the lessons of a task that passed (one per signature; again for the same task and
 * signature replaces the rule), embedded on the task's goal with `embedder`.
 * @returns the lessons' ids, in the record's order
 * @throws LoopsmithError `db_error`; the embedder's errors
 */
export async function storeLessons(db: Database, embedder: Embedder, rec: LessonsRecord): Promise<LessonsStored> {
  const vector = await embedParts(embedder, { goal: buildEmbedText({ goal: rec.goal }).goal, error: "", code: "" });
  const ids: string[] = [];
  for (const lesson of rec.lessons) {
    const { rows } = await withDb("store the lesson", () =>
      db.pool.query<{ id: string }>(
        `INSERT INTO loopsmith.lessons
           (task_id, iteration, language, goal, signature, rule, source, prompt_version, owner, embedder, embedding)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::vector(${embedder.dimensions}))
         ON CONFLICT (task_id, signature) DO UPDATE SET
           rule = EXCLUDED.rule, source = EXCLUDED.source, prompt_version = EXCLUDED.prompt_version,
           iteration = EXCLUDED.iteration
         RETURNING id::text AS id`,
        [
          rec.taskId,
          rec.iteration,
          rec.language,
          rec.goal,
          lesson.signature,
          lesson.rule,
          lesson.source,
          rec.promptVersion,
          rec.owner ?? "client",
          embedder.id,
          pgvector.toSql(vector),
        ],
      ),
    );
    const id = rows[0]?.id;
    if (id === undefined) throw new LoopsmithError("db_error", "memory could not store the lesson: no row came back");
    ids.push(id);
  }
  return { ids };
}

/** A memory's use with what it was measured from: n1 tasks shown it (k1 passed), n0 comparable tasks not (k0 passed). */
export interface MeasuredMemory extends MemoryUse {
  kind: MemoryKind;
  id: string;
  /** A lesson's rule, a failure's signature. */
  label: string;
  counts: { n1: number; k1: number; n0: number; k0: number };
  /** Its verdict was given by hand (the rule leaves it alone). */
  byHand: boolean;
}

/**
 * The measured use of memories: of `kind` and `ids`, or (both null) of every memory a recall
 * ever showed; with `owner`, only the memories of that owner's tasks. Keyed `<kind>:<id>`.
 * @throws LoopsmithError `db_error`
 */
export async function memoryUses(
  db: Database,
  kind: MemoryKind | null,
  ids: readonly string[] | null,
  owner: string | null = null,
): Promise<Map<string, MeasuredMemory>> {
  const { rows } = await withDb("measure the memories' use", () =>
    db.pool.query<Row>(
      `WITH shown AS (
         SELECT DISTINCT kind, memory_id, task_id FROM loopsmith.recall_uses
          WHERE ($1::text IS NULL OR kind = $1) AND ($2::bigint[] IS NULL OR memory_id = ANY($2::bigint[]))),
       m AS (
         SELECT 'lesson'::text AS kind, l.id, l.language, l.created_at, l.task_id AS source, l.rule AS label
           FROM loopsmith.lessons l WHERE l.id IN (SELECT memory_id FROM shown WHERE kind = 'lesson')
            AND ($3::text IS NULL OR l.owner = $3::text)
         UNION ALL
         SELECT 'failure'::text, f.id, f.language, f.created_at, f.task_id, f.signature
           FROM loopsmith.failures f WHERE f.id IN (SELECT memory_id FROM shown WHERE kind = 'failure')
            AND ($3::text IS NULL OR f.owner = $3::text)),
       treated AS (
         SELECT m.kind, m.id, count(t.task_id) AS n1, count(t.task_id) FILTER (WHERE t.status = 'passed') AS k1
           FROM m JOIN shown s ON s.kind = m.kind AND s.memory_id = m.id
           LEFT JOIN loopsmith.tasks t ON t.task_id = s.task_id
          GROUP BY m.kind, m.id),
       control AS (
         SELECT m.kind, m.id, count(t.task_id) AS n0, count(t.task_id) FILTER (WHERE t.status = 'passed') AS k0
           FROM m LEFT JOIN loopsmith.tasks t
             ON t.language = m.language AND t.finished_at >= m.created_at AND t.task_id <> m.source
            AND EXISTS (SELECT 1 FROM loopsmith.failures f WHERE f.task_id = t.task_id)
            AND NOT EXISTS (SELECT 1 FROM shown s WHERE s.kind = m.kind AND s.memory_id = m.id AND s.task_id = t.task_id)
          GROUP BY m.kind, m.id)
       SELECT m.kind, m.id::text AS id, m.label, tr.n1, tr.k1, c.n0, c.k0, v.demoted, v.by_hand, v.reason
         FROM m JOIN treated tr ON tr.kind = m.kind AND tr.id = m.id
         JOIN control c ON c.kind = m.kind AND c.id = m.id
         LEFT JOIN loopsmith.memory_verdicts v ON v.kind = m.kind AND v.memory_id = m.id`,
      [kind, ids === null ? null : ids.map(Number), owner],
    ),
  );
  const out = new Map<string, MeasuredMemory>();
  for (const r of rows) {
    const [n1, k1, n0, k0] = [r.n1, r.k1, r.n0, r.k0].map(Number) as [number, number, number, number];
    const { utility, stderr } = utilityOf(n1, k1, n0, k0);
    const k = str(r.kind) as MemoryKind;
    const use = MemoryUse.parse({
      recalledIn: n1,
      passedAfter: k1,
      utility,
      stderr,
      demoted: r.demoted === true,
      ...(typeof r.reason === "string" ? { reason: r.reason } : {}),
    });
    out.set(`${k}:${str(r.id)}`, {
      ...use,
      kind: k,
      id: str(r.id),
      label: str(r.label),
      counts: { n1, k1, n0, k0 },
      byHand: r.by_hand === true,
    });
  }
  return out;
}

/** A memory's use before any finished task was shown it. */
const UNUSED: MemoryUse = { recalledIn: 0, passedAfter: 0, utility: null, stderr: null, demoted: false };

/**
 * The lessons that fit a recall (already validated), best first, at most `req.k`: with
 * `signature` (a recall with an error), those learned from a failure with that signature by one
 * of `fromTasks` (the tasks of the failures the hybrid ranking recalled with that signature: a
 * headline such as `AssertionError: assert <num> == <num>` is shared by many causes, and the
 * ranking, which reads the code and the full error, tells them apart); without a signature,
 * those whose source task's goal is at least {@link LESSON_GOAL_SIMILARITY} similar by
 * `embedder`. Same language, not demoted, not the request's own task when it is excluded,
 * within its scope. Each carries its measured use.
 * @throws LoopsmithError `db_error`; the embedder's errors
 */
export async function recallLessons(
  db: Database,
  embedder: Embedder,
  req: RecallRequest,
  signature: string | undefined,
  fromTasks: readonly string[] = [],
): Promise<RecalledLesson[]> {
  if (signature !== undefined && fromTasks.length === 0) return [];
  const goalVec = await embedParts(embedder, { goal: buildEmbedText({ goal: req.text }).goal, error: "", code: "" });
  const vec = embeddingExpr(embedder.dimensions);
  const sim = `CASE WHEN l.embedder = $2 THEN 1 - (${vec.replace("embedding", "l.embedding")} <=> $1::vector(${embedder.dimensions})) END`;
  const { rows } = await withDb("recall lessons", () =>
    db.pool.query<Row>(
      `SELECT * FROM (
         SELECT l.id::text AS id, l.task_id, l.signature, l.rule, l.source, ${sim} AS similarity
           FROM loopsmith.lessons l
          WHERE l.language = $3 AND ($4::text IS NULL OR l.task_id <> $4::text)
            AND ($5::text IS NULL OR starts_with(l.task_id, $5::text))
            AND ($6::text IS NULL OR (l.signature = $6::text AND l.task_id = ANY($9::text[])))
            AND NOT EXISTS (SELECT 1 FROM loopsmith.memory_verdicts v
                             WHERE v.kind = 'lesson' AND v.memory_id = l.id AND v.demoted)) x
        WHERE $6::text IS NOT NULL OR coalesce(similarity, -1) >= $7
        ORDER BY coalesce(similarity, -1) DESC, id::bigint DESC
        LIMIT $8`,
      [
        pgvector.toSql(goalVec),
        embedder.id,
        req.language,
        req.excludeSameTask ? req.taskId : null,
        req.scope ?? null,
        signature ?? null,
        LESSON_GOAL_SIMILARITY,
        req.k,
        [...fromTasks],
      ],
    ),
  );
  const uses = await lessonUses(db, rows);
  return rows.map((r) => {
    const use = uses.get(`lesson:${str(r.id)}`);
    return {
      ...lessonFields(r),
      match: signature === undefined ? "goal" : "signature",
      similarity: r.similarity === null || r.similarity === undefined ? 0 : Number(r.similarity),
      use: use
        ? {
            recalledIn: use.recalledIn,
            passedAfter: use.passedAfter,
            utility: use.utility,
            stderr: use.stderr,
            demoted: use.demoted,
          }
        : UNUSED,
    };
  });
}

/** The measured use of each of these lesson rows, keyed `lesson:<id>` (nothing asked for no row). */
export async function lessonUses(db: Database, rows: readonly Row[]): Promise<Map<string, MeasuredMemory>> {
  if (rows.length === 0) return new Map();
  return memoryUses(
    db,
    "lesson",
    rows.map((r) => str(r.id)),
  );
}

/** The fields of a `loopsmith.lessons` row that every reply of a lesson carries: id, source task, signature, rule, who wrote it. */
export function lessonFields(r: Row): Pick<StoredLesson, "id" | "taskId" | "signature" | "rule" | "source"> {
  return {
    id: str(r.id),
    taskId: str(r.task_id),
    signature: str(r.signature),
    rule: str(r.rule),
    source: str(r.source) === "reflect" ? "reflect" : "fallback",
  };
}

/**
 * The ids of the failures among `ids` that are demoted.
 * @throws LoopsmithError `db_error`
 */
export async function demotedFailures(db: Database, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await withDb("read the demoted failures", () =>
    db.pool.query<{ id: string }>(
      `SELECT memory_id::text AS id FROM loopsmith.memory_verdicts
        WHERE kind = 'failure' AND demoted AND memory_id = ANY($1::bigint[])`,
      [ids.map(Number)],
    ),
  );
  return new Set(rows.map((r) => r.id));
}

/**
 * Logs the memories a recall showed `req.taskId` at `req.iteration` (0 when absent): one row per
 * lesson and failure (a row already logged for the same task, iteration and memory is kept).
 * @returns the rows written
 * @throws LoopsmithError `db_error`
 */
export async function logUses(
  db: Database,
  req: Pick<RecallRequest, "taskId" | "iteration">,
  recall: Recall,
): Promise<number> {
  const shown = [
    ...(recall.lessons ?? []).map((l) => ["lesson", l.id] as const),
    ...recall.failures.map((f) => ["failure", f.id] as const),
  ].filter(([, id]) => /^\d{1,18}$/.test(id));
  if (shown.length === 0) return 0;
  const { rowCount } = await withDb("log the recalled memories", () =>
    db.pool.query(
      `INSERT INTO loopsmith.recall_uses (task_id, iteration, kind, memory_id)
       SELECT $1, $2, u.kind, u.id FROM unnest($3::text[], $4::bigint[]) AS u(kind, id)
       ON CONFLICT (task_id, iteration, kind, memory_id) DO NOTHING`,
      [req.taskId, req.iteration ?? 0, shown.map(([k]) => k), shown.map(([, id]) => Number(id))],
    ),
  );
  return rowCount ?? 0;
}

/**
 * Judges again the memories `taskId` was shown, now that it ended: each is demoted or not by
 * {@link demotionOf}, unless a person gave its verdict by hand.
 * @returns the memories demoted now (`<kind>:<id>`)
 * @throws LoopsmithError `db_error`
 */
export async function judgeShown(db: Database, taskId: string): Promise<string[]> {
  const { rows } = await withDb("read the task's recalled memories", () =>
    db.pool.query<{ kind: MemoryKind; id: string }>(
      `SELECT DISTINCT kind, memory_id::text AS id FROM loopsmith.recall_uses WHERE task_id = $1`,
      [taskId],
    ),
  );
  const demoted: string[] = [];
  for (const kind of ["lesson", "failure"] as const) {
    const ids = rows.filter((r) => r.kind === kind).map((r) => r.id);
    if (ids.length === 0) continue;
    for (const use of (await memoryUses(db, kind, ids)).values()) {
      if (use.byHand) continue;
      const { n1, k1, n0, k0 } = use.counts;
      const reason = demotionOf(n1, k1, n0, k0);
      await withDb("record the memory's verdict", () =>
        db.pool.query(
          `INSERT INTO loopsmith.memory_verdicts (kind, memory_id, demoted, by_hand, reason)
           VALUES ($1, $2::bigint, $3, false, $4)
           ON CONFLICT (kind, memory_id) DO UPDATE SET demoted = EXCLUDED.demoted, reason = EXCLUDED.reason, updated_at = now()
           WHERE NOT loopsmith.memory_verdicts.by_hand`,
          [kind, use.id, reason !== undefined, reason ?? "measured: not demoted"],
        ),
      );
      if (reason) demoted.push(`${kind}:${use.id}`);
    }
  }
  return demoted;
}

/**
 * A person's verdict on one memory of `owner`'s tasks: demoted (left out of recall) or promoted
 * (recalled again); the rule never changes a verdict given by hand. Memory is shared, so the
 * verdict holds for every owner's recalls; a client can judge only the memories its own tasks
 * made.
 * @throws LoopsmithError `not_found` when no memory of that kind has the id among `owner`'s; `db_error`
 */
export async function setVerdict(db: Database, verdict: Omit<MemoryVerdict, "v">, owner: string): Promise<void> {
  const table = verdict.kind === "lesson" ? "lessons" : "failures";
  const { rows } = await withDb("look up the memory", () =>
    db.pool.query(`SELECT 1 FROM loopsmith.${table} WHERE id = $1::bigint AND owner = $2`, [verdict.id, owner]),
  );
  if (rows.length === 0) throw new LoopsmithError("not_found", `no stored ${verdict.kind} has id ${verdict.id}`);
  await withDb("record the verdict", () =>
    db.pool.query(
      `INSERT INTO loopsmith.memory_verdicts (kind, memory_id, demoted, by_hand, reason)
       VALUES ($1, $2::bigint, $3, true, $4)
       ON CONFLICT (kind, memory_id) DO UPDATE SET demoted = EXCLUDED.demoted, by_hand = true, reason = EXCLUDED.reason, updated_at = now()`,
      [verdict.kind, verdict.id, verdict.demoted, verdict.demoted ? "demoted by hand" : "promoted by hand"],
    ),
  );
}
