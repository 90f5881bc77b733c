/**
 * An improvement run's dashboard: one self-contained HTML file (inline CSS and a static inline
 * SVG chart; no script, no external URL) that opens from disk and works with JavaScript off.
 */
import { randomBytes } from "node:crypto";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { CaseOutcome, GenerationReport } from "@loopsmith/shared/contracts";
import { percent, type GenerationPoint, type RunsAggregate } from "./all-runs.js";
import {
  benchTotals,
  confirmationCell,
  formatP,
  generationMs,
  metricRows,
  metricsCell,
  selectionCell,
} from "./reports.js";

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** `value` with `& < > " '` escaped for HTML text and attribute values. Pure. */
export function escapeHtml(value: string | number): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);
}
const e = escapeHtml;

const mean = (xs: number[]): number | undefined => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);

/** True when the run's benchmark reports scores (the chart shows mean scores, not pass rates). */
function isScored(reports: GenerationReport[]): boolean {
  return reports.some(
    (r) => r.statistic?.test === "wilcoxon" || r.bench?.cases.some((c) => c.candidate.scores.length > 0),
  );
}

/** One side's level in a generation: its pass rate (0..1) or its mean score; undefined without a benchmark. */
function level(r: GenerationReport, side: "parent" | "candidate", scored: boolean): number | undefined {
  if (!r.bench) return undefined;
  if (scored) return mean(r.bench.cases.flatMap((c) => c[side].scores));
  const t = benchTotals(r);
  return t && t[side].runs > 0 ? t[side].passes / t[side].runs : undefined;
}

const W = 760;
const H = 300;
const M = { left: 56, right: 20, top: 20, bottom: 40 };

/** The static SVG line chart: candidate level per generation, the parent's level as a dashed step line. */
function chart(reports: GenerationReport[]): string {
  const scored = isScored(reports);
  const points = reports.map((r) => ({ r, y: level(r, "candidate", scored), parent: level(r, "parent", scored) }));
  const values = points.flatMap((p) => [p.y, p.parent]).filter((v): v is number => v !== undefined);
  let [lo, hi] = scored ? [Math.min(...values), Math.max(...values)] : [0, 1];
  if (!values.length) [lo, hi] = [0, 1];
  if (hi - lo < 1e-9) [lo, hi] = [lo - 1, hi + 1];
  const gens = reports.map((r) => r.generation);
  let [g0, g1] = [Math.min(...gens), Math.max(...gens)];
  if (g1 === g0) [g0, g1] = [g0 - 1, g1 + 1];
  const x = (g: number): number => M.left + ((g - g0) / (g1 - g0)) * (W - M.left - M.right);
  const y = (v: number): number => H - M.bottom - ((v - lo) / (hi - lo)) * (H - M.top - M.bottom);
  const fmt = (v: number): string => (scored ? v.toPrecision(3) : `${Math.round(v * 100)}%`);
  const parts: string[] = [];
  for (let i = 0; i <= 4; i++) {
    const v = lo + ((hi - lo) * i) / 4;
    parts.push(
      `<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}"/>`,
    );
    parts.push(
      `<text class="tick" x="${M.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${e(fmt(v))}</text>`,
    );
  }
  const step = Math.max(1, Math.ceil(gens.length / 20));
  gens.forEach((g, i) => {
    if (i % step === 0)
      parts.push(`<text class="tick" x="${x(g).toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle">${g}</text>`);
  });
  parts.push(
    `<text class="axis" x="${(M.left + W - M.right) / 2}" y="${H - 6}" text-anchor="middle">generation</text>`,
  );
  parts.push(
    `<text class="axis" x="14" y="${(M.top + H - M.bottom) / 2}" text-anchor="middle" transform="rotate(-90 14 ${(M.top + H - M.bottom) / 2})">${scored ? "mean score" : "candidate pass rate"}</text>`,
  );
  // The parent's level: measured where a benchmark ran, carried forward where none did.
  const half = (W - M.left - M.right) / (g1 - g0) / 2;
  const clampX = (v: number): string => Math.min(W - M.right, Math.max(M.left, v)).toFixed(1);
  let carried: number | undefined;
  const steps: string[] = [];
  for (const p of points) {
    carried = p.parent ?? carried;
    p.parent = carried;
    if (carried !== undefined)
      steps.push(
        `${clampX(x(p.r.generation) - half)},${y(carried).toFixed(1)} ${clampX(x(p.r.generation) + half)},${y(carried).toFixed(1)}`,
      );
  }
  if (steps.length) parts.push(`<polyline class="parent-level" points="${steps.join(" ")}"/>`);
  const measured = points.filter((p) => p.y !== undefined);
  if (measured.length > 1)
    parts.push(
      `<polyline class="candidate-line" points="${measured.map((p) => `${x(p.r.generation).toFixed(1)},${y(p.y as number).toFixed(1)}`).join(" ")}"/>`,
    );
  for (const p of points) {
    const { verdict, reason } = p.r.decision;
    const at = p.y ?? p.parent ?? lo;
    const label = `generation ${p.r.generation}: ${verdict} (${reason})${p.y === undefined ? ", not benchmarked" : `, ${fmt(p.y)}`}`;
    parts.push(
      `<a href="#gen-${p.r.generation}"><circle class="point ${e(verdict)}${p.y === undefined ? " unmeasured" : ""}" data-generation="${p.r.generation}" data-verdict="${e(verdict)}" cx="${x(p.r.generation).toFixed(1)}" cy="${y(at).toFixed(1)}" r="6"><title>${e(label)}</title></circle></a>`,
    );
  }
  return `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${scored ? "mean score" : "candidate pass rate"} per generation">${parts.join("")}</svg>`;
}

const CSS = `body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:980px;padding:0 1rem;color:#1b1f24;background:#fff}
h1{font-size:1.5rem;margin:0 0 .25rem}h2{font-size:1.15rem;margin:0 0 .5rem}.muted{color:#57606a}
.scripted{background:#fff4ce;border:1px solid #d4a72c;padding:.4rem .7rem;border-radius:4px;font-weight:600}
.chart{max-width:100%;height:auto;border:1px solid #d0d7de;border-radius:6px;margin:1rem 0}
.grid{stroke:#eaeef2}.tick,.axis{font-size:11px;fill:#57606a}.parent-level{fill:none;stroke:#6e7781;stroke-dasharray:5 4}
.candidate-line{fill:none;stroke:#0969da;stroke-width:1.5}.point{stroke-width:2.5}.point.accepted{fill:#1a7f37;stroke:#1a7f37}
.point.rejected{fill:#fff;stroke:#cf222e}.point.dry_run{fill:#fff;stroke:#8250df}.legend span{margin-right:1rem}.k-acc{color:#1a7f37}.k-rej{color:#cf222e}.k-dry{color:#8250df}.k-line{color:#0969da}
.generation{border:1px solid #d0d7de;border-radius:6px;padding:1rem;margin:1rem 0}
.badge{display:inline-block;padding:0 .5rem;border-radius:1rem;font-size:12px;color:#fff;vertical-align:middle}
.badge.accepted{background:#1a7f37}.badge.rejected{background:#cf222e}.badge.dry_run{background:#8250df}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #d0d7de;padding:.15rem .5rem;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}tr.fixed td{background:#dafbe1}tr.broken td{background:#ffebe9}
table.overview td,table.metrics td{white-space:nowrap}tr.blocker td,tr.error td{background:#ffebe9}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:.5rem 0}dt{font-weight:600}dd{margin:0}
pre{background:#f6f8fa;padding:.75rem;overflow:auto;border-radius:4px;font-size:12px;white-space:pre}`;

/** `passes/runs` with the mean score when the side has scores. */
function side(s: CaseOutcome["parent"]): string {
  const m = mean(s.scores);
  return `${s.passes}/${s.runs}${m === undefined ? "" : ` (${m.toPrecision(3)})`}`;
}

/** What the dashboard knows of the run beyond its reports. */
export interface DashboardMeta {
  /** The repository's name. */
  repo?: string;
  /** The run replayed scripted replies (no model was called). */
  scripted?: boolean;
  /** The run's error budget (`--alpha`), from its settings or summary; absent: the spent share is shown alone. */
  alpha?: number;
}

/** The table of every generation at a glance: sets, budget spent, metrics, cost. */
function overview(reports: GenerationReport[]): string {
  const rows = reports.map((r) => {
    const u = r.usage;
    const spent = r.statistic?.alphaSpent;
    return `<tr><td class="n"><a href="#gen-${r.generation}">${r.generation}</a></td><td>${e(r.decision.verdict)}</td><td><code>${e(r.decision.reason)}</code></td><td class="n">${e(selectionCell(r))}</td><td class="n">${e(confirmationCell(r))}</td><td class="n">${spent === undefined ? "-" : e(spent.toPrecision(3))}</td><td>${e(metricsCell(r))}</td><td class="n">${u.inputTokens + u.outputTokens}</td><td class="n">$${u.costUsd.toFixed(4)}</td></tr>`;
  });
  return `<table class="overview"><thead><tr><th>gen</th><th>verdict</th><th>reason</th><th>selection fixed/broken p</th><th>confirmation fixed/broken p</th><th>alpha spent</th><th>metrics</th><th>tokens</th><th>USD</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

/** A generation's metric deltas as a `table.metrics` (name, parent, candidate, delta, status); empty without metrics. */
function metricTable(r: GenerationReport): string {
  const metrics = metricRows(r);
  if (!metrics.length) return "";
  const trs = metrics.map(
    (m) =>
      `<tr><td>${e(m.name)}</td><td class="n">${e(m.parent)}</td><td class="n">${e(m.candidate)}</td><td class="n">${e(m.delta)}</td><td>${e(m.status)}</td></tr>`,
  );
  return `<table class="metrics"><thead><tr><th>metric</th><th>parent</th><th>candidate</th><th>delta</th><th>status</th></tr></thead><tbody>${trs.join("")}</tbody></table>`;
}

/** One review of a generation's task: the verdict and score, then a `table.findings` of what the reviewer found. */
function reviewHtml(review: NonNullable<GenerationReport["reviews"]>[number]): string {
  const head = `${review.approved ? "approved" : "not approved"}, score ${e(review.score.toFixed(2))}, ${review.findings.length} finding${review.findings.length === 1 ? "" : "s"}`;
  if (!review.findings.length) return head;
  const trs = review.findings.map(
    (f) =>
      `<tr class="${e(f.severity)}"><td>${e(f.severity)}</td><td>${f.rule ? `<code>${e(f.rule)}</code>` : "-"}</td><td>${f.path ? `<code>${e(f.path)}</code>` : "-"}</td><td class="n">${f.line ?? "-"}</td><td>${e(f.message)}</td></tr>`,
  );
  return `${head}<table class="findings"><thead><tr><th>severity</th><th>rule</th><th>file</th><th>line</th><th>message</th></tr></thead><tbody>${trs.join("")}</tbody></table>`;
}

/** The errors met during a generation as a `table.errors`: phase, code, message, and whether the generation was resumed after it. */
function errorsHtml(errors: NonNullable<GenerationReport["errors"]>): string {
  const trs = errors.map(
    (x) =>
      `<tr><td>${e(x.phase)}</td><td>${x.code ? `<code>${e(x.code)}</code>` : "-"}</td><td>${e(x.message)}</td><td>${x.retried ? "yes" : "no"}</td></tr>`,
  );
  return `<table class="errors"><thead><tr><th>phase</th><th>code</th><th>message</th><th>resumed after it</th></tr></thead><tbody>${trs.join("")}</tbody></table>`;
}

/** A generation's rows after its figures: each review, the errors met, the cost, and the time with each phase's. */
function recordRows(r: GenerationReport): [string, string][] {
  const rows: [string, string][] = (r.reviews ?? []).map((review) => [
    `review (iteration ${review.iteration})`,
    reviewHtml(review),
  ]);
  if (r.errors?.length) rows.push(["errors", errorsHtml(r.errors)]);
  const u = r.usage;
  rows.push([
    "cost",
    `${u.calls} calls, ${u.inputTokens} input + ${u.outputTokens} output tokens, $${u.costUsd.toFixed(4)}`,
  ]);
  const phases = Object.entries(r.phasesMs).map(([k, v]) => `${e(k)} ${(v / 1000).toFixed(1)} s`);
  rows.push(["time", `${(generationMs(r) / 1000).toFixed(1)} s${phases.length ? ` (${phases.join(", ")})` : ""}`]);
  return rows;
}

/** One generation's section. */
function section(r: GenerationReport, meta: DashboardMeta): string {
  const { verdict, reason, message } = r.decision;
  const rows: [string, string][] = [];
  if (r.hypothesis) {
    rows.push(["hypothesis", e(r.hypothesis.title)]);
    if (r.hypothesis.rationale) rows.push(["rationale", e(r.hypothesis.rationale)]);
    if (r.hypothesis.expected) rows.push(["expected", e(r.hypothesis.expected)]);
  }
  rows.push(["decision", `${e(verdict)}, reason <code>${e(reason)}</code>`], ["message", e(message)]);
  const s = r.statistic;
  if (s) {
    const effect =
      s.test === "mcnemar_exact"
        ? `${s.effect >= 0 ? "+" : ""}${(s.effect * 100).toFixed(1)} pp pass rate`
        : `${s.effect >= 0 ? "+" : ""}${s.effect.toPrecision(3)} median score`;
    rows.push([
      "statistic",
      `${e(s.test)} on ${s.cases} cases: ${s.fixed} fixed, ${s.broken} broken, p = ${e(formatP(s.pValue))} (α = ${e(s.alpha)}), effect ${e(effect)}${s.nonZero === undefined ? "" : `, ${s.nonZero} non-zero pairs`}`,
    ]);
    // Both sets (the one the model saw, and the held-out one), and the run's error budget spent with this test.
    const set = (t: NonNullable<typeof s.selection>): string =>
      `${e(t.test)}: ${t.fixed} fixed, ${t.broken} broken of ${t.cases} (${t.parentFailing} failing on the parent), p = ${e(formatP(t.pValue))} at ${e(t.alpha.toPrecision(3))} → ${t.passed ? "passed" : "not passed"}`;
    if (s.selection) rows.push(["selection", set(s.selection)]);
    if (s.confirmation) rows.push(["confirmation (held out)", set(s.confirmation)]);
    if (s.testIndex !== undefined)
      rows.push([
        "error budget",
        `test ${s.testIndex} of the run; ${e((s.alphaSpent ?? 0).toPrecision(3))} of the run's alpha${meta.alpha === undefined ? "" : ` ${e(meta.alpha)}`} spent${s.flaky ? `; ${s.flaky} flaky case(s) left out` : ""}${s.repeatsRun !== undefined ? `; ${s.repeatsRun} run(s) per side` : ""}`,
      ]);
  }
  if (r.check) {
    const counts = (c: typeof r.check.parent): string =>
      c ? `${e(c.status)}: ${c.passed}/${c.total} passed, ${c.failed} failed, ${c.skipped} skipped` : "-";
    rows.push([
      "check",
      `<code>${e(r.check.command)}</code>; parent ${counts(r.check.parent)}; candidate ${counts(r.check.candidate)}`,
    ]);
  }
  if (r.change) {
    const { stat } = r.change;
    rows.push([
      "change",
      `${e(r.change.summary)} (${stat.files} file${stat.files === 1 ? "" : "s"}, +${stat.insertions}/-${stat.deletions})`,
    ]);
    if (r.change.changed.length || r.change.deleted.length)
      rows.push([
        "files",
        [
          ...r.change.changed.map((f) => `<code>${e(f)}</code>`),
          ...r.change.deleted.map((f) => `<code>${e(f)}</code> (deleted)`),
        ].join(", "),
      ]);
  }
  const metrics = metricTable(r);
  if (metrics) rows.push(["metrics", metrics]);
  rows.push(...recordRows(r));
  let cases = "";
  if (r.bench) {
    // A set column when the run split its cases (or found flaky ones): which cases the model saw.
    const split = r.bench.cases.some((c) => c.set !== undefined || c.flaky);
    const trs = r.bench.cases.map((c) => {
      const pr = mean(c.parent.scores) ?? (c.parent.runs ? c.parent.passes / c.parent.runs : 0);
      const cr = mean(c.candidate.scores) ?? (c.candidate.runs ? c.candidate.passes / c.candidate.runs : 0);
      const cls = cr > pr ? ` class="fixed"` : cr < pr ? ` class="broken"` : "";
      const setCell = split ? `<td>${e(`${c.set ?? "-"}${c.flaky ? " (flaky)" : ""}`)}</td>` : "";
      return `<tr${cls}><td>${e(c.case)}</td>${setCell}<td class="n">${e(side(c.parent))}</td><td class="n">${e(side(c.candidate))}</td></tr>`;
    });
    cases = `<p class="muted">benchmark <code>${e(r.bench.command)}</code> (${e(r.bench.format)}, ${r.bench.repeats} repeats per side)</p><table class="cases"><thead><tr><th>case</th>${split ? "<th>set</th>" : ""}<th>parent passes/runs</th><th>candidate passes/runs</th></tr></thead><tbody>${trs.join("")}</tbody></table>`;
  } else {
    cases = `<p class="muted">no benchmark ran for this generation</p>`;
  }
  const patch = r.change
    ? `<details open><summary>patch</summary><pre class="patch">${e(r.change.patch)}</pre></details>`
    : "";
  return `<section class="generation" id="gen-${r.generation}"><h2>Generation ${r.generation} <span class="badge ${e(verdict)}">${e(verdict)}</span></h2><dl>${rows.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join("")}</dl>${cases}${patch}</section>`;
}

/**
 * The dashboard of run `runId`: one self-contained HTML document (inline CSS, static inline
 * SVG, no script, no external URL). It holds the run id in the title, a "scripted run: no
 * model was called" notice when `meta.scripted`, totals (generations, accepted, tokens, USD),
 * an SVG chart of the candidate's benchmark pass rate per generation (mean score when the
 * benchmark is scored) with one `circle.point[data-generation][data-verdict]` per generation
 * (accepted filled green, rejected hollow red, dry runs hollow purple; a generation without a
 * benchmark sits on the parent's level) and the parent's level as a dashed line, then one
 * `section.generation#gen-N` per generation: hypothesis, decision, reason code, message,
 * statistic, the selection and confirmation sets' tests, the run's error budget spent (of
 * `meta.alpha` when given), the metric deltas (a `table.metrics`: name, parent, candidate,
 * delta, status; see `metricRows`), check counts, change, the reviews of its task (each with
 * a `table.findings`: severity, rule, file, line, message), the errors met (a `table.errors`:
 * phase, code, message, whether the generation was resumed after it), cost (tokens, USD),
 * time (s, and per phase), the per-case table and the patch in a `<pre>`. Above the sections, a `table.overview` has one row
 * per generation: verdict, reason, each set's fixed/broken and p, alpha spent, metrics by
 * status, tokens and USD. Every string taken from the reports is HTML-escaped. Pure.
 */
export function dashboardHtml(runId: string, reports: GenerationReport[], meta: DashboardMeta = {}): string {
  const sorted = [...reports].sort((a, b) => a.generation - b.generation);
  const accepted = sorted.filter((r) => r.decision.verdict === "accepted").length;
  const tokens = sorted.reduce((s, r) => s + r.usage.inputTokens + r.usage.outputTokens, 0);
  const usd = sorted.reduce((s, r) => s + r.usage.costUsd, 0);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>loopsmith improve: ${e(runId)}</title><style>${CSS}</style></head>
<body><header><h1>Improvement run <code>${e(runId)}</code></h1>${meta.repo ? `<p class="muted">repository ${e(meta.repo)}</p>` : ""}${meta.scripted ? `<p class="scripted">scripted run: no model was called</p>` : ""}
<p>${sorted.length} generations, ${accepted} accepted, ${tokens} tokens, $${usd.toFixed(4)}${meta.alpha === undefined ? "" : `; error budget alpha ${e(meta.alpha)} for the whole run`}</p></header>
<main>${sorted.length ? chart(sorted) : `<p class="muted">no generations yet</p>`}
<p class="legend muted"><span><b class="k-acc">●</b> accepted</span><span><b class="k-rej">○</b> rejected</span><span><b class="k-dry">○</b> dry run</span><span><b>- - -</b> parent's level</span><span><b class="k-line">—</b> candidate</span></p>
${sorted.length ? overview(sorted) : ""}
${sorted.map((r) => section(r, meta)).join("\n")}</main></body></html>
`;
}

/** The x of the i-th of `n` points (0-based) across the plot area. */
function xAt(i: number, n: number): number {
  return n <= 1 ? (M.left + W - M.right) / 2 : M.left + (i / (n - 1)) * (W - M.left - M.right);
}

/** The y of `v` on a 0..`max` axis. */
function yAt(v: number, max: number): number {
  return H - M.bottom - (max > 0 ? v / max : 0) * (H - M.top - M.bottom);
}

/** Grid lines and left-axis ticks of a 0..`max` axis, 5 of them, labelled by `fmt`. */
function grid(max: number, fmt: (v: number) => string): string[] {
  const parts: string[] = [];
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    const y = yAt(v, max).toFixed(1);
    parts.push(`<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${y}" y2="${y}"/>`);
    parts.push(
      `<text class="tick" x="${M.left - 6}" y="${(Number(y) + 4).toFixed(1)}" text-anchor="end">${e(fmt(v))}</text>`,
    );
  }
  return parts;
}

/**
 * The x-axis ticks (the generation's place in time, 1-based; 20 labels at most, at `x(i)`)
 * and the axis labels (the y one left out when `yLabel` is empty).
 */
function axes(n: number, x: (i: number) => number, yLabel: string): string[] {
  const parts: string[] = [];
  const step = Math.max(1, Math.ceil(n / 20));
  for (let i = 0; i < n; i += step)
    parts.push(
      `<text class="tick" x="${x(i).toFixed(1)}" y="${H - M.bottom + 16}" text-anchor="middle">${i + 1}</text>`,
    );
  parts.push(
    `<text class="axis" x="${(M.left + W - M.right) / 2}" y="${H - 6}" text-anchor="middle">generations of every run, in order of time</text>`,
  );
  const mid = (M.top + H - M.bottom) / 2;
  if (yLabel)
    parts.push(
      `<text class="axis" x="14" y="${mid}" text-anchor="middle" transform="rotate(-90 14 ${mid})">${e(yLabel)}</text>`,
    );
  return parts;
}

/** USD on a chart's axis: 2 significant digits, `$0` for zero. */
function axisUsd(v: number): string {
  return v === 0 ? "$0" : `$${v.toPrecision(2)}`;
}

/** `<runId> generation N (started …)`: how a chart's mark names its generation. */
function pointName(g: GenerationPoint): string {
  return `${g.runId} generation ${g.generation} (started ${g.startedAt})`;
}

/**
 * The acceptance rate over time: one `circle.point[data-run][data-generation][data-verdict]
 * [data-rate]` per generation in order of time at the rate of the generations decided so far
 * (`data-rate` 0..1, empty and class `unrated` while none is), joined by a line.
 */
function rateChart(points: readonly GenerationPoint[]): string {
  const n = points.length;
  const parts = [...grid(1, (v) => `${Math.round(v * 100)}%`), ...axes(n, (i) => xAt(i, n), "acceptance rate so far")];
  const rated = points.map((g, i) => ({ g, i })).filter((p) => p.g.acceptanceRate !== null);
  if (rated.length > 1)
    parts.push(
      `<polyline class="rate-line" points="${rated.map((p) => `${xAt(p.i, n).toFixed(1)},${yAt(p.g.acceptanceRate ?? 0, 1).toFixed(1)}`).join(" ")}"/>`,
    );
  points.forEach((g, i) => {
    const rate = g.acceptanceRate;
    const label = `${pointName(g)}: ${g.verdict} (${g.reason}); ${rate === null ? "no generation decided yet" : `acceptance rate so far ${percent(rate)} (${g.accepted} of ${g.decided})`}`;
    parts.push(
      `<circle class="point ${e(g.verdict)}${rate === null ? " unrated" : ""}" data-run="${e(g.runId)}" data-generation="${g.generation}" data-verdict="${e(g.verdict)}" data-rate="${rate === null ? "" : rate}" cx="${xAt(i, n).toFixed(1)}" cy="${yAt(rate ?? 0, 1).toFixed(1)}" r="5"><title>${e(label)}</title></circle>`,
    );
  });
  return `<svg class="chart rate-chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="acceptance rate over time">${parts.join("")}</svg>`;
}

/**
 * The cost per generation: one `rect.cost-bar[data-run][data-generation][data-usd]` per
 * generation in order of time (left axis), and the total so far as `polyline.cost-total`
 * with one `circle.total[data-usd]` per generation (right axis).
 */
function costChart(points: readonly GenerationPoint[]): string {
  const n = points.length;
  const maxBar = Math.max(0, ...points.map((g) => g.costUsd));
  const maxTotal = Math.max(0, ...points.map((g) => g.totalUsd));
  // Each generation in the middle of its slot, so no bar runs past the axes.
  const slot = (W - M.left - M.right) / Math.max(n, 1);
  const xOf = (i: number): number => M.left + slot * (i + 0.5);
  // The legend names the axes: a rotated label would crowd the left ticks.
  const parts = [...grid(maxBar, axisUsd), ...axes(n, xOf, "")];
  for (let i = 0; i <= 4; i++)
    parts.push(
      `<text class="tick total-tick" x="${W - M.right + 4}" y="${(yAt(i, 4) + 4).toFixed(1)}" text-anchor="start">${e(axisUsd((maxTotal * i) / 4))}</text>`,
    );
  const bar = Math.max(1, Math.min(24, slot * 0.6));
  points.forEach((g, i) => {
    const x = xOf(i) - bar / 2;
    const y = yAt(g.costUsd, maxBar);
    parts.push(
      `<rect class="cost-bar" data-run="${e(g.runId)}" data-generation="${g.generation}" data-usd="${g.costUsd}" x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${bar.toFixed(1)}" height="${(H - M.bottom - y).toFixed(1)}"><title>${e(`${pointName(g)}: $${g.costUsd.toFixed(4)}; $${g.totalUsd.toFixed(4)} so far`)}</title></rect>`,
    );
  });
  const at = points.map((g, i) => `${xOf(i).toFixed(1)},${yAt(g.totalUsd, maxTotal).toFixed(1)}`);
  if (n > 1) parts.push(`<polyline class="cost-total" points="${at.join(" ")}"/>`);
  points.forEach((g, i) =>
    parts.push(
      `<circle class="total" data-usd="${g.totalUsd}" cx="${xOf(i).toFixed(1)}" cy="${yAt(g.totalUsd, maxTotal).toFixed(1)}" r="3"/>`,
    ),
  );
  return `<svg class="chart cost-chart" viewBox="0 0 ${W + 40} ${H}" width="${W + 40}" height="${H}" role="img" aria-label="cost per generation and total">${parts.join("")}</svg>`;
}

/** What the cross-run dashboard links to beyond the figures. */
export interface RunsDashboardMeta {
  /** Per run folder, the href of that run's own dashboard (relative to the page); a run without one is not linked. */
  dashboards?: Readonly<Record<string, string>>;
}

const RUNS_CSS = `.rate-line{fill:none;stroke:#0969da;stroke-width:1.5}.point.unrated{fill:#fff;stroke:#8c959f}
.cost-bar{fill:#54aeff}.cost-total{fill:none;stroke:#bf8700;stroke-width:1.5}.total{fill:#bf8700}.k-bar{color:#54aeff}.k-total{color:#bf8700}
.bar{display:inline-block;height:.7rem;background:#cf222e;border-radius:2px;vertical-align:middle}table.generations td,table.runs td{white-space:nowrap}`;

/**
 * The dashboard across the runs of a directory ({@link RunsAggregate}): one self-contained
 * HTML document (inline CSS and static inline SVG, no script, no external URL). It holds the
 * totals (runs, generations by verdict, acceptance rate of the decided ones, cost), an SVG
 * chart of the acceptance rate over time (`svg.rate-chart`: one circle per generation in
 * order of its start, at the rate of the generations decided so far), an SVG chart of the cost
 * per generation with the total so far (`svg.cost-chart`), the rejection reasons ranked by
 * count (`table.reasons`: reason, count, share, a bar), a `table.runs` (per run: generations,
 * accepted, rejected, dry runs, rate, USD, linked to its dashboard when `meta.dashboards`
 * names one) and a `table.generations` (per generation in order of time: started, run, gen,
 * verdict, reason, accepted of the decided so far, rate so far, USD, total USD). Every string
 * taken from the reports is HTML-escaped. Pure.
 */
export function runsDashboardHtml(agg: RunsAggregate, meta: RunsDashboardMeta = {}): string {
  const t = agg.totals;
  const g = agg.generations;
  const reasons = agg.reasons.map(
    (r) =>
      `<tr><td><code>${e(r.reason)}</code></td><td class="n">${r.count}</td><td class="n">${e(percent(r.share))}</td><td><span class="bar" style="width:${(r.share * 200).toFixed(0)}px"></span></td></tr>`,
  );
  const runs = agg.runs.map((r) => {
    const href = meta.dashboards?.[r.dir];
    const name = href ? `<a href="${e(href)}"><code>${e(r.runId)}</code></a>` : `<code>${e(r.runId)}</code>`;
    return `<tr><td>${name}</td><td class="n">${r.generations}</td><td class="n">${r.accepted}</td><td class="n">${r.rejected}</td><td class="n">${r.dryRuns}</td><td class="n">${e(percent(r.acceptanceRate))}</td><td class="n">$${r.costUsd.toFixed(4)}</td></tr>`;
  });
  const gens = g.map(
    (p) =>
      `<tr><td>${e(p.startedAt)}</td><td><code>${e(p.runId)}</code></td><td class="n">${p.generation}</td><td>${e(p.verdict)}</td><td><code>${e(p.reason)}</code></td><td class="n">${p.accepted}/${p.decided}</td><td class="n">${e(percent(p.acceptanceRate))}</td><td class="n">$${p.costUsd.toFixed(4)}</td><td class="n">$${p.totalUsd.toFixed(4)}</td></tr>`,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>loopsmith improve: ${t.runs} runs</title><style>${CSS}
${RUNS_CSS}</style></head>
<body><header><h1>Improvement runs</h1><p class="muted">in <code>${e(agg.dir)}</code></p>
<p class="totals">${t.runs} runs, ${t.generations} generations: ${t.accepted} accepted, ${t.rejected} rejected, ${t.dryRuns} dry runs; acceptance rate ${e(percent(t.acceptanceRate))} (${t.accepted} of ${t.accepted + t.rejected} decided); $${t.costUsd.toFixed(4)} in all</p></header>
<main><h2>Acceptance rate over time</h2>
${g.length ? rateChart(g) : `<p class="muted">no generations yet</p>`}
<p class="legend muted"><span><b class="k-acc">●</b> accepted</span><span><b class="k-rej">○</b> rejected</span><span><b class="k-dry">○</b> dry run</span><span><b class="k-line">—</b> accepted of the generations decided so far</span></p>
<h2>Cost per generation</h2>
${g.length ? costChart(g) : ""}
<p class="legend muted"><span><b class="k-bar">■</b> USD of the generation (left axis)</span><span><b class="k-total">—</b> total so far (right axis)</span></p>
<h2>Rejection reasons</h2>
${reasons.length ? `<table class="reasons"><thead><tr><th>reason</th><th>count</th><th>share</th><th></th></tr></thead><tbody>${reasons.join("")}</tbody></table>` : `<p class="muted">no rejected generation</p>`}
<h2>Runs</h2>
<table class="runs"><thead><tr><th>run</th><th>generations</th><th>accepted</th><th>rejected</th><th>dry runs</th><th>rate</th><th>USD</th></tr></thead><tbody>${runs.join("")}</tbody></table>
<h2>Generations in order of time</h2>
<table class="generations"><thead><tr><th>started</th><th>run</th><th>gen</th><th>verdict</th><th>reason</th><th>accepted</th><th>rate</th><th>USD</th><th>total USD</th></tr></thead><tbody>${gens.join("")}</tbody></table></main></body></html>
`;
}

/**
 * Writes `html` to `path` atomically (a temp file beside it, then a rename), creating the folder.
 * @throws the file system's error when it cannot be written
 */
export async function writeDashboard(path: string, html: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeFile(temp, html);
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}
