/** Turning a sandbox result (or a gate verdict) into the failure the loop reflects on. */
import { trimToTokens } from "@loopsmith/shared/llm";
import { type ExecutionResult, type FailureBrief, type Finding } from "@loopsmith/shared/contracts";

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

/** Failing tests a {@link failureLine} names before it says how many more failed. */
const LINE_TESTS = 5;
/** Longest {@link failureLine}, in characters. */
const LINE_CHARS = 400;
/** A per-edit line of `renderEditFailures`: `Edit 1 (path), not_found: message.` */
const EDIT_LINE = /^Edit \d+ \(.+\), [a-z_]+: /;

/**
 * How an iteration failed, in one line for people (a task's stop message): its status and the
 * tests that failed; else, for edits that could not be applied, each failed edit (its file and
 * why); else the first line of what it said (a blocker, a reply's problem, an error).
 */
export function failureLine(f: Pick<FailureBrief, "status" | "failingTests" | "output">): string {
  const lines = f.output
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/^\[(stdout|stderr)\]$/.test(l));
  let detail: string | undefined;
  if (f.failingTests.length) {
    const more = f.failingTests.length - LINE_TESTS;
    detail = `failing ${f.failingTests.slice(0, LINE_TESTS).join(", ")}${more > 0 ? ` and ${more} more` : ""}`;
  } else {
    const edits = lines.filter((l) => EDIT_LINE.test(l));
    detail = edits.length ? edits.join(" ") : lines[0];
  }
  const line = detail ? `${f.status}: ${detail}` : f.status;
  return line.length > LINE_CHARS ? `${line.slice(0, LINE_CHARS - 1)}…` : line;
}

/** A failure brief for a step that produced no candidate (for example an invalid model reply). */
export function briefFromError(iteration: number, status: string, message: string): FailureBrief {
  return { iteration, status, signature: "", failingTests: [], output: message, findings: [] };
}
