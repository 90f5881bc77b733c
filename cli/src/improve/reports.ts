/**
 * An improvement run's reports on disk (`<run dir>/reports/gen-N.json`, one per generation)
 * and the plain-text table `loopsmith report <runId>` prints.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { GenerationReport, LoopsmithError, type ImproveSummary } from "@loopsmith/shared";

const REPORT_FILE = /^gen-(\d+)\.json$/;

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

/** `text` on one line (controls and line breaks as spaces), cut to `max` characters with `…`. */
function cell(text: string, max: number): string {
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
  "fixed/broken",
  "p",
  "confirmation",
  "tokens",
  "USD",
  "time s",
] as const;
const RIGHT = new Set<string>([
  "gen",
  "files",
  "bench",
  "fixed/broken",
  "p",
  "confirmation",
  "tokens",
  "USD",
  "time s",
]);

/**
 * The confirmation column of a generation (issue #36): the held-out set's fixed/broken, then
 * `ok` when it confirmed the selection's improvement, `overfit` when it did not, and `-` when
 * the selection test did not pass (the confirmation was not needed). `-` without a confirmation set. Pure.
 */
export function confirmationCell(r: GenerationReport): string {
  const c = r.statistic?.confirmation;
  if (!c) return "-";
  const verdict = r.statistic?.selection?.passed ? (c.passed ? "ok" : "overfit") : "-";
  return `${c.fixed}/${c.broken} ${verdict}`;
}

/**
 * The lines after the table at the end of a run (issue #36): the selection and confirmation
 * sets and how they were chosen, the flaky cases left out of the test (up to 20 named), and the
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

/**
 * The plain-text table of a run's generations: gen, verdict, reason, hypothesis (cut to 40
 * characters), files changed (+insertions/-deletions), benchmark passes parent → candidate
 * (summed over cases and repeats, e.g. `12/20 → 18/20`), fixed/broken, p-value (3 significant
 * digits), tokens (input + output), USD (4 decimals) and wall time (s); columns aligned, then
 * one totals line (`total: N generations, A accepted, T tokens, $U`). Control characters from
 * the reports are shown as spaces. Pure.
 */
export function reportTable(reports: GenerationReport[]): string {
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
      r.statistic ? `${r.statistic.fixed}/${r.statistic.broken}` : "-",
      formatP(r.statistic?.pValue),
      confirmationCell(r),
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
  return lines.join("\n");
}
