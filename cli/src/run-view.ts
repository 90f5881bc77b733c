/**
 * A recorded run as people read it: its iterations and failures (read back from the run's
 * events), `loopsmith show`'s text and the `report.md` of `loopsmith export`. Pure.
 * Terminal text goes through `printable`; the report is Markdown, with model and sandbox
 * text in code spans and fences that it cannot close.
 */
import { z } from "zod";
import { Reflection, Review, type DagProgress, type RunRecord, type Usage } from "@loopsmith/shared/contracts";
import { auditFindingText, auditLines, auditMarkdown, auditOf, type AuditView } from "./audit-view.js";
import { decisionLines, decisionsMarkdown } from "./approvals.js";
import { dagOf, dagReportLines, dagTotals, dagTree } from "./dag-view.js";
import { duration, shortCount, usd } from "./format.js";
import { printable } from "./terminal.js";
import { instructionsLine, transcriptLines, transcriptMarkdown, transcriptSteps } from "./transcript-view.js";
import { formatTable } from "./ui/index.js";

/** One iteration of a run, as its events tell it. */
export interface RunIteration {
  iteration: number;
  /** `passed`, an execution status (`failed`, `error`, `timeout`, …), `blocked` (gate or review) or `llm_bad_reply`; `unknown` when no verdict was recorded. */
  outcome: string;
  failingTests: string[];
  /** The normalised error signature memory stored the failure under. */
  signature?: string;
  /** The reflection written on this iteration's failure. */
  reflection?: Reflection;
  /** Blocking findings of the gate, the review or the security audit. */
  findings: string[];
  /** The security audit of the iteration's candidate (`Task.audit`), when one ran. */
  audit?: AuditView;
}

const ExecData = z.object({ status: z.string(), failingTests: z.array(z.string()).catch([]) });
const RememberData = z.object({ signature: z.string() });
const ReflectData = z.object({ reflection: Reflection });
const GateData = z.object({ findings: z.array(z.object({ severity: z.string(), message: z.string() })) });
const ReviewData = z.object({ review: Review });
const UsageData = z.object({
  role: z.string(),
  provider: z.object({ name: z.string(), model: z.string(), scripted: z.boolean().optional() }),
});

/**
 * The run's iterations (1 and up), each with its verdict, failing tests, signature,
 * reflection and blocking findings, from its `step` and `warning` events.
 */
export function runIterations(record: RunRecord): RunIteration[] {
  const byNumber = new Map<number, RunIteration>();
  const at = (n: number): RunIteration => {
    let it = byNumber.get(n);
    if (!it) byNumber.set(n, (it = { iteration: n, outcome: "unknown", failingTests: [], findings: [] }));
    return it;
  };
  for (const e of record.events) {
    if (e.iteration < 1) continue;
    const data = e.data ?? {};
    if (e.kind === "warning" && /reply could not be read/.test(e.message) && at(e.iteration).outcome === "unknown")
      at(e.iteration).outcome = "llm_bad_reply";
    if (e.kind !== "step") continue;
    const exec = e.phase === "execute" ? ExecData.safeParse(data) : undefined;
    if (exec?.success)
      Object.assign(at(e.iteration), { outcome: exec.data.status, failingTests: exec.data.failingTests });
    const gate = e.phase === "gate" ? GateData.safeParse(data) : undefined;
    const blockers = gate?.success
      ? gate.data.findings.filter((f) => f.severity === "blocker").map((f) => f.message)
      : [];
    const review = e.phase === "review" ? ReviewData.safeParse(data) : undefined;
    if (review?.success)
      blockers.push(...review.data.review.findings.filter((f) => f.severity === "blocker").map((f) => f.message));
    const audit = auditOf(e);
    if (audit) {
      at(e.iteration).audit = audit;
      if (audit.blocked) blockers.push(...audit.findings.filter((f) => f.severity === "high").map(auditFindingText));
    }
    if (blockers.length) Object.assign(at(e.iteration), { outcome: "blocked", findings: blockers });
    const remember = e.phase === "remember" ? RememberData.safeParse(data) : undefined;
    if (remember?.success) at(e.iteration).signature = remember.data.signature;
    const reflect = e.phase === "reflect" ? ReflectData.safeParse(data) : undefined;
    if (reflect?.success) at(e.iteration).reflection = reflect.data.reflection;
  }
  return [...byNumber.values()].sort((a, b) => a.iteration - b.iteration);
}

/** The iterations that failed (any verdict but `passed`, or a stored signature). */
export function runFailures(record: RunRecord): RunIteration[] {
  return runIterations(record).filter((it) => it.outcome !== "passed" || it.signature !== undefined);
}

/** A DAG task's subtasks as its last event that carries them (`data.dag`, the result's first) tells; undefined for other tasks. */
export function runDag(record: RunRecord): DagProgress | undefined {
  for (let i = record.events.length - 1; i >= 0; i--) {
    const dag = dagOf(record.events[i] ?? {});
    if (dag) return dag;
  }
  return undefined;
}

/** Each role's providers (`name:model`) as the run's `usage` and model-reply events name them. */
export function providersByRole(record: RunRecord): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const add = (role: string, label: string): void => {
    const list = (out[role] ??= []);
    if (!list.includes(label)) list.push(label);
  };
  for (const e of record.events) {
    const usage = e.kind === "usage" ? UsageData.safeParse(e.data ?? {}) : undefined;
    if (usage?.success) add(usage.data.role, `${usage.data.provider.name}:${usage.data.provider.model}`);
    const llm = UsageData.safeParse((e.data as { llm?: unknown } | undefined)?.llm ?? {});
    if (llm.success) add(llm.data.role, `${llm.data.provider.name}:${llm.data.provider.model}`);
  }
  return out;
}

export { duration };

const oneLine = (text: string, max = 400): string => {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

function tokens(u: Usage, cost = true): string {
  return `${u.calls} call${u.calls === 1 ? "" : "s"}, ${u.inputTokens} input + ${u.outputTokens} output tokens (${u.cacheReadTokens} cache read)${cost ? `, ${usd(u.costUsd)}` : ""}`;
}

/** The result's headline: `PASSED (stop reason passed)` or `no result recorded`. */
function headline(record: RunRecord): string {
  const r = record.result;
  return r ? `${r.status.toUpperCase()} (stop reason ${r.stopReason})` : "NO RESULT RECORDED";
}

/** How {@link runText} draws. */
export interface RunTextOptions {
  /**
   * `show --transcript` (`-v`): the project instructions the prompts carried (one line), and in
   * agent mode each step's thought and observation under its line. @defaultValue false
   */
  transcript?: boolean;
  /** Colour the transcript (the caller decides, for example with `colourEnabled(process.stdout)`). @defaultValue false */
  color?: boolean;
}

/**
 * `loopsmith show` for people: the run's goal, verdict, iterations, failures, the agent-mode
 * transcript (one line per step; see `transcript-view.ts`), cost, time and providers; ends
 * in a newline.
 */
export function runText(record: RunRecord, opts: RunTextOptions = {}): string {
  const { task, result: r } = record;
  const lines = [
    `task ${record.taskId} · ${headline(record)}${r ? ` · ${r.iterations} iteration${r.iterations === 1 ? "" : "s"} · ${duration(r.durationMs)}` : ""}`,
  ];
  lines.push(`  goal: ${printable(oneLine(task.goal, 300))}`);
  lines.push(
    `  language ${task.language}${task.repo ? ` · repo ${printable(task.repo.name ?? task.repo.snapshot)} at ${task.repo.baseCommit}` : ""} · submitted ${printable(task.submittedAt)} · recorded ${record.recordedAt}`,
  );
  if (r) {
    lines.push(`  ${printable(r.message)}`);
    lines.push(
      `  providers: ${r.providers.map(printable).join(", ") || "none"}${r.scripted ? " — SCRIPTED: replies were replayed from a file, no model was called" : ""}`,
    );
    lines.push(`  LLM: ${tokens(r.usage.total)}`);
    const roles = providersByRole(record);
    const usage = Object.entries(r.usage.byRole).map(([role, u]) => [
      printable(role),
      `${tokens(u)}${roles[role] ? ` · ${roles[role].map(printable).join(", ")}` : ""}`,
    ]);
    lines.push(...formatTable(usage, { minWidths: [8], gap: " ", indent: "    " }));
    if (r.hidden) lines.push(`  hidden tests: ${r.hidden.passed}/${r.hidden.total} passed`);
    if (r.error) lines.push(`  error (${r.error.code}): ${printable(r.error.message)}`);
  }
  const iterations = runIterations(record);
  if (iterations.length) lines.push("  iterations:");
  for (const it of iterations) {
    lines.push(
      `    ${String(it.iteration).padStart(2)}  ${printable(it.outcome)}${it.failingTests.length ? `; failing: ${it.failingTests.map(printable).join(", ")}` : ""}`,
    );
    if (it.findings.length) lines.push(`        blocked: ${printable(oneLine(it.findings.join("; ")))}`);
    if (it.audit) lines.push(...auditLines(it.audit, "        "));
    if (it.signature) lines.push(`        signature: ${printable(it.signature)}`);
    if (it.reflection)
      lines.push(
        `        reflection: ${printable(oneLine(it.reflection.rootCause))}`,
        `        fix plan: ${printable(oneLine(it.reflection.fixPlan))}`,
      );
  }
  const instructions = opts.transcript ? instructionsLine(record.events) : undefined;
  if (instructions) lines.push(`  ${instructions}`);
  lines.push(
    ...transcriptLines(transcriptSteps(record.events), {
      verbose: opts.transcript ?? false,
      color: opts.color ?? false,
    }),
  );
  lines.push(...decisionLines(record.events, "  "));
  const dag = runDag(record);
  if (dag) lines.push("  subtasks:", ...dagReportLines(dag, Date.parse(record.recordedAt), "    "));
  if (r?.repo) {
    lines.push(`  change against ${r.repo.baseCommit}: ${printable(oneLine(r.repo.summary, 200)) || "(no summary)"}`);
    lines.push(
      `    changed: ${r.repo.changed.map(printable).join(", ") || "none"}${r.repo.deleted.length ? `; deleted: ${r.repo.deleted.map(printable).join(", ")}` : ""}`,
    );
  } else if (r?.files.length) {
    lines.push(`  files: ${[...r.files, ...r.tests].map((f) => printable(f.path)).join(", ")}`);
  }
  lines.push(
    `  events: ${record.events.length}${record.eventsTruncated ? ` of ${record.eventsTotal ?? "more"} (truncated)` : ""}`,
  );
  return `${lines.join("\n")}\n`;
}

/** `text` as a Markdown code span that its own backticks cannot close, on one line. */
export function codeSpan(text: string): string {
  const flat = text.replace(/\s+/g, " ");
  const longest = Math.max(0, ...(flat.match(/`+/g) ?? []).map((m) => m.length));
  const fence = "`".repeat(longest + 1);
  return longest ? `${fence} ${flat} ${fence}` : `${fence}${flat}${fence}`;
}

/** `text` in a fenced block that its own lines cannot close. */
function fenced(text: string, info = "text"): string {
  const longest = Math.max(2, ...(text.match(/~+/g) ?? []).map((m) => m.length));
  const fence = "~".repeat(longest + 1);
  return `${fence}${info}\n${text.replace(/\s+$/, "")}\n${fence}`;
}

/** Plain text for one Markdown line (or table cell): whitespace flattened, `<`, `>` and `|` escaped. */
const md = (text: string, max = 2_000): string =>
  oneLine(text, max).replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/\|/g, "\\|");

/** A code span inside a table cell, where a `|` would end the cell. */
const cellCode = (text: string): string => codeSpan(text).replace(/\|/g, "\\|");

/** The "Subtasks" section of a DAG task's `report.md`: totals and one table row per subtask, in tree order. */
function subtasksMarkdown(dag: DagProgress, now: number): string[] {
  const out: string[] = [];
  out.push(
    "## Subtasks",
    "",
    md(dagTotals(dag, now)),
    "",
    "| subtask | status | depends on | attempt | iterations | tokens | USD | time | goal |",
    "|---|---|---|---:|---:|---:|---:|---:|---|",
  );
  for (const { subtask: s, depth } of dagTree(dag.subtasks)) {
    const ms = s.startedAt && s.finishedAt ? Date.parse(s.finishedAt) - Date.parse(s.startedAt) : NaN;
    const status = `${s.status}${s.reason ? ` (${s.reason})` : ""}${dag.reopened.includes(s.id) ? ", re-opened" : ""}`;
    out.push(
      `| ${"&nbsp;&nbsp;".repeat(depth)}${cellCode(s.id)} | ${md(status)} | ${s.dependsOn.map(cellCode).join(", ")} | ${s.attempt} | ${s.iterations} | ${shortCount(s.tokens)} | ${usd(s.costUsd)} | ${Number.isNaN(ms) ? "" : duration(Math.max(0, ms))} | ${md(s.goal, 200)} |`,
    );
  }
  out.push("");
  return out;
}

/**
 * The `report.md` of a run: goal, verdict, iterations (each failure with its signature,
 * failing tests and reflection), the agent-mode transcript (folded per iteration), cost and tokens per role, time, providers (SCRIPTED when no
 * model was called) and, in repo mode, the change.
 */
export function reportMarkdown(record: RunRecord): string {
  const { task, result: r } = record;
  const out: string[] = [
    `# loopsmith run ${record.taskId}`,
    "",
    `**${headline(record)}**${r ? ` — ${md(r.message)}` : ""}`,
    "",
  ];
  out.push("| | |", "|---|---|", `| task | ${cellCode(record.taskId)} |`, `| language | ${task.language} |`);
  if (task.repo)
    out.push(`| repository | ${md(task.repo.name ?? task.repo.snapshot)} at ${cellCode(task.repo.baseCommit)} |`);
  if (r) {
    out.push(
      `| iterations | ${r.iterations} of at most ${task.limits.maxIterations} |`,
      `| time | ${duration(r.durationMs)} |`,
    );
    out.push(`| cost | ${usd(r.usage.total.costUsd)} (${md(tokens(r.usage.total, false))}) |`);
    out.push(
      `| providers | ${r.providers.map(cellCode).join(", ") || "none"}${r.scripted ? " — **SCRIPTED: replies were replayed from a file, no model was called**" : ""} |`,
    );
    if (r.hidden) out.push(`| hidden tests | ${r.hidden.passed}/${r.hidden.total} passed |`);
    if (r.error) out.push(`| error | ${cellCode(r.error.code)}: ${md(r.error.message)} |`);
  }
  out.push(`| submitted | ${md(task.submittedAt)} |`, `| recorded | ${record.recordedAt} |`, "");
  out.push("## Goal", "", fenced(task.goal), "", "## Iterations", "");
  const iterations = runIterations(record);
  if (!iterations.length) out.push("No iteration was recorded.", "");
  for (const it of iterations) {
    out.push(`### Iteration ${it.iteration}: ${md(it.outcome)}`, "");
    const items: string[] = [];
    if (it.failingTests.length) items.push(`- Failing tests: ${it.failingTests.map(codeSpan).join(", ")}`);
    if (it.findings.length) items.push(`- Blocked: ${it.findings.map((f) => md(f, 500)).join("; ")}`);
    if (it.audit) items.push(...auditMarkdown(it.audit, md));
    if (it.signature) items.push(`- Signature: ${codeSpan(it.signature)}`);
    if (it.reflection) {
      items.push(
        "- Reflection:",
        `  - Root cause: ${md(it.reflection.rootCause)}`,
        `  - Hypothesis: ${md(it.reflection.hypothesis)}`,
        `  - Fix plan: ${md(it.reflection.fixPlan)}`,
      );
    }
    if (items.length) out.push(...items, "");
  }
  out.push(...transcriptMarkdown(transcriptSteps(record.events)), ...decisionsMarkdown(record.events, md));
  const dag = runDag(record);
  if (dag) out.push(...subtasksMarkdown(dag, Date.parse(record.recordedAt)));
  if (r && Object.keys(r.usage.byRole).length) {
    const roles = providersByRole(record);
    out.push(
      "## Cost by role",
      "",
      "| role | provider | calls | input tokens | output tokens | cache read | USD |",
      "|---|---|---:|---:|---:|---:|---:|",
    );
    for (const [role, u] of Object.entries(r.usage.byRole)) {
      out.push(
        `| ${md(role)} | ${(roles[role] ?? []).map(cellCode).join(", ")} | ${u.calls} | ${u.inputTokens} | ${u.outputTokens} | ${u.cacheReadTokens} | ${usd(u.costUsd)} |`,
      );
    }
    out.push("");
  }
  if (r?.repo) {
    out.push("## Change", "", `Against ${codeSpan(r.repo.baseCommit)}: ${md(r.repo.summary) || "(no summary)"}`, "");
    for (const p of r.repo.changed) out.push(`- changed ${codeSpan(p)}`);
    for (const p of r.repo.deleted) out.push(`- deleted ${codeSpan(p)}`);
    out.push("", "The patch is in `change.patch` (`git apply change.patch` at that commit).", "");
  } else if (r?.files.length) {
    out.push("## Files", "");
    for (const f of r.files) out.push(`- ${codeSpan(f.path)} (${f.content.split("\n").length} lines)`);
    for (const f of r.tests) out.push(`- ${codeSpan(f.path)} (generated test, ${f.content.split("\n").length} lines)`);
    out.push("", "The files are in `result.json`.", "");
  }
  if (record.eventsTruncated)
    out.push(
      `_The run keeps ${record.events.length} of its ${record.eventsTotal ?? "more"} events; some iterations may be missing here._`,
      "",
    );
  return `${out.join("\n").replace(/\n+$/, "")}\n`;
}
