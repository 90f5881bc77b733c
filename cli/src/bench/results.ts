/**
 * The result lines of a bench run (`results.jsonl`), read and made, and what a run prints:
 * its notice when no model answered and its summary for the terminal.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { TaskResult } from "@loopsmith/shared/contracts";
import { BenchResult, type BenchArm, type BenchSummary, type ProviderLabel } from "./types.js";
import { machineText } from "./report.js";
import { memoryText } from "./memory-use.js";

/** The sentence every output of a run without a model carries. */
export function noticeFor(label: ProviderLabel): string | undefined {
  if (label === "simulated") {
    return "SIMULATED RUN: answers come from the dataset's reference solutions and their mutants; no model is called. It measures the harness and whether memory routes the right fix into the prompt, never a model.";
  }
  if (label === "scripted")
    return "SCRIPTED RUN: replies are replayed from scripts made of the dataset's reference solutions; no model is called.";
  return undefined;
}

/** Reads the result lines of a run folder; lines that are not results are left out. */
export function readResults(path: string): BenchResult[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .flatMap((l) => {
      try {
        const parsed = BenchResult.safeParse(JSON.parse(l));
        return parsed.success ? [parsed.data] : [];
      } catch {
        return [];
      }
    });
}

/** One result line from a task's result. */
export function resultLine(
  r: TaskResult,
  o: { runId: string; caseId: string; arm: BenchArm; wallMs: number; attempts: number; label: ProviderLabel },
): BenchResult {
  const label: ProviderLabel = r.scripted
    ? r.providers.some((p) => p.startsWith("simulated:"))
      ? "simulated"
      : "scripted"
    : r.providers.length
      ? "model"
      : o.label;
  return {
    v: 1,
    runId: o.runId,
    caseId: o.caseId,
    arm: o.arm,
    taskId: r.taskId,
    status: r.status,
    stopReason: r.stopReason,
    passed: r.hidden?.status === "passed",
    visiblePassed: r.status === "passed",
    hidden: r.hidden ? { passed: r.hidden.passed, total: r.hidden.total } : null,
    iterations: r.iterations,
    tokensIn: r.usage.total.inputTokens,
    tokensOut: r.usage.total.outputTokens,
    costUsd: r.usage.total.costUsd,
    wallMs: o.wallMs,
    provider: label,
    attempts: o.attempts,
    ...(r.error ? { error: `${r.error.code}: ${r.error.message}`, errorCode: r.error.code } : {}),
    finishedAt: new Date().toISOString(),
  };
}

/** A result line for a task that gave no result (timeout, lost stack). */
export function errorLine(o: {
  runId: string;
  caseId: string;
  arm: BenchArm;
  taskId: string;
  wallMs: number;
  attempts: number;
  label: ProviderLabel;
  message: string;
  /** The error's code (`task_timeout` when no result came in time). */
  code: string;
}): BenchResult {
  return {
    v: 1,
    runId: o.runId,
    caseId: o.caseId,
    arm: o.arm,
    taskId: o.taskId,
    status: "error",
    stopReason: "error",
    passed: false,
    visiblePassed: false,
    hidden: null,
    iterations: 0,
    tokensIn: 0,
    tokensOut: 0,
    costUsd: 0,
    wallMs: o.wallMs,
    provider: o.label,
    attempts: o.attempts,
    error: o.message,
    errorCode: o.code,
    finishedAt: new Date().toISOString(),
  };
}

/** The summary in a few lines for the terminal. */
export function summaryText(s: BenchSummary, out: string): string {
  const lines: string[] = [];
  if (s.notice) lines.push(s.notice);
  for (const arm of ["off", "on"] as const) {
    const a = s.arms[arm];
    if (!a) continue;
    lines.push(
      `memory ${arm}: pass@1 ${a.passAt1.toFixed(3)} (${a.passed}/${a.tasks}), iterations mean ${a.meanIterations.toFixed(2)} p90 ${a.p90Iterations}, ` +
        `tokens/task ${Math.round(a.tokensInPerTask)} in ${Math.round(a.tokensOutPerTask)} out, $${a.usdPerTask.toFixed(4)}/task, ${a.errors} errors; not passed: ${a.agentFailures} agent, ${a.infraErrors} infrastructure`,
    );
  }
  lines.push(...memoryText(s));
  if (s.paired) {
    const p = s.paired;
    lines.push(
      `paired (on - off, ${p.pairs} cases): pass ${p.passDiff >= 0 ? "+" : ""}${p.passDiff.toFixed(3)} (only on ${p.onlyOn}, only off ${p.onlyOff}, McNemar p ${p.mcnemarP.toPrecision(3)}), ` +
        `iterations ${p.meanIterationsDiff >= 0 ? "+" : ""}${p.meanIterationsDiff.toFixed(2)}${p.iterationsP === null ? "" : ` (Wilcoxon p ${p.iterationsP.toPrecision(3)})`}, tokens ${p.meanTokensDiff >= 0 ? "+" : ""}${Math.round(p.meanTokensDiff)}`,
    );
  }
  lines.push(
    `${s.tasksPerMin.toFixed(1)} tasks/min over ${(s.wallMs / 1000).toFixed(1)} s (concurrency ${s.concurrency})`,
  );
  if (s.machine) lines.push(machineText(s.machine));
  if (s.skippedLines.length) lines.push(`${s.skippedLines.length} dataset line(s) skipped (see report.md)`);
  lines.push(
    `wrote ${["results.jsonl", "summary.json", "report.md", "report.html"].map((f) => join(out, f)).join(", ")}`,
  );
  return lines.join("\n");
}
