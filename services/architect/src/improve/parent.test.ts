/**
 * The base parent measured on its own (parent.ts): a measurement as figures, a benchmark run
 * as its score, and a `measureOnly` run through `runImprove` with a stand-in executor that
 * answers the measuring script's result line: one sandbox run with the script, the figures in
 * the summary, no generation. The real script in the real sandbox: tests/e2e/improve.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  ImproveRequest,
  QualityBenchmarks,
  type ExecutionRequest,
  type ExecutionResult,
  type GenerationReport,
} from "@loopsmith/shared/contracts";
import { METRICS_MARKER, MEASURE_SCRIPT_PATH } from "./measure-python.js";
import { metricFigures, type Measurement } from "./metrics.js";
import { benchFigure, measureParent, parentLines } from "./parent.js";
import { runImprove, type ImproveContext, type ImproveDeps } from "./run.js";
import { initialImproveState, type ImproveState } from "./state.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function result(stdout: string, over: Partial<ExecutionResult> = {}): ExecutionResult {
  return { status: "passed", exitCode: 0, durationMs: 5, stdout, stderr: "", truncated: false, tests: [], ...over };
}

const measured: Measurement = {
  tests: { status: "ok", tool: "pytest 8.3.5", value: 75, cases: { a: true, b: true, c: true, d: false } },
  lint: { status: "ok", tool: "pyflakes 3.2.0", value: 2, cases: { "x.py:unused#1": false, "y.py:unused#1": false } },
  complexity: { status: "ok", tool: "radon 6.0.1", value: 1.5 },
  type_errors: { status: "unavailable", tool: "mypy 1.15.0", reason: "the type check passed its time limit of 0.1s" },
};

describe("metricFigures", () => {
  it("gives each enabled metric its value, tool and cases in report order, and the unavailable ones their reason", () => {
    const b = QualityBenchmarks.parse({ enabled: ["complexity", "lint", "tests", "type_errors", "security"] });
    const figures = metricFigures(measured, b);
    expect(figures.map((f) => f.metric)).toEqual(["tests", "lint", "type_errors", "complexity", "security"]);
    expect(figures[0]).toEqual({
      metric: "tests",
      status: "measured",
      value: 75,
      unit: "%",
      direction: "higher",
      tool: "pytest 8.3.5",
      cases: 4,
      passing: 3,
    });
    // Findings: every case is one, so there is no passing count.
    expect(figures[1]).toMatchObject({ metric: "lint", value: 2, cases: 2, direction: "lower" });
    expect(figures[1]).not.toHaveProperty("passing");
    // A value with no cases.
    expect(figures[3]).toMatchObject({ metric: "complexity", value: 1.5, unit: "mean CC" });
    expect(figures[3]).not.toHaveProperty("cases");
    expect(figures[2]).toMatchObject({ status: "unavailable", tool: "mypy 1.15.0", reason: /time limit/ });
    expect(figures[2]).not.toHaveProperty("value");
    // A metric the measurement lacks is unavailable, never a 0.
    expect(figures[4]).toMatchObject({
      status: "unavailable",
      reason: "the measuring script reported no security result",
    });
    expect(parentLines({ tree: "a".repeat(40), language: "python", metrics: figures, ms: 1 })).toEqual([
      "tests 75 % (3 of 4; pytest 8.3.5)",
      "lint 2 findings (pyflakes 3.2.0)",
      "type_errors unavailable: the type check passed its time limit of 0.1s",
      "complexity 1.5 mean CC (radon 6.0.1)",
      "security unavailable: the measuring script reported no security result",
    ]);
  });
});

describe("benchFigure", () => {
  it("counts the passing cases and averages the scores of the scored ones; an unreadable run is unavailable with its error", () => {
    const cases = [
      { case: "a", pass: true, score: 1 },
      { case: "b", pass: false, score: 0.5 },
      { case: "c", pass: true },
      { case: "d", pass: false },
    ];
    expect(benchFigure({ ok: true, cases }, "python3 bench.py", "json")).toEqual({
      command: "python3 bench.py",
      format: "json",
      status: "measured",
      cases: 4,
      passed: 2,
      passRate: 50,
      meanScore: 0.75,
      scored: 2,
    });
    const bad = benchFigure(
      { ok: false, status: "timeout", error: "the benchmark run ended with timeout" },
      "b",
      "json",
    );
    expect(bad).toMatchObject({
      status: "unavailable",
      cases: 0,
      passed: 0,
      reason: "the benchmark run ended with timeout",
    });
    expect(bad).not.toHaveProperty("passRate");
  });
});

/** A run's request on a tree with one Python file, measuring `enabled`. */
function request(settings: Record<string, unknown>, measureOnly: boolean): ImproveRequest {
  return ImproveRequest.parse({
    v: 1,
    runId: "measure-1",
    repo: { baseCommit: "b".repeat(40), snapshot: "snap-b", setupCommand: "" },
    language: "python",
    settings,
    measureOnly,
    submittedAt: new Date().toISOString(),
  });
}

/** The run's I/O: a tree on disk, an executor that answers `answer`, an in-memory store; events and calls kept. */
function harness(answer: (req: ExecutionRequest) => ExecutionResult) {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-parent-"));
  dirs.push(root);
  writeFileSync(join(root, "m.py"), "def f():\n    return 1\n");
  const calls: ExecutionRequest[] = [];
  const events: Array<{ kind: string; message: string; data?: Record<string, unknown> }> = [];
  const log = { info() {}, warn() {}, error() {}, debug() {}, child: () => log } as unknown as ImproveContext["log"];
  const io: ImproveDeps = {
    execute: async (req) => {
      calls.push(req);
      return answer(req);
    },
    tree: async () => root,
    store: {
      reports: async (): Promise<GenerationReport[]> => [],
    } as unknown as ImproveDeps["store"],
    // A measuring run asks no model and starts no task: these fail the test if reached.
    provider: {
      complete: () => Promise.reject(new Error("the model was called")),
    } as unknown as ImproveDeps["provider"],
    nc: {} as ImproveDeps["nc"],
    gate: () => Promise.reject(new Error("the gate was called")),
    cancelTask: () => Promise.reject(new Error("a task was cancelled")),
  };
  const checkpoints: ImproveState[] = [];
  const ctx: ImproveContext = {
    checkpoint: async (s) => void checkpoints.push(s),
    emit: async (e) => void events.push({ kind: e.kind, message: e.message, ...(e.data ? { data: e.data } : {}) }),
    heartbeat: () => undefined,
    cancelled: () => false,
    stopping: () => false,
    log,
  };
  return { io, ctx, calls, events, checkpoints };
}

describe("a measureOnly run", () => {
  it("measures the base parent once with the measuring script and ends with its figures, no generation", async () => {
    const line = `${METRICS_MARKER}${JSON.stringify({
      metrics: {
        tests: { status: "ok", tool: "pytest 8.3.5", value: 100, cases: { "t::a": true, "t::b": true } },
        coverage: { status: "unavailable", tool: "coverage 7.6.0", reason: "coverage json failed: boom" },
      },
    })}`;
    const { io, ctx, calls, events, checkpoints } = harness(() => result(`noise\n${line}\n`));
    const state: ImproveState = initialImproveState(
      request({ benchmarks: { enabled: ["tests", "coverage"], timeouts: { tests: 30 } } }, true),
    );
    const final = await runImprove(state, io, ctx);
    // The parent's figures are checkpointed before the run ends, and the final state before its result.
    expect(checkpoints.map((c) => [c.status, c.parentMeasure !== undefined])).toEqual([
      ["running", true],
      ["final", true],
    ]);

    expect(calls).toHaveLength(1);
    const [call] = calls as [ExecutionRequest];
    expect(call.files.map((f) => f.path)).toEqual([MEASURE_SCRIPT_PATH]);
    expect(call.shell).toMatch(/^python3 \.loopsmith-measure\.py '\{"enabled":\["tests","coverage"\]/);
    expect(call.base).toMatchObject({ commit: "b".repeat(40), snapshot: "snap-b", setupCommand: "" });
    expect(call.idempotencyKey).toBe("measure-1-gen-0/0/measure_metrics");
    expect(final.summary).toMatchObject({ stopReason: "completed", generations: 0, accepted: [] });
    expect(final.summary?.parent).toMatchObject({
      tree: "b".repeat(40),
      language: "python",
      metrics: [
        { metric: "tests", status: "measured", value: 100, cases: 2, passing: 2, tool: "pytest 8.3.5" },
        { metric: "coverage", status: "unavailable", reason: "coverage json failed: boom" },
      ],
    });
    expect(final.summary?.parent?.bench).toBeUndefined();
    const measuredEvent = events.find((e) => e.data?.parent !== undefined);
    expect(measuredEvent?.message).toBe(
      `the parent ${"b".repeat(12)}: tests 100 % (2 of 2; pytest 8.3.5); coverage unavailable: coverage json failed: boom`,
    );
    expect(events.filter((e) => e.kind === "generation")).toHaveLength(0);
    expect(events.at(-1)?.kind).toBe("result");
  });

  it("with a benchmark, runs it once on the parent instead; with a check, the check too", async () => {
    const bench = ['{"case": "a", "pass": true}', '{"case": "b", "pass": false}', "done"].join("\n");
    const { io, calls } = harness((req) =>
      req.shell === "pytest -q"
        ? result("", { summary: { total: 3, passed: 2, failed: 1, error: 0, skipped: 0 } })
        : result(bench),
    );
    const state = initialImproveState(request({ bench: "python3 b.py", check: "pytest -q" }, true));
    const m = await measureParent(state, io);
    expect(calls.map((c) => c.shell)).toEqual(["python3 b.py", "pytest -q"]);
    expect(calls.map((c) => c.idempotencyKey)).toEqual([
      "measure-1-gen-0/0/measure_bench",
      "measure-1-gen-0/0/check_parent",
    ]);
    expect(m.metrics).toBeUndefined();
    expect(m.bench).toMatchObject({ status: "measured", cases: 2, passed: 1, passRate: 50 });
    expect(m.check).toEqual({
      command: "pytest -q",
      counts: { status: "passed", total: 3, passed: 2, failed: 1, skipped: 0 },
    });
    expect(parentLines(m)).toEqual([
      "benchmark: 1 of 2 case(s) pass (50 %)",
      "check `pytest -q`: passed, 2 of 3 test(s) passed",
    ]);
  });

  it("a run that is not measureOnly measures the check only through its generations", async () => {
    const { io, calls } = harness(() => result('{"case": "a", "pass": true}'));
    const m = await measureParent(
      initialImproveState(request({ bench: "python3 b.py", check: "pytest -q", dryRun: true }, false)),
      io,
    );
    expect(calls.map((c) => c.shell)).toEqual(["python3 b.py"]);
    expect(m.check).toBeUndefined();
  });
});
