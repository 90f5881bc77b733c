import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { emptyUsage, type TaskResult } from "@loopsmith/shared/contracts";
import { noticeFor, readResults, resultLine } from "./results.js";
import { selectCases } from "./run.js";
import type { BenchCase } from "./types.js";

const kase = (id: string): BenchCase => ({
  id,
  format: "humaneval",
  language: "python",
  goal: "g",
  files: [],
  visibleTests: [{ path: "test_a.py", content: "" }],
  hiddenTests: [{ path: "test_b.py", content: "" }],
  solutionPath: "solution.py",
  solution: "",
  entryPoint: "f",
  line: 1,
});
const cases = ["HumanEval/0", "HumanEval/1", "HumanEval/12", "HumanEval/2"].map(kase);

function result(over: Partial<TaskResult> = {}): TaskResult {
  return {
    v: 1,
    taskId: "bench-r-on-0-1",
    status: "passed",
    stopReason: "passed",
    iterations: 2,
    files: [],
    tests: [],
    lastExecution: null,
    hidden: { status: "passed", passed: 3, total: 3 },
    failureIds: [],
    usage: {
      total: { ...emptyUsage(), inputTokens: 100, outputTokens: 20, costUsd: 0.01 },
      byRole: {},
      byIteration: [],
    },
    scripted: false,
    providers: ["anthropic:claude"],
    durationMs: 10,
    message: "",
    ...over,
  };
}
const base = {
  runId: "r",
  caseId: "HumanEval/0",
  arm: "on" as const,
  wallMs: 1234,
  attempts: 1,
  label: "model" as const,
};

describe("selectCases", () => {
  it("takes ids with or without the prefix, in dataset order, then the limit", () => {
    expect(selectCases(cases, { ids: ["12", "HumanEval/1"] }).map((c) => c.id)).toEqual([
      "HumanEval/1",
      "HumanEval/12",
    ]);
    expect(selectCases(cases, { limit: 2 }).map((c) => c.id)).toEqual(["HumanEval/0", "HumanEval/1"]);
  });
  it("names the ids it cannot find", () => {
    expect(() => selectCases(cases, { ids: ["7", "HumanEval/1"] })).toThrow(/no case 7/);
  });
});

describe("resultLine", () => {
  it("scores on the hidden tests and keeps the visible verdict apart", () => {
    const hiddenFailed = resultLine(result({ hidden: { status: "failed", passed: 1, total: 3 } }), base);
    expect(hiddenFailed).toMatchObject({
      passed: false,
      visiblePassed: true,
      hidden: { passed: 1, total: 3 },
      tokensIn: 100,
      tokensOut: 20,
      costUsd: 0.01,
      provider: "model",
    });
    expect(resultLine(result({ status: "failed", stopReason: "stuck", hidden: null }), base)).toMatchObject({
      passed: false,
      visiblePassed: false,
      hidden: null,
    });
  });
  it("labels a run by who really answered", () => {
    expect(resultLine(result({ scripted: true, providers: ["simulated:simulated:HumanEval/0"] }), base).provider).toBe(
      "simulated",
    );
    expect(resultLine(result({ scripted: true, providers: ["scripted:script:task"] }), base).provider).toBe("scripted");
  });
  it("carries the error of a task that ended in one", () => {
    const line = resultLine(
      result({
        status: "error",
        stopReason: "error",
        hidden: null,
        error: { code: "unavailable", message: "no builder", retryable: true },
      }),
      base,
    );
    expect(line.error).toBe("unavailable: no builder");
  });
});

describe("readResults", () => {
  it("keeps the valid lines of a file a crash may have cut", () => {
    const dir = mkdtempSync(join(tmpdir(), "bench-results-"));
    const good = resultLine(result(), base);
    writeFileSync(
      join(dir, "results.jsonl"),
      `${JSON.stringify(good)}\n{"v":1,"runId":\n${JSON.stringify({ ...good, caseId: "HumanEval/1" })}\n`,
    );
    expect(readResults(join(dir, "results.jsonl")).map((r) => r.caseId)).toEqual(["HumanEval/0", "HumanEval/1"]);
    expect(readResults(join(dir, "none.jsonl"))).toEqual([]);
  });
});

describe("noticeFor", () => {
  it("says no model was called for scripted and simulated runs only", () => {
    expect(noticeFor("simulated")).toMatch(/^SIMULATED RUN: .*no model is called.*never a model/);
    expect(noticeFor("scripted")).toMatch(/^SCRIPTED RUN: .*no model is called/);
    expect(noticeFor("model")).toBeUndefined();
  });
});
