import { describe, expect, it } from "vitest";
import type { BenchArm } from "../types.js";
import { summarize } from "../summary.js";
import type { Grade, SweInstance } from "@loopsmith/evals";
import { gradeLine } from "./record.js";
import { noticeOf, sweSummaryText } from "./run.js";

const inst = (n: number): SweInstance => ({
  instance_id: `o__r-${n}`,
  repo: "o/r",
  base_commit: "a".repeat(40),
  problem_statement: "it breaks",
  hints_text: "",
  patch: "",
  test_patch: "",
  FAIL_TO_PASS: ["t.py::a"],
  PASS_TO_PASS: ["t.py::b"],
  version: "1.0",
  environment_setup_commit: "a".repeat(40),
});
const resolved: Grade = {
  status: "resolved",
  failToPass: { passed: 1, total: 1, failing: [] },
  passToPass: { passed: 1, total: 1, failing: [] },
  testMs: 10,
  log: "",
};

/** The terminal text of a scripted agent run over two instances with the given memory. */
function text(memory: "on" | "ab"): string {
  const arms: BenchArm[] = memory === "ab" ? ["off", "on"] : ["on"];
  const results = [1, 2].flatMap((n) =>
    arms.map((arm) =>
      gradeLine(resolved, { runId: "r1", inst: inst(n), arm, taskId: `t-${arm}-${n}`, label: "scripted", wallMs: 5 }),
    ),
  );
  const notice = noticeOf("agent", "scripted");
  const summary = summarize({
    results,
    runId: "r1",
    dataset: "d.jsonl",
    format: "swe-bench",
    provider: { label: "scripted", name: "scripted", model: "script:task" },
    ...(notice ? { notice } : {}),
    memory,
    concurrency: 2,
    startedAt: "2026-01-01T00:00:00.000Z",
    finishedAt: "2026-01-01T00:00:10.000Z",
    skipped: [],
  });
  return sweSummaryText(summary, results, "/out");
}

describe("sweSummaryText", () => {
  it("--memory ab on a scripted run: says it is scripted, one line per arm, and names the files it wrote", () => {
    const t = text("ab");
    expect(t.split("\n")[0]).toMatch(/^SCRIPTED RUN: .*no model is called/);
    expect(t).toContain("memory off: resolved 2/2 (100.0 %)");
    expect(t).toContain("memory on: resolved 2/2 (100.0 %)");
    // Each arm has its own predictions file (recordInstance); there is no predictions.jsonl.
    expect(t).toContain("/out/predictions.off.jsonl, /out/predictions.on.jsonl");
    expect(t).not.toContain("/out/predictions.jsonl");
    for (const f of ["results.jsonl", "summary.json", "report.md", "report.html"]) expect(t).toContain(`/out/${f}`);
  });

  it("one arm: a single predictions.jsonl and no arm label", () => {
    const t = text("on");
    expect(t).toContain("/out/predictions.jsonl");
    expect(t).not.toContain("predictions.on.jsonl");
    expect(t).toMatch(/^resolved 2\/2/m);
  });
});
