import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared/contracts";
import { aggregateRuns } from "./all-runs.js";
import { dashboardHtml, escapeHtml, runsDashboardHtml, writeDashboard } from "./dashboard.js";

const BASE = "0123456789abcdef0123456789abcdef01234567";
const XSS = "<script>alert(1)</script>";
const usage = {
  calls: 3,
  inputTokens: 1500,
  outputTokens: 500,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0.0421,
  latencyMs: 9,
};

/** 10 cases; the first `parent` pass on the parent and the first `candidate` on the candidate (2 runs each). */
function cases(parent: number, candidate: number, scores?: (i: number) => [number, number]) {
  return Array.from({ length: 10 }, (_, i) => ({
    case: i === 0 ? "<img src=x onerror=alert(2)>" : `case-${i}`,
    parent: { passes: i < parent ? 2 : 0, runs: 2, scores: scores ? [scores(i)[0]] : [] },
    candidate: { passes: i < candidate ? 2 : 0, runs: 2, scores: scores ? [scores(i)[1]] : [] },
  }));
}

function report(
  generation: number,
  verdict: "accepted" | "rejected" | "dry_run",
  reason: string,
  bench?: ReturnType<typeof cases>,
): GenerationReport {
  return GenerationReport.parse({
    v: 1,
    runId: "run-7",
    generation,
    parent: BASE,
    hypothesis: { title: generation === 1 ? XSS : `hypothesis ${generation}`, rationale: "why & how" },
    change: {
      summary: "edit slug.py",
      patch: `--- a/slug.py\n+++ b/slug.py\n-</pre><script>x()</script>\n+return "&lt;"\n`,
      changed: ["slug.py"],
      deleted: [],
      stat: { files: 1, insertions: 1, deletions: 1 },
    },
    ...(bench
      ? {
          bench: { command: "python3 bench/run.py", format: "json", repeats: 2, cases: bench },
          statistic: { test: "mcnemar_exact", cases: 10, fixed: 3, broken: 0, pValue: 0.125, alpha: 0.05, effect: 0.3 },
        }
      : {}),
    decision: { verdict, reason, message: `message of ${generation}: "quoted" <b>bold</b>` },
    usage,
    phasesMs: { plan: 1200, bench: 3400 },
    startedAt: "2025-01-01T00:00:00.000Z",
    finishedAt: "2025-01-01T00:00:05.000Z",
  });
}

const reports = [
  report(1, "accepted", "accepted", cases(4, 7)),
  report(2, "rejected", "regression", cases(7, 5)),
  report(3, "rejected", "protected"),
];

/** The chart's points: [generation, verdict, cy]. */
function points(html: string): [number, string, number][] {
  return [
    ...html.matchAll(
      /<circle class="point [^"]*" data-generation="(\d+)" data-verdict="([a-z_]+)" cx="[\d.]+" cy="([\d.]+)"/g,
    ),
  ].map((m) => [Number(m[1]), m[2] as string, Number(m[3])]);
}

describe("dashboardHtml", () => {
  const html = dashboardHtml("run-7", reports, { repo: "acme/slug", scripted: true });

  it("is one document titled with the run id, with the scripted notice only for scripted runs", () => {
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain("<title>loopsmith improve: run-7</title>");
    expect(html).toContain("scripted run: no model was called");
    expect(html).toContain("repository acme/slug");
    expect(html).toContain("3 generations, 1 accepted, 6000 tokens, $0.1263");
    expect(dashboardHtml("run-7", reports)).not.toContain("scripted run");
  });

  it("is self-contained: no script, no external resource", () => {
    expect(html).not.toMatch(/<(script|link|img|iframe|object|embed)\b|@import|url\(|https?:\/\//i);
    // The only links are to the page's own sections.
    expect(html).not.toMatch(/<[a-z][^>]*\s(src|href)=(?!"#gen-\d+")/i);
    // One per chart point and one per overview row.
    expect(html.match(/ href="#gen-\d+"/g)).toHaveLength(6);
    expect(html).toMatch(/<style>[^<]+<\/style>/);
  });

  it("plots one point per generation, placed by the candidate's pass rate, the unmeasured one on the parent's level", () => {
    const pts = points(html);
    expect(pts.map(([g, v]) => [g, v])).toEqual([
      [1, "accepted"],
      [2, "rejected"],
      [3, "rejected"],
    ]);
    const [p1, p2, p3] = pts.map((p) => p[2]) as [number, number, number];
    // 70% on gen 1, 50% on gen 2: a higher rate is drawn higher (smaller y).
    expect(p1).toBeLessThan(p2);
    // Gen 3 ran no benchmark: it sits on the parent's level carried from gen 2 (70%), i.e. gen 1's height.
    expect(p3).toBe(p1);
    expect(html).toMatch(/<circle class="point rejected unmeasured" data-generation="3"/);
    expect(html).toMatch(/<polyline class="parent-level" points="[\d., ]+"\/>/);
    expect(html).toContain("candidate pass rate");
  });

  it("has one section per generation with the decision, statistic, cases, cost and patch", () => {
    const sections = html.split('<section class="generation" ').slice(1);
    expect(sections.map((s) => /^id="gen-(\d+)"/.exec(s)?.[1])).toEqual(["1", "2", "3"]);
    const [s1, s2, s3] = sections as [string, string, string];
    expect(s1).toContain("<code>accepted</code>");
    expect(s2).toContain("<code>regression</code>");
    expect(s2).toContain("message of 2: &quot;quoted&quot; &lt;b&gt;bold&lt;/b&gt;");
    expect(s1).toContain(
      "mcnemar_exact on 10 cases: 3 fixed, 0 broken, p = 0.125 (α = 0.05), effect +30.0 pp pass rate",
    );
    expect(s1.match(/<tr( class="\w+")?><td>/g)).toHaveLength(10);
    expect(s1).toContain(`<tr class="fixed"><td>case-4</td><td class="n">0/2</td><td class="n">2/2</td></tr>`);
    expect(s2).toContain(`<tr class="broken"><td>case-5</td><td class="n">2/2</td><td class="n">0/2</td></tr>`);
    expect(s3).toContain("no benchmark ran for this generation");
    expect(s3).not.toContain("<table");
    expect(s1).toContain("3 calls, 1500 input + 500 output tokens, $0.0421");
    expect(s1).toContain("5.0 s (plan 1.2 s, bench 3.4 s)");
    expect(s1).toMatch(
      /<pre class="patch">--- a\/slug.py\n\+\+\+ b\/slug.py\n-&lt;\/pre&gt;&lt;script&gt;x\(\)&lt;\/script&gt;\n\+return &quot;&amp;lt;&quot;\n<\/pre>/,
    );
  });

  it("escapes every string from the reports", () => {
    expect(html).not.toContain(XSS);
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).toContain("&lt;img src=x onerror=alert(2)&gt;");
    expect(html).toContain("why &amp; how");
    const evil = dashboardHtml(`"><script>`, reports, { repo: `</title><script>` });
    expect(evil).not.toMatch(/<script/i);
    expect(escapeHtml(`<a href="x" title='y'>&`)).toBe("&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;");
  });

  it("plots mean scores when the benchmark is scored", () => {
    const scored = dashboardHtml("run-s", [
      report(
        1,
        "accepted",
        "accepted",
        cases(0, 0, (i) => [i, i + 2]),
      ),
      report(
        2,
        "dry_run",
        "dry_run",
        cases(0, 0, (i) => [i + 2, i + 1]),
      ),
    ]);
    expect(scored).toContain("mean score");
    const [a, b] = points(scored) as [[number, string, number], [number, string, number]];
    expect(b[1]).toBe("dry_run");
    // Means 6.5 and 5.5 on the candidate side: gen 1 is drawn higher.
    expect(a[2]).toBeLessThan(b[2]);
    // Rows show the mean score per side and are marked by it, passes being equal.
    expect(scored).toContain(
      `<tr class="fixed"><td>case-4</td><td class="n">0/2 (4.00)</td><td class="n">0/2 (6.00)</td></tr>`,
    );
    expect(scored).toContain(
      `<tr class="broken"><td>case-4</td><td class="n">0/2 (6.00)</td><td class="n">0/2 (5.00)</td></tr>`,
    );
  });

  it("shows both sets, the error budget and each case's set when the run split its cases", () => {
    const set = (fixed: number, passed: boolean) => ({
      test: "sign_exact" as const,
      cases: 5,
      parentFailing: 3,
      fixed,
      broken: 0,
      pValue: 0.125,
      alpha: 0.0273,
      passed,
    });
    const split = cases(4, 7).map((c, i) => ({
      ...c,
      set: i % 2 ? ("confirmation" as const) : ("selection" as const),
      ...(i === 9 ? { flaky: true } : {}),
    }));
    const r = GenerationReport.parse({
      ...report(1, "rejected", "overfit", split),
      statistic: {
        test: "mcnemar_exact",
        cases: 10,
        fixed: 3,
        broken: 0,
        pValue: 0.125,
        alpha: 0.0273,
        effect: 0.3,
        selection: set(3, true),
        confirmation: set(0, false),
        testIndex: 1,
        alphaSpent: 0.0273,
        flaky: 1,
      },
    });
    const page = dashboardHtml("run-8", [r], {});
    expect(page).toContain(
      "<dt>selection</dt><dd>sign_exact: 3 fixed, 0 broken of 5 (3 failing on the parent), p = 0.125 at 0.0273 → passed</dd>",
    );
    expect(page).toContain("<dt>confirmation (held out)</dt><dd>sign_exact: 0 fixed, 0 broken of 5");
    expect(page).toContain("→ not passed");
    expect(page).toContain("test 1 of the run; 0.0273 of the run's alpha spent; 1 flaky case(s) left out");
    expect(page).toContain("<th>set</th>");
    expect(page).toContain("<td>case-9</td><td>confirmation (flaky)</td>");
    expect(html).not.toContain("<th>set</th>");
    // The overview row: both sets' fixed/broken and p, the budget spent, the cost.
    expect(page).toContain(
      `<tr><td class="n"><a href="#gen-1">1</a></td><td>rejected</td><td><code>overfit</code></td><td class="n">3/0 p 0.125</td><td class="n">0/0 p 0.125 overfit</td><td class="n">0.0273</td><td>-</td>`,
    );
    // With the run's budget known, the spent share is of it.
    const withBudget = dashboardHtml("run-8", [r], { alpha: 0.05 });
    expect(withBudget).toContain("test 1 of the run; 0.0273 of the run's alpha 0.05 spent");
    expect(withBudget).toContain("error budget alpha 0.05 for the whole run");
  });

  it("shows a generation's metric deltas as a table, escaped, when its report has metrics", () => {
    const r = Object.assign(report(2, "accepted", "accepted", cases(4, 6)), {
      metrics: [
        { name: "coverage", parent: 70, candidate: 72.5, delta: 2.5, status: "improved" },
        { name: "<b>lint</b>", parent: 3, candidate: 3, status: "unchanged" },
      ],
    }) as GenerationReport;
    const page = dashboardHtml("run-9", [r]);
    expect(page).toContain(
      `<table class="metrics"><thead><tr><th>metric</th><th>parent</th><th>candidate</th><th>delta</th><th>status</th></tr></thead><tbody><tr><td>coverage</td><td class="n">70</td><td class="n">72.5</td><td class="n">+2.5</td><td>improved</td></tr><tr><td>&lt;b&gt;lint&lt;/b&gt;</td><td class="n">3</td><td class="n">3</td><td class="n">0</td><td>unchanged</td></tr></tbody></table>`,
    );
    expect(page).toContain("<td>1 improved, 1 unchanged</td>");
    expect(html).not.toContain(`<table class="metrics">`);
  });

  it("shows each review's findings and the errors met, escaped, and the time of each phase", () => {
    const r = GenerationReport.parse({
      ...report(4, "rejected", "check_failed"),
      reviews: [
        {
          iteration: 2,
          approved: false,
          score: 0.4,
          findings: [{ severity: "blocker", rule: "no-eval", path: "a<b>.py", line: 9, message: XSS }],
        },
      ],
      errors: [{ phase: "implement", code: "sandbox_error", message: "<i>docker</i> went away", retried: true }],
    });
    const page = dashboardHtml("run-9", [r]);
    expect(page).toContain(
      `<dt>review (iteration 2)</dt><dd>not approved, score 0.40, 1 finding<table class="findings"><thead><tr><th>severity</th><th>rule</th><th>file</th><th>line</th><th>message</th></tr></thead><tbody><tr class="blocker"><td>blocker</td><td><code>no-eval</code></td><td><code>a&lt;b&gt;.py</code></td><td class="n">9</td><td>&lt;script&gt;alert(1)&lt;/script&gt;</td></tr></tbody></table></dd>`,
    );
    expect(page).toContain(
      `<dt>errors</dt><dd><table class="errors"><thead><tr><th>phase</th><th>code</th><th>message</th><th>resumed after it</th></tr></thead><tbody><tr><td>implement</td><td><code>sandbox_error</code></td><td>&lt;i&gt;docker&lt;/i&gt; went away</td><td>yes</td></tr></tbody></table></dd>`,
    );
    expect(page).toContain("<dt>time</dt><dd>5.0 s (plan 1.2 s, bench 3.4 s)</dd>");
    expect(html).not.toContain(`<table class="findings">`);
    expect(html).not.toContain(`<table class="errors">`);
  });

  it("renders a run with no generation yet", () => {
    const empty = dashboardHtml("run-0", []);
    expect(empty).toContain("no generations yet");
    expect(points(empty)).toEqual([]);
  });
});

describe("writeDashboard", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("creates the folder and writes the file without leaving a temp file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-dash-test-"));
    dirs.push(dir);
    const file = join(dir, "nested", "dashboard.html");
    await writeDashboard(file, "<!doctype html><p>one</p>");
    await writeDashboard(file, "<!doctype html><p>two</p>");
    expect(await readFile(file, "utf8")).toBe("<!doctype html><p>two</p>");
    expect(await readdir(join(dir, "nested"))).toEqual(["dashboard.html"]);
  });
});

describe("runsDashboardHtml", () => {
  const at = (m: number) => `2025-02-01T09:${String(m).padStart(2, "0")}:00.000Z`;
  const gen = (runId: string, generation: number, minute: number, base: GenerationReport, costUsd: number) =>
    GenerationReport.parse({
      ...base,
      runId,
      generation,
      usage: { ...usage, costUsd },
      startedAt: at(minute),
      finishedAt: at(minute + 1),
    });
  const agg = aggregateRuns("/runs/<dir>", [
    {
      runId: "run-a",
      dir: "/runs/run-a",
      reports: [
        gen("run-a", 1, 0, reports[0] as GenerationReport, 0.01),
        gen("run-a", 2, 4, reports[2] as GenerationReport, 0.02),
      ],
    },
    { runId: "run-b", dir: "/runs/run-b", reports: [gen("run-b", 1, 2, reports[1] as GenerationReport, 0.03)] },
  ]);
  const page = runsDashboardHtml(agg, { dashboards: { "/runs/run-a": "run-a/dashboard.html" } });

  it("plots the acceptance rate so far per generation in order of time", () => {
    const rates = [
      ...page.matchAll(
        /<circle class="point [^"]*" data-run="([^"]+)" data-generation="(\d+)" data-verdict="([a-z_]+)" data-rate="([\d.]*)"/g,
      ),
    ].map((m) => [m[1], Number(m[2]), m[3], Number(m[4])]);
    expect(rates).toEqual([
      ["run-a", 1, "accepted", 1],
      ["run-b", 1, "rejected", 0.5],
      ["run-a", 2, "rejected", 1 / 3],
    ]);
  });

  it("draws a cost bar per generation and the running total", () => {
    const bars = [
      ...page.matchAll(/<rect class="cost-bar" data-run="([^"]+)" data-generation="(\d+)" data-usd="([\d.]+)"/g),
    ].map((m) => [m[1], Number(m[2]), Number(m[3])]);
    expect(bars).toEqual([
      ["run-a", 1, 0.01],
      ["run-b", 1, 0.03],
      ["run-a", 2, 0.02],
    ]);
    const totals = [...page.matchAll(/<circle class="total" data-usd="([\d.]+)"/g)].map((m) => Number(m[1]));
    [0.01, 0.04, 0.06].forEach((t, i) => expect(totals[i]).toBeCloseTo(t, 12));
    expect(page).toContain("$0.0600 in all");
  });

  it("ranks the rejection reasons, links the runs that have a dashboard and escapes the directory", () => {
    expect(page).toContain(
      `<tbody><tr><td><code>protected</code></td><td class="n">1</td><td class="n">50.0%</td><td><span class="bar" style="width:100px"></span></td></tr><tr><td><code>regression</code></td>`,
    );
    expect(page).toContain(`<td><a href="run-a/dashboard.html"><code>run-a</code></a></td>`);
    expect(page).toContain(`<td><code>run-b</code></td><td class="n">1</td>`);
    expect(page).toContain("<code>/runs/&lt;dir&gt;</code>");
    expect(page).not.toMatch(/<script|https?:\/\//);
  });
});
