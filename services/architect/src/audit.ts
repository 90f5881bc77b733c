/**
 * AUDIT (`Task.audit`, docs/AUDIT.md): the security audit of a candidate, after the gate and
 * the review and before it runs. The static tools run in the sandbox over the candidate's
 * files, through the executor's ordinary run request (bandit in the Python image;
 * ESLint with eslint-plugin-security from `/opt/loopsmith/metrics` in the Node image), then
 * the audit model (the reviewer's `audit` endpoint) weighs them and adds its own. A `high`
 * finding blocks the iteration: the builder is told why in the next build's failure; `medium`
 * and `low` findings are a warning and the candidate runs.
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  type AuditFinding,
  type AuditRecord,
  type AuditSeverity,
  type ExecutionRequest,
  type ExecutionResult,
  type FileChange,
  type Finding,
  type Language,
  type Phase,
  type StaticAuditRun,
} from "@loopsmith/shared/contracts";
import { auditTexts } from "./event-texts.js";
import { briefFromFindings } from "./failure.js";
import { stepKey } from "./requests.js";
import type { PhaseOutcome, TaskRun } from "./run.js";
import type { TaskState } from "./state.js";

/** Where the Node image keeps loopsmith's ESLint and its security plugin (deploy/rootfs/sandbox-node/metrics). */
export const NODE_TOOLS = "/opt/loopsmith/metrics";

/** The static run's wall-clock limit, ms. */
export const STATIC_TIMEOUT_MS = 120_000;

/**
 * Most findings an audit keeps (static and model together; the static ones first). Its step
 * event carries them all, so the count stays well below what one event may hold.
 */
export const MAX_AUDIT_FINDINGS = 100;

const PY = /\.py$/;
const JS = /\.(?:js|mjs|cjs|jsx|ts|mts|cts|tsx)$/;

/**
 * ESLint security rules whose finding is `high`: code run from a computed string, a
 * program started, templates with escaping turned off, and insecure randomness. The
 * plugin's other rules (non-literal file names, regular expressions, timing attacks, …)
 * are heuristics that are often right code: `medium`.
 */
const ESLINT_HIGH = new Set([
  "security/detect-eval-with-expression",
  "security/detect-child-process",
  "security/detect-disable-mustache-escape",
  "security/detect-pseudoRandomBytes",
]);

/** Where the phase after GATE and REVIEW goes: AUDIT when the task asks for it, else EXECUTE. */
export function beforeExecute(s: Pick<TaskState, "task">): Phase {
  return s.task.audit ? "audit" : "execute";
}

/** A workspace path as the tools print it (`./a.py`, `/workspace/a.py`) back to the candidate's (`a.py`). */
function workspacePath(file: string): string {
  return file.replace(/^\/workspace\//, "").replace(/^(?:\.\/)+/, "");
}

/**
 * The sandbox run of the language's static tool over `files` (the candidate's, not its
 * generated tests): bandit for Python (without B101, `assert`, which every test uses),
 * loopsmith's ESLint with only the security plugin's findings kept for JavaScript and
 * TypeScript; `skipped` with the reason when the candidate has no file the tool reads.
 */
export function staticAuditCommand(
  language: Language,
  files: readonly FileChange[],
): { tool: string; command: string[]; files: FileChange[] } | { tool: string; skipped: string } {
  const tool = language === "python" ? "bandit" : "eslint-plugin-security";
  const read = files.filter((f) => (language === "python" ? PY : JS).test(f.path));
  if (read.length === 0)
    return { tool, skipped: `no ${language === "python" ? "Python" : "JavaScript/TypeScript"} file` };
  // `./` keeps a path that starts with `-` from being read as an option.
  const paths = read.map((f) => `./${f.path}`);
  const command =
    language === "python"
      ? ["python3", "-m", "bandit", "-q", "-f", "json", "-s", "B101", ...paths]
      : [
          "node",
          `${NODE_TOOLS}/node_modules/eslint/bin/eslint.js`,
          "--config",
          `${NODE_TOOLS}/eslint.config.mjs`,
          "--no-inline-config",
          "--no-warn-ignored",
          "--no-error-on-unmatched-pattern",
          "--format",
          "json",
          ...paths,
        ];
  return { tool, command, files: read };
}

/** The JSON document a tool printed: stdout from its first `{` or `[` (bandit may print a banner first). */
function jsonOf(stdout: string, open: "{" | "["): unknown {
  const start = stdout.indexOf(open);
  if (start < 0) throw new Error("no JSON in its output");
  return JSON.parse(stdout.slice(start));
}

/** A 1-based line, or nothing. */
const lineOf = (n: unknown): number | undefined =>
  typeof n === "number" && Number.isInteger(n) && n > 0 ? n : undefined;

const SEVERITIES: readonly AuditSeverity[] = ["low", "medium", "high"];

/**
 * bandit's JSON report as findings: its `issue_severity` (HIGH, MEDIUM, LOW) is the
 * severity, one step lower when its `issue_confidence` is LOW (a HIGH finding bandit itself
 * doubts does not block). `rule` is the test id and name (`B602:subprocess_popen_with_shell_equals_true`).
 * @throws Error when stdout is not bandit's JSON report
 */
export function parseBandit(stdout: string): AuditFinding[] {
  const doc = jsonOf(stdout, "{") as { results?: unknown };
  if (!doc || typeof doc !== "object" || !Array.isArray(doc.results))
    throw new Error("not a bandit report (no results)");
  return doc.results.flatMap((r: Record<string, unknown>): AuditFinding[] => {
    const sev = SEVERITIES.indexOf(String(r.issue_severity ?? "").toLowerCase() as AuditSeverity);
    if (sev < 0 || typeof r.filename !== "string") return [];
    const doubted = String(r.issue_confidence ?? "").toUpperCase() === "LOW";
    const line = lineOf(r.line_number);
    return [
      {
        rule: `${String(r.test_id ?? "B000")}${r.test_name ? `:${String(r.test_name)}` : ""}`.slice(0, 200),
        file: workspacePath(r.filename).slice(0, 500) || r.filename,
        ...(line ? { line } : {}),
        severity: SEVERITIES[Math.max(0, sev - (doubted ? 1 : 0))] as AuditSeverity,
        source: "bandit",
        message: (String(r.issue_text ?? "").trim() || "bandit finding").slice(0, 2_000),
      },
    ];
  });
}

/**
 * ESLint's JSON report as findings, the security plugin's rules only (`security/…`; the
 * configuration's other rules, complexity and lint, are not the audit's): `high` for the
 * rules in {@link ESLINT_HIGH}, else `medium`.
 * @throws Error when stdout is not ESLint's JSON report
 */
export function parseEslint(stdout: string): AuditFinding[] {
  const doc = jsonOf(stdout, "[");
  if (!Array.isArray(doc)) throw new Error("not an ESLint report (not a list)");
  return doc.flatMap((f: { filePath?: unknown; messages?: unknown }): AuditFinding[] => {
    if (typeof f?.filePath !== "string" || !Array.isArray(f.messages)) return [];
    const file = workspacePath(f.filePath);
    return f.messages.flatMap((m: Record<string, unknown>): AuditFinding[] => {
      const rule = typeof m.ruleId === "string" ? m.ruleId : "";
      if (!rule.startsWith("security/")) return [];
      const line = lineOf(m.line);
      return [
        {
          rule,
          file,
          ...(line ? { line } : {}),
          severity: ESLINT_HIGH.has(rule) ? "high" : "medium",
          source: "eslint",
          message: (String(m.message ?? "").trim() || rule).slice(0, 2_000),
        },
      ];
    });
  });
}

/**
 * What the static run's result says: its findings, or why there are none to be had. Exit
 * 127 (`command_not_found`) means the tool is not in the image; any result whose stdout is
 * not the tool's report (a sandbox failure, a timeout, a crash) is `unavailable` with the
 * reason, never a finding.
 */
export function staticFindingsOf(
  tool: string,
  result: ExecutionResult,
): { run: StaticAuditRun; findings: AuditFinding[] } {
  if (result.status === "command_not_found")
    return { run: { tool, status: "unavailable", reason: `${tool} is not in the sandbox image` }, findings: [] };
  try {
    const findings = tool === "bandit" ? parseBandit(result.stdout) : parseEslint(result.stdout);
    return { run: { tool, status: "ok" }, findings };
  } catch (err) {
    const why = result.reason ?? (result.stderr.trim().split("\n").slice(-3).join(" ") || (err as Error).message);
    return {
      run: { tool, status: "unavailable", reason: `${tool} gave no report (${result.status}): ${why}`.slice(0, 2_000) },
      findings: [],
    };
  }
}

/** An audit finding as a blocker the builder reads (the failure's findings): `rule` says it was the audit's, and whose. */
export function blockerOf(f: AuditFinding): Finding {
  return {
    severity: "blocker",
    message: `security audit, ${f.source} ${f.rule}: ${f.message}`.slice(0, 2_000),
    path: f.file,
    ...(f.line ? { line: f.line } : {}),
    rule: `audit.${f.source}.${f.rule}`.slice(0, 200),
  };
}

/**
 * The static findings first, then the model's; a model finding at the same file, line and
 * rule as a static one replaces it only when it is more severe (the model confirms a tool's
 * finding by repeating it).
 */
export function mergeFindings(staticFindings: readonly AuditFinding[], model: readonly AuditFinding[]): AuditFinding[] {
  const key = (f: AuditFinding) => `${f.file}\u0000${f.line ?? 0}\u0000${f.rule}`;
  const out = [...staticFindings];
  for (const m of model) {
    const i = out.findIndex((f) => key(f) === key(m));
    const current = out[i];
    if (!current) out.push(m);
    else if (SEVERITIES.indexOf(m.severity) > SEVERITIES.indexOf(current.severity)) out[i] = m;
  }
  return out.slice(0, MAX_AUDIT_FINDINGS);
}

/** The static run of the audit: its findings, or unavailable (a bus error included), never a throw. */
async function staticAudit(s: TaskState, run: TaskRun): Promise<{ run: StaticAuditRun; findings: AuditFinding[] }> {
  const planned = staticAuditCommand(s.task.language, s.candidate?.files ?? []);
  if ("skipped" in planned)
    return { run: { tool: planned.tool, status: "skipped", reason: planned.skipped }, findings: [] };
  const request: ExecutionRequest = {
    v: 1,
    taskId: s.task.taskId,
    iteration: s.iteration,
    idempotencyKey: stepKey(s, "audit_static"),
    language: s.task.language,
    files: planned.files,
    command: planned.command,
    timeoutMs: STATIC_TIMEOUT_MS,
    memoryMb: Math.max(512, s.task.limits.memoryMb),
  };
  try {
    return staticFindingsOf(planned.tool, await run.steps.execute(request));
  } catch (err) {
    const why = err instanceof LoopsmithError ? `${err.code}: ${err.message}` : String(err);
    return {
      run: { tool: planned.tool, status: "unavailable", reason: `the sandbox run failed: ${why}` },
      findings: [],
    };
  }
}

/**
 * AUDIT: the static tools, then the model; a `high` finding blocks the iteration (a
 * `blocked` failure whose findings the next build sees), lower ones warn and the candidate
 * runs. An unreadable model reply is a warning: the static findings still decide. The step
 * event's `data.audit` is the {@link AuditRecord} the report and `loopsmith show` list.
 */
export async function auditPhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  await run.emit("phase", auditTexts.auditing, { phase: "audit" });
  const stat = await staticAudit(s, run);
  let model: AuditFinding[] = [];
  let modelRead = true;
  let llmData: Record<string, unknown> = {};
  const auditStep = run.steps.audit;
  if (!auditStep) {
    modelRead = false;
    await run.emit("warning", auditTexts.noModel, { phase: "audit" });
  } else {
    try {
      // The audit model is the review role's: its calls count there, and a script's replies are its list.
      const reply = await run.llm("review", "audit", (head) =>
        auditStep({
          ...head,
          candidate: s.candidate ?? { files: [], tests: [], notes: "" },
          staticFindings: stat.findings.slice(0, 200),
        }),
      );
      model = reply.value.findings.map((f) => ({ ...f, source: "model" as const }));
      llmData = reply.data;
    } catch (err) {
      const outcome = await run.llmFailure(err, "review");
      if (outcome !== "iteration_failed") return outcome;
      modelRead = false;
    }
  }
  const findings = mergeFindings(stat.findings, model);
  const high = findings.filter((f) => f.severity === "high");
  const record: AuditRecord = { findings, blocked: high.length > 0, static: stat.run, modelRead };
  await run.emit("step", auditTexts.audited(record), { phase: "audit", data: { audit: record, ...llmData } });
  if (high.length > 0)
    return { next: "remember", patch: { failure: briefFromFindings(s.iteration, "blocked", high.map(blockerOf)) } };
  const lower = findings.filter((f) => f.severity !== "high");
  if (lower.length)
    await run.emit("warning", auditTexts.warnings(lower), { phase: "audit", data: { findings: lower } });
  return { next: "execute" };
}
