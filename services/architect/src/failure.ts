/** Turning a sandbox result (or a gate verdict) into the failure the loop reflects on. */
import { trimToTokens, type ExecutionResult, type FailureBrief, type Finding } from "@loopsmith/shared";

/** Names of the tests that failed or errored. */
export function failingTests(result: ExecutionResult): string[] {
  return result.tests.filter((t) => t.status === "failed" || t.status === "error").map((t) => t.name);
}

const ERROR_LINE = /^\s*(?:E\s+)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b.*)$/m;

/**
 * The raw error text a signature is made from: the first failing test's message, else the
 * last exception line of the output, else the status. At most 2,000 characters.
 */
export function errorTextOf(result: ExecutionResult): string {
  const first = result.tests.find((t) => (t.status === "failed" || t.status === "error") && t.message);
  if (first?.message) return first.message.slice(0, 2_000);
  const output = `${result.stderr}\n${result.stdout}`;
  const lines = output.split("\n").filter((l) => ERROR_LINE.test(l));
  const last = lines[lines.length - 1];
  if (last) return last.trim().slice(0, 2_000);
  return result.reason ?? `${result.status}${result.exitCode === null ? "" : ` (exit ${result.exitCode})`}`;
}

/** The output a prompt sees: stdout and stderr, trimmed to about `maxTokens` tokens. */
export function outputOf(result: ExecutionResult, maxTokens = 1_500): string {
  const parts = [
    result.stdout.trim() && `[stdout]\n${result.stdout.trim()}`,
    result.stderr.trim() && `[stderr]\n${result.stderr.trim()}`,
  ];
  return trimToTokens(parts.filter(Boolean).join("\n"), maxTokens);
}

/** A failure brief from an execution. `signature` is filled in once memory has normalised it. */
export function briefFromExecution(iteration: number, result: ExecutionResult): FailureBrief {
  return {
    iteration,
    status: result.status,
    signature: "",
    failingTests: failingTests(result),
    output: outputOf(result),
    findings: [],
  };
}

/** A failure brief from blocking findings (gate or review); nothing was executed. */
export function briefFromFindings(iteration: number, status: string, findings: Finding[]): FailureBrief {
  const text = findings
    .map((f) => `${f.severity}: ${f.message}${f.path ? ` (${f.path}${f.line ? `:${f.line}` : ""})` : ""}`)
    .join("\n");
  return { iteration, status, signature: "", failingTests: [], output: text, findings };
}

/** A failure brief for a step that produced no candidate (for example an invalid model reply). */
export function briefFromError(iteration: number, status: string, message: string): FailureBrief {
  return { iteration, status, signature: "", failingTests: [], output: message, findings: [] };
}
