import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  readSummary,
  benchTotals,
  confirmationCell,
  errorLines,
  formatP,
  metricRows,
  readReports,
  reportTable,
  reviewLines,
  runFooter,
  selectionCell,
  writeReport,
} from "./reports.js";

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
      /^gen\s+verdict\s+reason\s+hypothesis\s+files\s+bench\s+selection\s+confirmation\s+alpha spent\s+metrics\s+tokens\s+USD\s+time s$/,
    );
    const row1 = lines[1] as string;
    expect(row1).toMatch(/^\s*1\s+accepted\s+accepted\s+Normalize accents with unicodedata befo…\s/);
    expect(row1).toContain("2 (+12/-4)");
    expect(row1).toContain("12/20 → 18/20");
    // No split: the selection column holds the whole benchmark's test.
    expect(row1).toMatch(/\s3\/0 p 0\.250\s+-\s+-\s+-\s+1234\s+0\.0123\s+12\.5$/);
    // Rows without a change, benchmark or statistic show dashes.
    expect(lines[3]).toMatch(/^\s*3\s+rejected\s+protected\s.*\s-\s+-\s+-\s+-\s+-\s+-\s+1234\s+0\.0123\s+12\.5$/);
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

describe("the reviews and errors of a generation under the table", () => {
  const reviewed = report(4, {
    reviews: [
      {
        iteration: 1,
        approved: false,
        score: 0.25,
        findings: [
          { severity: "blocker", rule: "security.eval", path: "app.py", line: 7, message: "eval of\ninput" },
          { severity: "info", message: "no test for the new branch" },
        ],
      },
      { iteration: 2, approved: true, score: 0.9, findings: [] },
    ],
    errors: [
      { phase: "implement", code: "unavailable", message: "lost the events of task run-1-gen-4", retried: true },
      { phase: "plan", message: "no check command" },
    ],
  });

  it("prints each review with its findings as the reviewer gave them, then each error with its phase", () => {
    const lines = reportTable([reviewed]).split("\n");
    const from = lines.indexOf("gen 4 review of iteration 1: not approved, score 0.25, 2 finding(s)");
    expect(from).toBeGreaterThan(0);
    expect(lines.slice(from)).toEqual([
      "gen 4 review of iteration 1: not approved, score 0.25, 2 finding(s)",
      "  blocker security.eval app.py:7 eval of input",
      "  info - - no test for the new branch",
      "gen 4 review of iteration 2: approved, score 0.90, 0 finding(s)",
      "gen 4 error in implement (unavailable, retried): lost the events of task run-1-gen-4",
      "gen 4 error in plan: no check command",
    ]);
  });

  it("prints nothing of the kind for a report without reviews or errors", () => {
    expect(reviewLines(accepted)).toEqual([]);
    expect(errorLines(accepted)).toEqual([]);
    expect(reportTable([accepted])).not.toMatch(/review|error in/);
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

describe("confirmationCell and runFooter", () => {
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
    expect(confirmationCell(withSets(true, true))).toBe("3/0 p 0.500 ok");
    expect(confirmationCell(withSets(true, false))).toBe("0/0 p 0.500 overfit");
    expect(confirmationCell(withSets(false, false))).toBe("0/0 p 0.500 -");
    expect(confirmationCell(report(5))).toBe("-");
    expect(selectionCell(withSets(true, true))).toBe("9/0 p 0.500");
    expect(selectionCell(report(5))).toBe("-");
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

describe("the table of a split run read back from its reports (loopsmith report)", () => {
  const sets = (fixed: number, p: number, passed: boolean, alpha: number) => ({
    test: "sign_exact" as const,
    cases: 6,
    parentFailing: fixed,
    fixed,
    broken: 0,
    pValue: p,
    alpha,
    passed,
  });
  const split = report(2, {
    bench: {
      command: "python3 bench.py",
      format: "json",
      repeats: 1,
      cases: Array.from({ length: 9 }, (_, i) => ({
        case: `c${i}`,
        set: i < 6 ? ("selection" as const) : ("confirmation" as const),
        ...(i === 8 ? { flaky: true } : {}),
        parent: side(0, 1),
        candidate: side(1, 1),
      })),
    },
    statistic: {
      test: "mcnemar_exact",
      cases: 9,
      fixed: 8,
      broken: 0,
      pValue: 0.0078,
      alpha: 0.0136,
      effect: 0.9,
      selection: sets(6, 0.015625, false, 0.0136),
      confirmation: sets(2, 0.25, false, 0.05),
      testIndex: 2,
      alphaSpent: 0.0409,
    },
    decision: { verdict: "rejected", reason: "no_improvement", message: "p = 0.0156 ≥ 0.0136" },
  });
  const lines = reportTable([report(1), split]).split("\n");

  it("shows each set's fixed/broken and p, and the alpha spent, in the row", () => {
    expect(lines[2]).toMatch(/\s6\/0 p 0\.0156\s+2\/0 p 0\.250 -\s+0\.0409\s+-\s+1234\s/);
  });

  it("names the sets and the error budget under the table, without a summary", () => {
    expect(lines.slice(4)).toEqual([
      "sets: 6 selection case(s) shown to the model, 3 confirmation case(s) held out; 1 flaky case(s) left out of the test (generation 2's report)",
      "error budget: 0.0409 of the run's alpha spent by 1 paired test(s)",
    ]);
  });

  it("uses the run summary's lines instead when it has one", () => {
    const withSummary = reportTable([split], { alpha: { budget: 0.05, spent: 0.0409, tests: 2 } }).split("\n");
    expect(withSummary.at(-1)).toBe("error budget: alpha 0.05 for the whole run; 0.0409 spent by 2 paired test(s)");
    expect(withSummary.some((l) => l.startsWith("sets:"))).toBe(false);
  });

  it("reads the run's summary.json for report and dashboard; none or a bad one is undefined", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-summary-"));
    expect(await readSummary(dir)).toBeUndefined();
    const summary = {
      v: 1,
      runId: "run-1",
      status: "done",
      stopReason: "completed",
      generations: 2,
      accepted: [1],
      head: "a".repeat(40),
      usage: {
        calls: 1,
        inputTokens: 1,
        outputTokens: 2,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        costUsd: 0,
        latencyMs: 5,
      },
      message: "done",
      alpha: { budget: 0.05, spent: 0.0409, tests: 2 },
    };
    await writeFile(join(dir, "summary.json"), JSON.stringify(summary));
    expect((await readSummary(dir))?.alpha).toEqual({ budget: 0.05, spent: 0.0409, tests: 2 });
    await writeFile(join(dir, "summary.json"), "{ not json");
    expect(await readSummary(dir)).toBeUndefined();
    await rm(dir, { recursive: true, force: true });
  });
});

describe("metric deltas (a run judged on the repository's quality metrics)", () => {
  const withMetrics = (metrics: unknown): GenerationReport => Object.assign(report(3), { metrics }) as GenerationReport;

  it("reads an array of entries, computing a delta the report does not give", () => {
    const r = withMetrics([
      { name: "coverage", parent: 71.25, candidate: 74.5, status: "improved" },
      { name: "lint_findings", parent: 12, candidate: 12, delta: 0, status: "unchanged" },
      { name: "security", parent: null, candidate: "unavailable", status: "unavailable" },
      { parent: 1, candidate: 2 },
    ]);
    expect(metricRows(r)).toEqual([
      { name: "coverage", parent: "71.25", candidate: "74.5", delta: "+3.25", status: "improved" },
      { name: "lint_findings", parent: "12", candidate: "12", delta: "0", status: "unchanged" },
      { name: "security", parent: "-", candidate: "unavailable", delta: "-", status: "unavailable" },
    ]);
    const lines = reportTable([r]).split("\n");
    expect(lines[1]).toContain("1 improved, 1 unchanged, 1 unavailable");
    expect(lines).toContain(
      "gen 3 metrics: coverage 71.25 → 74.5 (+3.25, improved); lint_findings 12 → 12 (0, unchanged); security - → unavailable (-, unavailable)",
    );
  });

  it("reads a record of name → entry and an object holding the entries under deltas", () => {
    expect(metricRows(withMetrics({ type_errors: { parent: { value: 3 }, candidate: { value: 1 } } }))).toEqual([
      { name: "type_errors", parent: "3", candidate: "1", delta: "-2", status: "-" },
    ]);
    expect(
      metricRows(withMetrics({ deltas: [{ metric: "complexity", parent: 4, candidate: 5, status: "regressed" }] })),
    ).toEqual([{ name: "complexity", parent: "4", candidate: "5", delta: "+1", status: "regressed" }]);
    expect(metricRows(report(1))).toEqual([]);
  });

  it("reads the contract's quality report: per-repeat means, the unit, improved and regressed", () => {
    const outcome = (metric: string, extra: Record<string, unknown>) => ({
      metric,
      direction: "higher",
      unit: "%",
      weight: 1,
      tolerance: 0,
      status: "measured",
      tool: {},
      parentValues: [70, 71],
      candidateValues: [72, 73],
      delta: 2,
      test: "signed_rank",
      improved: false,
      regressed: false,
      note: "",
      ...extra,
    });
    const r = withMetrics({
      language: "python",
      repeats: 2,
      metrics: [
        outcome("coverage", { improved: true }),
        outcome("tests", { regressed: true, delta: -1, candidateValues: [69.5, 70.5] }),
        outcome("security", { status: "unavailable", parentValues: [], candidateValues: [], delta: undefined }),
      ],
      weightedImprovement: 0.1,
      regressed: ["tests"],
      improved: ["coverage"],
    });
    expect(metricRows(r)).toEqual([
      { name: "coverage (%)", parent: "70.5", candidate: "72.5", delta: "+2", status: "improved" },
      { name: "tests (%)", parent: "70.5", candidate: "70", delta: "-1", status: "regressed" },
      { name: "security (%)", parent: "-", candidate: "-", delta: "-", status: "unavailable" },
    ]);
  });
});
