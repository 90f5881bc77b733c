import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GenerationReport, type DecisionReason } from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { aggregateRuns, percent, readRuns, runDashboards, runsTable } from "./all-runs.js";
import { runIdOrAll } from "../commands/improve.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "loopsmith-all-runs-test-"));
  dirs.push(d);
  return d;
}

const BASE = "0123456789abcdef0123456789abcdef01234567";

/** A report as `loopsmith improve` writes it (plain JSON, no defaults filled in), started `minute` minutes past 10:00. */
function reportJson(
  runId: string,
  generation: number,
  minute: number,
  verdict: "accepted" | "rejected" | "dry_run",
  reason: DecisionReason,
  costUsd: number,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const at = (m: number) => `2025-03-01T10:${String(m).padStart(2, "0")}:00.000Z`;
  return {
    v: 1,
    runId,
    generation,
    parent: BASE,
    decision: { verdict, reason, message: `${verdict} (${reason})` },
    usage: {
      calls: 1,
      inputTokens: 10,
      outputTokens: 5,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd,
      latencyMs: 1,
    },
    phasesMs: { plan: 100, implement: 200 },
    startedAt: at(minute),
    finishedAt: at(minute + 1),
    ...extra,
  };
}

/** Writes each report to `<dir>/<folder>/reports/gen-<N>.json`. */
async function writeRun(dir: string, folder: string, reports: Record<string, unknown>[]): Promise<string> {
  const run = join(dir, folder);
  await mkdir(join(run, "reports"), { recursive: true });
  for (const r of reports)
    await writeFile(join(run, "reports", `gen-${String(r.generation)}.json`), JSON.stringify(r, null, 2));
  return run;
}

/**
 * Three runs whose generations interleave in time:
 * run-a: 1 accepted (10:00, $0.01), 2 regression (10:10, $0.02);
 * run-b: 1 regression (10:05, $0.005), 2 protected (10:15, $0.001), 3 dry run (10:20, $0.003);
 * run-c: 1 no_improvement (10:02, $0), an old report without reviews or errors; 2 accepted (10:30, $0.04),
 * a new one with a review and an error.
 */
async function threeRuns(): Promise<string> {
  const dir = await tempDir();
  await writeRun(dir, "run-a", [
    reportJson("run-a", 1, 0, "accepted", "accepted", 0.01),
    reportJson("run-a", 2, 10, "rejected", "regression", 0.02),
  ]);
  await writeRun(dir, "run-b", [
    reportJson("run-b", 1, 5, "rejected", "regression", 0.005),
    reportJson("run-b", 2, 15, "rejected", "protected", 0.001),
    reportJson("run-b", 3, 20, "dry_run", "dry_run", 0.003),
  ]);
  await writeRun(dir, "run-c", [
    reportJson("run-c", 1, 2, "rejected", "no_improvement", 0),
    reportJson("run-c", 2, 30, "accepted", "accepted", 0.04, {
      reviews: [
        {
          iteration: 1,
          approved: true,
          score: 0.8,
          findings: [{ severity: "warning", rule: "style", path: "a.py", line: 3, message: "long line" }],
        },
      ],
      errors: [{ phase: "implement", code: "unavailable", message: "NATS went away", retried: true }],
    }),
  ]);
  // Not runs: a folder without reports/, and a file.
  await mkdir(join(dir, "scratch"));
  await writeFile(join(dir, "notes.txt"), "hello");
  return dir;
}

describe("readRuns", () => {
  it("reads every run folder of a directory, ordered by its first generation's start, and skips what is not a run", async () => {
    const dir = await threeRuns();
    const runs = await readRuns(dir);
    expect(runs.map((r) => [r.runId, r.dir, r.reports.map((x) => x.generation)])).toEqual([
      ["run-a", join(dir, "run-a"), [1, 2]],
      ["run-c", join(dir, "run-c"), [1, 2]],
      ["run-b", join(dir, "run-b"), [1, 2, 3]],
    ]);
    // The old report parses without the new fields; the new one keeps them.
    const [oldReport, newReport] = runs[1]?.reports ?? [];
    expect(oldReport?.reviews).toBeUndefined();
    expect(oldReport?.errors).toBeUndefined();
    expect(newReport?.reviews?.[0]?.findings[0]).toEqual({
      severity: "warning",
      rule: "style",
      path: "a.py",
      line: 3,
      message: "long line",
    });
    expect(newReport?.errors).toEqual([
      { phase: "implement", code: "unavailable", message: "NATS went away", retried: true },
    ]);
  });

  it("reads a run's own folder as one run", async () => {
    const dir = await threeRuns();
    const runs = await readRuns(join(dir, "run-b"));
    expect(runs.map((r) => [r.runId, r.reports.length])).toEqual([["run-b", 3]]);
  });

  it("says which folder is wrong: missing, empty of runs, or holding a report that does not parse", async () => {
    const dir = await tempDir();
    const missing = await readRuns(join(dir, "nope")).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(LoopsmithError);
    expect(missing).toMatchObject({ code: "not_found" });
    expect((missing as Error).message).toContain(`no improvement runs in ${join(dir, "nope")}: it is not a folder`);

    await mkdir(join(dir, "empty"));
    await expect(readRuns(dir)).rejects.toMatchObject({
      code: "not_found",
      message: expect.stringContaining("no folder in it holds a reports/ folder"),
    });

    await writeRun(dir, "bad", [{ ...reportJson("bad", 1, 0, "rejected", "regression", 0), usage: "free" }]);
    await expect(readRuns(dir)).rejects.toMatchObject({
      code: "bad_request",
      message: expect.stringContaining(`${join(dir, "bad", "reports", "gen-1.json")}: not a generation report (usage:`),
    });
  });
});

describe("aggregateRuns", () => {
  it("orders every generation by time, with the acceptance rate of the decided ones and the cost so far", async () => {
    const dir = await threeRuns();
    const agg = aggregateRuns(dir, await readRuns(dir));
    expect(
      agg.generations.map((g) => [g.runId, g.generation, g.verdict, `${g.accepted}/${g.decided}`, g.acceptanceRate]),
    ).toEqual([
      ["run-a", 1, "accepted", "1/1", 1],
      ["run-c", 1, "rejected", "1/2", 0.5],
      ["run-b", 1, "rejected", "1/3", 1 / 3],
      ["run-a", 2, "rejected", "1/4", 0.25],
      ["run-b", 2, "rejected", "1/5", 0.2],
      // A dry run decides nothing: the rate stays.
      ["run-b", 3, "dry_run", "1/5", 0.2],
      ["run-c", 2, "accepted", "2/6", 1 / 3],
    ]);
    const costs = agg.generations.map((g) => g.costUsd);
    expect(costs).toEqual([0.01, 0, 0.005, 0.02, 0.001, 0.003, 0.04]);
    const totals = agg.generations.map((g) => g.totalUsd);
    [0.01, 0.01, 0.015, 0.035, 0.036, 0.039, 0.079].forEach((t, i) => expect(totals[i]).toBeCloseTo(t, 12));
  });

  it("ranks the rejection reasons by count (ties by name) with their share of the rejections", async () => {
    const dir = await threeRuns();
    const agg = aggregateRuns(dir, await readRuns(dir));
    expect(agg.reasons).toEqual([
      { reason: "regression", count: 2, share: 0.5 },
      { reason: "no_improvement", count: 1, share: 0.25 },
      { reason: "protected", count: 1, share: 0.25 },
    ]);
  });

  it("totals each run and all of them", async () => {
    const dir = await threeRuns();
    const agg = aggregateRuns(dir, await readRuns(dir));
    expect(agg.runs.map((r) => [r.runId, r.generations, r.accepted, r.rejected, r.dryRuns, r.acceptanceRate])).toEqual([
      ["run-a", 2, 1, 1, 0, 0.5],
      ["run-c", 2, 1, 1, 0, 0.5],
      ["run-b", 3, 0, 2, 1, 0],
    ]);
    expect(agg.runs.map((r) => r.startedAt)).toEqual([
      "2025-03-01T10:00:00.000Z",
      "2025-03-01T10:02:00.000Z",
      "2025-03-01T10:05:00.000Z",
    ]);
    expect(agg.runs[2]?.costUsd).toBeCloseTo(0.009, 12);
    const { costUsd, ...rest } = agg.totals;
    expect(rest).toEqual({ runs: 3, generations: 7, accepted: 2, rejected: 4, dryRuns: 1, acceptanceRate: 1 / 3 });
    expect(costUsd).toBeCloseTo(0.079, 12);
  });

  it("has no rate before a decision and no reasons without a rejection", () => {
    const dry = GenerationReport.parse(reportJson("only-dry", 1, 0, "dry_run", "dry_run", 0.5));
    const agg = aggregateRuns("/x", [{ runId: "only-dry", dir: "/x/only-dry", reports: [dry] }]);
    expect(agg.generations.map((g) => g.acceptanceRate)).toEqual([null]);
    expect(agg.totals.acceptanceRate).toBeNull();
    expect(agg.reasons).toEqual([]);
    expect(runsTable(agg)).toContain("(no rejected generation)");
    expect(percent(null)).toBe("-");
  });
});

describe("runsTable", () => {
  it("prints the totals, the runs, the rate over time and the ranked reasons as aligned tables", async () => {
    const dir = await threeRuns();
    const lines = runsTable(aggregateRuns(dir, await readRuns(dir))).split("\n");
    expect(lines[0]).toBe(
      `3 run(s) in ${dir}: 7 generation(s), 2 accepted, 4 rejected, 1 dry run(s); acceptance rate 33.3% (2 of 6 decided); $0.0790 in all`,
    );
    const at = (title: string): number => lines.indexOf(title);
    expect(lines.slice(2, 6)).toEqual([
      "run    generations  accepted  rejected  dry runs   rate     USD",
      "run-a            2         1         1         0  50.0%  0.0300",
      "run-c            2         1         1         0  50.0%  0.0400",
      "run-b            3         0         2         1   0.0%  0.0090",
    ]);
    const over = at(
      "acceptance rate over time (each generation in order of its start; the rate is of the generations decided so far):",
    );
    expect(lines[over + 1]).toBe(
      "started                   run    gen  verdict   reason          accepted    rate     USD  total USD",
    );
    expect(lines[over + 2]).toBe(
      "2025-03-01T10:00:00.000Z  run-a    1  accepted  accepted             1/1  100.0%  0.0100     0.0100",
    );
    expect(lines[over + 8]).toBe(
      "2025-03-01T10:30:00.000Z  run-c    2  accepted  accepted             2/6   33.3%  0.0400     0.0790",
    );
    const reasons = at("rejection reasons, by count:");
    expect(lines.slice(reasons + 1)).toEqual([
      "reason          count  share",
      "regression          2  50.0%",
      "no_improvement      1  25.0%",
      "protected           1  25.0%",
    ]);
  });
});

describe("runDashboards", () => {
  it("links the runs that have a dashboard.html, relative to the page", async () => {
    const dir = await threeRuns();
    const runs = await readRuns(dir);
    await writeFile(join(dir, "run-a", "dashboard.html"), "<!doctype html>");
    expect(await runDashboards(runs, join(dir, "runs.html"))).toEqual({
      [join(dir, "run-a")]: "run-a/dashboard.html",
    });
    expect(await runDashboards(runs, join(dir, "out", "all.html"))).toEqual({
      [join(dir, "run-a")]: "../run-a/dashboard.html",
    });
  });
});

describe("runIdOrAll", () => {
  it("takes a run id or --all, and refuses both, neither and a bad run id", () => {
    expect(runIdOrAll("report", "run-1", undefined)).toBe("one");
    expect(runIdOrAll("report", undefined, true)).toBe("all");
    expect(() => runIdOrAll("report", "run-1", true)).toThrow("report: give a run id or --all, not both");
    expect(() => runIdOrAll("dashboard", undefined, undefined)).toThrow("dashboard: give a run id, or --all");
    expect(() => runIdOrAll("report", "bad id!", undefined)).toThrow("is not valid");
  });
});
