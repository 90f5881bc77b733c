import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GenerationReport, LoopsmithError } from "@loopsmith/shared";
import { benchTotals, confirmationCell, formatP, readReports, reportTable, runFooter, writeReport } from "./reports.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "loopsmith-reports-test-"));
  dirs.push(d);
  return d;
}

const BASE = "0123456789abcdef0123456789abcdef01234567";
const side = (passes: number, runs = 2) => ({ passes, runs, scores: [] });

/** A report: gen 1 accepted with a benchmark (12/20 → 18/20), others rejected without one. */
function report(generation: number, extra: Partial<GenerationReport> = {}): GenerationReport {
  return GenerationReport.parse({
    v: 1,
    runId: "run-1",
    generation,
    parent: BASE,
    hypothesis: { title: `Normalize accents with unicodedata before slugifying, generation ${generation}` },
    decision: { verdict: "rejected", reason: "protected", message: "touched bench/cases.json" },
    usage: {
      calls: 2,
      inputTokens: 1000,
      outputTokens: 234,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0.01234,
      latencyMs: 5,
    },
    phasesMs: { plan: 1000, implement: 2000 },
    startedAt: "2025-01-01T00:00:00.000Z",
    finishedAt: "2025-01-01T00:00:12.500Z",
    ...extra,
  });
}
const accepted = report(1, {
  change: {
    summary: "fix",
    patch: "--- a\n+++ b\n",
    changed: ["a.py", "b.py"],
    deleted: [],
    stat: { files: 2, insertions: 12, deletions: 4 },
  },
  bench: {
    command: "python3 bench.py",
    format: "json",
    repeats: 2,
    cases: Array.from({ length: 10 }, (_, i) => ({
      case: `c${i}`,
      parent: side(i < 6 ? 2 : 0),
      candidate: side(i < 9 ? 2 : 0),
    })),
  },
  statistic: { test: "mcnemar_exact", cases: 10, fixed: 3, broken: 0, pValue: 0.25, alpha: 0.05, effect: 0.3 },
  decision: { verdict: "accepted", reason: "accepted", message: "3 fixed, none broken" },
});

describe("writeReport / readReports", () => {
  it("writes pretty JSON atomically and reads the reports back sorted by generation number", async () => {
    const dir = await tempDir();
    const paths = [];
    for (const n of [10, 2, 1]) paths.push(await writeReport(dir, n === 1 ? accepted : report(n)));
    expect(paths[0]).toBe(join(dir, "reports", "gen-10.json"));
    expect(await readFile(paths[0] as string, "utf8")).toMatch(/^\{\n {2}"v": 1,\n/);
    // No temp file is left behind; unrelated files are ignored.
    await writeFile(join(dir, "reports", "notes.txt"), "x");
    expect((await readdir(join(dir, "reports"))).filter((f) => f.endsWith(".tmp"))).toEqual([]);
    const back = await readReports(dir);
    expect(back.map((r) => r.generation)).toEqual([1, 2, 10]);
    expect(back[0]).toEqual(accepted);
    // Writing again replaces the file.
    await writeReport(dir, { ...accepted, decision: { ...accepted.decision, message: "again" } });
    expect((await readReports(dir))[0]?.decision.message).toBe("again");
  });

  it("names the file and the problem when a report is not JSON or not a report", async () => {
    const dir = await tempDir();
    await mkdir(join(dir, "reports"));
    await writeFile(join(dir, "reports", "gen-1.json"), "{ not json");
    const notJson = await readReports(dir).catch((e: unknown) => e);
    expect(notJson).toBeInstanceOf(LoopsmithError);
    expect(notJson).toMatchObject({
      code: "bad_request",
      message: expect.stringMatching(/gen-1\.json: not valid JSON/),
    });

    await writeFile(
      join(dir, "reports", "gen-1.json"),
      JSON.stringify({ ...accepted, decision: { verdict: "maybe" } }),
    );
    await expect(readReports(dir)).rejects.toMatchObject({
      code: "bad_request",
      message: expect.stringMatching(/gen-1\.json: not a generation report \(decision\.verdict: /),
    });

    await writeFile(join(dir, "reports", "gen-1.json"), JSON.stringify(report(2)));
    await expect(readReports(dir)).rejects.toMatchObject({
      code: "bad_request",
      message: expect.stringMatching(/gen-1\.json: holds generation 2, not 1/),
    });
  });

  it("says not_found when the run has no reports folder", async () => {
    const dir = await tempDir();
    await expect(readReports(join(dir, "nope"))).rejects.toMatchObject({
      code: "not_found",
      message: expect.stringContaining("reports"),
    });
  });
});

describe("reportTable", () => {
  const table = reportTable([
    accepted,
    report(2, { hypothesis: { title: "a\u001b[31m red\nline", rationale: "", expected: "", files: [] } }),
    report(3),
  ]);
  const lines = table.split("\n");

  it("prints one aligned row per generation with the figures of each column", () => {
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(
      /^gen\s+verdict\s+reason\s+hypothesis\s+files\s+bench\s+fixed\/broken\s+p\s+confirmation\s+tokens\s+USD\s+time s$/,
    );
    const row1 = lines[1] as string;
    expect(row1).toMatch(/^\s*1\s+accepted\s+accepted\s+Normalize accents with unicodedata befo…\s/);
    expect(row1).toContain("2 (+12/-4)");
    expect(row1).toContain("12/20 → 18/20");
    expect(row1).toMatch(/\s3\/0\s+0\.250\s+-\s+1234\s+0\.0123\s+12\.5$/);
    // Rows without a change, benchmark or statistic show dashes.
    expect(lines[3]).toMatch(/^\s*3\s+rejected\s+protected\s.*\s-\s+-\s+-\s+-\s+-\s+1234\s+0\.0123\s+12\.5$/);
    // Aligned: every column ends at the same offset in each row (right-aligned numbers).
    const ends = lines.slice(0, 4).map((l) => l.length);
    expect(new Set(ends).size).toBe(1);
    expect(lines.slice(0, 4).map((l) => l.search(/verdict|accepted|rejected/))).toEqual([5, 5, 5, 5]);
  });

  it("puts terminal controls and line breaks from a report on one harmless line", () => {
    expect(table).not.toContain("\u001b");
    expect(lines[2]).toContain("a [31m red line");
  });

  it("ends with the totals, on a line that does not start with a number", () => {
    expect(lines[4]).toBe("total: 3 generations, 1 accepted, 3702 tokens, $0.0370");
    expect(reportTable([]).split("\n")).toEqual([
      expect.stringMatching(/^gen/),
      "(no generations)",
      "total: 0 generations, 0 accepted, 0 tokens, $0.0000",
    ]);
  });
});

describe("helpers", () => {
  it("sums passes and runs over cases, and formats p-values to 3 significant digits", () => {
    expect(benchTotals(accepted)).toEqual({
      cases: 10,
      parent: { passes: 12, runs: 20 },
      candidate: { passes: 18, runs: 20 },
    });
    expect(benchTotals(report(2))).toBeUndefined();
    expect([formatP(2 * 0.5 ** 8), formatP(1), formatP(undefined), formatP(1.234e-9)]).toEqual([
      "0.00781",
      "1.00",
      "-",
      "1.23e-9",
    ]);
  });
});

describe("confirmationCell and runFooter (issue #36)", () => {
  const set = (fixed: number, passed: boolean) => ({
    test: "sign_exact" as const,
    cases: 10,
    parentFailing: 6,
    fixed,
    broken: 0,
    pValue: 0.5,
    alpha: 0.05,
    passed,
  });
  const withSets = (selection: boolean, confirmation: boolean) =>
    report(4, {
      statistic: {
        test: "mcnemar_exact",
        cases: 30,
        fixed: 9,
        broken: 0,
        pValue: 0.002,
        alpha: 0.0273,
        effect: 0.3,
        selection: set(9, selection),
        confirmation: set(confirmation ? 3 : 0, confirmation),
      },
    });

  it("says ok, overfit, or - when the selection did not pass", () => {
    expect(confirmationCell(withSets(true, true))).toBe("3/0 ok");
    expect(confirmationCell(withSets(true, false))).toBe("0/0 overfit");
    expect(confirmationCell(withSets(false, false))).toBe("0/0 -");
    expect(confirmationCell(report(5))).toBe("-");
  });

  it("names the sets, the flaky cases and the error budget spent", () => {
    const lines = runFooter({
      calibration: {
        runs: 3,
        flaky: ["t\u001b[31mx", "c9"],
        seed: 42,
        source: "fraction",
        selection: ["a", "b", "c"],
        confirmation: ["d"],
        parentFailing: ["a"],
      },
      alpha: { budget: 0.05, spent: 0.0409, tests: 2 },
    });
    expect(lines[0]).toBe(
      "sets: 3 selection case(s) shown to the model, 1 confirmation case(s) held out (held out at random, stratified by the parent's pass/fail, seed 42)",
    );
    expect(lines[1]).toContain("flaky: 2 of 4 case(s) both passed and failed in 3 calibration run(s)");
    expect(lines[1]).not.toContain("\u001b");
    expect(lines[2]).toBe("error budget: alpha 0.05 for the whole run; 0.0409 spent by 2 paired test(s)");
    expect(runFooter({})).toEqual([]);
  });
});
