import { describe, expect, it } from "vitest";
import pino from "pino";
import { AuditRequest, type AuditFinding, type TaskScript } from "@loopsmith/shared/contracts";
import { LoopsmithError, loadConfig } from "@loopsmith/shared/runtime";
import { createProvider } from "@loopsmith/shared/llm";
import { AUDIT_SYSTEM, createAuditor, renderAuditMessage } from "./audit.js";

const log = pino({ level: "silent" });

/** The scripted provider as a stack without a script file runs it: it answers tasks that carry their replies. */
const scripted = () =>
  createProvider({ config: loadConfig({ env: { LOOPSMITH_PROVIDER: "scripted" }, discover: false }), log });

const bandit: AuditFinding = {
  rule: "B324:hashlib",
  file: "auth.py",
  line: 3,
  severity: "high",
  source: "bandit",
  message: "Use of weak MD5 hash for security.",
};

/** An audit request whose task carries `review` replies (the audit model is the review role's). */
const request = (review: unknown[], key = "t-a/1/audit") =>
  AuditRequest.parse({
    v: 1,
    taskId: "t-a",
    iteration: 1,
    idempotencyKey: key,
    callsBefore: 0,
    script: { v: 1, kind: "loopsmith-script", replies: { review } } satisfies TaskScript,
    task: { goal: "hash a password", language: "python", files: [], acceptanceTests: [] },
    candidate: {
      files: [{ path: "auth.py", content: "import hashlib\n\ndef h(pw):\n    return hashlib.md5(pw).hexdigest()\n" }],
      tests: [],
      notes: "",
    },
    staticFindings: [bandit],
  });

describe("the audit model", () => {
  it("is shown the candidate and the static findings, and its validated findings come back scripted", async () => {
    const reply = {
      findings: [
        { ...bandit, source: undefined, rule: "weak-crypto", message: "md5 of a password: use hashlib.scrypt" },
      ],
    };
    const auditor = createAuditor({ provider: scripted(), log });
    const r = await auditor.audit(request([reply]));
    expect(r.value.findings).toEqual([
      {
        rule: "weak-crypto",
        file: "auth.py",
        line: 3,
        severity: "high",
        message: "md5 of a password: use hashlib.scrypt",
      },
    ]);
    expect(r.provider).toMatchObject({ name: "scripted", scripted: true });
    const message = renderAuditMessage(request([reply]));
    expect(message).toContain("## Static findings\n- bandit B324:hashlib (high) auth.py:3: Use of weak MD5 hash");
    expect(message).toContain("return hashlib.md5(pw).hexdigest()");
    expect(AUDIT_SYSTEM).toMatch(/path-traversal/);
  });

  it("a garbage reply, and a wrong shape after the re-ask, is llm_bad_reply saying so", async () => {
    const auditor = createAuditor({ provider: scripted(), log });
    const err = await auditor
      .audit(request(["looks fine to me!", { findings: [{ rule: "x", severity: "critical" }] }]))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LoopsmithError);
    expect((err as LoopsmithError).code).toBe("llm_bad_reply");
    expect((err as LoopsmithError).message).toMatch(/still unusable after one re-ask .*expected shape/);
  });
});
