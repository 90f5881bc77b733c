/** How `solve` shows progress: one line per event for people, or JSON lines with `--json`. */
import type { TaskEvent, TaskResult } from "@loopsmith/shared";

/** USD with enough digits for small sums. */
export function usd(n: number): string {
  return n === 0 ? "$0" : n < 0.01 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`;
}

/** One human line for an event, or null to print nothing. */
export function eventLine(e: TaskEvent): string | null {
  if (e.kind === "result") return null;
  if (e.kind === "phase" || e.kind === "usage") return null;
  const tag = e.iteration > 0 ? `[iteration ${e.iteration}]` : "[start]";
  if (e.kind === "warning") return `${tag} warning: ${e.message}`;
  return `${tag} ${e.phase ? `${e.phase}: ` : ""}${e.message}`;
}

/** The human summary of a result. */
export function resultText(r: TaskResult): string {
  const u = r.usage.total;
  const lines = [
    "",
    `${r.status === "passed" ? "PASSED" : r.status.toUpperCase()}: ${r.message}`,
    `  task ${r.taskId} · ${r.iterations} iteration${r.iterations === 1 ? "" : "s"} · stop reason ${r.stopReason} · ${(r.durationMs / 1000).toFixed(1)} s`,
    `  LLM: ${u.calls} calls, ${u.inputTokens} input + ${u.outputTokens} output tokens (${u.cacheReadTokens} cache read), ${usd(u.costUsd)}${r.scripted ? " (scripted replies: no model was called)" : ""}`,
  ];
  const byRole = Object.entries(r.usage.byRole).map(([role, x]) => `${role} ${usd(x.costUsd)}/${x.calls}`);
  if (byRole.length) lines.push(`  cost by role: ${byRole.join(", ")}`);
  if (r.hidden) lines.push(`  hidden tests: ${r.hidden.passed}/${r.hidden.total} passed`);
  if (r.failureIds.length) lines.push(`  failures remembered: ${r.failureIds.join(", ")}`);
  if (r.error) lines.push(`  error: ${r.error.message}`);
  for (const f of r.files) lines.push(`\n--- ${f.path}\n${f.content.trimEnd()}`);
  return lines.join("\n");
}
