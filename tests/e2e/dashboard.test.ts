/**
 * The improvement dashboard in a real browser: Debian's headless Chromium opens the file
 * from disk (no server), and the DOM it builds is checked: the title, one chart point per
 * generation with its verdict, one section per generation, and report text that tries to
 * inject a script shown as text and never run. A screenshot proves it paints.
 * Chromium is required: the test fails (never skips) when it is missing.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared";
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

const reports = [
  report(1, "accepted", "accepted", { bench: true, title: XSS, message: "2 fixed, none broken" }),
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
    await writeDashboard(file, dashboardHtml(RUN_ID, reports, { repo: "acme/slug", scripted: true }));
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
