/**
 * Emptying memory (`loopsmith reset`): what the agent learned (failures with their
 * reflections, successes, the recall log `stats` reads its hit rate from, and lessons, the
 * recall-use log and the memories' verdicts), and the task
 * history (`history`, `stats`, `show`, `export`, `replay`: the task records and their
 * recorded runs). Every owner's rows go: whoever reaches the database owns all of it.
 */
import type pg from "pg";
import { toDbError } from "./errors.js";
import { analyseStale, type AnalysedTable } from "./db.js";

/** What to empty: `memory` (failures, successes, recalls), `history` (tasks, runs), or both. */
export interface ResetScope {
  memory: boolean;
  history: boolean;
}

/** Rows removed per table; 0 for a table outside the scope. */
export interface ResetCounts {
  failures: number;
  successes: number;
  recalls: number;
  tasks: number;
  runs: number;
}

/** What memory learned besides failures and successes, emptied with them (not counted). */
const LEARNED = ["lessons", "recall_uses", "memory_verdicts"] as const;

/** The tables of each part of the scope, in the order they are emptied. */
const TABLES = {
  memory: ["failures", "successes", "recalls"],
  history: ["tasks", "runs"],
} as const satisfies Record<keyof ResetScope, ReadonlyArray<keyof ResetCounts>>;

/**
 * Empties the tables of `scope` in one transaction: each is locked first (a memory service
 * writing meanwhile waits, then sees the empty table), counted, then truncated (the space is
 * freed at once; PGlite has no autovacuum to do it later). Identities keep counting, so an
 * old `[memory:failure:<id>]` in a transcript never names a new row. The emptied tables are
 * analysed afterwards, so the planner does not plan for the rows that were there.
 * @param pool - memory's pool (`openDatabase`), on PostgreSQL or PGlite
 * @returns the rows removed per table
 * @throws LoopsmithError `db_error` when the database refuses (nothing is removed then)
 */
export async function resetMemory(pool: pg.Pool, scope: ResetScope): Promise<ResetCounts> {
  const counts: ResetCounts = { failures: 0, successes: 0, recalls: 0, tasks: 0, runs: 0 };
  const tables = [...(scope.memory ? TABLES.memory : []), ...(scope.history ? TABLES.history : [])];
  if (!tables.length) return counts;
  // Lessons, the recall-use log and the memories' verdicts go with the memory, uncounted.
  const names = [...tables, ...(scope.memory ? LEARNED : [])].map((t) => `loopsmith.${t}`).join(", ");
  let client: pg.PoolClient | undefined;
  try {
    client = await pool.connect();
    await client.query("BEGIN");
    await client.query(`LOCK TABLE ${names} IN ACCESS EXCLUSIVE MODE`);
    for (const table of tables) {
      const { rows } = await client.query<{ n: string }>(`SELECT count(*)::text AS n FROM loopsmith.${table}`);
      counts[table] = Number(rows[0]?.n ?? 0);
    }
    await client.query(`TRUNCATE ${names}`);
    await client.query("COMMIT");
  } catch (err) {
    await client?.query("ROLLBACK").catch(() => undefined);
    throw toDbError(`empty ${tables.join(", ")}`, err);
  } finally {
    client?.release();
  }
  const analysed = tables.filter((t): t is AnalysedTable => t !== "recalls");
  await analyseStale(pool, analysed).catch(() => undefined);
  return counts;
}
