/**
 * The view across improvement runs, through the real CLI and in a real browser: three run
 * folders of report files (one written before reviews and errors were recorded) in a temp
 * directory; `loopsmith report --all` prints the figures (table and `--json`), `loopsmith
 * dashboard --all` writes the page, and Debian's headless Chromium opens it from disk (no
 * server): the acceptance rate over time (one point per generation, in order of time), the
 * rejection reasons ranked, the cost per generation and the total, the link to a run's own
 * dashboard, whose review findings and errors render too. A screenshot proves it paints.
 * Chromium is required: the test fails (never skips) when it is missing.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loopsmith } from "../fixtures/cli.js";

const BASE = "0123456789abcdef0123456789abcdef01234567";
const XSS = "<script>document.title = 'pwned'</script>";

/** The chromium binary on PATH. @throws Error naming the package to install when there is none */
function chromiumBin(): string {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const file = join(dir, "chromium");
    if (dir && existsSync(file)) return file;
  }
  throw new Error("chromium is not installed (not on PATH): apt-get install chromium");
}

/** Runs chromium headless with `args`; resolves with its stdout. */
function chromium(home: string, args: string[]): Promise<string> {
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
      chromiumBin(),
      flags,
      { timeout: 60_000, maxBuffer: 32 * 1024 * 1024, env: { ...process.env, HOME: home } },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`chromium ${args.join(" ")} failed: ${err.message}\n${stderr.slice(-2000)}`));
        else resolve(stdout);
      },
    );
  });
}

/** A report's JSON as `loopsmith improve` writes it, started `minute` minutes past noon. */
function report(
  runId: string,
  generation: number,
  minute: number,
  verdict: "accepted" | "rejected" | "dry_run",
  reason: string,
  costUsd: number,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const at = (m: number) => `2025-04-01T12:${String(m).padStart(2, "0")}:00.000Z`;
  return {
    v: 1,
    runId,
    generation,
    parent: BASE,
    hypothesis: { title: `hypothesis ${generation} of ${runId}`, rationale: "", expected: "", files: [] },
    decision: { verdict, reason, message: `${verdict}: ${reason}` },
    usage: {
      calls: 2,
      inputTokens: 100,
      outputTokens: 20,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd,
      latencyMs: 3,
    },
    phasesMs: { plan: 400, implement: 1600 },
    startedAt: at(minute),
    finishedAt: at(minute + 2),
    ...extra,
  };
}

/** The text of each row of the table with class `cls` in `dom`, cells joined by " | ". */
function rows(dom: string, cls: string): string[] {
  const table = new RegExp(`<table class="${cls}">([\\s\\S]*?)</table>`).exec(dom)?.[1] ?? "";
  return [...table.matchAll(/<tr[^>]*>([\s\S]*?)<\/tr>/g)].map((m) =>
    [...(m[1] ?? "").matchAll(/<t[dh][^>]*>([\s\S]*?)<\/t[dh]>/g)]
      .map((c) => (c[1] ?? "").replace(/<[^>]+>/g, "").trim())
      .join(" | "),
  );
}

/** One attribute of a serialized start tag. */
function attr(tag: string, name: string): string | undefined {
  return new RegExp(`\\s${name}="([^"]*)"`).exec(tag)?.[1];
}

describe("the dashboard across improvement runs, through the CLI, in headless Chromium", () => {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-runs-e2e-"));
  const runs = join(dir, "improve");
  const page = join(runs, "runs.html");
  const write = (folder: string, reports: Record<string, unknown>[]): void => {
    mkdirSync(join(runs, folder, "reports"), { recursive: true });
    for (const r of reports)
      writeFileSync(join(runs, folder, "reports", `gen-${String(r.generation)}.json`), JSON.stringify(r, null, 2));
  };

  beforeAll(async () => {
    write("run-a", [
      report("run-a", 1, 0, "accepted", "accepted", 0.012),
      report("run-a", 2, 20, "rejected", "regression", 0.008, {
        reviews: [
          {
            iteration: 1,
            approved: false,
            score: 0.3,
            findings: [{ severity: "blocker", rule: "no-eval", path: "slug.py", line: 4, message: XSS }],
          },
        ],
        errors: [
          { phase: "implement", code: "unavailable", message: "lost the events of task run-a-gen-2", retried: true },
        ],
      }),
    ]);
    // Written before reviews and errors were recorded.
    write("run-b", [
      report("run-b", 1, 10, "rejected", "regression", 0.02),
      report("run-b", 2, 30, "rejected", "protected", 0.005),
    ]);
    write("run-c", [
      report("run-c", 1, 40, "dry_run", "dry_run", 0.001),
      report("run-c", 2, 50, "accepted", "accepted", 0.03),
    ]);
    const one = await loopsmith(["dashboard", "run-a", "--dir", join(runs, "run-a")], {}, 120_000);
    expect(one.stderr).toBe("");
    expect(one.code).toBe(0);
    const all = await loopsmith(["dashboard", "--all", "--dir", runs], {}, 120_000);
    expect(all.stderr).toBe("");
    expect(all.code).toBe(0);
    expect(all.stdout).toBe(`wrote ${page}\n`);
  }, 240_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("report --all prints the figures across the runs, as a table and as JSON", async () => {
    const text = await loopsmith(["report", "--all", "--dir", runs], {}, 120_000);
    expect(text.code).toBe(0);
    const lines = text.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe(
      `3 run(s) in ${runs}: 6 generation(s), 2 accepted, 3 rejected, 1 dry run(s); acceptance rate 40.0% (2 of 5 decided); $0.0760 in all`,
    );
    expect(lines.slice(lines.indexOf("rejection reasons, by count:") + 1)).toEqual([
      "reason      count  share",
      "regression      2  66.7%",
      "protected       1  33.3%",
    ]);

    const json = await loopsmith(["report", "--all", "--dir", runs, "--json"], {}, 120_000);
    expect(json.code).toBe(0);
    const agg = JSON.parse(json.stdout) as {
      kind: string;
      generations: { runId: string; generation: number; acceptanceRate: number | null; totalUsd: number }[];
      reasons: { reason: string; count: number }[];
      totals: { acceptanceRate: number; costUsd: number };
    };
    expect(agg.kind).toBe("runs");
    expect(agg.generations.map((g) => [g.runId, g.generation, g.acceptanceRate])).toEqual([
      ["run-a", 1, 1],
      ["run-b", 1, 0.5],
      ["run-a", 2, 1 / 3],
      ["run-b", 2, 0.25],
      ["run-c", 1, 0.25],
      ["run-c", 2, 0.4],
    ]);
    expect(agg.generations.at(-1)?.totalUsd).toBeCloseTo(0.076, 12);
    expect(agg.reasons).toEqual([
      { reason: "regression", count: 2, share: 2 / 3 },
      { reason: "protected", count: 1, share: 1 / 3 },
    ]);

    const both = await loopsmith(["report", "run-a", "--all", "--dir", runs], {}, 120_000);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("give a run id or --all, not both");
  });

  it("renders the acceptance rate over time, the ranked reasons and the cost per generation", async () => {
    const dom = await chromium(dir, ["--dump-dom", pathToFileURL(page).href]);
    expect(/<title>([^<]*)<\/title>/.exec(dom)?.[1]).toBe("loopsmith improve: 3 runs");
    expect(dom).toContain(
      "3 runs, 6 generations: 2 accepted, 3 rejected, 1 dry runs; acceptance rate 40.0% (2 of 5 decided); $0.0760 in all",
    );

    const points = [...dom.matchAll(/<circle\b[^>]*>/g)]
      .map((m) => m[0])
      .filter((tag) => /\bclass="[^"]*\bpoint\b/.test(tag));
    expect(points.map((t) => [attr(t, "data-run"), attr(t, "data-generation"), attr(t, "data-verdict")])).toEqual([
      ["run-a", "1", "accepted"],
      ["run-b", "1", "rejected"],
      ["run-a", "2", "rejected"],
      ["run-b", "2", "rejected"],
      ["run-c", "1", "dry_run"],
      ["run-c", "2", "accepted"],
    ]);
    // Placed in order of time, left to right, and by the rate so far: 100% highest, 25% lowest.
    const cx = points.map((t) => Number(attr(t, "cx")));
    expect([...cx].sort((a, b) => a - b)).toEqual(cx);
    const cy = points.map((t) => Number(attr(t, "cy")));
    expect(cy[0]).toBeLessThan(cy[1] as number);
    expect(cy[3]).toBe(cy[4]);
    expect(cy[5]).toBeLessThan(cy[4] as number);

    const bars = [...dom.matchAll(/<rect\b[^>]*class="cost-bar"[^>]*>/g)].map((m) => Number(attr(m[0], "data-usd")));
    expect(bars).toEqual([0.012, 0.02, 0.008, 0.005, 0.001, 0.03]);
    const heights = [...dom.matchAll(/<rect\b[^>]*class="cost-bar"[^>]*>/g)].map((m) => Number(attr(m[0], "height")));
    expect(Math.max(...heights)).toBe(heights[5]);

    expect(rows(dom, "reasons").map((r) => r.trimEnd())).toEqual([
      "reason | count | share |",
      "regression | 2 | 66.7% |",
      "protected | 1 | 33.3% |",
    ]);
    // Each reason's bar is as long as its share (200 px for all of the rejections).
    const reasons = /<table class="reasons">([\s\S]*?)<\/table>/.exec(dom)?.[1] ?? "";
    expect([...reasons.matchAll(/class="bar" style="width:\s*(\d+)px/g)].map((m) => Number(m[1]))).toEqual([133, 67]);
    expect(rows(dom, "runs")).toEqual([
      "run | generations | accepted | rejected | dry runs | rate | USD",
      "run-a | 2 | 1 | 1 | 0 | 50.0% | $0.0200",
      "run-b | 2 | 0 | 2 | 0 | 0.0% | $0.0250",
      "run-c | 2 | 1 | 0 | 1 | 100.0% | $0.0310",
    ]);
    expect(rows(dom, "generations").slice(-1)).toEqual([
      "2025-04-01T12:50:00.000Z | run-c | 2 | accepted | accepted | 2/5 | 40.0% | $0.0300 | $0.0760",
    ]);
    // Only run-a has its own dashboard: it is linked.
    expect(dom).toContain('<a href="run-a/dashboard.html"><code>run-a</code></a>');
    expect(dom).not.toContain('href="run-b/dashboard.html"');
  });

  it("the linked run dashboard shows the review's findings and the errors, the injected script as text", async () => {
    const dom = await chromium(dir, ["--dump-dom", pathToFileURL(join(runs, "run-a", "dashboard.html")).href]);
    expect(/<title>([^<]*)<\/title>/.exec(dom)?.[1]).toBe("loopsmith improve: run-a");
    expect(rows(dom, "findings")).toEqual([
      "severity | rule | file | line | message",
      `blocker | no-eval | slug.py | 4 | &lt;script&gt;document.title = 'pwned'&lt;/script&gt;`,
    ]);
    expect(rows(dom, "errors")).toEqual([
      "phase | code | message | resumed after it",
      "implement | unavailable | lost the events of task run-a-gen-2 | yes",
    ]);
    expect(dom).not.toMatch(/<script\b/i);
  });

  it("paints a 1200×900 screenshot of the view across runs", async () => {
    const png = join(dir, "runs.png");
    await chromium(dir, [
      `--screenshot=${png}`,
      "--window-size=1200,900",
      "--hide-scrollbars",
      pathToFileURL(page).href,
    ]);
    expect(statSync(png).size).toBeGreaterThan(5_000);
    const bytes = readFileSync(png);
    expect(bytes.subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a");
    expect([bytes.readUInt32BE(16), bytes.readUInt32BE(20)]).toEqual([1200, 900]);
  });
});
