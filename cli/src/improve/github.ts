/**
 * `--pr github`'s pull-request body: the Markdown evidence of an improvement run's accepted
 * generations. The GitHub client, the access check and the pull request itself are in
 * ../github/ (shared with `solve --issue`).
 */
import type { GenerationReport } from "@loopsmith/shared/contracts";
import { codeSpan } from "../run-view.js";
import { benchTotals, formatP } from "./reports.js";

/** GitHub refuses bodies over 65,536 characters; this leaves room. */
export const PR_BODY_MAX = 60_000;

/** `text` safe in a Markdown table cell or a one-line paragraph. */
function md(text: string): string {
  return text.replace(/\r?\n|\r/g, " ").replace(/[|\\`*_[\]<>]/g, (c) => `\\${c}`);
}

const num = (n: number): string => n.toLocaleString("en-US");

/** One generation's part of the body; `maxRows` caps its changed-case rows. */
function generationMarkdown(r: GenerationReport, maxRows: number): string {
  const out: string[] = [`### Generation ${r.generation}: ${r.decision.verdict}`, ""];
  if (r.hypothesis) {
    out.push(`**Hypothesis:** ${md(r.hypothesis.title)}`, "");
    if (r.hypothesis.rationale) out.push(md(r.hypothesis.rationale), "");
  }
  out.push(`**Decision:** ${r.decision.verdict} (${codeSpan(r.decision.reason)}): ${md(r.decision.message)}`, "");
  const s = r.statistic;
  if (s) {
    const test = s.test === "mcnemar_exact" ? "exact McNemar test" : "Wilcoxon signed-rank test";
    const effect =
      s.test === "mcnemar_exact"
        ? `${s.effect >= 0 ? "+" : ""}${(s.effect * 100).toFixed(1)} percentage points of pass rate`
        : `${s.effect >= 0 ? "+" : ""}${s.effect.toPrecision(3)} median score difference`;
    out.push(
      `**Statistic:** ${test} on ${num(s.cases)} paired cases: ${num(s.fixed)} fixed, ${num(s.broken)} broken, p = ${formatP(s.pValue)} (alpha ${s.alpha}), effect ${effect}.`,
      "",
    );
  }
  if (r.change) {
    const { stat } = r.change;
    out.push(
      `**Change:** ${md(r.change.summary)} (${stat.files} file${stat.files === 1 ? "" : "s"} changed, +${stat.insertions} −${stat.deletions})`,
      "",
    );
    const files = [...r.change.changed.map(codeSpan), ...r.change.deleted.map((f) => `${codeSpan(f)} (deleted)`)];
    if (files.length)
      out.push(
        `Files: ${files.slice(0, 50).join(", ")}${files.length > 50 ? `, and ${files.length - 50} more` : ""}`,
        "",
      );
  }
  const t = benchTotals(r);
  if (r.bench && t) {
    out.push(
      `**Benchmark:** ${codeSpan(r.bench.command)} (${r.bench.format}, ${r.bench.repeats} repeat${r.bench.repeats === 1 ? "" : "s"} per side): ${t.parent.passes}/${t.parent.runs} passes on the parent, ${t.candidate.passes}/${t.candidate.runs} on the candidate.`,
      "",
    );
    const changed = r.bench.cases.filter(
      (c) =>
        c.parent.passes !== c.candidate.passes ||
        c.parent.runs !== c.candidate.runs ||
        String(c.parent.scores) !== String(c.candidate.scores),
    );
    if (changed.length) {
      out.push("| case | parent passes/runs | candidate passes/runs |", "|---|---:|---:|");
      for (const c of changed.slice(0, maxRows))
        out.push(`| ${md(c.case)} | ${c.parent.passes}/${c.parent.runs} | ${c.candidate.passes}/${c.candidate.runs} |`);
      if (changed.length > maxRows)
        out.push(
          "",
          `_…and ${num(changed.length - maxRows)} more changed cases, left out: GitHub limits a pull request's body; see reports/gen-${r.generation}.json._`,
        );
      out.push("", `${num(t.cases - changed.length)} of ${num(t.cases)} cases unchanged.`, "");
    } else out.push("No case changed.", "");
  }
  const u = r.usage;
  out.push(
    `**Cost:** ${num(u.calls)} model calls, ${num(u.inputTokens + u.outputTokens)} tokens (${num(u.inputTokens)} in, ${num(u.outputTokens)} out), $${u.costUsd.toFixed(4)}`,
    "",
  );
  return out.join("\n");
}

/**
 * The Markdown body of the pull request for `report` (or for several generations) of run
 * `runId`: for each, the hypothesis, the decision with its reason code and message, the
 * statistic (fixed and broken counts, p-value, effect), the diff stat, the benchmark cases
 * that changed (parent and candidate passes/runs) and the cost (tokens, USD). With
 * `opts.scripted` it says first, in bold, that the replies were replayed and no model was
 * called. At most {@link PR_BODY_MAX} characters: the case lists are cut first (with a note),
 * then the text itself. Pure.
 */
export function prBody(
  report: GenerationReport | GenerationReport[],
  runId: string,
  opts: { scripted?: boolean } = {},
): string {
  const reports = Array.isArray(report) ? report : [report];
  const head = [`## loopsmith improvement run ${codeSpan(runId)}`, ""];
  if (opts.scripted)
    head.push(
      "> **Scripted run:** the model's replies were replayed from a script; no model was called. The evidence below is from a test fixture, not a real improvement.",
      "",
    );
  const render = (maxRows: number): string =>
    [
      ...head,
      ...reports.map((r) => generationMarkdown(r, maxRows)),
      "_Opened by loopsmith `improve --pr github`._",
      "",
    ].join("\n");
  let body = render(Number.MAX_SAFE_INTEGER);
  if (body.length > PR_BODY_MAX) {
    let lo = 0;
    let hi = Math.max(0, ...reports.map((r) => r.bench?.cases.length ?? 0));
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (render(mid).length <= PR_BODY_MAX) lo = mid;
      else hi = mid - 1;
    }
    body = render(lo);
  }
  if (body.length > PR_BODY_MAX) {
    const note = "\n\n_…cut: GitHub limits a pull request's body; see the run's reports._\n";
    body = body.slice(0, PR_BODY_MAX - note.length) + note;
  }
  return body;
}
