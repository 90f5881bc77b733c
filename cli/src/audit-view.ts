/**
 * The security audit's findings (`Task.audit`) as `loopsmith show` and `report.md` list them,
 * read from an iteration's `audit` step event (`data.audit`, an `AuditRecord`). Pure.
 */
import { AuditRecord, type AuditFinding, type TaskEvent } from "@loopsmith/shared/contracts";
import { printable } from "./terminal.js";

const AuditData = AuditRecord.pick({ findings: true, blocked: true, static: true }).partial({ static: true });

/** An iteration's audit as its step event carries it, or undefined when the event is not one (or unreadable). */
export function auditOf(e: Pick<TaskEvent, "kind" | "phase" | "data">): AuditView | undefined {
  if (e.kind !== "step" || e.phase !== "audit") return undefined;
  const parsed = AuditData.safeParse((e.data as { audit?: unknown } | undefined)?.audit);
  if (!parsed.success) return undefined;
  const { findings, blocked, static: run } = parsed.data;
  return {
    findings,
    blocked,
    tool: run ? `${run.tool} ${run.status}${run.reason ? ` (${run.reason})` : ""}` : "no static run recorded",
  };
}

/** One iteration's audit: its findings (static first, then the model's), whether a high one blocked, how the static run went. */
export interface AuditView {
  findings: AuditFinding[];
  blocked: boolean;
  /** The static tool and its status in words: `bandit ok`, `eslint-plugin-security unavailable (…)`. */
  tool: string;
}

/** A finding in one line: `high bandit B602:… app.py:3: message`. */
export function auditFindingText(f: AuditFinding): string {
  return `${f.severity} ${f.source} ${f.rule} ${f.file}${f.line ? `:${f.line}` : ""}: ${f.message.replace(/\s+/g, " ").trim()}`;
}

/** The severities' counts, in words: `2 findings (1 high, 1 medium)`. */
export function auditSummary(a: AuditView): string {
  const n = a.findings.length;
  const counts = (["high", "medium", "low"] as const)
    .map((s) => [s, a.findings.filter((f) => f.severity === s).length] as const)
    .filter(([, c]) => c > 0)
    .map(([s, c]) => `${c} ${s}`);
  return `${n} finding${n === 1 ? "" : "s"}${counts.length ? ` (${counts.join(", ")})` : ""}${a.blocked ? ", blocked" : ""}; ${a.tool}`;
}

/** `loopsmith show`'s lines of an iteration's audit, terminal-safe, at most `max` findings. */
export function auditLines(a: AuditView, indent: string, max = 20): string[] {
  const lines = [`${indent}audit: ${printable(auditSummary(a))}`];
  for (const f of a.findings.slice(0, max)) lines.push(`${indent}  ${printable(auditFindingText(f))}`);
  if (a.findings.length > max) lines.push(`${indent}  … and ${a.findings.length - max} more`);
  return lines;
}

/**
 * `report.md`'s item of an iteration's audit: the summary, then one sub-item per finding (at
 * most `max`), each through `escape` (the report's Markdown-safe text, which takes a length).
 */
export function auditMarkdown(a: AuditView, escape: (text: string, max?: number) => string, max = 50): string[] {
  return [
    `- Security audit: ${escape(auditSummary(a))}`,
    ...a.findings.slice(0, max).map((f) => `  - ${escape(auditFindingText(f), 500)}`),
    ...(a.findings.length > max ? [`  - … and ${a.findings.length - max} more`] : []),
  ];
}
