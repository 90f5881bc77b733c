import { describe, expect, it } from "vitest";
import type { TaskEvent } from "@loopsmith/shared/contracts";
import type { RecallUse } from "@loopsmith/shared/llm";
import { isRecallEvent, memoryText, resultMemory, summarizeArmMemory } from "./memory-use.js";
import { summaryText } from "./results.js";
import { reportHtml, reportMarkdown } from "./report.js";
import { summarize } from "./summary.js";
import type { BenchArm, BenchResult, ResultMemory } from "./types.js";

function use(kind: "lesson" | "failure", memoryId: string, iteration: number): RecallUse {
  return {
    kind,
    memoryId,
    taskId: "t",
    iteration,
    nextPassed: null,
    taskPassed: null,
    taskIterations: null,
    createdAt: "2026-12-03T08:00:00.000Z",
  };
}

function line(caseId: string, arm: BenchArm, memory?: ResultMemory): BenchResult {
  return {
    v: 1,
    runId: "r1",
    caseId,
    arm,
    taskId: `t-${arm}-${caseId}`,
    status: "passed",
    stopReason: "passed",
    passed: true,
    visiblePassed: true,
    hidden: { passed: 1, total: 1 },
    iterations: 2,
    tokensIn: 0,
    tokensOut: 0,
    costUsd: 0,
    wallMs: 1000,
    provider: "simulated",
    attempts: 1,
    ...(memory ? { memory } : {}),
    finishedAt: "2026-12-03T08:00:00.000Z",
  };
}

const OFF: ResultMemory = { recalls: 0, hits: 0, lessons: [], failures: [] };

describe("a task's memory use", () => {
  it("counts the recalls that showed a memory by iteration, and lists the lessons and failures shown", () => {
    const m = resultMemory(3, [use("lesson", "7", 1), use("failure", "40", 1), use("lesson", "7", 2)]);
    expect(m).toEqual({ recalls: 3, hits: 2, lessons: ["7", "7"], failures: ["40"] });
    expect(resultMemory(0, [])).toEqual(OFF);
  });

  it("reads a recall from the recall phase's steps that carry the failures' ids, not the memory-off step", () => {
    const event = (over: Partial<TaskEvent>) => ({ kind: "step", phase: "recall", ...over }) as TaskEvent;
    expect(isRecallEvent(event({ data: { failureIds: [] } }))).toBe(true);
    expect(isRecallEvent(event({}))).toBe(false);
    expect(isRecallEvent(event({ phase: "remember", data: { failureIds: [] } }))).toBe(false);
    expect(isRecallEvent(event({ kind: "phase", data: { failureIds: [] } }))).toBe(false);
  });
});

describe("memory's use per arm", () => {
  const on = [
    line("a", "on", { recalls: 2, hits: 1, lessons: ["7"], failures: [] }),
    line("b", "on", { recalls: 2, hits: 2, lessons: ["7", "8"], failures: ["40"] }),
    line("c", "on", { recalls: 1, hits: 0, lessons: [], failures: [] }),
  ];
  const utility = new Map<string, number | null>([
    ["lesson:7", 0.3],
    ["lesson:8", null],
    ["failure:40", -0.1],
  ]);

  it("sums recalls and hits, counts lessons shown and distinct, and means the known utilities", () => {
    expect(summarizeArmMemory(on, utility)).toEqual({
      tasks: 3,
      recalls: 5,
      hits: 3,
      hitRate: 0.6,
      lessonsShown: 3,
      distinctLessons: 2,
      lessonsMeasured: 1,
      meanLessonUtility: 0.3,
      failuresShown: 1,
      distinctFailures: 1,
      failuresMeasured: 1,
      meanFailureUtility: -0.1,
    });
    // Without the utility table nothing is measured; lines without memory's use give no summary.
    expect(summarizeArmMemory(on)).toMatchObject({ lessonsMeasured: 0, meanLessonUtility: null });
    expect(summarizeArmMemory([line("a", "on")])).toBeUndefined();
  });

  it("puts a row per arm in summary.json, report.md, report.html and the terminal; the off arm is zero by construction", () => {
    const results = [...on, ...["a", "b", "c"].map((c) => line(c, "off", OFF))];
    const summary = summarize({
      results,
      runId: "r1",
      dataset: "d.jsonl",
      format: "mbpp",
      provider: { label: "simulated", name: "simulated", model: "simulated" },
      memory: "ab",
      concurrency: 1,
      startedAt: "2026-12-03T08:00:00.000Z",
      finishedAt: "2026-12-03T08:01:00.000Z",
      skipped: [],
      utility,
    });
    expect(summary.arms.on?.memory).toMatchObject({ recalls: 5, hits: 3, distinctLessons: 2, meanLessonUtility: 0.3 });
    expect(summary.arms.off?.memory).toMatchObject({ tasks: 3, recalls: 0, hits: 0, hitRate: null, lessonsShown: 0 });
    const md = reportMarkdown(summary, results);
    expect(md).toContain("## Memory use per arm");
    expect(md).toMatch(/^\| off \| 3 \| 0 \| 0 \| 0 \| 0 \| n\/a \(0\) \| 0 \| 0 \| n\/a \(0\) \|$/m);
    expect(md).toMatch(/^\| on \| 3 \| 5 \| 3 \(60\.0%\) \| 3 \| 2 \| \+0\.30 \(1\) \| 1 \| 1 \| -0\.10 \(1\) \|$/m);
    expect(md).toContain("The off arm makes no recall by construction");
    const html = reportHtml(summary, results);
    expect(html).toContain('<h2 id="memory">Memory use per arm</h2>');
    expect(html).toContain("The off arm makes no recall by construction");
    const text = summaryText(summary, "out");
    expect(text).toContain(
      "memory on recalls: 5 (3 showed a memory), lessons shown 3 (2 distinct, mean utility +0.30 (1))",
    );
    expect(text).toContain("memory off recalls: 0 (0 showed a memory)");
    expect(memoryText(summary)).toHaveLength(2);
  });

  it("leaves the section out of a run whose lines do not record memory's use", () => {
    const results = [line("a", "on"), line("a", "off")];
    const summary = summarize({
      results,
      runId: "r1",
      dataset: "d.jsonl",
      format: "mbpp",
      provider: { label: "model", name: "anthropic", model: "m" },
      memory: "ab",
      concurrency: 1,
      startedAt: "2026-12-03T08:00:00.000Z",
      finishedAt: "2026-12-03T08:01:00.000Z",
      skipped: [],
    });
    expect(summary.arms.on?.memory).toBeUndefined();
    expect(reportMarkdown(summary, results)).not.toContain("Memory use per arm");
    expect(reportHtml(summary, results)).not.toContain('id="memory"');
  });
});
