/**
 * Improvement runs across one directory, for `loopsmith report --all` and
 * `loopsmith dashboard --all`: every run folder in it (`loopsmith improve` writes
 * `<dataDir>/improve/<runId>/` unless `--out` names another), read and aggregated into the
 * acceptance rate over time, the rejection reasons ranked by count, and the cost per
 * generation with the running total.
 */
import { readdir, stat } from "node:fs/promises";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type DecisionReason, type GenerationReport, type ImproveSummary } from "@loopsmith/shared/contracts";
import { cell, readReports, readSummary } from "./reports.js";

/** One run folder and what it holds. */
export interface RunReports {
  /** The run's id: its reports', else its summary's, else the folder's name. */
  runId: string;
  /** The run's folder (absolute). */
  dir: string;
  /** Its reports, by generation. */
  reports: GenerationReport[];
  summary?: ImproveSummary;
}

/** True when `path` is a directory (symbolic links followed); false when it does not exist or is something else. */
async function isDir(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The runs in `dir`: each folder directly in it that holds a `reports/` folder, and `dir`
 * itself when it holds one (a run's own `--out` folder), each with its reports
 * (`readReports`) and summary (`readSummary`), ordered by their first generation's start
 * (runs without a report last), then by folder.
 * @param dir - the folder of the runs (`<dataDir>/improve` by default)
 * @throws LoopsmithError `not_found` when `dir` does not exist or is not a folder, or when no
 *   run is in it; `bad_request` as `readReports` for a report file that does not parse
 */
export async function readRuns(dir: string): Promise<RunReports[]> {
  const root = resolve(dir);
  let names: string[];
  try {
    names = (await readdir(root)).sort();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR")
      throw new LoopsmithError(
        "not_found",
        `no improvement runs in ${root}: it is not a folder (runs are written to <dataDir>/improve/<runId>, or to improve's --out; is --dir right?)`,
        { cause: err },
      );
    throw err;
  }
  const folders = [
    ...((await isDir(join(root, "reports"))) ? [root] : []),
    ...names.filter((n) => n !== "reports").map((n) => join(root, n)),
  ];
  const runs: RunReports[] = [];
  for (const folder of folders) {
    if (!(await isDir(join(folder, "reports")))) continue;
    const reports = await readReports(folder);
    const summary = await readSummary(folder);
    const runId = reports[0]?.runId ?? summary?.runId ?? basename(folder);
    runs.push({ runId, dir: folder, reports, ...(summary ? { summary } : {}) });
  }
  if (!runs.length)
    throw new LoopsmithError(
      "not_found",
      `no improvement runs in ${root}: no folder in it holds a reports/ folder (a run's folder has reports/gen-N.json)`,
    );
  const first = (r: RunReports): number => Math.min(...r.reports.map(startMs));
  return runs.sort((a, b) => first(a) - first(b) || a.dir.localeCompare(b.dir));
}

/**
 * The runs' own dashboards as links from the page `page` will be: per run folder holding a
 * `dashboard.html`, its path relative to the page's folder (`/`-separated, each segment
 * URL-encoded). Runs without one are left out.
 */
export async function runDashboards(runs: readonly RunReports[], page: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const run of runs) {
    const file = join(run.dir, "dashboard.html");
    try {
      if (!(await stat(file)).isFile()) continue;
    } catch {
      continue;
    }
    out[run.dir] = relative(dirname(resolve(page)), file)
      .split(sep)
      .map(encodeURIComponent)
      .join("/");
  }
  return out;
}

/** When a generation started, epoch ms: its `startedAt`, else its `finishedAt`, else +Infinity (sorted last). */
function startMs(r: GenerationReport): number {
  const t = Date.parse(r.startedAt);
  if (Number.isFinite(t)) return t;
  const f = Date.parse(r.finishedAt);
  return Number.isFinite(f) ? f : Number.POSITIVE_INFINITY;
}

/** One generation in the cross-run order of time, with the figures so far. */
export interface GenerationPoint {
  runId: string;
  /** The run's folder. */
  dir: string;
  generation: number;
  startedAt: string;
  verdict: GenerationReport["decision"]["verdict"];
  reason: DecisionReason;
  /** This generation's LLM cost, USD (the report's `usage.costUsd`). */
  costUsd: number;
  /** The cost of every generation up to this one (in order of time), USD. */
  totalUsd: number;
  /** Generations accepted or rejected up to this one (dry runs decide nothing). */
  decided: number;
  /** Of them, accepted. */
  accepted: number;
  /** `accepted / decided` up to this one, 0..1; null while none is decided (only dry runs so far). */
  acceptanceRate: number | null;
}

/** One rejection reason and how often it ended a generation. */
export interface ReasonCount {
  reason: DecisionReason;
  /** Rejected generations with this reason. */
  count: number;
  /** `count` over all rejected generations, 0..1. */
  share: number;
}

/** The figures of a set of generations (one run, or all of them). */
export interface RunFigures {
  generations: number;
  accepted: number;
  rejected: number;
  dryRuns: number;
  /** `accepted / (accepted + rejected)`, 0..1; null when none was decided. */
  acceptanceRate: number | null;
  /** The generations' LLM cost, USD. */
  costUsd: number;
}

/** The figures of one run. */
export interface RunTotals extends RunFigures {
  runId: string;
  dir: string;
  /** The first generation's start (ISO-8601), when it has one. */
  startedAt?: string;
}

/** Every run of a directory, aggregated ({@link aggregateRuns}). */
export interface RunsAggregate {
  /** The folder of the runs (absolute). */
  dir: string;
  /** Per run, in the order of {@link readRuns}. */
  runs: RunTotals[];
  /** Every generation of every run, in order of time (its start; ties by run id, then generation). */
  generations: GenerationPoint[];
  /** The rejection reasons, most frequent first (ties by name). */
  reasons: ReasonCount[];
  /** All the runs together. */
  totals: RunFigures & { runs: number };
}

/** The figures of `reports`. Pure. */
function figures(reports: readonly GenerationReport[]): RunFigures {
  const count = (v: string): number => reports.filter((r) => r.decision.verdict === v).length;
  const [accepted, rejected, dryRuns] = [count("accepted"), count("rejected"), count("dry_run")];
  return {
    generations: reports.length,
    accepted,
    rejected,
    dryRuns,
    acceptanceRate: accepted + rejected > 0 ? accepted / (accepted + rejected) : null,
    costUsd: reports.reduce((sum, r) => sum + r.usage.costUsd, 0),
  };
}

/**
 * The runs of `dir` aggregated: per run its figures; every generation of every run in order
 * of time, each with its cost, the running total of cost, and the acceptance rate of the
 * generations decided so far (accepted over accepted + rejected: dry runs are listed and
 * cost, but decide nothing); the rejection reasons ranked by count with their share of the
 * rejections; and the totals. Pure.
 */
export function aggregateRuns(dir: string, runs: readonly RunReports[]): RunsAggregate {
  const all = runs.flatMap((run) => run.reports.map((report) => ({ run, report })));
  all.sort(
    (a, b) =>
      startMs(a.report) - startMs(b.report) ||
      a.run.runId.localeCompare(b.run.runId) ||
      a.run.dir.localeCompare(b.run.dir) ||
      a.report.generation - b.report.generation,
  );
  let totalUsd = 0;
  let decided = 0;
  let accepted = 0;
  const generations = all.map(({ run, report }): GenerationPoint => {
    const { verdict, reason } = report.decision;
    totalUsd += report.usage.costUsd;
    if (verdict !== "dry_run") decided++;
    if (verdict === "accepted") accepted++;
    return {
      runId: run.runId,
      dir: run.dir,
      generation: report.generation,
      startedAt: report.startedAt,
      verdict,
      reason,
      costUsd: report.usage.costUsd,
      totalUsd,
      decided,
      accepted,
      acceptanceRate: decided ? accepted / decided : null,
    };
  });
  const counts = new Map<DecisionReason, number>();
  for (const { report } of all)
    if (report.decision.verdict === "rejected")
      counts.set(report.decision.reason, (counts.get(report.decision.reason) ?? 0) + 1);
  const rejected = [...counts.values()].reduce((a, b) => a + b, 0);
  const reasons = [...counts]
    .map(([reason, count]) => ({ reason, count, share: count / rejected }))
    .sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason));
  return {
    dir,
    runs: runs.map((run) => {
      const starts = run.reports.map(startMs);
      const first = run.reports[starts.indexOf(Math.min(...starts))];
      return {
        runId: run.runId,
        dir: run.dir,
        ...(first ? { startedAt: first.startedAt } : {}),
        ...figures(run.reports),
      };
    }),
    generations,
    reasons,
    totals: { runs: runs.length, ...figures(all.map((x) => x.report)) },
  };
}

/** A rate 0..1 as a percentage with one decimal (`42.9%`), `-` for null. Pure. */
export function percent(rate: number | null): string {
  return rate === null ? "-" : `${(rate * 100).toFixed(1)}%`;
}

/** USD with 4 decimals (`0.0123`). */
const usd = (v: number): string => v.toFixed(4);

/** Rows aligned in columns two spaces apart; the columns named in `right` right-aligned. */
function aligned(header: readonly string[], rows: readonly string[][], right: ReadonlySet<string>): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => [...(row[i] ?? "")].length)));
  const line = (row: readonly string[]): string =>
    row
      .map((value, i) => {
        const pad = " ".repeat(Math.max(0, (widths[i] ?? 0) - [...value].length));
        return right.has(header[i] ?? "") ? pad + value : value + pad;
      })
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)];
}

/**
 * The text of `loopsmith report --all`: one line of totals (runs, generations by verdict,
 * the acceptance rate of the decided ones, the cost), a table per run (generations,
 * accepted, rejected, dry runs, rate, USD), the acceptance rate over time (one row per
 * generation in order of its start: time, run, gen, verdict, reason, accepted so far of the
 * decided, rate so far, USD, total USD so far) and the rejection reasons ranked by count
 * (count, share of the rejections). Text from the reports is shown on one line. Pure.
 */
export function runsTable(agg: RunsAggregate): string {
  const t = agg.totals;
  const lines = [
    `${t.runs} run(s) in ${cell(agg.dir, 200)}: ${t.generations} generation(s), ${t.accepted} accepted, ${t.rejected} rejected, ${t.dryRuns} dry run(s); acceptance rate ${percent(t.acceptanceRate)} (${t.accepted} of ${t.accepted + t.rejected} decided); $${usd(t.costUsd)} in all`,
    "",
    ...aligned(
      ["run", "generations", "accepted", "rejected", "dry runs", "rate", "USD"],
      agg.runs.map((r) => [
        cell(r.runId, 48),
        String(r.generations),
        String(r.accepted),
        String(r.rejected),
        String(r.dryRuns),
        percent(r.acceptanceRate),
        usd(r.costUsd),
      ]),
      new Set(["generations", "accepted", "rejected", "dry runs", "rate", "USD"]),
    ),
    "",
    "acceptance rate over time (each generation in order of its start; the rate is of the generations decided so far):",
    ...(agg.generations.length
      ? aligned(
          ["started", "run", "gen", "verdict", "reason", "accepted", "rate", "USD", "total USD"],
          agg.generations.map((g) => [
            cell(g.startedAt, 40),
            cell(g.runId, 48),
            String(g.generation),
            g.verdict,
            g.reason,
            `${g.accepted}/${g.decided}`,
            percent(g.acceptanceRate),
            usd(g.costUsd),
            usd(g.totalUsd),
          ]),
          new Set(["gen", "accepted", "rate", "USD", "total USD"]),
        )
      : ["(no generations)"]),
    "",
    "rejection reasons, by count:",
    ...(agg.reasons.length
      ? aligned(
          ["reason", "count", "share"],
          agg.reasons.map((r) => [r.reason, String(r.count), percent(r.share)]),
          new Set(["count", "share"]),
        )
      : ["(no rejected generation)"]),
  ];
  return lines.join("\n");
}
