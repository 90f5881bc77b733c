import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { machineState } from "./machine.js";
import {
  isInfraError,
  lastResults,
  mcnemarExactP,
  nearestRank,
  pairedSummary,
  signedRankP,
  simulatedNotice,
  summarize,
  summarizeArm,
} from "./summary.js";
import { BenchSummary, type BenchArm, type BenchResult } from "./types.js";

function result(caseId: string, arm: BenchArm, over: Partial<BenchResult> = {}): BenchResult {
  return {
    v: 1,
    runId: "r1",
    caseId,
    arm,
    taskId: `bench-r1-${arm}-${caseId}`,
    status: "passed",
    stopReason: "passed",
    passed: true,
    visiblePassed: true,
    hidden: { passed: 3, total: 3 },
    iterations: 1,
    tokensIn: 100,
    tokensOut: 50,
    costUsd: 0.01,
    wallMs: 1000,
    provider: "simulated",
    attempts: 1,
    finishedAt: "2026-11-25T12:00:00.000Z",
    ...over,
  };
}

describe("summarizeArm", () => {
  it("computes pass@1, visible pass rate, per-task means, nearest-rank p90, errors and the histograms", () => {
    const rs = [
      result("a", "on", { iterations: 1 }),
      result("b", "on", {
        iterations: 2,
        passed: false,
        status: "failed",
        stopReason: "max_iterations",
        tokensIn: 300,
        tokensOut: 150,
        costUsd: 0.03,
        wallMs: 3000,
      }),
      result("c", "on", {
        iterations: 3,
        visiblePassed: false,
        passed: false,
        status: "error",
        stopReason: "error",
        error: "executor down",
      }),
      result("d", "on", { iterations: 10 }),
    ];
    const s = summarizeArm(rs);
    expect(s.tasks).toBe(4);
    expect(s.passed).toBe(2);
    expect(s.passAt1).toBe(0.5);
    expect(s.visiblePassRate).toBe(0.75);
    expect(s.meanIterations).toBe(4);
    expect(s.p90Iterations).toBe(10);
    expect(s.tokensInPerTask).toBe(150);
    expect(s.tokensOutPerTask).toBe(75);
    expect(s.usdPerTask).toBeCloseTo(0.015, 10);
    expect(s.meanWallMs).toBe(1500);
    expect(s.errors).toBe(1);
    expect(s.stopReasons).toEqual({ passed: 2, max_iterations: 1, error: 1 });
    expect(s.iterationsHistogram).toEqual({ "1": 1, "2": 1, "3": 1, "10": 1 });
  });

  it("counts the last line of a case that has several (a resumed run)", () => {
    const s = summarizeArm([
      result("a", "on", { passed: false, status: "error", stopReason: "error" }),
      result("b", "on"),
      result("a", "on", { iterations: 4 }),
    ]);
    expect(s.tasks).toBe(2);
    expect(s.passed).toBe(2);
    expect(s.errors).toBe(0);
    expect(s.meanIterations).toBe(2.5);
  });

  it("gives zeros, not NaN, for an arm with no task", () => {
    const s = summarizeArm([]);
    expect(s).toMatchObject({
      tasks: 0,
      passAt1: 0,
      visiblePassRate: 0,
      meanIterations: 0,
      p90Iterations: 0,
      usdPerTask: 0,
    });
  });

  it("nearest-rank p90 is the ⌈0.9·n⌉-th smallest", () => {
    expect(nearestRank([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9)).toBe(9);
    expect(nearestRank([5, 1], 0.9)).toBe(5);
    expect(nearestRank([7], 0.9)).toBe(7);
  });

  it("keeps pass@1 and the visible pass rate in [0, 1], and p90 between the mean's bounds (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            id: fc.integer({ min: 0, max: 30 }),
            passed: fc.boolean(),
            vis: fc.boolean(),
            it: fc.integer({ min: 0, max: 20 }),
          }),
          { maxLength: 60 },
        ),
        (xs) => {
          const s = summarizeArm(
            xs.map((x) => result(`c${x.id}`, "on", { passed: x.passed, visiblePassed: x.vis, iterations: x.it })),
          );
          expect(s.passAt1).toBeGreaterThanOrEqual(0);
          expect(s.passAt1).toBeLessThanOrEqual(1);
          expect(s.visiblePassRate).toBeGreaterThanOrEqual(0);
          expect(s.visiblePassRate).toBeLessThanOrEqual(1);
          expect(s.tasks).toBe(new Set(xs.map((x) => x.id)).size);
          expect(Object.values(s.iterationsHistogram).reduce((a, b) => a + b, 0)).toBe(s.tasks);
          if (s.tasks)
            expect(s.p90Iterations).toBeGreaterThanOrEqual(Math.min(...Object.keys(s.iterationsHistogram).map(Number)));
        },
      ),
    );
  });
});

describe("pairedSummary", () => {
  it("pairs by case id, counts the 2x2 table and the differences on − off", () => {
    const on = [
      result("a", "on", { iterations: 1 }),
      result("b", "on", { iterations: 2 }),
      result("c", "on", { passed: false, iterations: 5 }),
      result("d", "on", { passed: false, iterations: 5 }),
      result("only-on", "on"),
    ];
    const off = [
      result("a", "off", { iterations: 3, tokensIn: 300 }),
      result("b", "off", { passed: false, iterations: 5 }),
      result("c", "off", { iterations: 2 }),
      result("d", "off", { passed: false, iterations: 5 }),
    ];
    const p = pairedSummary(on, off);
    expect(p).toMatchObject({ pairs: 4, bothPass: 1, onlyOn: 1, onlyOff: 1, neither: 1, passDiff: 0, mcnemarP: 1 });
    expect(p.meanIterationsDiff).toBe((-2 - 3 + 3 + 0) / 4);
    expect(p.meanTokensDiff).toBe(-200 / 4);
    expect(p.iterationsP).not.toBeNull();
    expect(p.tokensP).toBe(1);
  });

  it("exact McNemar: 6 discordant pairs all one way give p = 2·0.5⁶ = 0.03125", () => {
    expect(mcnemarExactP(6, 0)).toBeCloseTo(0.03125, 12);
    expect(mcnemarExactP(0, 0)).toBe(1);
    const on = Array.from({ length: 6 }, (_, i) => result(`c${i}`, "on"));
    const off = Array.from({ length: 6 }, (_, i) => result(`c${i}`, "off", { passed: false }));
    expect(pairedSummary(on, off).mcnemarP).toBeCloseTo(0.03125, 12);
    expect(pairedSummary(on, off).passDiff).toBe(1);
  });

  it("Wilcoxon p is null when every difference is 0, 1 with one non-zero difference, exact otherwise", () => {
    expect(signedRankP([])).toBeNull();
    expect(signedRankP([0, 0, 0])).toBeNull();
    expect(signedRankP([0, 3])).toBe(1);
    // Exact: 6 positive differences with distinct ranks: p = 2/2⁶.
    expect(signedRankP([1, 2, 3, 4, 5, 6])).toBeCloseTo(2 / 64, 10);
    const same = [result("a", "on"), result("b", "on")];
    const p = pairedSummary(same, [result("a", "off"), result("b", "off")]);
    expect(p.iterationsP).toBeNull();
    expect(p.tokensP).toBeNull();
  });

  it("McNemar p is symmetric in on/off, is 1 when the discordant counts are equal, and lies in (0, 1] (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 80 }), fc.integer({ min: 0, max: 80 }), (b, c) => {
        const p = mcnemarExactP(b, c);
        expect(p).toBeGreaterThan(0);
        expect(p).toBeLessThanOrEqual(1);
        expect(mcnemarExactP(c, b)).toBe(p);
        if (b === c) expect(p).toBe(1);
      }),
    );
  });

  it("swapping the arms mirrors the table and negates the differences; p-values stay (property)", () => {
    const pairArb = fc.array(
      fc.record({
        on: fc.boolean(),
        off: fc.boolean(),
        itOn: fc.integer({ min: 0, max: 8 }),
        itOff: fc.integer({ min: 0, max: 8 }),
      }),
      { maxLength: 40 },
    );
    fc.assert(
      fc.property(pairArb, (xs) => {
        const on = xs.map((x, i) => result(`c${i}`, "on", { passed: x.on, iterations: x.itOn }));
        const off = xs.map((x, i) => result(`c${i}`, "off", { passed: x.off, iterations: x.itOff }));
        const a = pairedSummary(on, off);
        const b = pairedSummary(off, on);
        expect(b.onlyOn).toBe(a.onlyOff);
        expect(b.onlyOff).toBe(a.onlyOn);
        expect(b.mcnemarP).toBe(a.mcnemarP);
        expect(b.passDiff).toBeCloseTo(-a.passDiff, 12);
        expect(b.meanIterationsDiff).toBeCloseTo(-a.meanIterationsDiff, 12);
        if (a.iterationsP === null) expect(b.iterationsP).toBeNull();
        else expect(b.iterationsP).toBeCloseTo(a.iterationsP, 12);
        expect(a.bothPass + a.onlyOn + a.onlyOff + a.neither).toBe(a.pairs);
      }),
    );
  });
});

describe("summarize", () => {
  const base = {
    runId: "r1",
    dataset: "examples/bench/jsbench-sample.jsonl",
    format: "jsbench" as const,
    provider: { label: "simulated" as const, name: "simulated", model: "" },
    concurrency: 4,
    startedAt: "2026-11-25T12:00:00.000Z",
    finishedAt: "2026-11-25T12:02:00.000Z",
    skipped: [{ line: 3, message: "not JSON" }],
  };

  it("for ab: both arms, the paired comparison, tasks/min over the wall time, the notice", () => {
    const results = [
      result("a", "off"),
      result("a", "on"),
      result("b", "off", { passed: false }),
      result("b", "on"),
      result("b", "on", { iterations: 2 }),
    ];
    const s = summarize({ ...base, memory: "ab", results });
    expect(BenchSummary.safeParse(s).success).toBe(true);
    expect(s.wallMs).toBe(120_000);
    expect(s.tasksPerMin).toBe(2);
    expect(s.arms.on?.tasks).toBe(2);
    expect(s.arms.off?.passed).toBe(1);
    expect(s.paired).toMatchObject({ pairs: 2, onlyOn: 1, onlyOff: 0 });
    expect(s.notice).toBe(simulatedNotice("simulated"));
    expect(s.notice).toMatch(/^SIMULATED RUN: no model was called/);
    expect(s.skippedLines).toEqual([{ line: 3, message: "not JSON" }]);
  });

  it("for one arm: that arm only, no paired comparison; no notice for a model; tasksPerMin 0 with no wall time", () => {
    const s = summarize({
      ...base,
      memory: "off",
      provider: { label: "model", name: "anthropic", model: "claude" },
      finishedAt: base.startedAt,
      results: [result("a", "off")],
    });
    expect(Object.keys(s.arms)).toEqual(["off"]);
    expect(s.paired).toBeUndefined();
    expect(s.notice).toBeUndefined();
    expect(s.tasksPerMin).toBe(0);
  });

  it("keeps a notice it is given", () => {
    const s = summarize({ ...base, memory: "on", notice: "SCRIPTED RUN: custom", results: [] });
    expect(s.notice).toBe("SCRIPTED RUN: custom");
    expect(s.arms.on?.tasks).toBe(0);
  });

  it("lastResults keeps one line per case and arm, the last", () => {
    const rs = lastResults([
      result("a", "on", { iterations: 1 }),
      result("a", "off"),
      result("a", "on", { iterations: 7 }),
    ]);
    expect(rs.map((r) => [r.arm, r.iterations])).toEqual([
      ["on", 7],
      ["off", 1],
    ]);
  });
});

describe("infrastructure failures apart from the agent's", () => {
  const failedBy = (caseId: string, errorCode?: string): BenchResult =>
    result(caseId, "off", {
      status: errorCode ? "error" : "failed",
      stopReason: errorCode ? "error" : "max_iterations",
      passed: false,
      visiblePassed: false,
      ...(errorCode ? { errorCode, error: `${errorCode}: …` } : {}),
    });
  const machine = (busyPct: number) => ({
    cpus: 2,
    memoryGiB: 24,
    referenceMs: 180,
    busyPct,
    stealPct: 0.5,
    loadAverage: [1, 1, 1],
  });
  const rs = [
    result("a", "off"),
    failedBy("b"),
    failedBy("c", "sandbox_error"),
    failedBy("d", "unavailable"),
    failedBy("e", "task_timeout"),
    failedBy("f", "llm_bad_reply"),
  ];

  it("counts the sandbox and the bus as infrastructure, a bad model reply and failing tests as the agent's", () => {
    expect(isInfraError({ errorCode: "sandbox_error" })).toBe(true);
    expect(isInfraError({ errorCode: "llm_bad_reply" })).toBe(false);
    expect(isInfraError({})).toBe(false);
    const s = summarizeArm(rs, machine(50));
    expect([s.infraErrors, s.agentFailures, s.passed]).toEqual([2, 3, 1]);
  });

  it("counts a task timeout as the machine's only while the machine was over 90 % busy", () => {
    expect(summarizeArm(rs, machine(95)).infraErrors).toBe(3);
    expect(summarizeArm(rs, machine(90)).infraErrors).toBe(2);
    expect(summarizeArm(rs).infraErrors).toBe(2);
  });

  it("records the machine in the summary", () => {
    const s = summarize({
      results: rs,
      runId: "r1",
      dataset: "d.jsonl",
      format: "humaneval",
      provider: { label: "scripted", name: "scripted", model: "" },
      memory: "off",
      concurrency: 2,
      startedAt: "2026-12-01T00:00:00.000Z",
      finishedAt: "2026-12-01T00:01:00.000Z",
      skipped: [],
      machine: machine(95),
    });
    expect(s.machine?.busyPct).toBe(95);
    expect(s.arms.off?.infraErrors).toBe(3);
  });
});

describe("machineState", () => {
  it("reads the CPUs, memory, load and the busy share between two readings", () => {
    const m = machineState(123.456, { busy: 10, idle: 10, steal: 0 }, { busy: 19, idle: 11, steal: 0 });
    expect(m.busyPct).toBe(90);
    expect(m.referenceMs).toBe(123.5);
    expect(m.cpus).toBeGreaterThan(0);
    expect(m.memoryGiB).toBeGreaterThan(0);
    expect(m.loadAverage).toHaveLength(3);
  });
});
