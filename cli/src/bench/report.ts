/**
 * The human-readable outputs of a `loopsmith bench` run: `report.md` and
 * one self-contained `report.html` (inline CSS and inline SVG charts drawn here; no script,
 * no external reference of any kind). When no model answered (provider `scripted` or
 * `simulated`), both start with the run's notice. Every string that comes from the dataset or
 * a result (case ids, stop reasons, errors, skipped-line messages) is escaped.
 */
import { escapeHtml } from "../html.js";
import { TRANSCRIPT_CSS, transcriptHtml, type ViewStep } from "../transcript-view.js";
import { armsOf, lastResults, simulatedNotice } from "./summary.js";
import type { ArmSummary, BenchArm, BenchResult, BenchSummary, PairedSummary } from "./types.js";
import type { MachineState } from "./machine.js";
import { MEMORY_HEAD, memoryNotes, memoryRows } from "./memory-use.js";

/** The notice a report carries: the summary's, else the one its provider label implies. */
function noticeOf(s: BenchSummary): string | undefined {
  return s.notice ?? simulatedNotice(s.provider.label);
}

/** The arms present in a summary, in report order (off before on). */
function armsIn(s: BenchSummary): BenchArm[] {
  return armsOf(s.memory).filter((a) => s.arms[a] !== undefined);
}

function pct(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}

function num(x: number, digits = 2): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(digits);
}

function signed(x: number, digits = 2): string {
  return `${x > 0 ? "+" : ""}${num(x, digits)}`;
}

function usd(x: number): string {
  return `$${x.toFixed(4)}`;
}

function ms(x: number): string {
  return x >= 1000 ? `${(x / 1000).toFixed(1)} s` : `${Math.round(x)} ms`;
}

function pval(p: number | null): string {
  if (p === null) return "n/a (no difference)";
  return p < 1e-4 ? p.toExponential(2) : p.toFixed(4);
}

/** Ordered per-task rows: the counted line of each (case, arm), cases in first-seen order, off before on. */
function taskRows(results: readonly BenchResult[]): BenchResult[] {
  const order = new Map<string, number>();
  for (const r of results) if (!order.has(r.caseId)) order.set(r.caseId, order.size);
  return lastResults(results).sort(
    (a, b) =>
      (order.get(a.caseId) ?? 0) - (order.get(b.caseId) ?? 0) || (a.arm === b.arm ? 0 : a.arm === "off" ? -1 : 1),
  );
}

/** Cases passing in exactly one arm of an A/B: [only on, only off]. */
function discordant(results: readonly BenchResult[]): [string[], string[]] {
  const rows = lastResults(results);
  const off = new Map(rows.filter((r) => r.arm === "off").map((r) => [r.caseId, r.passed]));
  const onlyOn: string[] = [];
  const onlyOff: string[] = [];
  for (const r of rows.filter((x) => x.arm === "on")) {
    const o = off.get(r.caseId);
    if (o === undefined) continue;
    if (r.passed && !o) onlyOn.push(r.caseId);
    if (!r.passed && o) onlyOff.push(r.caseId);
  }
  return [onlyOn, onlyOff];
}

// ---------------------------------------------------------------------------------------
// Markdown

/** A Markdown table cell or inline text: one line, `|` escaped, no raw HTML. */
export function mdText(s: string): string {
  return s
    .replace(/[\r\n]+/g, " ")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/\|/g, "\\|")
    .replace(/`/g, "\\`");
}

function mdTable(head: string[], rows: string[][]): string[] {
  return [
    `| ${head.join(" | ")} |`,
    `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ];
}

function armRow(arm: string, a: ArmSummary): string[] {
  return [
    arm,
    String(a.tasks),
    String(a.passed),
    pct(a.passAt1),
    pct(a.visiblePassRate),
    num(a.meanIterations),
    num(a.p90Iterations),
    num(a.tokensInPerTask, 0),
    num(a.tokensOutPerTask, 0),
    usd(a.usdPerTask),
    ms(a.meanWallMs),
    String(a.errors),
    String(a.infraErrors),
    String(a.agentFailures),
  ];
}

/** The machine a run ran on, in one line (summary.json's `machine`). */
export function machineText(m: MachineState): string {
  return `machine: ${m.cpus} CPUs, ${m.memoryGiB} GiB; reference workload ${Math.round(m.referenceMs)} ms (lower is faster); over the run the CPUs were ${m.busyPct.toFixed(0)}% busy, ${m.stealPct.toFixed(1)}% stolen; load ${m.loadAverage.map((x) => x.toFixed(2)).join(" ")} at the end`;
}

const ARM_HEAD = [
  "arm",
  "tasks",
  "passed",
  "pass@1",
  "visible pass",
  "mean iterations",
  "p90 iterations",
  "tokens in / task",
  "tokens out / task",
  "USD / task",
  "mean wall",
  "errors",
  "infrastructure failures",
  "agent failures",
];

/**
 * `report.md`: the notice first (no-model runs), then the run's facts, totals per arm, memory's
 * use per arm (when the results record it: `memory-use.ts`), the paired comparison (`ab` only), stop reasons per arm and the skipped dataset lines.
 * @param summary - the run's `summary.json`
 * @param results - the lines of `results.jsonl` (repeated lines: the last counts)
 */
export function reportMarkdown(summary: BenchSummary, results: readonly BenchResult[]): string {
  const s = summary;
  const out: string[] = [];
  const notice = noticeOf(s);
  if (notice) out.push(`> **${mdText(notice)}**`, "");
  out.push(`# loopsmith bench ${mdText(s.runId)}`, "");
  out.push(
    `- dataset: ${mdText(s.dataset)} (${s.format})`,
    `- provider: ${mdText(s.provider.label)} (${mdText(s.provider.name)}${s.provider.model ? `, ${mdText(s.provider.model)}` : ""})`,
    `- memory: ${s.memory}; concurrency ${s.concurrency}`,
    `- started ${mdText(s.startedAt)}, finished ${mdText(s.finishedAt)}; wall ${ms(s.wallMs)}; ${num(s.tasksPerMin)} tasks/min`,
    ...(s.machine ? [`- ${machineText(s.machine)}`] : []),
    "",
  );
  const arms = armsIn(s);
  out.push(
    "## Totals",
    "",
    ...mdTable(
      ARM_HEAD,
      arms.map((a) => armRow(a, s.arms[a] as ArmSummary)),
    ),
    "",
  );
  out.push("pass@1 counts the hidden tests (one sample per task); visible pass counts the tests the model saw.", "");
  const memory = memoryRows(s);
  if (memory.length)
    out.push("## Memory use per arm", "", ...mdTable(MEMORY_HEAD, memory), "", ...memoryNotes(s).map(mdText), "");
  if (s.memory === "ab" && s.paired) {
    const p = s.paired;
    const [onlyOn, onlyOff] = discordant(results);
    out.push(
      "## Paired comparison (memory on − memory off)",
      "",
      `${p.pairs} tasks ran in both arms.`,
      "",
      ...mdTable(
        ["", "off passed", "off failed"],
        [
          ["**on passed**", String(p.bothPass), String(p.onlyOn)],
          ["**on failed**", String(p.onlyOff), String(p.neither)],
        ],
      ),
      "",
      ...mdTable(
        ["measure", "on − off", "p (two-sided)", "test"],
        [
          ["pass rate", signed(p.passDiff * 100, 1) + " pp", pval(p.mcnemarP), "exact McNemar"],
          ["iterations / task", signed(p.meanIterationsDiff), pval(p.iterationsP), "Wilcoxon signed-rank"],
          ["tokens / task", signed(p.meanTokensDiff, 0), pval(p.tokensP), "Wilcoxon signed-rank"],
        ],
      ),
      "",
    );
    if (onlyOn.length) out.push(`Passed only with memory on: ${onlyOn.map(mdText).join(", ")}`, "");
    if (onlyOff.length) out.push(`Passed only with memory off: ${onlyOff.map(mdText).join(", ")}`, "");
  }
  const reasons = [...new Set(arms.flatMap((a) => Object.keys(s.arms[a]?.stopReasons ?? {})))].sort();
  out.push("## Stop reasons", "");
  if (reasons.length) {
    out.push(
      ...mdTable(
        ["stop reason", ...arms],
        reasons.map((r) => [mdText(r), ...arms.map((a) => String(s.arms[a]?.stopReasons[r] ?? 0))]),
      ),
    );
  } else out.push("No task finished.");
  out.push("", "## Skipped dataset lines", "");
  if (s.skippedLines.length) out.push(...s.skippedLines.map((l) => `- line ${l.line}: ${mdText(l.message)}`));
  else out.push("None.");
  out.push("");
  return out.join("\n");
}

// ---------------------------------------------------------------------------------------
// HTML

export { escapeHtml };

const e = escapeHtml;

const COLOR: Record<BenchArm, string> = { off: "#8a8f98", on: "#2f6fdf" };
const PASS = "#2e9e5b";
const FAIL = "#d04a3a";

/** Horizontal bars: pass@1 and visible pass rate per arm. */
function passRateChart(s: BenchSummary): string {
  const arms = armsIn(s);
  const rows = arms.flatMap((a) => {
    const x = s.arms[a] as ArmSummary;
    return [
      { label: `${a}: pass@1 (hidden)`, v: x.passAt1, color: COLOR[a] },
      { label: `${a}: visible tests`, v: x.visiblePassRate, color: COLOR[a], light: true },
    ];
  });
  const left = 170;
  const width = 360;
  const rowH = 26;
  const h = rows.length * rowH + 24;
  const parts = rows.map((r, i) => {
    const y = 8 + i * rowH;
    const w = Math.max(0, Math.min(1, r.v)) * width;
    return (
      `<text x="${left - 8}" y="${y + 14}" text-anchor="end">${e(r.label)}</text>` +
      `<rect x="${left}" y="${y}" width="${width}" height="18" fill="#eef0f3"/>` +
      `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="18" fill="${r.color}"${r.light ? ' fill-opacity="0.5"' : ""}><title>${e(r.label)}: ${pct(r.v)}</title></rect>` +
      `<text x="${left + width + 6}" y="${y + 14}">${pct(r.v)}</text>`
    );
  });
  return svg(left + width + 60, h, parts.join(""), "Pass rate per arm");
}

/** Grouped bars: tasks per iteration count, one bar per arm. */
function iterationsChart(s: BenchSummary): string {
  const arms = armsIn(s);
  const keys = [...new Set(arms.flatMap((a) => Object.keys(s.arms[a]?.iterationsHistogram ?? {})))]
    .map(Number)
    .sort((a, b) => a - b);
  if (!keys.length) return "<p>No task finished.</p>";
  const max = Math.max(1, ...arms.flatMap((a) => keys.map((k) => s.arms[a]?.iterationsHistogram[String(k)] ?? 0)));
  const plotH = 160;
  const bar = 18;
  const group = arms.length * bar + 14;
  const left = 40;
  const w = left + keys.length * group + 20;
  const parts: string[] = [];
  parts.push(`<line x1="${left}" y1="${plotH + 10}" x2="${w - 10}" y2="${plotH + 10}" stroke="#999"/>`);
  parts.push(
    `<text x="${left - 6}" y="${14}" text-anchor="end">${max}</text><text x="${left - 6}" y="${plotH + 10}" text-anchor="end">0</text>`,
  );
  keys.forEach((k, gi) => {
    const gx = left + gi * group + 7;
    arms.forEach((a, ai) => {
      const c = s.arms[a]?.iterationsHistogram[String(k)] ?? 0;
      const h = (c / max) * plotH;
      const x = gx + ai * bar;
      parts.push(
        `<rect x="${x}" y="${(plotH + 10 - h).toFixed(1)}" width="${bar - 2}" height="${h.toFixed(1)}" fill="${COLOR[a]}"><title>${a}: ${c} task(s) ended after ${k} iteration(s)</title></rect>`,
      );
      if (c)
        parts.push(
          `<text x="${x + (bar - 2) / 2}" y="${(plotH + 6 - h).toFixed(1)}" text-anchor="middle" font-size="10">${c}</text>`,
        );
    });
    parts.push(`<text x="${gx + (arms.length * bar) / 2}" y="${plotH + 26}" text-anchor="middle">${k}</text>`);
  });
  parts.push(`<text x="${w / 2}" y="${plotH + 44}" text-anchor="middle">iterations</text>`);
  // Shifted down so the count above the tallest bar is not clipped.
  return (
    svg(w, plotH + 64, `<g transform="translate(0,12)">${parts.join("")}</g>`, "Tasks per iteration count") +
    legend(arms)
  );
}

/** Per task: iterations with memory on minus off, sorted; colour = the pass outcome of the pair. */
function pairedChart(results: readonly BenchResult[]): string {
  const rows = lastResults(results);
  const off = new Map(rows.filter((r) => r.arm === "off").map((r) => [r.caseId, r]));
  const pairs = rows
    .filter((r) => r.arm === "on" && off.has(r.caseId))
    .map((r) => {
      const o = off.get(r.caseId) as BenchResult;
      return { id: r.caseId, d: r.iterations - o.iterations, on: r.passed, off: o.passed };
    })
    .sort((a, b) => a.d - b.d || a.id.localeCompare(b.id));
  if (!pairs.length) return "<p>No task ran in both arms.</p>";
  const maxAbs = Math.max(1, ...pairs.map((p) => Math.abs(p.d)));
  const half = 90;
  const step = Math.max(3, Math.min(18, Math.floor(720 / pairs.length)));
  const w = Math.max(520, 40 + pairs.length * step + 20);
  const mid = 10 + half;
  const parts: string[] = [`<line x1="36" y1="${mid}" x2="${w - 10}" y2="${mid}" stroke="#999"/>`];
  parts.push(
    `<text x="32" y="${mid - half + 4}" text-anchor="end">+${maxAbs}</text><text x="32" y="${mid + 4}" text-anchor="end">0</text><text x="32" y="${mid + half + 4}" text-anchor="end">−${maxAbs}</text>`,
  );
  pairs.forEach((p, i) => {
    // A pair with no difference is a short tick across the axis, so every task shows.
    const h = p.d === 0 ? 3 : (Math.abs(p.d) / maxAbs) * half;
    const y = p.d === 0 ? mid - 1.5 : p.d > 0 ? mid - h : mid;
    const color = p.on && !p.off ? PASS : !p.on && p.off ? FAIL : "#6b7280";
    const outcome =
      p.on && p.off
        ? "both passed"
        : p.on
          ? "passed only with memory on"
          : p.off
            ? "passed only with memory off"
            : "neither passed";
    parts.push(
      `<rect x="${40 + i * step}" y="${y.toFixed(1)}" width="${Math.max(1, step - 1)}" height="${h.toFixed(1)}" fill="${color}"><title>${e(p.id)}: ${signed(p.d)} iterations (on − off), ${outcome}</title></rect>`,
    );
  });
  parts.push(
    `<text x="40" y="${2 * half + 34}">tasks, sorted by iterations on − off (below 0: memory on took fewer)</text>`,
  );
  return (
    svg(w, 2 * half + 42, parts.join(""), "Per-task iterations, memory on minus memory off") +
    `<p class="legend"><span class="sw" style="background:${PASS}"></span>passed only with memory on <span class="sw" style="background:${FAIL}"></span>passed only with memory off <span class="sw" style="background:#6b7280"></span>same outcome</p>`
  );
}

function svg(w: number, h: number, body: string, title: string): string {
  return `<svg role="img" aria-label="${e(title)}" width="${Math.round(w)}" height="${Math.round(h)}" viewBox="0 0 ${Math.round(w)} ${Math.round(h)}" font-family="system-ui, sans-serif" font-size="12"><title>${e(title)}</title>${body}</svg>`;
}

function legend(arms: BenchArm[]): string {
  return `<p class="legend">${arms.map((a) => `<span class="sw" style="background:${COLOR[a]}"></span>memory ${a}`).join(" ")}</p>`;
}

function htmlTable(head: string[], rows: string[][], cls = ""): string {
  return `<table${cls ? ` class="${cls}"` : ""}><thead><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
}

/** The paired comparison of `--memory ab`: the 2×2 pass table, the tests, and the per-task chart. */
function pairedSection(p: PairedSummary, results: readonly BenchResult[]): string[] {
  return [
    '<h2 id="paired">Paired comparison (memory on − memory off)</h2>',
    `<p>${p.pairs} tasks ran in both arms.</p>`,
    htmlTable(
      ["", "off passed", "off failed"],
      [
        ["<b>on passed</b>", String(p.bothPass), String(p.onlyOn)],
        ["<b>on failed</b>", String(p.onlyOff), String(p.neither)],
      ],
    ),
    htmlTable(
      ["measure", "on − off", "p (two-sided)", "test"],
      [
        ["pass rate", e(`${signed(p.passDiff * 100, 1)} pp`), e(pval(p.mcnemarP)), "exact McNemar"],
        ["iterations / task", e(signed(p.meanIterationsDiff)), e(pval(p.iterationsP)), "Wilcoxon signed-rank"],
        ["tokens / task", e(signed(p.meanTokensDiff, 0)), e(pval(p.tokensP)), "Wilcoxon signed-rank"],
      ],
    ),
    pairedChart(results),
  ];
}

/** The "Tasks" section: one row per counted task (case, arm, passed, visible, iterations, tokens, USD, wall, stop reason). */
function tasksSection(results: readonly BenchResult[]): string[] {
  const rows = taskRows(results).map((r) => [
    e(r.caseId),
    e(r.arm),
    r.passed ? '<span class="pass">yes</span>' : '<span class="fail">no</span>',
    r.visiblePassed ? "yes" : "no",
    String(r.iterations),
    String(r.tokensIn),
    String(r.tokensOut),
    e(usd(r.costUsd)),
    e(ms(r.wallMs)),
    e(r.stopReason) + (r.error ? ` — ${e(r.error)}` : ""),
  ]);
  return [
    "<h2>Tasks</h2>",
    htmlTable(
      ["case", "arm", "passed", "visible", "iterations", "tokens in", "tokens out", "USD", "wall", "stop reason"],
      rows,
      "tasks",
    ),
  ];
}

/** The "Transcripts" section: a heading per counted task that has agent steps, then its transcript. */
function transcriptSections(
  results: readonly BenchResult[],
  transcripts: ReadonlyMap<string, readonly ViewStep[]>,
): string[] {
  const parts = taskRows(results).flatMap((r) => {
    const steps = transcripts.get(r.taskId) ?? [];
    return steps.length ? [`<h3>${e(r.caseId)} (memory ${e(r.arm)})</h3>`, transcriptHtml(steps)] : [];
  });
  return parts.length ? ['<h2 id="transcripts">Transcripts (agent mode)</h2>', ...parts] : [];
}

const CSS = `
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1100px;padding:0 16px;color:#1f2328;line-height:1.4}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.notice{background:#fff4ce;border:2px solid #d4a72c;padding:10px 14px;font-weight:600;border-radius:6px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:right}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}
.tasks td:nth-child(2),.tasks td:last-child{text-align:left}
.pass{color:${PASS};font-weight:600}.fail{color:${FAIL};font-weight:600}
.legend{font-size:12px;color:#57606a}.sw{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;vertical-align:middle}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{color:#57606a}dd{margin:0}
svg{display:block;margin:8px 0;max-width:100%;height:auto}
${TRANSCRIPT_CSS}
`;

/**
 * `report.html`: one self-contained page (inline CSS, inline SVG, no script, no external
 * reference): the notice first (no-model runs), the run's facts, totals per arm, memory's use
 * per arm (when recorded), a pass-rate
 * chart, an iterations histogram, for `ab` the paired comparison (2×2 pass table, tests, and a
 * per-task iterations on − off chart), stop reasons, skipped lines and the per-task table
 * (case, arm, passed, visible, iterations, tokens in/out, USD, wall time, stop reason) and,
 * for agent-mode tasks, their transcripts (one folded `<details>` per iteration, see
 * `transcriptHtml`).
 * @param summary - the run's `summary.json`
 * @param results - the lines of `results.jsonl` (repeated lines: the last counts)
 * @param transcripts - agent steps by task id (`BenchResult.taskId`); tasks without steps get no transcript
 */
export function reportHtml(
  summary: BenchSummary,
  results: readonly BenchResult[],
  transcripts: ReadonlyMap<string, readonly ViewStep[]> = new Map(),
): string {
  const s = summary;
  const arms = armsIn(s);
  const notice = noticeOf(s);
  const body: string[] = [];
  if (notice) body.push(`<p class="notice" role="alert">${e(notice)}</p>`);
  body.push(`<h1>loopsmith bench ${e(s.runId)}</h1>`);
  body.push(
    "<dl>",
    `<dt>dataset</dt><dd>${e(s.dataset)} (${e(s.format)})</dd>`,
    `<dt>provider</dt><dd>${e(s.provider.label)} (${e(s.provider.name)}${s.provider.model ? `, ${e(s.provider.model)}` : ""})</dd>`,
    `<dt>memory</dt><dd>${e(s.memory)}; concurrency ${s.concurrency}</dd>`,
    `<dt>time</dt><dd>${e(s.startedAt)} → ${e(s.finishedAt)}; wall ${ms(s.wallMs)}; ${num(s.tasksPerMin)} tasks/min</dd>`,
    "</dl>",
  );
  body.push(
    "<h2>Totals</h2>",
    htmlTable(
      ARM_HEAD.map(e),
      arms.map((a) => armRow(a, s.arms[a] as ArmSummary).map(e)),
    ),
  );
  const memory = memoryRows(s);
  if (memory.length)
    body.push(
      '<h2 id="memory">Memory use per arm</h2>',
      htmlTable(
        MEMORY_HEAD.map(e),
        memory.map((r) => r.map(e)),
      ),
      ...memoryNotes(s).map((n) => `<p>${e(n)}</p>`),
    );
  body.push("<h2>Pass rate</h2>", passRateChart(s));
  body.push("<h2>Iterations</h2>", iterationsChart(s));
  if (s.memory === "ab" && s.paired) body.push(...pairedSection(s.paired, results));
  const reasons = [...new Set(arms.flatMap((a) => Object.keys(s.arms[a]?.stopReasons ?? {})))].sort();
  body.push("<h2>Stop reasons</h2>");
  body.push(
    reasons.length
      ? htmlTable(
          ["stop reason", ...arms],
          reasons.map((r) => [e(r), ...arms.map((a) => String(s.arms[a]?.stopReasons[r] ?? 0))]),
        )
      : "<p>No task finished.</p>",
  );
  body.push("<h2>Skipped dataset lines</h2>");
  body.push(
    s.skippedLines.length
      ? `<ul>${s.skippedLines.map((l) => `<li>line ${l.line}: ${e(l.message)}</li>`).join("")}</ul>`
      : "<p>None.</p>",
  );
  body.push(...tasksSection(results));
  body.push(...transcriptSections(results, transcripts));
  return [
    "<!doctype html>",
    '<html lang="en">',
    "<head>",
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>loopsmith bench ${e(s.runId)}${notice ? ` (${e(s.provider.label)})` : ""}</title>`,
    `<style>${CSS}</style>`,
    "</head>",
    "<body>",
    ...body,
    "</body>",
    "</html>",
    "",
  ].join("\n");
}
