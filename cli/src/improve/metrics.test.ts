/**
 * `loopsmith metrics` without a stack: its flags as commander parses them and the combinations
 * it refuses, `--metrics` over the configured list, the tool/version split, and the table and
 * JSON object made from a measurement. The measuring itself, in the real sandbox:
 * tests/e2e/improve.test.ts.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { LoopsmithError, loadConfig } from "@loopsmith/shared/runtime";
import { ParentMeasure } from "@loopsmith/shared/contracts";
import { checkMetricsFlags, registerImprove } from "../commands/improve.js";
import { CliError } from "../errors.js";
import { completionTree } from "../completion.js";
import { metricsJson, metricsTable, splitTool, type MetricsFlags } from "./metrics.js";
import { improveSettings, metricList } from "./settings.js";

const measure: ParentMeasure = ParentMeasure.parse({
  tree: "a".repeat(40),
  language: "python",
  metrics: [
    {
      metric: "tests",
      status: "measured",
      value: 75,
      unit: "%",
      direction: "higher",
      tool: "pytest 8.3.5",
      cases: 4,
      passing: 3,
    },
    {
      metric: "lint",
      status: "measured",
      value: 2,
      unit: "findings",
      direction: "lower",
      tool: "pyflakes 3.2.0",
      cases: 2,
    },
    {
      metric: "complexity",
      status: "measured",
      value: 1.3333333,
      unit: "mean CC",
      direction: "lower",
      tool: "radon 6.0.1",
    },
    {
      metric: "type_errors",
      status: "unavailable",
      unit: "errors",
      direction: "lower",
      tool: "mypy 1.15.0",
      reason: "mypy failed (exit code 2): no module",
    },
    {
      metric: "doc_coverage",
      status: "measured",
      value: 50,
      unit: "%",
      direction: "higher",
      tool: "ast (python 3.13)",
      cases: 2,
      passing: 1,
    },
  ],
  ms: 4_200,
});

/** The program as main.ts registers improve's commands; the action runner records what it was given. */
function program() {
  const seen: Array<{ json: boolean | undefined; error?: unknown }> = [];
  const p = new Command().exitOverride();
  registerImprove(
    p,
    async (json, action) => {
      try {
        await action();
        seen.push({ json });
      } catch (error) {
        seen.push({ json, error });
      }
    },
    async () => {
      throw new Error("no logger in this test");
    },
  );
  return { p, seen };
}

describe("loopsmith metrics: flags", () => {
  it("parses improve's measuring flags", async () => {
    const { p } = program();
    const argv = ["--repo", "/r", "--base", "v1", "--metrics", "tests,lint", "--check", "pytest -q"];
    // The action runs too, and stops at the logger this test has not: nothing is measured.
    await p.parseAsync(["node", "loopsmith", "metrics", ...argv, "--setup-cmd", "", "--config", "c.json", "--json"]);
    const opts = p.commands.find((c) => c.name() === "metrics")?.opts() as MetricsFlags;
    expect(opts).toMatchObject({
      repo: "/r",
      base: "v1",
      metrics: "tests,lint",
      check: "pytest -q",
      setupCmd: "",
      config: "c.json",
      json: true,
    });
  });

  it("refuses --bench-format or --bench-junit without --bench, and --metrics with --bench, before anything runs", async () => {
    expect(() => checkMetricsFlags({ benchFormat: "junit" })).toThrow(/--bench-format needs --bench/);
    expect(() => checkMetricsFlags({ benchJunit: "out.xml" })).toThrow(/--bench-junit needs --bench/);
    expect(() => checkMetricsFlags({ bench: "b", metrics: "tests" })).toThrow(/exclude each other/);
    expect(() => checkMetricsFlags({ bench: "b", benchFormat: "junit", benchJunit: "o.xml" })).not.toThrow();
    const { p, seen } = program();
    await p.parseAsync(["node", "loopsmith", "metrics", "--bench-format", "json", "--json"]);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.json).toBe(true);
    expect(seen[0]?.error).toBeInstanceOf(CliError);
    expect((seen[0]?.error as CliError).code).toBe("bad_request");
    // improve refuses the same pair.
    await p.parseAsync(["node", "loopsmith", "improve", "--bench", "b", "--metrics", "lint"]);
    expect((seen[1]?.error as CliError).message).toMatch(/--metrics and --bench exclude each other/);
  });

  it("is offered by shell completion, with its flags", () => {
    const tree = completionTree(program().p);
    expect(tree[0]?.subcommands.map((s) => s.name)).toContain("metrics");
    expect(tree.find((n) => n.path === "/metrics")?.options.map((o) => o.flag)).toEqual(
      expect.arrayContaining(["--repo", "--metrics", "--check", "--bench", "--setup-cmd", "--json"]),
    );
  });
});

describe("--metrics", () => {
  it("takes names separated by commas or blanks, in report order, each once", () => {
    expect(metricList("lint, tests tests,coverage")).toEqual(["tests", "coverage", "lint"]);
  });

  it("refuses an unknown name or an empty list as bad input, naming the metrics", () => {
    const err = (() => {
      try {
        metricList("tests,speed,size");
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(LoopsmithError);
    expect((err as LoopsmithError).code).toBe("bad_request");
    expect((err as LoopsmithError).message).toMatch(
      /"speed", "size" are not metrics; the metrics are tests, coverage, lint/,
    );
    expect(() => metricList(" , ")).toThrow(/names no metric/);
  });

  it("replaces the configured list and keeps the configured timeouts", () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-metrics-flags-"));
    const file = join(dir, "config.json");
    writeFileSync(
      file,
      JSON.stringify({ improve: { benchmarks: { enabled: ["security"], timeouts: { tests: 30 } } } }),
    );
    const config = loadConfig({ file, env: {} });
    expect(improveSettings({}, config, undefined).benchmarks.enabled).toEqual(["security"]);
    const b = improveSettings({ metrics: "coverage,tests" }, config, undefined).benchmarks;
    expect(b.enabled).toEqual(["tests", "coverage"]);
    expect(b.timeouts).toEqual({ tests: 30 });
  });
});

describe("loopsmith metrics: output", () => {
  it("splits a tool from its version", () => {
    expect(splitTool("pytest 8.3.5")).toEqual({ tool: "pytest", version: "8.3.5" });
    expect(splitTool("ast (python 3.13)")).toEqual({ tool: "ast", version: "python 3.13" });
    expect(splitTool("TSDoc scan (node 22.3.0)")).toEqual({ tool: "TSDoc scan", version: "node 22.3.0" });
    expect(splitTool("eslint v9.1.0")).toEqual({ tool: "eslint", version: "9.1.0" });
    expect(splitTool("mytool")).toEqual({ tool: "mytool" });
    expect(splitTool(undefined)).toEqual({});
  });

  it("prints a row per metric: value and unit, cases, tool, version, and unavailable with its reason", () => {
    const table = metricsTable(measure, "title line").split("\n");
    expect(table[0]).toBe("title line");
    expect(table[1]?.split(/\s{2,}/)).toEqual(["METRIC", "VALUE", "CASES", "TOOL", "VERSION", "NOTE"]);
    const cells = table.slice(2).map((l) => l.split(/\s{2,}/));
    expect(cells).toEqual([
      ["tests", "75 %", "3/4", "pytest", "8.3.5", "higher is better"],
      ["lint", "2 findings", "2", "pyflakes", "3.2.0", "lower is better"],
      ["complexity", "1.333 mean CC", "-", "radon", "6.0.1", "lower is better"],
      ["type_errors", "unavailable", "-", "mypy", "1.15.0", "mypy failed (exit code 2): no module"],
      ["doc_coverage", "50 %", "1/2", "ast", "python 3.13", "higher is better"],
    ]);
    // The columns line up: each VALUE starts where the header's does.
    const at = table[1]?.indexOf("VALUE");
    for (const l of table.slice(2)) expect(l.slice(at).startsWith(" ")).toBe(false);
  });

  it("prints the benchmark and the check as rows of their own", () => {
    const table = metricsTable(
      ParentMeasure.parse({
        tree: "a".repeat(40),
        language: "python",
        bench: { command: "python3 b.py", format: "json", status: "measured", cases: 40, passed: 20, passRate: 50 },
        check: { command: "pytest -q", counts: { status: "failed", total: 4, passed: 3, failed: 1, skipped: 0 } },
        ms: 10,
      }),
      "t",
    );
    expect(
      table
        .split("\n")
        .slice(2)
        .map((l) => l.split(/\s{2,}/)),
    ).toEqual([
      ["benchmark", "50 %", "20/40", "python3 b.py", "-", "cases passing"],
      ["check", "failed", "3/4", "pytest -q", "-", "1 failed, 0 skipped"],
    ]);
  });

  it("--json: one object with each figure by metric name, the tool and its version apart", () => {
    const json = metricsJson(measure, { name: "repo", commit: "c".repeat(40) }, "metrics-1");
    expect(json).toMatchObject({
      kind: "metrics",
      repo: "repo",
      commit: "c".repeat(40),
      language: "python",
      ms: 4_200,
    });
    const metrics = json.metrics as Record<string, Record<string, unknown>>;
    expect(Object.keys(metrics)).toEqual(["tests", "lint", "complexity", "type_errors", "doc_coverage"]);
    expect(metrics.tests).toEqual({
      status: "measured",
      value: 75,
      unit: "%",
      direction: "higher",
      cases: 4,
      passing: 3,
      tool: "pytest",
      version: "8.3.5",
    });
    expect(metrics.type_errors).toMatchObject({ status: "unavailable", reason: /mypy failed/, tool: "mypy" });
    expect(json).not.toHaveProperty("bench");
    expect(JSON.parse(JSON.stringify(json))).toEqual(json);
  });
});
