import { describe, expect, it } from "vitest";
import { RunRecord, Task, type AuditRecord, type TaskEvent } from "@loopsmith/shared/contracts";
import { reportMarkdown, runIterations, runText } from "./run-view.js";

const taskId = "audit-task";

/** An audited run as the audit phase records it: iteration 1 blocked by a bandit HIGH, iteration 2 warned and passed. */
function audited(): RunRecord {
  const blocked: AuditRecord = {
    findings: [
      {
        rule: "B324:hashlib",
        file: "auth.py",
        line: 4,
        severity: "high",
        source: "bandit",
        message: "Use of weak MD5 hash for security.",
      },
      { rule: "secrets", file: "auth.py", line: 1, severity: "low", source: "model", message: "a test key | in code" },
    ],
    blocked: true,
    static: { tool: "bandit", status: "ok" },
    modelRead: true,
  };
  const warned: AuditRecord = {
    findings: [
      {
        rule: "path-traversal",
        file: "files.py",
        line: 9,
        severity: "medium",
        source: "model",
        message: "the name is joined unchecked",
      },
    ],
    blocked: false,
    static: { tool: "bandit", status: "unavailable", reason: "bandit is not in the sandbox image" },
    modelRead: true,
  };
  const ev = (seq: number, iteration: number, kind: TaskEvent["kind"], extra: Partial<TaskEvent> = {}): TaskEvent => ({
    v: 1,
    taskId,
    seq,
    at: "2026-01-01T00:00:01.000Z",
    iteration,
    kind,
    message: `${kind} ${seq}`,
    ...extra,
  });
  return RunRecord.parse({
    v: 1,
    taskId,
    task: Task.parse({
      v: 1,
      taskId,
      goal: "hash passwords",
      language: "python",
      audit: true,
      submittedAt: "2026-01-01T00:00:00.000Z",
    }),
    result: null,
    events: [
      ev(0, 1, "step", { phase: "audit", data: { audit: blocked } }),
      ev(1, 2, "step", { phase: "audit", data: { audit: warned } }),
      ev(2, 2, "step", { phase: "execute", data: { status: "passed", failingTests: [] } }),
      // Not an audit record: ignored, not an error.
      ev(3, 2, "step", { phase: "audit", data: { audit: { findings: "none" } } }),
    ],
    recordedAt: "2026-01-01T00:00:20.000Z",
  });
}

describe("the security audit in show and the report", () => {
  it("each iteration keeps its audit; a blocking one makes the iteration blocked by its high findings", () => {
    const [first, second] = runIterations(audited());
    expect(first).toMatchObject({
      outcome: "blocked",
      findings: ["high bandit B324:hashlib auth.py:4: Use of weak MD5 hash for security."],
    });
    expect(first?.audit?.findings).toHaveLength(2);
    expect(second).toMatchObject({ outcome: "passed", findings: [] });
    expect(second?.audit?.findings.map((f) => f.rule)).toEqual(["path-traversal"]);
  });

  it("show lists every finding with severity, source, rule and place, and how the static run went", () => {
    const text = runText(audited());
    expect(text).toContain("        audit: 2 findings (1 high, 1 low), blocked; bandit ok\n");
    expect(text).toContain("          high bandit B324:hashlib auth.py:4: Use of weak MD5 hash for security.\n");
    expect(text).toContain("          low model secrets auth.py:1: a test key | in code\n");
    expect(text).toContain(
      "        audit: 1 finding (1 medium); bandit unavailable (bandit is not in the sandbox image)\n",
    );
    expect(text).toContain("          medium model path-traversal files.py:9: the name is joined unchecked\n");
  });

  it("report.md lists them under each iteration, Markdown-escaped", () => {
    const md = reportMarkdown(audited());
    expect(md).toContain("### Iteration 1: blocked");
    expect(md).toContain("- Security audit: 2 findings (1 high, 1 low), blocked; bandit ok\n");
    expect(md).toContain("  - high bandit B324:hashlib auth.py:4: Use of weak MD5 hash for security.\n");
    expect(md).toContain("  - low model secrets auth.py:1: a test key \\| in code\n");
    expect(md).toContain("  - medium model path-traversal files.py:9: the name is joined unchecked\n");
  });
});
