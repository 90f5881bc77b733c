import { describe, expect, it } from "vitest";
import { escapeHtml, mdText, reportHtml, reportMarkdown } from "./report.js";
import { summarize } from "./summary.js";
import type { BenchArm, BenchResult, ProviderLabel } from "./types.js";

function result(caseId: string, arm: BenchArm, over: Partial<BenchResult> = {}): BenchResult {
  return {
    v: 1,
    runId: "r1",
    caseId,
    arm,
    taskId: `t-${arm}-${caseId}`,
    status: "passed",
    stopReason: "passed",
    passed: true,
    visiblePassed: true,
    hidden: { passed: 1, total: 1 },
    iterations: 1,
    tokensIn: 120,
    tokensOut: 40,
    costUsd: 0.002,
    wallMs: 2500,
    provider: "model",
    attempts: 1,
    finishedAt: "2026-11-25T12:00:00.000Z",
    ...over,
  };
}

const EVIL = `<script>alert("x")</script>`;

function run(memory: "on" | "off" | "ab", label: ProviderLabel) {
  const arms: BenchArm[] = memory === "ab" ? ["off", "on"] : [memory];
  const results: BenchResult[] = [];
  ["HumanEval/0", "HumanEval/1", EVIL, "a|b"].forEach((id, i) => {
    for (const arm of arms) {
      results.push(
        result(id, arm, {
          provider: label,
          iterations: arm === "on" ? 1 + (i % 2) : 2 + i,
          passed: arm === "on" || i % 2 === 0,
          stopReason: i === 2 ? `<b>stop</b>` : "passed",
        }),
      );
    }
  });
  const summary = summarize({
    results,
    runId: "r1",
    dataset: "data/<he>.jsonl",
    format: "humaneval",
    provider: { label, name: label === "model" ? "anthropic" : label, model: label === "model" ? "claude-x" : "" },
    memory,
    concurrency: 2,
    startedAt: "2026-11-25T12:00:00.000Z",
    finishedAt: "2026-11-25T12:01:00.000Z",
    skipped: [{ line: 7, message: `not JSON: Unexpected token < in "<img src=x onerror=alert(1)>"` }],
  });
  return { summary, results, md: reportMarkdown(summary, results), html: reportHtml(summary, results) };
}

describe("the no-model notice", () => {
  for (const label of ["scripted", "simulated"] as const) {
    it(`opens report.md and report.html for a ${label} run`, () => {
      const { md, html, summary } = run("ab", label);
      const notice = summary.notice ?? "";
      expect(notice).toMatch(new RegExp(`^${label.toUpperCase()} RUN: no model was called`));
      expect(notice).toContain("this measures the harness and memory, not a model");
      expect(md.split("\n")[0]).toContain(notice);
      const body = html.slice(html.indexOf("<body>"));
      expect(body.indexOf(escapeHtml(notice))).toBeGreaterThan(0);
      expect(body.indexOf(escapeHtml(notice))).toBeLessThan(body.indexOf("<h1>"));
    });
  }

  it("is absent for a model", () => {
    const { md, html } = run("ab", "model");
    expect(md).not.toMatch(/RUN: no model was called/);
    expect(html).not.toMatch(/RUN: no model was called/);
    expect(html).not.toContain('class="notice"');
  });

  it("appears from the provider label even when the summary carries none", () => {
    const { summary, results } = run("on", "simulated");
    const bare = { ...summary, notice: undefined };
    expect(reportMarkdown(bare, results)).toContain("SIMULATED RUN");
    expect(reportHtml(bare, results)).toContain("SIMULATED RUN");
  });
});

describe("escaping", () => {
  const { md, html } = run("ab", "simulated");

  it("escapes every dataset-derived string in the html", () => {
    expect(html).not.toContain("<script");
    expect(html).not.toContain("<img");
    expect(html).not.toContain("<b>stop</b>");
    expect(html).toContain(escapeHtml(EVIL));
    expect(html).toContain("&lt;b&gt;stop&lt;/b&gt;");
    expect(html).toContain("data/&lt;he&gt;.jsonl");
    expect(escapeHtml(`a&b"c'<>`)).toBe("a&amp;b&quot;c&#39;&lt;&gt;");
  });

  it("keeps markdown tables intact and raw HTML out of report.md", () => {
    expect(md).not.toContain("<script");
    expect(md).not.toContain("<img");
    expect(md).toContain("&lt;b&gt;stop&lt;/b&gt;");
    expect(mdText("a|b\nc")).toBe("a\\|b c");
  });
});

describe("report.html is self-contained", () => {
  for (const memory of ["on", "ab"] as const) {
    it(`references nothing outside itself (${memory})`, () => {
      const { html } = run(memory, "model");
      expect(html).not.toMatch(/https?:\/\//i);
      expect(html).not.toMatch(/<script|<link|<img|<iframe|<object|<embed|@import|url\(/i);
      // No tag loads or links anything (escaped dataset text may still say `src=`).
      expect(html).not.toMatch(/<[a-z][^>]*\s(src|href|xlink:href|action)=/i);
      expect(html).toMatch(/^<!doctype html>/);
      expect(html).toContain("<style>");
      expect(html.match(/<svg /g)?.length).toBeGreaterThanOrEqual(memory === "ab" ? 3 : 2);
    });
  }

  it("has the per-task table: case, arm, passed, iterations, tokens, USD, wall time, stop reason", () => {
    const { html } = run("ab", "model");
    const table = html.slice(html.indexOf("<h2>Tasks</h2>"));
    for (const h of ["case", "arm", "passed", "iterations", "tokens in", "tokens out", "USD", "wall", "stop reason"])
      expect(table).toContain(`<th>${h}</th>`);
    expect(table.match(/<tr><td>/g)).toHaveLength(8);
    expect(table).toContain("$0.0020");
    expect(table).toContain("2.5 s");
  });
});

describe("ab sections", () => {
  it("appear for ab only", () => {
    const ab = run("ab", "simulated");
    expect(ab.md).toContain("## Paired comparison");
    expect(ab.md).toContain("exact McNemar");
    expect(ab.md).toMatch(/\| \*\*on passed\*\* \| 2 \| 2 \|/);
    expect(ab.html).toContain('id="paired"');
    expect(ab.html).toContain("Per-task iterations, memory on minus memory off");
    for (const memory of ["on", "off"] as const) {
      const one = run(memory, "simulated");
      expect(one.md).not.toContain("Paired comparison");
      expect(one.md).not.toContain("McNemar");
      expect(one.html).not.toContain('id="paired"');
      expect(one.html).not.toContain("McNemar");
    }
  });

  it("lists totals per arm, stop reasons and the skipped lines in report.md", () => {
    const { md } = run("ab", "model");
    expect(md).toMatch(/^\| off \| 4 \| 2 \| 50\.0% \|/m);
    expect(md).toMatch(/^\| on \| 4 \| 4 \| 100\.0% \|/m);
    expect(md).toContain("## Stop reasons");
    expect(md).toMatch(/^\| passed \| 3 \| 3 \|$/m);
    expect(md).toContain("- line 7: not JSON");
  });
});
