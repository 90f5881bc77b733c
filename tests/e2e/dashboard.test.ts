/**
 * The improvement dashboard in a real browser: Debian's headless Chromium opens the file
 * from disk (no server), and the DOM it builds is checked: the title, one chart point per
 * generation with its verdict, one section per generation, the text a person reads per
 * generation (each set's fixed/broken and p, the run's error budget spent, the metric deltas,
 * the cost), and report text that tries to inject a script shown as text and never run. A
 * screenshot proves it paints.
 * Chromium is required: the test fails (never skips) when it is missing.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared/contracts";
import { dashboardHtml, writeDashboard } from "../../cli/src/improve/dashboard.js";

const RUN_ID = "dash-e2e-run";
const XSS = "<script>alert(1)</script>";
const TITLE_HIJACK = `<script>document.title = "pwned"</script>`;

/**
 * The chromium binary on PATH.
 * @throws Error naming the package to install when there is none (the test fails, never skips)
 */
function chromiumBin(): string {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const file = join(dir, "chromium");
    if (dir && existsSync(file)) return file;
  }
  throw new Error("chromium is not installed (not on PATH): apt-get install chromium");
}

/** Runs chromium headless with `args`; resolves with its stdout. */
function chromium(bin: string, home: string, args: string[]): Promise<string> {
  const flags = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    `--user-data-dir=${join(home, "profile")}`,
    ...args,
  ];
  return new Promise((resolve, reject) => {
    execFile(
      bin,
      flags,
      { timeout: 60_000, maxBuffer: 32 * 1024 * 1024, env: { ...process.env, HOME: home } },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`chromium ${args.join(" ")} failed: ${err.message}\n${stderr.slice(-2000)}`));
        else resolve(stdout);
      },
    );
  });
}

function report(
  generation: number,
  verdict: "accepted" | "rejected",
  reason: string,
  opts: { bench: boolean; title: string; message: string },
): GenerationReport {
  const cases = Array.from({ length: 8 }, (_, i) => ({
    case: `title-${i}`,
    parent: { passes: i < 4 + generation ? 2 : 0, runs: 2, scores: [] },
    candidate: { passes: i < (verdict === "accepted" ? 7 : 3) ? 2 : 0, runs: 2, scores: [] },
  }));
  return GenerationReport.parse({
    v: 1,
    runId: RUN_ID,
    generation,
    parent: "0123456789abcdef0123456789abcdef01234567",
    hypothesis: { title: opts.title, rationale: "accents are dropped" },
    change: {
      summary: "edit",
      patch: `--- a/slug.py\n+++ b/slug.py\n-old\n+${XSS}\n`,
      changed: [reason === "protected" ? "bench/cases.json" : "slug.py"],
      deleted: [],
      stat: { files: 1, insertions: 1, deletions: 1 },
    },
    ...(opts.bench
      ? {
          bench: { command: "python3 bench/run.py", format: "json", repeats: 2, cases },
          statistic: {
            test: "mcnemar_exact",
            cases: 8,
            fixed: verdict === "accepted" ? 2 : 0,
            broken: verdict === "accepted" ? 0 : 2,
            pValue: 0.5,
            alpha: 0.05,
            effect: verdict === "accepted" ? 0.25 : -0.25,
            selection: {
              test: "sign_exact",
              cases: 6,
              parentFailing: 3,
              fixed: verdict === "accepted" ? 3 : 0,
              broken: verdict === "accepted" ? 0 : 2,
              pValue: verdict === "accepted" ? 0.125 : 1,
              alpha: 0.0273 / generation,
              passed: verdict === "accepted",
            },
            confirmation: {
              test: "sign_exact",
              cases: 2,
              parentFailing: 1,
              fixed: verdict === "accepted" ? 1 : 0,
              broken: 0,
              pValue: verdict === "accepted" ? 0.5 : 1,
              alpha: 0.05,
              passed: verdict === "accepted",
            },
            testIndex: generation,
            alphaSpent: generation === 1 ? 0.0273 : 0.0409,
          },
        }
      : {}),
    decision: { verdict, reason, message: opts.message },
    usage: {
      calls: 2,
      inputTokens: 900,
      outputTokens: 100,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0.002,
      latencyMs: 3,
    },
    phasesMs: { plan: 500 },
    startedAt: "2025-01-01T00:00:00Z",
    finishedAt: "2025-01-01T00:00:02Z",
  });
}

/** Generation 1 also carries repository quality metrics (the contract's `QualityReport`). */
const metrics = {
  language: "python",
  repeats: 1,
  metrics: [
    { metric: "coverage", unit: "%", parentValues: [71.5], candidateValues: [74], delta: 2.5, improved: true },
    { metric: "lint", unit: "findings", parentValues: [4], candidateValues: [4], delta: 0, status: "measured" },
  ],
  weightedImprovement: 0.05,
  regressed: [],
  improved: ["coverage"],
};
const reports = [
  Object.assign(report(1, "accepted", "accepted", { bench: true, title: XSS, message: "2 fixed, none broken" }), {
    metrics,
  }),
  report(2, "rejected", "regression", { bench: true, title: "flip a coin per case", message: TITLE_HIJACK }),
  report(3, "rejected", "protected", {
    bench: false,
    title: "edit the benchmark",
    message: "touched bench/cases.json",
  }),
];

/** One attribute of a serialized start tag. */
function attr(tag: string, name: string): string | undefined {
  return new RegExp(`\\s${name}="([^"]*)"`).exec(tag)?.[1];
}

describe("the improvement dashboard in headless Chromium", () => {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-dashboard-e2e-"));
  const file = join(dir, "dashboard.html");

  beforeAll(async () => {
    await writeDashboard(file, dashboardHtml(RUN_ID, reports, { repo: "acme/slug", scripted: true, alpha: 0.05 }));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("renders the chart points, the sections and the injected script as text", async () => {
    const dom = await chromium(chromiumBin(), dir, ["--dump-dom", pathToFileURL(file).href]);
    // Rendered, and no script ran: the title is ours (the injected script would have changed it).
    expect(/<title>([^<]*)<\/title>/.exec(dom)?.[1]).toBe(`loopsmith improve: ${RUN_ID}`);
    expect(dom).toContain("scripted run: no model was called");

    const points = [...dom.matchAll(/<circle\b[^>]*>/g)]
      .map((m) => m[0])
      .filter((tag) => /\bclass="[^"]*\bpoint\b/.test(tag));
    expect(points.map((tag) => [attr(tag, "data-generation"), attr(tag, "data-verdict")])).toEqual([
      ["1", "accepted"],
      ["2", "rejected"],
      ["3", "rejected"],
    ]);
    // Accepted above the rejected regression (70% candidate pass rate against 30%).
    const cy = points.map((tag) => Number(attr(tag, "cy")));
    expect(cy[0]).toBeLessThan(cy[1] as number);

    const sections = [...dom.matchAll(/<section\b[^>]*>/g)]
      .map((m) => m[0])
      .filter((tag) => /\bclass="[^"]*\bgeneration\b/.test(tag));
    expect(sections.map((tag) => attr(tag, "id"))).toEqual(["gen-1", "gen-2", "gen-3"]);
    expect(dom).toContain("<code>regression</code>");
    expect(dom).toContain("<code>protected</code>");

    // The injected markup is text: escaped in the DOM, never an element.
    expect(dom).not.toMatch(/<script\b/i);
    expect(dom).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(dom).toContain('&lt;script&gt;document.title = "pwned"&lt;/script&gt;');
  });

  it("shows per generation both sets' results, the error budget spent, the metric deltas and the cost", async () => {
    const dom = await chromium(chromiumBin(), dir, ["--dump-dom", pathToFileURL(file).href]);
    /** The text of each row of the table with class `cls`, cells joined by " | ", as the browser built it. */
    const rows = (cls: string): string[] => {
      const table = new RegExp(`<table class="${cls}">([\\s\\S]*?)</table>`).exec(dom)?.[1] ?? "";
      return [...table.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((m) =>
        [...(m[1] ?? "").matchAll(/<t[dh][^>]*>([\s\S]*?)<\/t[dh]>/g)]
          .map((c) => (c[1] ?? "").replace(/<[^>]+>/g, "").trim())
          .join(" | "),
      );
    };
    expect(rows("overview")).toEqual([
      "gen | verdict | reason | selection fixed/broken p | confirmation fixed/broken p | alpha spent | metrics | tokens | USD",
      "1 | accepted | accepted | 3/0 p 0.125 | 1/0 p 0.500 ok | 0.0273 | 1 improved, 1 measured | 1000 | $0.0020",
      "2 | rejected | regression | 0/2 p 1.00 | 0/0 p 1.00 - | 0.0409 | - | 1000 | $0.0020",
      "3 | rejected | protected | - | - | - | - | 1000 | $0.0020",
    ]);
    expect(rows("metrics")).toEqual([
      "metric | parent | candidate | delta | status",
      "coverage (%) | 71.5 | 74 | +2.5 | improved",
      "lint (findings) | 4 | 4 | 0 | measured",
    ]);
    const gen2 = /<section class="generation" id="gen-2">([\s\S]*?)<\/section>/.exec(dom)?.[1] ?? "";
    expect(gen2).toContain("test 2 of the run; 0.0409 of the run's alpha 0.05 spent");
    expect(gen2).toContain("<dt>selection</dt><dd>sign_exact: 0 fixed, 2 broken of 6 (3 failing on the parent)");
    expect(gen2).toContain("<dt>cost</dt><dd>2 calls, 900 input + 100 output tokens, $0.0020</dd>");
  });

  it("paints a 1200×900 screenshot", async () => {
    const png = join(dir, "dash.png");
    await chromium(chromiumBin(), dir, [
      `--screenshot=${png}`,
      "--window-size=1200,900",
      "--hide-scrollbars",
      pathToFileURL(file).href,
    ]);
    expect(existsSync(png)).toBe(true);
    expect(statSync(png).size).toBeGreaterThan(5_000);
    const bytes = readFileSync(png);
    expect(bytes.subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a");
    // IHDR: width and height, big-endian, at bytes 16 and 20.
    expect([bytes.readUInt32BE(16), bytes.readUInt32BE(20)]).toEqual([1200, 900]);
  });
});
