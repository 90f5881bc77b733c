/**
 * A DAG task's subtasks as people read them, from the `data.dag` (`DagProgress`) of its
 * `schedule`, `integrate` and `result` events: a tree in dependency order, one line per
 * subtask with its status, attempt, iteration, time and, once it ended, its iterations,
 * tokens and cost. Pure; `solve-progress.ts` draws it live, `output.ts` and `run-view.ts`
 * put it in the reports. Model-written text (goals, reasons) goes through `printable`.
 */
import { DagProgress, type SubtaskProgress, type SubtaskStatus, type TaskEvent } from "@loopsmith/shared/contracts";
import { duration, shortCount, usd } from "./format.js";
import { printable } from "./terminal.js";
import { formatTable, palette, type Palette } from "./ui/index.js";

/** How {@link renderDagTree} draws. */
export interface DagTreeOptions {
  /** Colour each status mark (see `ui/colour.ts`; the caller decides, for example with `colourEnabled(stream)`). @defaultValue false */
  color?: boolean;
  /** Cut each line to this many characters (a terminal's width), the last one `…`. */
  width?: number;
  /** End each line with the subtask's goal. @defaultValue false */
  goals?: boolean;
}

/** The mark of each status, first on a subtask's line. */
export const STATUS_MARKS: Readonly<Record<SubtaskStatus, string>> = {
  pending: "○",
  running: "▶",
  passed: "✔",
  failed: "✖",
  cancelled: "⊘",
};

/** The colour of each mark: dim, cyan, green, red, yellow. */
const MARK_COLORS: Readonly<Record<SubtaskStatus, keyof Palette>> = {
  pending: "dim",
  running: "cyan",
  passed: "green",
  failed: "red",
  cancelled: "yellow",
};
const COLOURS = palette(true);

/** An event's `data.dag`, or undefined when it carries none or one that fails the contract. */
export function dagOf(e: Pick<TaskEvent, "data">): DagProgress | undefined {
  const raw = e.data?.dag;
  if (raw === undefined) return undefined;
  const parsed = DagProgress.safeParse(raw);
  return parsed.success ? parsed.data : undefined;
}

/** A subtask's place in the drawn tree. */
export interface PlacedSubtask {
  subtask: SubtaskProgress;
  /** The dependency it is drawn under; absent at the top level. */
  parent?: string;
  /** 0 at the top level. */
  depth: number;
  /** The tree's connectors before its mark: `""` at the top level, else `├─ `, `│  └─ `, … */
  prefix: string;
}

/**
 * The subtasks as a tree, in dependency order (each after all of its dependencies; the plan's
 * order among those that could come next, the children of the line above first). A subtask
 * with one dependency is drawn under it; with several, under the deepest of them on the
 * tree's path to the line above, so that every line sits in its parent's subtree and the
 * order stays a dependency order. Dependencies the progress does not list are left out; a
 * cycle (never in a validated plan) is broken in plan order. Pure.
 */
export function dagTree(subtasks: readonly SubtaskProgress[]): PlacedSubtask[] {
  const unique = [...new Map(subtasks.map((s) => [s.id, s])).values()];
  const known = new Set(unique.map((s) => s.id));
  const deps = new Map(unique.map((s) => [s.id, [...new Set(s.dependsOn)].filter((d) => d !== s.id && known.has(d))]));
  const placed: Array<Omit<PlacedSubtask, "prefix">> = [];
  const done = new Set<string>();
  // The tree path to the subtask placed last: `path[i]` is at depth i.
  let path: string[] = [];
  while (placed.length < unique.length) {
    let best: { s: SubtaskProgress; at: number } | undefined;
    for (const s of unique) {
      if (done.has(s.id)) continue;
      const ds = deps.get(s.id) ?? [];
      if (!ds.every((d) => done.has(d))) continue;
      // Deepest of its dependencies on the path (-1: none, a top-level subtask).
      const at = Math.max(-1, ...ds.map((d) => path.indexOf(d)));
      if (!best || at > best.at) best = { s, at };
    }
    // Only a cycle leaves nothing ready: its first subtask in plan order goes on top.
    best ??= { s: unique.find((s) => !done.has(s.id)) as SubtaskProgress, at: -1 };
    const parent = best.at >= 0 ? path[best.at] : undefined;
    path = [...path.slice(0, best.at + 1), best.s.id];
    done.add(best.s.id);
    placed.push({ subtask: best.s, ...(parent !== undefined ? { parent } : {}), depth: best.at + 1 });
  }
  // Connectors: a child's line continues its parent's, `└─` for its parent's last child.
  const below = new Map<string, string>();
  return placed.map((p, i) => {
    if (p.parent === undefined) {
      below.set(p.subtask.id, "");
      return { ...p, prefix: "" };
    }
    const last = !placed.slice(i + 1).some((q) => q.parent === p.parent);
    const base = below.get(p.parent) ?? "";
    below.set(p.subtask.id, `${base}${last ? "   " : "│  "}`);
    return { ...p, prefix: `${base}${last ? "└─ " : "├─ "}` };
  });
}

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? "" : "s"}`;

/** ms from `from` to `to` (ISO-8601 or epoch ms), or undefined when either is missing or unreadable. */
function span(from: string | undefined, to: string | number | undefined): number | undefined {
  if (from === undefined || to === undefined) return undefined;
  const a = Date.parse(from);
  const b = typeof to === "number" ? to : Date.parse(to);
  return Number.isNaN(a) || Number.isNaN(b) ? undefined : Math.max(0, b - a);
}

/** Whether a subtask ended (passed, failed or cancelled). */
const ended = (s: SubtaskProgress): boolean =>
  s.status === "passed" || s.status === "failed" || s.status === "cancelled";

/**
 * One subtask's state after its mark and id: `running · attempt 2 · iteration 3 · 41.0 s`,
 * `passed · attempt 1 · 4 iterations · 12.3k tokens · $0.04 · 2 min 10 s`,
 * `cancelled (dependency_failed)`, `pending · waiting for store`.
 * @param o.waitingFor - the dependencies a pending subtask still waits for
 * @param o.reopened - re-opened after a failed integration run
 */
export function subtaskSummary(
  s: SubtaskProgress,
  nowMs: number,
  o: { waitingFor?: readonly string[]; reopened?: boolean } = {},
): string {
  const parts = [
    `${s.status}${s.reason && (s.status === "failed" || s.status === "cancelled") ? ` (${printable(s.reason)})` : ""}`,
  ];
  if (s.status === "pending" && o.waitingFor?.length)
    parts.push(`waiting for ${o.waitingFor.map(printable).join(", ")}`);
  if (s.attempt > 0) parts.push(`attempt ${s.attempt}`);
  if (s.status === "running" && s.iteration > 0) parts.push(`iteration ${s.iteration}`);
  if (s.status === "passed" || s.status === "failed" || (s.status === "cancelled" && s.attempt > 0)) {
    parts.push(plural(s.iterations, "iteration"), `${shortCount(s.tokens)} tokens`, usd(s.costUsd));
  }
  const ms = s.status === "running" ? span(s.startedAt, nowMs) : ended(s) ? span(s.startedAt, s.finishedAt) : undefined;
  if (ms !== undefined) parts.push(duration(ms));
  if (o.reopened) parts.push("re-opened");
  return parts.join(" · ");
}

/** `text` cut to `width` characters, its last one `…` when cut. */
function cut(text: string, width: number | undefined): string {
  if (width === undefined || text.length <= width) return text;
  return `${text.slice(0, Math.max(0, width - 1))}…`;
}

/** `line` with the mark at `at` in colour (when the line still holds it). */
function colored(line: string, at: number, status: SubtaskStatus): string {
  const mark = STATUS_MARKS[status];
  if (line.slice(at, at + mark.length) !== mark) return line;
  const paint = COLOURS[MARK_COLORS[status]] as (text: string) => string;
  return `${line.slice(0, at)}${paint(mark)}${line.slice(at + mark.length)}`;
}

/** A goal on one line, cut to `max` characters. */
const oneLineGoal = (goal: string, max = 80): string => printable(cut(goal.replace(/\s+/g, " ").trim(), max));

/**
 * The subtasks of a DAG task as a tree (see {@link dagTree}), one line per subtask: the
 * tree's connectors, a status mark, the id (padded so the states line up), then its state
 * (see {@link subtaskSummary}): attempt, the iteration a running one is in, the time so far
 * (running, from `startedAt` to `nowMs`) or in all (ended, `startedAt` to `finishedAt`), and
 * for ended ones iterations, tokens and USD; failed and cancelled ones give their reason
 * (`dependency_failed`). Pure.
 * @param nowMs - the time running subtasks are measured to (epoch ms)
 */
export function renderDagTree(progress: DagProgress, nowMs: number, opts: DagTreeOptions = {}): string[] {
  const placed = dagTree(progress.subtasks);
  const status = new Map(progress.subtasks.map((s) => [s.id, s.status]));
  const reopened = new Set(progress.reopened);
  const heads = placed.map((p) => `${p.prefix}${STATUS_MARKS[p.subtask.status]} ${printable(p.subtask.id)}`);
  const rows = placed.map((p, i) => {
    const s = p.subtask;
    const waitingFor =
      s.status === "pending" ? s.dependsOn.filter((d) => status.has(d) && status.get(d) !== "passed") : [];
    const goal = opts.goals && s.goal.trim() ? ` — ${oneLineGoal(s.goal)}` : "";
    return [heads[i] ?? "", `${subtaskSummary(s, nowMs, { waitingFor, reopened: reopened.has(s.id) })}${goal}`];
  });
  return formatTable(rows).map((text, i) => {
    const line = cut(text, opts.width);
    const p = placed[i];
    return opts.color && p ? colored(line, p.prefix.length, p.subtask.status) : line;
  });
}

/**
 * The totals of a DAG task's subtasks, on one line: how many ended how, iterations, tokens,
 * USD, and time: summed over the subtasks, and from the first start to the last end.
 * @param nowMs - the end of a subtask still running
 */
export function dagTotals(progress: DagProgress, nowMs: number): string {
  const { subtasks } = progress;
  const order: SubtaskStatus[] = ["passed", "failed", "cancelled", "running", "pending"];
  const counts = order
    .map((st) => [st, subtasks.filter((s) => s.status === st).length] as const)
    .filter(([, n]) => n > 0);
  const sum = (f: (s: SubtaskProgress) => number): number => subtasks.reduce((a, s) => a + f(s), 0);
  const times = subtasks.flatMap((s) => {
    const end = s.status === "running" ? nowMs : ended(s) ? s.finishedAt : undefined;
    const ms = span(s.startedAt, end);
    const start = s.startedAt === undefined ? NaN : Date.parse(s.startedAt);
    return ms === undefined ? [] : [{ start, end: start + ms, ms }];
  });
  const parts = [
    `${plural(subtasks.length, "subtask")}: ${counts.map(([st, n]) => `${n} ${st}`).join(", ") || "none"}`,
    plural(
      sum((s) => s.iterations),
      "iteration",
    ),
    `${shortCount(sum((s) => s.tokens))} tokens`,
    usd(sum((s) => s.costUsd)),
  ];
  if (times.length) {
    const wall = Math.max(...times.map((t) => t.end)) - Math.min(...times.map((t) => t.start));
    parts.push(`${duration(times.reduce((a, t) => a + t.ms, 0))} of subtask time in ${duration(wall)}`);
  }
  if (progress.reopened.length) parts.push(`re-opened: ${progress.reopened.map(printable).join(", ")}`);
  return parts.join(" · ");
}

/** What a subtask's line says that can change, but its running time. */
function stateKey(s: SubtaskProgress, reopened: boolean): string {
  return JSON.stringify([
    s.status,
    s.attempt,
    s.iteration,
    s.iterations,
    s.tokens,
    s.costUsd,
    s.reason ?? "",
    reopened,
  ]);
}

/**
 * The lines of the subtasks whose state changed from `previous` to `next` (all of them with
 * no `previous`), in tree order, each `<mark> <id>  <state>` without the tree's connectors:
 * what a log (not a terminal) shows of a DAG task. A running subtask whose only change is
 * its time is not repeated. Pure.
 */
export function changedSubtaskLines(previous: DagProgress | undefined, next: DagProgress, nowMs: number): string[] {
  const before = new Map(
    (previous?.subtasks ?? []).map((s) => [s.id, stateKey(s, previous?.reopened.includes(s.id) ?? false)]),
  );
  const status = new Map(next.subtasks.map((s) => [s.id, s.status]));
  const lines: string[] = [];
  for (const { subtask: s } of dagTree(next.subtasks)) {
    const reopened = next.reopened.includes(s.id);
    if (before.get(s.id) === stateKey(s, reopened)) continue;
    const waitingFor =
      s.status === "pending" ? s.dependsOn.filter((d) => status.has(d) && status.get(d) !== "passed") : [];
    lines.push(`${STATUS_MARKS[s.status]} ${printable(s.id)}  ${subtaskSummary(s, nowMs, { waitingFor, reopened })}`);
  }
  return lines;
}

/**
 * A DAG task's subtasks for a final report: the totals (see {@link dagTotals}), then the
 * tree with each subtask's goal, indented by `indent`.
 */
export function dagReportLines(progress: DagProgress, nowMs: number, indent = "  "): string[] {
  return [
    `${indent}${dagTotals(progress, nowMs)}`,
    ...renderDagTree(progress, nowMs, { goals: true }).map((l) => `${indent}  ${l}`),
  ];
}
