/** Database rows to contract shapes (`pg` parses jsonb; bigint ids are selected as text). */
import type {
  FileChange,
  Language,
  Reflection,
  RecalledFailure,
  RecalledSuccess,
  TaskRecord,
  Usage,
} from "@loopsmith/shared/contracts";

type Row = Record<string, unknown>;

const str = (v: unknown): string => (typeof v === "string" ? v : String(v ?? ""));
const num = (v: unknown): number => (typeof v === "number" ? v : Number(v));

/**
 * A `failures` row with `similarity` to a {@link RecalledFailure}; with `signature_key`,
 * `score` and `fix_id`/`fix_iteration`/`fix_files` (the success that followed) when selected.
 */
export function rowToRecalledFailure(row: Row): RecalledFailure {
  const out: RecalledFailure = {
    id: str(row.id),
    taskId: str(row.task_id),
    goal: str(row.goal),
    signature: str(row.signature),
    failingTests: Array.isArray(row.failing_tests) ? row.failing_tests.map(str) : [],
    reflection: (row.reflection ?? null) as Reflection | null,
    similarity: num(row.similarity),
  };
  if (typeof row.signature_key === "string" && row.signature_key !== "") out.key = row.signature_key;
  if (row.score !== undefined && row.score !== null) out.score = num(row.score);
  if ("fix_id" in row) {
    out.fixedBy =
      row.fix_id === null || row.fix_id === undefined
        ? null
        : {
            successId: str(row.fix_id),
            iteration: num(row.fix_iteration),
            files: (Array.isArray(row.fix_files) ? row.fix_files : []) as FileChange[],
          };
  }
  return out;
}

/** A `successes` row with `similarity` to a {@link RecalledSuccess}. */
export function rowToRecalledSuccess(row: Row): RecalledSuccess {
  return {
    id: str(row.id),
    taskId: str(row.task_id),
    goal: str(row.goal),
    files: (Array.isArray(row.files) ? row.files : []) as FileChange[],
    similarity: num(row.similarity),
  };
}

/** A `tasks` row to a {@link TaskRecord}; `finishedAt` as ISO-8601 UTC. */
export function rowToTaskRecord(row: Row): TaskRecord {
  const finished = row.finished_at instanceof Date ? row.finished_at : new Date(str(row.finished_at));
  return {
    v: 1,
    taskId: str(row.task_id),
    goal: str(row.goal),
    language: str(row.language) as Language,
    status: str(row.status),
    stopReason: str(row.stop_reason),
    iterations: num(row.iterations),
    usage: row.usage as Usage,
    usageByRole: (row.usage_by_role ?? {}) as Record<string, Usage>,
    durationMs: num(row.duration_ms),
    scripted: row.scripted === true,
    finishedAt: finished.toISOString(),
  };
}
