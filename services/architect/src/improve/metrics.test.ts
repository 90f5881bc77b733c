import { describe, expect, it } from "vitest";
import { QualityBenchmarks, type ExecutionResult } from "@loopsmith/shared/contracts";
import {
  changedToolConfig,
  measureCommand,
  readMeasurement,
  type Measurement,
  type MeasuredMetric,
} from "./metrics.js";
import { judgeMetrics, signTestP } from "./metrics-judge.js";
import { METRICS_MARKER } from "./measure-python.js";

const ALL = QualityBenchmarks.parse({});
const only = (...enabled: string[]) => QualityBenchmarks.parse({ enabled });

/** An `ok` metric from its cases (a finding: false) and a value. */
function ok(cases: Record<string, boolean>, value?: number, tool = "tool 1.0"): MeasuredMetric {
  const v = Object.values(cases);
  return { status: "ok", tool, value: value ?? (v.length ? (100 * v.filter(Boolean).length) / v.length : 0), cases };
}
const findings = (...keys: string[]): MeasuredMetric =>
  ok(Object.fromEntries(keys.map((k) => [`${k}#1`, false])), keys.length);
const tests = (pass: Record<string, boolean>): MeasuredMetric => ok(pass);

describe("judgeMetrics", () => {
  const opts = { alpha: 0.05, language: "python" as const };

  it("accepts a fixed lint finding that breaks nothing: a static analyser's difference is exact", () => {
    const parent: Measurement = {
      lint: findings("a.py:'os' imported but unused", "b.py:undefined name 'x'"),
      tests: tests({ t1: true, t2: true }),
    };
    const candidate: Measurement = { lint: findings("b.py:undefined name 'x'"), tests: tests({ t1: true, t2: true }) };
    const d = judgeMetrics([parent], [candidate], { ...opts, benchmarks: only("lint", "tests") });
    expect(d.verdict).toBe("accepted");
    expect(d.report.improved).toEqual(["lint"]);
    const lint = d.report.metrics.find((m) => m.metric === "lint");
    expect(lint).toMatchObject({
      test: "deterministic",
      fixed: 1,
      broken: 0,
      delta: -1,
      improved: true,
      regressed: false,
    });
    expect(lint?.tool).toEqual({ parent: "tool 1.0", candidate: "tool 1.0" });
    expect(d.report.weightedImprovement).toBeGreaterThan(0);
  });

  it("rejects `metric_regressed` a candidate that hides a type error behind `# type: ignore`", () => {
    const parent: Measurement = { type_errors: findings("core.py:Incompatible return value type") };
    const candidate: Measurement = {
      type_errors: findings("core.py:suppressed by type: ignore:return x  # type: ignore"),
    };
    const d = judgeMetrics([parent], [candidate], { ...opts, benchmarks: only("type_errors") });
    expect(d.reason).toBe("metric_regressed");
    expect(d.report.regressed).toEqual(["type_errors"]);
    expect(d.message).toMatch(/^Regressed beyond tolerance: type_errors: .*fixed 1, broke 1/);
  });

  it("rejects a change of the type checker's configuration, whatever the errors say", () => {
    const parent: Measurement = { type_errors: findings("core.py:Function is missing a type annotation") };
    const candidate: Measurement = { type_errors: findings() };
    const d = judgeMetrics([parent], [candidate], {
      ...opts,
      benchmarks: only("type_errors"),
      configChanged: [{ metric: "type_errors", file: "mypy.ini" }],
    });
    expect(d.reason).toBe("metric_regressed");
    expect(d.report.regressed).toEqual(["type_errors"]);
    expect(d.message).toContain("changed type_errors's configuration (mypy.ini)");
  });

  it("does not count deleted uncovered lines as coverage, and names the test a deleted branch broke", () => {
    const parent: Measurement = {
      coverage: ok({ "cli.py:if x < 0:#1": true, 'cli.py:word = "negative"#1': false, "cli.py:return word#1": false }),
      tests: tests({ test_cli: true, test_core: true }),
    };
    const candidate: Measurement = {
      coverage: ok({ "cli.py:if x == 0:#1": true }),
      tests: tests({ test_cli: false, test_core: true }),
    };
    const d = judgeMetrics([parent], [candidate], { ...opts, benchmarks: only("coverage", "tests") });
    expect(d.reason).toBe("metric_regressed");
    expect(d.report.regressed).toEqual(["tests"]);
    const cov = d.report.metrics.find((m) => m.metric === "coverage");
    expect(cov?.delta).toBeGreaterThan(0); // the percentage rose…
    expect(cov).toMatchObject({ fixed: 0, broken: 0, improved: false }); // …and no line was newly covered
    expect(d.report.metrics.find((m) => m.metric === "tests")?.brokenCases).toEqual(["test_cli"]);
  });

  it("tests the cases of a run of the code with the sign test at α_j split over the weighted metrics", () => {
    const pass = (n: number, fixed: number) =>
      tests(Object.fromEntries(Array.from({ length: n }, (_, i) => [`t${i}`, i < fixed])));
    const parent: Measurement = { tests: pass(12, 0), lint: findings() };
    // 6 fixed of 12: one-sided p = 1/64 ≈ 0.0156, below 0.05 / 2 = 0.025 but not below 0.01 / 2.
    const candidate: Measurement = { tests: pass(12, 6), lint: findings() };
    const at = (alpha: number) =>
      judgeMetrics([parent], [candidate], { ...opts, alpha, benchmarks: only("tests", "lint") });
    const t = at(0.05).report.metrics.find((m) => m.metric === "tests");
    expect(t).toMatchObject({ test: "sign_exact", fixed: 6, broken: 0, alpha: 0.025, improved: true });
    expect(t?.pValue).toBeCloseTo(1 / 64, 10);
    expect(at(0.05).verdict).toBe("accepted");
    expect(at(0.01).reason).toBe("no_improvement");
  });

  it("treats a case that fails in any repeat as failing, and a static analyser whose repeats disagree as noisy", () => {
    const parent = [{ lint: findings("a.py:x") }, { lint: findings() }];
    const candidate = [{ lint: findings() }, { lint: findings() }];
    const d = judgeMetrics(parent, candidate, { ...opts, benchmarks: only("lint") });
    expect(d.report.metrics[0]).toMatchObject({ test: "sign_exact", fixed: 1, broken: 0, improved: false });
    expect(d.reason).toBe("no_improvement");
  });

  it("leaves an unavailable metric out with its reason, never as 0", () => {
    const parent: Measurement = {
      lint: findings("a.py:x"),
      type_errors: { status: "unavailable", reason: "mypy is not installed in the sandbox" },
    };
    const candidate: Measurement = { lint: findings(), type_errors: findings() };
    const d = judgeMetrics([parent], [candidate], { ...opts, benchmarks: only("lint", "type_errors") });
    expect(d.verdict).toBe("accepted");
    const te = d.report.metrics.find((m) => m.metric === "type_errors");
    expect(te).toMatchObject({ status: "unavailable", reason: "parent: mypy is not installed in the sandbox" });
    expect(te?.parentValues).toEqual([]);
    expect(te?.delta).toBeUndefined();
    expect(d.message).toContain("Unavailable: type_errors.");
  });

  it("rejects complexity beyond its tolerance, and ignores an improvement of a metric weighted 0", () => {
    const worse = judgeMetrics([{ complexity: ok({}, 2) }], [{ complexity: ok({}, 2.6) }], {
      ...opts,
      benchmarks: only("complexity"),
    });
    expect(worse.reason).toBe("metric_regressed");
    const within = judgeMetrics([{ complexity: ok({}, 2) }], [{ complexity: ok({}, 2.4) }], {
      ...opts,
      benchmarks: only("complexity"),
    });
    expect(within.reason).toBe("no_improvement");
    const unweighted = judgeMetrics([{ lint: findings("a.py:x") }], [{ lint: findings() }], {
      ...opts,
      benchmarks: QualityBenchmarks.parse({ enabled: ["lint"], weights: { lint: 0 } }),
    });
    expect(unweighted.reason).toBe("no_improvement");
  });

  it("rejects a new failing test beyond the tolerance and accepts it within", () => {
    const parent: Measurement = { tests: tests({ a: true }), lint: findings("x.py:y") };
    const candidate: Measurement = { tests: tests({ a: true, b: false }), lint: findings() };
    const strict = judgeMetrics([parent], [candidate], { ...opts, benchmarks: only("tests", "lint") });
    expect(strict.report.regressed).toEqual(["tests"]);
    const lenient = (weights: Record<string, number>) =>
      judgeMetrics([parent], [candidate], {
        ...opts,
        benchmarks: QualityBenchmarks.parse({ enabled: ["tests", "lint"], tolerances: { tests: 1 }, weights }),
      });
    // tests (weight 2): −1 of 2 cases; lint: +1 of 1 → the weighted improvement is 0, not better.
    expect(lenient({}).report.weightedImprovement).toBe(0);
    expect(lenient({}).reason).toBe("no_improvement");
    expect(lenient({ tests: 1 }).report.weightedImprovement).toBe(0.5);
    expect(lenient({ tests: 1 }).verdict).toBe("accepted");
  });
});

describe("changedToolConfig", () => {
  const enabled = ALL.enabled;
  it("names a changed mypy.ini and the [mypy] section of setup.cfg, not its other sections", () => {
    expect(
      changedToolConfig(
        [
          { path: "mypy.ini", before: "[mypy]\ndisallow_untyped_defs = True\n", after: "[mypy]\n" },
          {
            path: "setup.cfg",
            before: "[metadata]\nname = a\n[mypy]\nstrict = True\n",
            after: "[metadata]\nname = b\n[mypy]\nstrict = True\n",
          },
          { path: "app.py", before: "x = 1\n", after: "x = 2\n" },
        ],
        enabled,
      ),
    ).toEqual([{ metric: "type_errors", file: "mypy.ini" }]);
    expect(
      changedToolConfig(
        [{ path: "pyproject.toml", before: "[tool.mypy]\nstrict = true\n", after: "[tool.mypy]\nstrict = false\n" }],
        enabled,
      ),
    ).toEqual([{ metric: "type_errors", file: "pyproject.toml" }]);
    expect(changedToolConfig([{ path: "tsconfig.json", before: "{}", after: undefined }], ["lint"])).toEqual([]);
  });

  it("names a changed vitest or jest configuration for coverage, and an eslint configuration for lint", () => {
    expect(
      changedToolConfig(
        [
          {
            path: "vitest.config.ts",
            before: "export default {};\n",
            after: 'export default { test: { exclude: ["a"] } };\n',
          },
          { path: "pkg/jest.config.js", before: undefined, after: "module.exports = {};\n" },
          { path: "eslint.config.mjs", before: "export default [];\n", after: "export default [{}];\n" },
          { path: "vite.config.ts", before: "a", after: "b" },
        ],
        enabled,
      ),
    ).toEqual([
      { metric: "coverage", file: "vitest.config.ts" },
      { metric: "coverage", file: "pkg/jest.config.js" },
      { metric: "lint", file: "eslint.config.mjs" },
    ]);
  });
});

describe("measureCommand and readMeasurement", () => {
  const result = (stdout: string, status: ExecutionResult["status"] = "passed"): ExecutionResult => ({
    status,
    exitCode: 0,
    durationMs: 1,
    stdout,
    stderr: "",
    truncated: false,
    tests: [],
  });

  it("sends the script with its settings, quoted for sh", () => {
    const c = measureCommand("python", QualityBenchmarks.parse({ enabled: ["lint"], timeouts: { lint: 7 } }));
    expect(c.shell).toBe(`python3 .loopsmith-measure.py '{"enabled":["lint"],"timeouts":{"lint":7}}'`);
    expect(c.file.path).toBe(".loopsmith-measure.py");
    expect(c.timeoutMs).toBe(37_000);
    expect(measureCommand("typescript", ALL).shell).toMatch(/^node \.loopsmith-measure\.cjs '/);
  });

  it("reads the result line, and makes every metric unavailable when the run ended without it", () => {
    const line = `${METRICS_MARKER}${JSON.stringify({ metrics: { lint: { status: "ok", tool: "pyflakes 3.2.0", value: 0, cases: {} } } })}`;
    expect(readMeasurement(result(`noise\n${line}\n`), ["lint", "tests"])).toEqual({
      lint: { status: "ok", tool: "pyflakes 3.2.0", value: 0, cases: {} },
      tests: { status: "unavailable", reason: "the measuring script reported no tests result" },
    });
    const timedOut = readMeasurement({ ...result("", "timeout"), reason: "600 s" }, ["lint"]);
    expect(timedOut.lint).toEqual({
      status: "unavailable",
      reason: "the measuring run ended timeout (600 s) without its result",
    });
  });
});

describe("signTestP", () => {
  it("is the one-sided binomial tail", () => {
    expect(signTestP(0, 0)).toBe(1);
    expect(signTestP(5, 0)).toBeCloseTo(1 / 32, 12);
    expect(signTestP(1, 1)).toBeCloseTo(0.75, 12);
  });
});
