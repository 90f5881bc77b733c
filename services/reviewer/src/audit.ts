/**
 * The security audit's model step (`Task.audit`, docs/AUDIT.md): asks the LLM for
 * OWASP-class problems in a candidate (injection, unsafe deserialisation, path traversal,
 * secrets, SSRF, weak crypto), given what the static tools found. The call goes to the
 * `review` role's model (its routing, fallbacks and, scripted, its list of replies).
 */
import type { Logger } from "pino";
import {
  AuditVerdict,
  renderInstructions,
  type AuditFinding,
  type AuditReply,
  type AuditRequest,
} from "@loopsmith/shared/contracts";
import { createIdempotencyCache } from "@loopsmith/shared/bus";
import { renderFile, renderTask, section, type LlmProvider } from "@loopsmith/shared/llm";

/** The audit prompt's version: bump it with every change of {@link AUDIT_SYSTEM}. */
export const AUDIT_PROMPT_VERSION = 1;

/** The audit model's system prompt: the classes it looks for, the severities, the reply's shape. */
export const AUDIT_SYSTEM = `You are the security auditor of loopsmith. Before a candidate runs, find the security
problems its code would have in production, in the OWASP classes:
- injection: SQL, shell or template text built from input (string formatting into a query or a command);
- unsafe-deserialization: pickle, marshal, yaml.load without a safe loader, eval of data;
- path-traversal: a file path joined from input without normalising and checking it stays under its root;
- secrets: credentials, API keys, tokens or private keys written in the code;
- ssrf: a URL or host taken from input and fetched by the server;
- weak-crypto: md5/sha1 for passwords or signatures, random instead of secrets for tokens, ECB mode, fixed IVs, disabled TLS verification.
Give each finding a rule (one of the class names above, or a short kebab-case name for another
class), the file and line, a severity and one sentence saying what is wrong and how to fix it.
Severities: "high" when the flaw is exploitable as written (it blocks the candidate: only for
real, reachable problems), "medium" when it is dangerous in some uses, "low" for hardening
advice. The message may have a section "Static findings" from bandit or ESLint's security
plugin: confirm those that are real by repeating them with your severity, and say nothing of
those that are not. Do not report style, correctness or test problems: only security.
Reply with the structured output only: {"findings": [...]}, an empty list when nothing is wrong.

Worked example.
Candidate db.py line 4: cursor.execute("SELECT * FROM users WHERE name = '%s'" % name)
Reply:
{"findings": [{"rule": "injection", "file": "db.py", "line": 4, "severity": "high",
  "message": "the query is built with % from name: pass it as a parameter, cursor.execute(\\"... WHERE name = ?\\", (name,))"}]}`;

/** Dependencies and options of {@link createAuditor}. */
export interface AuditorDeps {
  provider: LlmProvider;
  log: Logger;
  /** The system prompt. @defaultValue {@link AUDIT_SYSTEM} */
  system?: string;
  /** Replies kept by idempotency key (a retried request is not a second model call). @defaultValue 128 */
  cacheSize?: number;
}

/** The auditor: one model call per candidate. */
export interface Auditor {
  /**
   * Audits a candidate. A second request with the same idempotency key gets the first one's
   * reply; a failed call is not kept.
   * @returns the model's validated findings (each `source: "model"` once the architect adds
   *   it), the usage (tokens, USD, ms) and who answered
   * @throws LoopsmithError from the provider unchanged: `llm_bad_reply` when the reply is not
   *   `{"findings": [...]}` after the re-ask, `llm_auth`, `timeout`, `budget_exceeded`, …
   */
  audit(request: AuditRequest): Promise<AuditReply>;
}

/** The static tools' findings as the audit prompt shows them: one line each, with source, rule, file and line. */
export function renderStaticFindings(findings: readonly AuditFinding[]): string {
  if (!findings.length) return "";
  const lines = findings.map(
    (f) => `- ${f.source} ${f.rule} (${f.severity}) ${f.file}${f.line ? `:${f.line}` : ""}: ${f.message}`,
  );
  return section("Static findings", lines.join("\n"));
}

/**
 * The user message of an audit: the task, the repository's instructions in repo mode, the
 * candidate's files and generated tests (each trimmed by `renderFile`), and the static
 * tools' findings.
 */
export function renderAuditMessage(request: AuditRequest): string {
  const { candidate } = request;
  return [
    renderTask(request.task),
    renderInstructions(request.task.repo?.instructions),
    section("Candidate files", candidate.files.map((f) => renderFile(f)).join("\n")),
    section("Generated tests", candidate.tests.map((f) => renderFile(f)).join("\n")),
    renderStaticFindings(request.staticFindings),
    "Audit this candidate for security problems. Reply with the structured output only.",
  ]
    .filter(Boolean)
    .join("\n");
}

/** Creates the auditor. */
export function createAuditor(deps: AuditorDeps): Auditor {
  const system = deps.system ?? AUDIT_SYSTEM;
  const replies = createIdempotencyCache<AuditReply>({ maxEntries: deps.cacheSize ?? 128 });

  const run = async (request: AuditRequest): Promise<AuditReply> => {
    const log = deps.log.child({ taskId: request.taskId, iteration: request.iteration, phase: "audit" });
    const { value, usage, provider } = await deps.provider.complete({
      role: "review",
      system,
      messages: [{ role: "user", content: renderAuditMessage(request) }],
      schema: AuditVerdict,
      schemaName: "audit",
      context: {
        taskId: request.taskId,
        iteration: request.iteration,
        ...(request.callsBefore !== undefined ? { callsBefore: request.callsBefore } : {}),
        ...(request.script ? { script: request.script } : {}),
      },
      budget: request.budget,
    });
    log.info(
      {
        findings: value.findings.length,
        high: value.findings.filter((f) => f.severity === "high").length,
        costUsd: usage.costUsd,
      },
      "candidate audited",
    );
    return { value, usage, provider: provider ?? deps.provider.info };
  };

  return { audit: (request) => replies.run(request.idempotencyKey, () => run(request)) };
}
