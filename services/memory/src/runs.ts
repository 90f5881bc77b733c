/**
 * Recorded runs: a finished task's task, events and result in `loopsmith.runs`, and the pure
 * parts around it — assembling a run from what `record_task` brings and the events read
 * from the stream, capping its events, and cutting its JSON text into parts that each fit
 * one NATS message.
 */
import { createHash } from "node:crypto";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { DEFAULT_OWNER } from "@loopsmith/shared/bus";
import {
  RUN_EVENTS_CAP,
  RunRecord,
  TaskEvent,
  type RunPart,
  type TaskRecord,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import type { Database } from "./db.js";
import { withDb } from "./errors.js";

/** Bytes of a reply kept free for the reply envelope and the part's other fields. */
const PART_ENVELOPE_BYTES = 16 * 1024;

/**
 * JSON text PostgreSQL's jsonb accepts: it refuses the NUL character (`\u0000`) in strings,
 * so each NUL becomes U+FFFD (the only change; model and sandbox text practically never
 * holds one).
 */
export function jsonbText(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    typeof v === "string" && v.includes("\u0000") ? v.replaceAll("\u0000", "\uFFFD") : v,
  );
}

/**
 * Rank of an event when a run has more than the cap: lower ranks are kept first. The
 * result and every event carrying a model reply (`data.llm`) rank 0, what a reader needs
 * (steps, iterations, warnings) 1, `usage` 2, `phase` 3.
 */
function keepRank(e: TaskEvent): number {
  if (e.kind === "result" || (e.data !== undefined && e.data.llm !== undefined)) return 0;
  if (e.kind === "usage") return 2;
  if (e.kind === "phase") return 3;
  return 1;
}

/**
 * At most `cap` of `events` (sorted by `seq`): when there are more, the lowest ranks are
 * kept (the result and model replies first, `phase` events dropped first), in `seq` order.
 * Pure.
 * @returns the kept events and how many were left out
 */
export function capEvents(events: TaskEvent[], cap: number = RUN_EVENTS_CAP): { events: TaskEvent[]; dropped: number } {
  if (events.length <= cap) return { events, dropped: 0 };
  const kept = events
    .map((e, i) => ({ e, i, rank: keepRank(e) }))
    .sort((a, b) => a.rank - b.rank || a.i - b.i)
    .slice(0, Math.max(0, cap))
    .sort((a, b) => a.i - b.i)
    .map((x) => x.e);
  return { events: kept, dropped: events.length - kept.length };
}

/** What was read from the events stream for a task. */
export interface ReadEvents {
  events: TaskEvent[];
  /** False when the stream could not be read up to the task's last event. */
  complete: boolean;
}

/** The `result` event memory adds when the stream does not hold one yet (it is published after `record_task`). */
function resultEvent(taskId: string, seq: number, at: string, result: TaskResult): TaskEvent {
  return {
    v: 1,
    taskId,
    seq,
    at,
    iteration: result.iterations,
    kind: "result",
    phase: "done",
    message: result.message,
    result,
  };
}

/**
 * The run of a `record_task` request that carries `task`: its events (deduplicated by `seq`,
 * in `seq` order, only the task's own), then a result event built from `result` when the
 * stream held none, capped at `cap`. Pure.
 * @param record - the task record; its `task` must be present
 * @param read - what the events stream gave
 * @param recordedAt - ISO-8601 time of recording
 * @throws LoopsmithError `bad_request` when `record.task` is absent or names another task
 */
export function assembleRun(
  record: TaskRecord,
  read: ReadEvents,
  recordedAt: string,
  cap: number = RUN_EVENTS_CAP,
): RunRecord {
  const { task } = record;
  if (!task)
    throw new LoopsmithError(
      "bad_request",
      `the task record of ${record.taskId} has no task: there is no run to record`,
    );
  if (task.taskId !== record.taskId || (record.result && record.result.taskId !== record.taskId)) {
    throw new LoopsmithError(
      "bad_request",
      `the task record of ${record.taskId} carries the task or result of another task`,
    );
  }
  const bySeq = new Map<number, TaskEvent>();
  for (const e of read.events) if (e.taskId === record.taskId && !bySeq.has(e.seq)) bySeq.set(e.seq, e);
  const events = [...bySeq.values()].sort((a, b) => a.seq - b.seq);
  const result = record.result ?? null;
  if (result && !events.some((e) => e.kind === "result")) {
    events.push(resultEvent(record.taskId, (events.at(-1)?.seq ?? -1) + 1, record.finishedAt, result));
  }
  const capped = capEvents(events, cap);
  return {
    v: 1,
    taskId: record.taskId,
    task,
    result,
    events: capped.events,
    eventsTruncated: !read.complete || capped.dropped > 0,
    eventsTotal: events.length,
    recordedAt,
  };
}

/**
 * Stores (or replaces) a run: one row per task, `recorded_at` set to now.
 * @throws LoopsmithError `db_error`
 */
export async function saveRun(db: Database, run: RunRecord): Promise<void> {
  await withDb("record the run", () =>
    db.pool.query(
      `INSERT INTO loopsmith.runs (task_id, task, result, events, events_truncated, events_total, recorded_at)
       VALUES ($1, $2::jsonb, $3::jsonb, $4::jsonb, $5, $6, now())
       ON CONFLICT (task_id) DO UPDATE SET
         task = EXCLUDED.task, result = EXCLUDED.result, events = EXCLUDED.events,
         events_truncated = EXCLUDED.events_truncated, events_total = EXCLUDED.events_total, recorded_at = now()`,
      [
        run.taskId,
        jsonbText(run.task),
        run.result ? jsonbText(run.result) : null,
        jsonbText(run.events),
        run.eventsTruncated,
        run.eventsTotal ?? null,
      ],
    ),
  );
}

/**
 * The recorded run of `taskId`, checked against today's contract (events that no longer
 * match it are left out, and the run says it is truncated).
 * @throws LoopsmithError `not_found` when no run of that task was recorded; `db_error`;
 *   `internal` when the stored task or result no longer matches the contract
 */
export async function readRun(db: Database, taskId: string, owner: string = DEFAULT_OWNER): Promise<RunRecord> {
  // A run's owner is its task's (`task.owner`; none: the default client's). Another owner's
  // run is "not found", like one never recorded.
  const { rows } = await withDb("read the run", () =>
    db.pool.query<{
      task: unknown;
      result: unknown;
      events: unknown;
      events_truncated: boolean;
      events_total: number | null;
      recorded_at: Date;
    }>(
      `SELECT task, result, events, events_truncated, events_total, recorded_at FROM loopsmith.runs
        WHERE task_id = $1 AND coalesce(task->>'owner', $3) = $2`,
      [taskId, owner, DEFAULT_OWNER],
    ),
  );
  const row = rows[0];
  if (!row)
    throw new LoopsmithError(
      "not_found",
      `no run of task ${taskId} is recorded in memory (runs are recorded when a task ends)`,
    );
  const raw = Array.isArray(row.events) ? (row.events as unknown[]) : [];
  const events = raw.flatMap((e) => {
    const parsed = TaskEvent.safeParse(e);
    return parsed.success ? [parsed.data] : [];
  });
  const parsed = RunRecord.safeParse({
    v: 1,
    taskId,
    task: row.task,
    result: row.result ?? null,
    events,
    eventsTruncated: row.events_truncated || events.length < raw.length,
    ...(row.events_total !== null ? { eventsTotal: row.events_total } : {}),
    recordedAt: new Date(row.recorded_at).toISOString(),
  });
  if (!parsed.success)
    throw new LoopsmithError("internal", `the recorded run of ${taskId} does not match the current contract`, {
      details: parsed.error.issues,
    });
  return parsed.data;
}

/**
 * The part of `record`'s JSON text that starts at `offset`, as long as fits a reply of
 * `maxBytes` (the server's `max_payload`). Pure.
 * @throws LoopsmithError `bad_request` when `offset` is past the end of the text
 */
export function runPart(record: RunRecord, offset: number, maxBytes: number): RunPart {
  const text = JSON.stringify(record);
  if (offset > text.length)
    throw new LoopsmithError(
      "bad_request",
      `offset ${offset} is past the end of the run of ${record.taskId} (${text.length} characters)`,
    );
  const sha256 = createHash("sha256").update(text, "utf8").digest("hex");
  const budget = Math.max(1024, maxBytes - PART_ENVELOPE_BYTES);
  let n = Math.min(text.length - offset, budget);
  // The part travels as a JSON string: escapes and multi-byte characters make it longer.
  for (;;) {
    const bytes = Buffer.byteLength(JSON.stringify(text.slice(offset, offset + n)), "utf8");
    if (bytes <= budget || n <= 1) break;
    n = Math.max(1, Math.floor((n * budget * 0.97) / bytes));
  }
  return {
    v: 1,
    taskId: record.taskId,
    recordedAt: record.recordedAt,
    sha256,
    total: text.length,
    offset,
    text: text.slice(offset, offset + n),
  };
}
