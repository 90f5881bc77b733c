/**
 * An improvement run's reports on disk (`<run dir>/reports/gen-N.json`, one per generation)
 * and the plain-text table `loopsmith report <runId>` prints.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { GenerationReport, ImproveSummary, testAlpha, type ImproveSettings } from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";

const REPORT_FILE = /^gen-(\d+)\.json$/;

/**
 * The run's summary (`<dir>/summary.json`, written when the run ends), or undefined while the
 * run has none yet or when the file does not parse as an {@link ImproveSummary} (the table
 * then takes the run's lines from the reports alone).
 */
export async function readSummary(dir: string): Promise<ImproveSummary | undefined> {
  try {
    const parsed = ImproveSummary.safeParse(JSON.parse(await readFile(join(dir, "summary.json"), "utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The reports of the run in `dir`, read from `<dir>/reports/gen-<N>.json`, sorted by N.
 * Files with other names are ignored.
 * @param dir - the run's directory (the one holding `reports/`)
 * @throws LoopsmithError `not_found` when `<dir>/reports` does not exist;
 *   `bad_request` (`"<file>: <why>"`) when a file is not JSON, fails the {@link GenerationReport}
 *   schema, or holds another generation than its name says
 */
export async function readReports(dir: string): Promise<GenerationReport[]> {
  const folder = join(dir, "reports");
  let names: string[];
  try {
    names = await readdir(folder);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "ENOTDIR") {
      throw new LoopsmithError(
        "not_found",
        `no reports in ${dir}: ${folder} does not exist (is the run id or --dir right?)`,
        { cause: err },
      );
    }
    throw err;
  }
  const files = names
    .map((name) => ({ name, n: Number(REPORT_FILE.exec(name)?.[1] ?? NaN) }))
    .filter((f) => Number.isSafeInteger(f.n))
    .sort((a, b) => a.n - b.n);
  const reports: GenerationReport[] = [];
  for (const { name, n } of files) {
    const file = join(folder, name);
    let json: unknown;
    try {
      json = JSON.parse(await readFile(file, "utf8"));
    } catch (err) {
      throw new LoopsmithError("bad_request", `${file}: not valid JSON (${(err as Error).message}).`, { cause: err });
    }
    const parsed = GenerationReport.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue?.path.length ? issue.path.join(".") : "(root)";
      throw new LoopsmithError(
        "bad_request",
        `${file}: not a generation report (${where}: ${issue?.message ?? "invalid"}).`,
        { details: parsed.error.issues },
      );
    }
    if (parsed.data.generation !== n) {
      throw new LoopsmithError("bad_request", `${file}: holds generation ${parsed.data.generation}, not ${n}.`);
    }
    reports.push(parsed.data);
  }
  return reports;
}

/**
 * Writes `report` to `<dir>/reports/gen-<generation>.json` as pretty JSON, atomically (a temp
 * file beside it, then a rename), creating the folder; an existing file is replaced.
 * @returns the path written
 * @throws the file system's error when the folder cannot be created or written
 */
export async function writeReport(dir: string, report: GenerationReport): Promise<string> {
  const folder = join(dir, "reports");
  await mkdir(folder, { recursive: true });
  const file = join(folder, `gen-${report.generation}.json`);
  const temp = `${file}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeFile(temp, `${JSON.stringify(report, null, 2)}\n`);
    await rename(temp, file);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  return file;
}

/** Benchmark passes summed over a generation's cases and repeats; undefined when no benchmark ran. */
export interface BenchTotals {
  /** Cases compared. */
  cases: number;
  parent: { passes: number; runs: number };
  candidate: { passes: number; runs: number };
}

/** The benchmark totals of `report` (passes and runs over all cases), or undefined when it has no benchmark. Pure. */
export function benchTotals(report: GenerationReport): BenchTotals | undefined {
  if (!report.bench) return undefined;
  const totals: BenchTotals = {
    cases: report.bench.cases.length,
    parent: { passes: 0, runs: 0 },
    candidate: { passes: 0, runs: 0 },
  };
  for (const c of report.bench.cases) {
    totals.parent.passes += c.parent.passes;
    totals.parent.runs += c.parent.runs;
    totals.candidate.passes += c.candidate.passes;
    totals.candidate.runs += c.candidate.runs;
  }
  return totals;
}

/** A generation's wall time in ms: finishedAt − startedAt, or the sum of its phases when the times do not parse. Pure. */
export function generationMs(report: GenerationReport): number {
  const ms = Date.parse(report.finishedAt) - Date.parse(report.startedAt);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  return Object.values(report.phasesMs).reduce((a, b) => a + b, 0);
}

/** A p-value with 3 significant digits (`0.00781`, `1.00`), or `-` when there is none. Pure. */
export function formatP(p: number | undefined): string {
  return p === undefined ? "-" : p.toPrecision(3);
}

/**
 * `text` on one line for a table cell: control characters, line breaks and bidirectional
 * overrides as spaces (report text is not trusted), trimmed, cut to `max` characters (code
 * points) with `…`. Pure.
 */
export function cell(text: string, max: number): string {
  // eslint-disable-next-line no-control-regex
  const line = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]+/g, " ").trim();
  const chars = [...line];
  return chars.length > max ? `${chars.slice(0, max - 1).join("")}…` : line;
}

const COLUMNS = [
  "gen",
  "verdict",
  "reason",
  "hypothesis",
  "files",
  "bench",
  "selection",
  "confirmation",
  "alpha spent",
  "metrics",
  "tokens",
  "USD",
  "time s",
] as const;
const RIGHT = new Set<string>([
  "gen",
  "files",
  "bench",
  "selection",
  "confirmation",
  "alpha spent",
  "tokens",
  "USD",
  "time s",
]);

/**
 * The selection column of a generation: the selection set's `fixed/broken p <p>` (the cases
 * the model was shown, whose test must say "better"), or the whole benchmark's when the run
 * did not split its cases; `-` without a paired test. Pure.
 */
export function selectionCell(r: GenerationReport): string {
  const s = r.statistic;
  if (!s) return "-";
  const t = s.selection ?? s;
  return `${t.fixed}/${t.broken} p ${formatP(t.pValue)}`;
}

/**
 * The confirmation column of a generation: the held-out set's `fixed/broken p <p>`,
 * then `ok` when it confirmed the selection's improvement, `overfit` when it did not, and `-`
 * when the selection test did not pass (the confirmation was not needed). `-` without a
 * confirmation set. Pure.
 */
export function confirmationCell(r: GenerationReport): string {
  const c = r.statistic?.confirmation;
  if (!c) return "-";
  const verdict = r.statistic?.selection?.passed ? (c.passed ? "ok" : "overfit") : "-";
  return `${c.fixed}/${c.broken} p ${formatP(c.pValue)} ${verdict}`;
}

/**
 * The lines after the table at the end of a run, so a reader can judge the evidence: the
 * selection and confirmation sets and how they were chosen, the flaky cases left out of the test (up to 20 named), and the
 * run's error budget spent. Empty for a summary without them (a dry run, an older run). Pure.
 */
export function runFooter(summary: Pick<ImproveSummary, "calibration" | "alpha">): string[] {
  const out: string[] = [];
  const c = summary.calibration;
  if (c) {
    const how =
      c.source === "holdout"
        ? "named by --holdout"
        : c.source === "fraction"
          ? `held out at random, stratified by the parent's pass/fail, seed ${c.seed}`
          : "no confirmation set";
    out.push(
      `sets: ${c.selection.length} selection case(s) shown to the model, ${c.confirmation.length} confirmation case(s) held out (${how})`,
    );
    const named = c.flaky.slice(0, 20).map((id) => cell(id, 60));
    out.push(
      `flaky: ${c.flaky.length} of ${c.selection.length + c.confirmation.length} case(s) both passed and failed in ${c.runs} calibration run(s) of the parent and were left out of the test${named.length ? `: ${named.join(", ")}${c.flaky.length > named.length ? ", …" : ""}` : ""}`,
    );
  }
  const a = summary.alpha;
  if (a)
    out.push(
      `error budget: alpha ${a.budget} for the whole run; ${a.spent.toPrecision(3)} spent by ${a.tests} paired test(s)`,
    );
  return out;
}

/** One value of a metric: a number, a text (`unavailable`, a version), or absent. */
const MetricValue = z
  .union([z.number(), z.string(), z.boolean(), z.null(), z.object({ value: z.union([z.number(), z.string()]) })])
  .optional();
const MetricEntry = z.object({
  name: z.string().optional(),
  metric: z.string().optional(),
  unit: z.string().optional(),
  parent: MetricValue,
  candidate: MetricValue,
  /** Per-repeat values of each side (the contract's `MetricOutcome`): their mean is shown. */
  parentValues: z.array(z.number()).optional(),
  candidateValues: z.array(z.number()).optional(),
  delta: MetricValue,
  status: z.string().optional(),
  improved: z.boolean().optional(),
  regressed: z.boolean().optional(),
});
type MetricEntry = z.infer<typeof MetricEntry>;

/** One repository metric of a generation, parent against candidate (a run judged on the quality metrics). */
export interface MetricRow {
  name: string;
  /** The parent's value as shown (`-` when absent). */
  parent: string;
  /** The candidate's value as shown (`-` when absent). */
  candidate: string;
  /** candidate − parent as shown with its sign, the report's own delta when it gives one (`-` when neither side is a number). */
  delta: string;
  /**
   * `regressed` or `improved` when the report flags it so, else the report's status of the
   * metric (`measured`, `unavailable`, …); `-` when it gives none.
   */
  status: string;
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A metric value as text: numbers to 4 significant digits (integers whole). */
function metricText(v: MetricEntry["parent"]): string {
  if (v === undefined || v === null) return "-";
  if (typeof v === "object") return metricText(v.value);
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
  return String(v);
}

/**
 * The metric deltas of a generation, read from its report's `metrics` field whatever its exact
 * shape: an array of entries, a record of name → entry, or an object holding such an array
 * under `deltas`, `entries` or `metrics` (the contract's `QualityReport`). An entry names itself
 * by `name` (or `metric`, or its key in a record; with its `unit` in parentheses) and may carry
 * `parent`, `candidate` (numbers, texts, `{value}`) or per-repeat `parentValues` and
 * `candidateValues` (their means are shown), `delta`, `status`, `improved` and `regressed`; a
 * delta it does not give is computed when both sides are numbers. Entries without a name are
 * skipped; no `metrics` field (a run with a benchmark) gives `[]`. Pure.
 */
export function metricRows(report: GenerationReport): MetricRow[] {
  const raw = (report as unknown as { metrics?: unknown }).metrics;
  if (raw === undefined || raw === null || typeof raw !== "object") return [];
  let named: [string | undefined, unknown][];
  if (Array.isArray(raw)) named = raw.map((x) => [undefined, x]);
  else {
    const inner = (["deltas", "entries", "metrics"] as const)
      .map((k) => (raw as Record<string, unknown>)[k])
      .find((v) => Array.isArray(v)) as unknown[] | undefined;
    named = inner ? inner.map((x) => [undefined, x]) : Object.entries(raw);
  }
  const rows: MetricRow[] = [];
  for (const [key, value] of named) {
    const parsed = MetricEntry.safeParse(value);
    if (!parsed.success) continue;
    const m = parsed.data;
    const base = m.name ?? m.metric ?? key;
    if (!base) continue;
    const name = m.unit ? `${base} (${m.unit})` : base;
    const avg = (xs: number[] | undefined): number | undefined => (xs?.length ? mean(xs) : undefined);
    const parent = m.parent ?? avg(m.parentValues);
    const candidate = m.candidate ?? avg(m.candidateValues);
    const num = (v: MetricEntry["parent"]): number | undefined =>
      typeof v === "number"
        ? v
        : typeof v === "object" && v !== null && typeof v.value === "number"
          ? v.value
          : undefined;
    const [p, c, d] = [num(parent), num(candidate), num(m.delta)];
    const diff = d ?? (p !== undefined && c !== undefined ? c - p : undefined);
    const status = m.regressed ? "regressed" : m.improved ? "improved" : (m.status ?? "-");
    rows.push({
      name: cell(name, 40),
      parent: cell(metricText(parent), 40),
      candidate: cell(metricText(candidate), 40),
      delta:
        diff !== undefined
          ? `${diff > 0 ? "+" : ""}${metricText(diff)}`
          : m.delta !== undefined && m.delta !== null
            ? cell(metricText(m.delta), 40)
            : "-",
      status: cell(status, 40),
    });
  }
  return rows;
}

/** The metrics column: how many metrics had each status (`2 improved, 1 regressed`), `-` without metrics. Pure. */
export function metricsCell(r: GenerationReport): string {
  const rows = metricRows(r);
  if (!rows.length) return "-";
  const counts = new Map<string, number>();
  for (const m of rows) counts.set(m.status, (counts.get(m.status) ?? 0) + 1);
  if (counts.size === 1 && counts.has("-")) return `${rows.length} metric(s)`;
  return [...counts].map(([status, n]) => `${n} ${status === "-" ? "no status" : status}`).join(", ");
}

/**
 * A generation's reviews as lines: per review `gen N review of iteration I: approved|not
 * approved, score S, K finding(s)`, then one indented line per finding as the reviewer gave it
 * (`severity rule path:line message`, `-` for what it left out). Empty when no review ran.
 * Report text is shown on one line ({@link cell}). Pure.
 */
export function reviewLines(r: GenerationReport): string[] {
  const out: string[] = [];
  for (const review of r.reviews ?? []) {
    out.push(
      `gen ${r.generation} review of iteration ${review.iteration}: ${review.approved ? "approved" : "not approved"}, score ${review.score.toFixed(2)}, ${review.findings.length} finding(s)`,
    );
    for (const f of review.findings) {
      const where = f.path ? `${cell(f.path, 80)}${f.line !== undefined ? `:${f.line}` : ""}` : "-";
      out.push(`  ${f.severity} ${f.rule ? cell(f.rule, 60) : "-"} ${where} ${cell(f.message, 300)}`);
    }
  }
  return out;
}

/**
 * A generation's errors as lines, in order: `gen N error in <phase> (<code>[, retried]):
 * <message>`. Empty when none was met. Pure.
 */
export function errorLines(r: GenerationReport): string[] {
  return (r.errors ?? []).map((e) => {
    const tags = [...(e.code ? [e.code] : []), ...(e.retried ? ["retried"] : [])];
    return `gen ${r.generation} error in ${e.phase}${tags.length ? ` (${tags.join(", ")})` : ""}: ${cell(e.message, 300)}`;
  });
}

/**
 * The lines under the table when there is no run summary to read (`loopsmith report` on the
 * reports alone): the sets as the latest split report shows them (selection, confirmation and
 * flaky case counts) and the error budget its tests spent (the largest `alphaSpent`). Pure.
 */
export function reportsFooter(reports: GenerationReport[]): string[] {
  const out: string[] = [];
  const split = [...reports].reverse().find((r) => r.bench?.cases.some((c) => c.set !== undefined));
  if (split?.bench) {
    const count = (set: string): number => split.bench?.cases.filter((c) => c.set === set).length ?? 0;
    const flaky = split.bench.cases.filter((c) => c.flaky).length;
    out.push(
      `sets: ${count("selection")} selection case(s) shown to the model, ${count("confirmation")} confirmation case(s) held out; ${flaky} flaky case(s) left out of the test (generation ${split.generation}'s report)`,
    );
  }
  const tested = reports.filter((r) => r.statistic?.alphaSpent !== undefined);
  if (tested.length) {
    const spent = Math.max(...tested.map((r) => r.statistic?.alphaSpent ?? 0));
    out.push(`error budget: ${spent.toPrecision(3)} of the run's alpha spent by ${tested.length} paired test(s)`);
  }
  return out;
}

/**
 * The least n for which n fixed and 0 broken cases pass the selection's one-sided exact sign
 * test at level `alpha`: p = 0.5^n < alpha (strictly, as the decision tests it). Pure.
 * @throws RangeError when `alpha` is not in (0, 1]
 */
export function fixesNeeded(alpha: number): number {
  if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`alpha must be in (0, 1], got ${alpha}`);
  return Math.max(1, Math.floor(-Math.log2(alpha)) + 1);
}

/**
 * Before generation 1: one warning line when the selection set is too small for a
 * perfect fix to be significant. A perfect fix makes every selection case that failed on the
 * parent in all calibration runs pass (n discordant pairs, 0 broken), so the best p-value of the
 * selection's one-sided exact sign test is 0.5^n; the j-th paired test of the run is at α_j
 * (`testAlpha`, shared). When 0.5^n ≥ α_1 no generation can be accepted; when only the later
 * tests are out of reach, the line says from which test on. It names n, the p-value, the level,
 * the cases needed and what would fix it (more failing cases in the benchmark, a larger
 * `--alpha` with the least one that would do, fewer `--generations`, a smaller confirmation
 * share). For a scored benchmark (signed-rank test) a passing case can still score better, so
 * the line speaks of the failing cases only. Undefined when a perfect fix is significant at
 * every generation's level. Pure.
 */
export function smallBenchmarkWarning(
  calibration: NonNullable<ImproveSummary["calibration"]>,
  settings: Pick<ImproveSettings, "alpha" | "generations" | "alphaSpending">,
): string | undefined {
  const { alpha, generations: g, alphaSpending: rule } = settings;
  const failing = new Set(calibration.parentFailing);
  const n = calibration.selection.filter((id) => failing.has(id)).length;
  const best = 0.5 ** n;
  const a1 = testAlpha(alpha, 1, g, rule);
  const aG = testAlpha(alpha, g, g, rule);
  if (best < aG) return undefined;
  const spending = rule === "none" ? "each test at --alpha" : `spent ${rule} over ${g} generation(s)`;
  const cases = `the selection set has ${n} case(s) failing on the parent (of ${calibration.selection.length})`;
  const p = `a perfect fix gives p = ${best.toPrecision(3)} at best (one-sided exact sign test)`;
  if (best >= a1) {
    // The least --alpha that would let generation 1 accept it: α_1 scales with alpha.
    const enough = best / (a1 / alpha);
    const raise = enough < 0.5 ? `--alpha above ${enough.toPrecision(3)}, ` : "";
    // Fewer generations raise α_1 only when the run spends over them (harmonic, more than one).
    const fewer = rule === "harmonic" && g > 1 ? "fewer --generations or " : "";
    return `warning: no generation of this run can be accepted: ${cases}; ${p}, not below generation 1's level ${a1.toPrecision(3)} (--alpha ${alpha} ${spending}); ${fixesNeeded(a1)} failing selection case(s) are needed. Add failing cases to the benchmark, or use ${raise}${fewer}a smaller --confirmation-fraction.`;
  }
  let last = 1;
  while (last < g && best < testAlpha(alpha, last + 1, g, rule)) last++;
  return `warning: only the first ${last} benchmarked generation(s) of ${g} can be accepted: ${cases}; ${p}, not below the level ${testAlpha(alpha, last + 1, g, rule).toPrecision(3)} of test ${last + 1} (--alpha ${alpha} ${spending}); ${fixesNeeded(aG)} failing selection case(s) would reach the last generation's level ${aG.toPrecision(3)}. Add failing cases to the benchmark, or use a larger --alpha, fewer --generations or a smaller --confirmation-fraction.`;
}

/**
 * The plain-text table of a run's generations: gen, verdict, reason, hypothesis (cut to 40
 * characters), files changed (+insertions/-deletions), benchmark passes parent → candidate
 * (summed over cases and repeats, e.g. `12/20 → 18/20`), the selection set's fixed/broken and
 * one-sided p ({@link selectionCell}; the whole benchmark's two-sided test without a split),
 * the confirmation set's ({@link confirmationCell}), the run's alpha spent once the
 * generation's test was made, the metrics by status ({@link metricsCell}), tokens (input +
 * output), USD (4 decimals) and wall time (s); columns aligned. Then one totals line
 * (`total: N generations, A accepted, T tokens, $U`), one line per generation with metrics
 * (`gen N metrics: name parent → candidate (delta, status); …`), its reviews and their findings
 * ({@link reviewLines}) and its errors ({@link errorLines}), and the run's lines: from
 * `summary` when given ({@link runFooter}), else from the reports ({@link reportsFooter}).
 * Control characters from the reports are shown as spaces. Pure.
 */
export function reportTable(
  reports: GenerationReport[],
  summary?: Pick<ImproveSummary, "calibration" | "alpha">,
): string {
  const rows = reports.map((r) => {
    const bench = benchTotals(r);
    const stat = r.change?.stat;
    return [
      String(r.generation),
      r.decision.verdict,
      r.decision.reason,
      cell(r.hypothesis?.title ?? r.change?.summary ?? "-", 40),
      stat ? `${stat.files} (+${stat.insertions}/-${stat.deletions})` : "-",
      bench ? `${bench.parent.passes}/${bench.parent.runs} → ${bench.candidate.passes}/${bench.candidate.runs}` : "-",
      selectionCell(r),
      confirmationCell(r),
      r.statistic?.alphaSpent !== undefined ? r.statistic.alphaSpent.toPrecision(3) : "-",
      metricsCell(r),
      String(r.usage.inputTokens + r.usage.outputTokens),
      r.usage.costUsd.toFixed(4),
      (generationMs(r) / 1000).toFixed(1),
    ];
  });
  const header: string[] = [...COLUMNS];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => [...(row[i] ?? "")].length)));
  const line = (row: string[]): string =>
    row
      .map((value, i) => {
        const pad = " ".repeat(Math.max(0, (widths[i] ?? 0) - [...value].length));
        return RIGHT.has(header[i] ?? "") ? pad + value : value + pad;
      })
      .join("  ")
      .trimEnd();
  const tokens = reports.reduce((sum, r) => sum + r.usage.inputTokens + r.usage.outputTokens, 0);
  const usd = reports.reduce((sum, r) => sum + r.usage.costUsd, 0);
  const accepted = reports.filter((r) => r.decision.verdict === "accepted").length;
  const lines = [line(header), ...(rows.length ? rows.map(line) : ["(no generations)"])];
  lines.push(
    `total: ${reports.length} generation${reports.length === 1 ? "" : "s"}, ${accepted} accepted, ${tokens} tokens, $${usd.toFixed(4)}`,
  );
  for (const r of reports) {
    const metrics = metricRows(r);
    if (metrics.length)
      lines.push(
        `gen ${r.generation} metrics: ${metrics.map((m) => `${m.name} ${m.parent} → ${m.candidate} (${m.delta}, ${m.status})`).join("; ")}`,
      );
    lines.push(...reviewLines(r), ...errorLines(r));
  }
  lines.push(...(summary ? runFooter(summary) : reportsFooter(reports)));
  return lines.join("\n");
}
