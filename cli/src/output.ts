/**
 * What the CLI prints for people: progress lines, the result of `solve`, history and
 * statistics. Everything that came from a sandbox or a model (messages, test names, file
 * names and contents, goals) goes through {@link printable}; `--json` output is written with
 * `jsonLine` instead and stays lossless.
 */
import type {
  DagProgress,
  ExecutionResult,
  Failures,
  History,
  MemoryStats,
  TaskEvent,
  TaskResult,
} from "@loopsmith/shared/contracts";
import type { MemoryUse, UtilityStats } from "@loopsmith/shared/llm";
import { dagReportLines } from "./dag-view.js";
import { usd } from "./format.js";
import { historyRows } from "./history-rows.js";
import { printable } from "./terminal.js";
import { padCell } from "./ui/index.js";

export { usd };

/** One human line for an event, or null to print nothing. */
export function eventLine(e: TaskEvent): string | null {
  if (e.kind === "result") return null;
  if (e.kind === "phase" || e.kind === "usage") return null;
  const tag = e.iteration > 0 ? `[iteration ${e.iteration}]` : "[start]";
  if (e.kind === "warning") return `${tag} warning: ${printable(e.message)}`;
  return `${tag} ${e.phase ? `${e.phase}: ` : ""}${printable(e.message)}`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/**
 * The human summary of a result. Failure records are named by count with where to look,
 * never by bare id (the ids are in the `--json` result, `failureIds`). A DAG task's (`dag`,
 * the `data.dag` of its result event) shows its subtasks: the totals, then the tree with
 * each subtask's attempts, iterations, tokens, USD and time.
 * @param nowMs - what a subtask still running is measured to
 */
export function resultText(r: TaskResult, dag?: DagProgress, nowMs: number = Date.now()): string {
  const u = r.usage.total;
  const lines = [
    "",
    `${r.status === "passed" ? "PASSED" : r.status.toUpperCase()}: ${printable(r.message)}`,
    `  task ${r.taskId} · ${plural(r.iterations, "iteration")} · stop reason ${r.stopReason} · ${(r.durationMs / 1000).toFixed(1)} s`,
    `  LLM: ${u.calls} calls, ${u.inputTokens} input + ${u.outputTokens} output tokens (${u.cacheReadTokens} cache read), ${usd(u.costUsd)}${r.scripted ? " (scripted replies: no model was called)" : ""}`,
  ];
  const byRole = Object.entries(r.usage.byRole).map(([role, x]) => `${printable(role)} ${usd(x.costUsd)}/${x.calls}`);
  if (byRole.length) lines.push(`  cost by role: ${byRole.join(", ")}`);
  if (r.hidden) lines.push(`  hidden tests: ${r.hidden.passed}/${r.hidden.total} passed`);
  if (r.failureIds.length) {
    lines.push(
      `  ${plural(r.failureIds.length, "failure")} of this task stored in memory, recalled for similar tasks; ` +
        `see ${r.failureIds.length === 1 ? "it" : "them"} with \`loopsmith failures --task ${r.taskId}\``,
    );
  }
  if (dag) lines.push(...dagReportLines(dag, nowMs));
  if (r.error) lines.push(`  error: ${printable(r.error.message)}`);
  if (r.repo) {
    // Repo mode: the change as a patch (whole files of a repository would drown the terminal).
    lines.push(`  change against ${r.repo.baseCommit.slice(0, 12)}: ${printable(r.repo.summary)}`);
    lines.push(`\n${printable(r.repo.patch.trimEnd())}`);
    return lines.join("\n");
  }
  for (const f of r.files) lines.push(`\n--- ${printable(f.path)}\n${printable(f.content.trimEnd())}`);
  return lines.join("\n");
}

/**
 * `loopsmith history` for people: one line per task, newest first, ending in a newline. A DAG
 * task's child tasks on the same page are indented under its row (see `historyRows`).
 */
export function historyText(history: History): string {
  if (history.tasks.length === 0) return "no tasks yet\n";
  return historyRows(history.tasks)
    .map(({ task: t, depth }) => {
      const goal = printable(t.goal.replace(/\s+/g, " ").slice(0, 60));
      // Fixed-width columns (status 9, iterations 2, USD 8), so a child row indented under its parent keeps them.
      return `${"  ".repeat(depth)}${printable(t.finishedAt)}  ${padCell(printable(t.status), 9)} ${padCell(String(t.iterations), 2, "right")} it  ${padCell(usd(t.usage.costUsd), 8, "right")}${t.scripted ? " scripted" : ""}  ${t.taskId}  ${goal}\n`;
    })
    .join("");
}

/** `loopsmith failures` for people: each failure with its signature, failing tests and fix, ending in a newline. */
export function failuresText(f: Failures): string {
  const lessons = (f.lessons ?? []).map((l) => {
    const lines = [
      `${printable(l.createdAt)}  lesson ${l.id} · from task ${l.taskId} · ${l.source === "reflect" ? `reflect role, lesson prompt v${l.promptVersion}` : "from the last reflection"}${l.use.demoted ? " · DEMOTED" : ""}`,
      `  signature: ${printable(l.signature)}`,
      `  rule: ${printable(l.rule)}`,
      `  use: ${useText(l.use)}`,
    ];
    return `${lines.join("\n")}\n`;
  });
  const uses = (f.uses ?? []).map(
    (u) =>
      `  iteration ${u.iteration} recalled ${u.kind} ${u.memoryId}: next iteration ${u.nextPassed === null ? "unknown" : u.nextPassed ? "passed" : "failed"}; task ${u.taskPassed === null ? "not finished" : `${u.taskPassed ? "passed" : "did not pass"} in ${u.taskIterations} iterations`}\n`,
  );
  const utility = f.utility
    ? f.utility.length
      ? [
          "utility (lowest first):\n",
          ...f.utility.map(
            (u) =>
              `  ${u.kind} ${u.id}${u.demoted ? " DEMOTED" : ""}: ${useText(u)} · ${printable(u.label.slice(0, 100))}\n`,
          ),
        ]
      : ["utility: no memory was recalled by a finished task yet\n"]
    : [];
  return [
    failureLines(f),
    // A reply without lessons (a memory service of an older build) says nothing of them.
    f.lessons === undefined ? "" : lessons.length ? lessons.join("") : "no lessons stored\n",
    uses.length ? `what the task's recalls showed it:\n${uses.join("")}` : "",
    utility.join(""),
  ].join("");
}

/** A memory's measured use in one line: tasks, passes, utility and its standard error, and a verdict's reason. */
function useText(u: MemoryUse): string {
  const measured =
    u.recalledIn === 0
      ? "not recalled by a finished task yet"
      : `recalled in ${u.recalledIn} finished tasks, ${u.passedAfter} passed` +
        (u.utility === null
          ? ""
          : `; utility ${u.utility >= 0 ? "+" : ""}${u.utility.toFixed(2)} (s.e. ${(u.stderr ?? 0).toFixed(2)})`);
  return u.reason ? `${measured} (${printable(u.reason)})` : measured;
}

/** The failures part of {@link failuresText}. */
function failureLines(f: Failures): string {
  if (f.failures.length === 0) return "no failures stored\n";
  return f.failures
    .map((x) => {
      const lines = [
        `${printable(x.createdAt)}  task ${x.taskId} · iteration ${x.iteration} · ${printable(x.status)} · failure ${x.id}`,
        `  signature: ${printable(x.signature)}`,
      ];
      if (x.failingTests.length) lines.push(`  failing tests: ${x.failingTests.map(printable).join(", ")}`);
      if (x.reflection) lines.push(`  fix: ${printable(x.reflection.fixPlan.replace(/\s+/g, " ").slice(0, 300))}`);
      return `${lines.join("\n")}\n`;
    })
    .join("");
}

/** A share in [0, 1] as a whole percentage, or `n/a`. */
function pct(share: number | null | undefined): string {
  return share === null || share === undefined ? "n/a" : `${(100 * share).toFixed(0)}%`;
}

/** The recall-use line of `loopsmith stats`: what recalls showed, and the utility distribution. */
function utilityLine(u: UtilityStats): string {
  const q = u.quartiles;
  const f = (x: number) => `${x >= 0 ? "+" : ""}${x.toFixed(2)}`;
  return (
    `memories shown: ${u.shown} (${u.lessonsShown} lessons) to ${u.tasksShown} tasks, next iteration passed after ${pct(u.nextPassRate)}; ` +
    `utility of ${u.measured} measured: ${q ? `min ${f(q[0])}, q1 ${f(q[1])}, median ${f(q[2])}, q3 ${f(q[3])}, max ${f(q[4])}` : "n/a"}; ${u.demoted} demoted`
  );
}

/** `loopsmith stats` for people, ending in a newline. */
export function statsText(stats: MemoryStats): string {
  const w = stats.window;
  const window =
    w.since || w.last
      ? `${w.last ? `last ${w.last} tasks` : "tasks"}${w.since ? ` since ${printable(w.since)}` : ""}`
      : "all tasks";
  const reasons = Object.entries(stats.stopReasons)
    .map(([r, n]) => `${printable(r)} ${n}`)
    .join(", ");
  const r = stats.recall;
  return [
    `window: ${window}`,
    `tasks: ${stats.tasks} (${stats.passed} passed, ${pct(stats.passRate)})${reasons ? `; stop reasons: ${reasons}` : ""}`,
    `iterations: mean ${stats.meanIterations?.toFixed(2) ?? "n/a"}, p90 ${stats.p90Iterations ?? "n/a"}, mean to pass ${stats.meanIterationsToPass?.toFixed(2) ?? "n/a"}`,
    `tokens: ${stats.inputTokens} in, ${stats.outputTokens} out; cost ${usd(stats.totalCostUsd)} (${stats.meanCostUsd === null ? "n/a" : usd(stats.meanCostUsd)} a task)`,
    ...(Object.keys(stats.usageByRole).length
      ? [
          `cost by role: ${Object.entries(stats.usageByRole)
            .map(
              ([role, u]) =>
                `${printable(role)} ${usd(u.costUsd)} (${u.calls} calls, ${u.inputTokens}+${u.outputTokens} tokens)`,
            )
            .join(", ")}`,
        ]
      : []),
    `recall: ${r.recalls} failure recalls, ${r.hits} found the same failure (hit rate ${pct(r.hitRate)}), ${r.withFix} with its fix`,
    ...(stats.utility ? [utilityLine(stats.utility)] : []),
    `memory: ${stats.failures} failures and ${stats.successes} successes remembered (${stats.backend})`,
    "",
  ].join("\n");
}

/** `sandbox run` for people: the command's output, then a summary and one line per test. */
export function resultSummary(r: ExecutionResult): string {
  const lines: string[] = [];
  if (r.stdout) lines.push(printable(r.stdout.trimEnd()));
  if (r.stderr) lines.push(printable(r.stderr.trimEnd()));
  lines.push("");
  lines.push(
    `${r.status.toUpperCase()} · exit code ${r.exitCode ?? "none"} · ${(r.durationMs / 1000).toFixed(2)} s${r.truncated ? " · output truncated" : ""}`,
  );
  if (r.reason) lines.push(`  ${printable(r.reason)}`);
  for (const t of r.tests) {
    const mark = t.status === "passed" ? "✔" : t.status === "skipped" ? "-" : "✖";
    lines.push(
      `  ${mark} ${printable(`${t.classname ? `${t.classname}::` : ""}${t.name}`)}${t.status === "failed" || t.status === "error" ? ` (${t.status})` : ""}`,
    );
  }
  return `${lines.join("\n")}\n`;
}
