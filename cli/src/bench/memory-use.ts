/**
 * Memory's use in a `loopsmith bench` run, per arm: what each task's recalls showed it (read
 * from memory's recall-use log when the task ends), the utility of the memories shown (read
 * from memory's utility table at the end of the run), the per-arm totals and their rows in the
 * reports. Utility is memory's measured association (docs/MEMORY.md), not a causal effect: the
 * causal comparison of a `--memory ab` run is its paired section.
 */
import type { Logger } from "pino";
import { Endpoints, call } from "@loopsmith/shared/bus";
import { type TaskEvent } from "@loopsmith/shared/contracts";
import type { RecallUse } from "@loopsmith/shared/llm";
import type { Client } from "../client.js";
import { ArmMemory, type BenchResult, type BenchSummary, type ResultMemory } from "./types.js";

/** Most rows of memory's utility table a run reads (the memory service's page limit). */
export const UTILITY_ROWS_MAX = 500;

/**
 * Whether `event` reports a recall that answered: the `step` events of the recall phase that
 * carry the recalled failures' ids (before the first build, and after each failure). The
 * "memory is off" step carries none.
 */
export function isRecallEvent(event: TaskEvent): boolean {
  return event.kind === "step" && event.phase === "recall" && Array.isArray(event.data?.failureIds);
}

/**
 * A task's memory use from its recall count and its recall-use log: `hits` are the recalls
 * (distinct iterations) that showed a memory, at most `recalls`.
 */
export function resultMemory(recalls: number, uses: readonly RecallUse[]): ResultMemory {
  return {
    recalls,
    hits: Math.min(recalls, new Set(uses.map((u) => u.iteration)).size),
    lessons: uses.filter((u) => u.kind === "lesson").map((u) => u.memoryId),
    failures: uses.filter((u) => u.kind === "failure").map((u) => u.memoryId),
  };
}

/**
 * What memory showed `taskId`: no request when it made no recall (a memory-off task);
 * undefined, with a warning in `log`, when memory could not be read.
 */
export async function readTaskMemory(
  client: Client,
  log: Logger,
  taskId: string,
  recalls: number,
): Promise<ResultMemory | undefined> {
  if (recalls === 0) return resultMemory(0, []);
  try {
    const read = await call(client.nc, Endpoints.memory.failures, { v: 1, taskId, limit: 1 }, { owner: client.owner });
    return resultMemory(recalls, read.uses ?? []);
  } catch (err) {
    log.warn({ err, taskId }, "bench: memory's recall log could not be read for the task");
    return undefined;
  }
}

/**
 * The utility of every memory the client's tasks were shown, keyed `<kind>:<id>` (null: not
 * measured yet), at most {@link UTILITY_ROWS_MAX} rows (lowest utility first); undefined, with
 * a warning in `log`, when memory could not be read.
 */
export async function readMemoryUtility(client: Client, log: Logger): Promise<Map<string, number | null> | undefined> {
  try {
    const read = await call(
      client.nc,
      Endpoints.memory.failures,
      { v: 1, limit: UTILITY_ROWS_MAX, utility: true },
      { owner: client.owner },
    );
    return new Map((read.utility ?? []).map((u) => [`${u.kind}:${u.id}`, u.utility]));
  } catch (err) {
    log.warn({ err }, "bench: memory's utility table could not be read");
    return undefined;
  }
}

/** The mean of the known utilities of `ids` of `kind`, and how many are known. */
function meanUtility(
  kind: "lesson" | "failure",
  ids: ReadonlySet<string>,
  utility: ReadonlyMap<string, number | null>,
): [number, number | null] {
  const known = [...ids]
    .map((id) => utility.get(`${kind}:${id}`))
    .filter((u): u is number => typeof u === "number")
    .sort((a, b) => a - b);
  return [known.length, known.length ? known.reduce((s, x) => s + x, 0) / known.length : null];
}

/**
 * Memory's use over one arm's counted results (one line per case, as `lastResults` keeps), from the
 * lines that record it; undefined when none does (lines written before it was recorded).
 * @param utility - memory's utility per `<kind>:<id>` ({@link readMemoryUtility}); empty: unknown
 */
export function summarizeArmMemory(
  results: readonly BenchResult[],
  utility: ReadonlyMap<string, number | null> = new Map(),
): ArmMemory | undefined {
  const ms = results.flatMap((r) => (r.memory ? [r.memory] : []));
  if (ms.length === 0) return undefined;
  const recalls = ms.reduce((s, m) => s + m.recalls, 0);
  const hits = ms.reduce((s, m) => s + m.hits, 0);
  const lessons = ms.flatMap((m) => m.lessons);
  const failures = ms.flatMap((m) => m.failures);
  const [lessonsMeasured, meanLessonUtility] = meanUtility("lesson", new Set(lessons), utility);
  const [failuresMeasured, meanFailureUtility] = meanUtility("failure", new Set(failures), utility);
  return ArmMemory.parse({
    tasks: ms.length,
    recalls,
    hits,
    hitRate: recalls ? hits / recalls : null,
    lessonsShown: lessons.length,
    distinctLessons: new Set(lessons).size,
    lessonsMeasured,
    meanLessonUtility,
    failuresShown: failures.length,
    distinctFailures: new Set(failures).size,
    failuresMeasured,
    meanFailureUtility,
  });
}

/** The head of the memory-use table. */
export const MEMORY_HEAD = [
  "arm",
  "tasks",
  "recalls",
  "recalls that showed a memory",
  "lessons shown",
  "distinct lessons",
  "mean lesson utility (measured)",
  "raw failures shown",
  "distinct raw failures",
  "mean failure utility (measured)",
];

function utilityCell(mean: number | null, measured: number): string {
  return mean === null ? `n/a (${measured})` : `${mean >= 0 ? "+" : ""}${mean.toFixed(2)} (${measured})`;
}

/** One arm's row of the memory-use table. */
export function memoryRow(arm: string, m: ArmMemory): string[] {
  return [
    arm,
    String(m.tasks),
    String(m.recalls),
    `${m.hits}${m.hitRate === null ? "" : ` (${(m.hitRate * 100).toFixed(1)}%)`}`,
    String(m.lessonsShown),
    String(m.distinctLessons),
    utilityCell(m.meanLessonUtility, m.lessonsMeasured),
    String(m.failuresShown),
    String(m.distinctFailures),
    utilityCell(m.meanFailureUtility, m.failuresMeasured),
  ];
}

/** The arms of `s` with memory's use, in report order, with their rows. */
export function memoryRows(s: BenchSummary): string[][] {
  return (["off", "on"] as const).flatMap((a) => {
    const m = s.arms[a]?.memory;
    return m ? [memoryRow(a, m)] : [];
  });
}

/** What the memory-use table says and does not say, in sentences (the off arm's zeros, utility's meaning). */
export function memoryNotes(s: BenchSummary): string[] {
  return [
    ...(s.arms.off?.memory
      ? ["The off arm makes no recall by construction (memory off: nothing is recalled or shown), so its counts are 0."]
      : []),
    "A recall is made before a task's first build and after each failure. Utility is memory's measured association of a memory with passing (docs/MEMORY.md), read at the end of the run over every task that was shown it; it is not a causal effect (for that, the paired comparison).",
  ];
}

/** One line per arm for the terminal: recalls, hits, lessons and their mean utility. */
export function memoryText(s: BenchSummary): string[] {
  return (["off", "on"] as const).flatMap((arm) => {
    const m = s.arms[arm]?.memory;
    if (!m) return [];
    return [
      `memory ${arm} recalls: ${m.recalls} (${m.hits} showed a memory), lessons shown ${m.lessonsShown} (${m.distinctLessons} distinct, mean utility ${utilityCell(m.meanLessonUtility, m.lessonsMeasured)}), raw failures shown ${m.failuresShown}${arm === "off" ? " (memory off: none by construction)" : ""}`,
    ];
  });
}
