import { describe, expect, it } from "vitest";
import { unifiedPatch } from "@loopsmith/shared/workspace";
import { type Finding, type GateRequest, type GateResult } from "@loopsmith/shared/contracts";
import { changeTampering, tamperingViolation } from "./tampering.js";

const exitFinding = (path: string, line: number): Finding => ({
  severity: "blocker",
  message: "`os._exit` at module level: importing the module ends the process before the tests report",
  path,
  line,
  rule: "tampering.exit",
});
const argvConcern: Finding = {
  severity: "warning",
  message: "`sys.argv` tested in a function: fine for a command-line tool's main",
  path: "solution.py",
  line: 4,
  rule: "tampering.branch_on_runner",
};

/** A gate stub: an exit finding on each line that says `EXIT`. */
function stubGate(requests: GateRequest[] = []): (req: GateRequest) => Promise<GateResult> {
  return async (req) => {
    requests.push(req);
    const findings = req.files.flatMap((f) =>
      f.content.split("\n").flatMap((line, i) => (line.includes("EXIT") ? [exitFinding(f.path, i + 1)] : [])),
    );
    return { blocked: findings.length > 0, findings };
  };
}

describe("improve: the tampering guard", () => {
  it("a clear finding is a `tampering` violation naming what and where; a warning is not", () => {
    const result: GateResult = { blocked: true, findings: [exitFinding("pkg/__init__.py", 2), argvConcern] };
    expect(tamperingViolation(result)).toEqual({
      reason: "tampering",
      message:
        "the change tampers with the evaluation: pkg/__init__.py:2: `os._exit` at module level: importing the module ends the process before the tests report (tampering.exit)",
      paths: ["pkg/__init__.py"],
    });
    expect(tamperingViolation({ blocked: false, findings: [argvConcern] })).toBeUndefined();
  });

  it("changeTampering gates the changed files as the generation's `validate_gate` step, against the parent", async () => {
    const requests: GateRequest[] = [];
    const read = (p: string) => (p === "pkg/__init__.py" ? "import x\n" : undefined);
    const patch = unifiedPatch(read, [{ path: "pkg/__init__.py", content: "EXIT\nimport x\n" }], []);
    const change = {
      taskId: "run-gen-2",
      generation: 2,
      language: "python" as const,
      patch,
      deleted: [],
      read,
      evaluation: ["bench/run.py"],
    };
    const v = await changeTampering(stubGate(requests), change);
    expect(v).toMatchObject({ reason: "tampering", paths: ["pkg/__init__.py"] });
    expect(requests.map((r) => [r.idempotencyKey, r.files.map((f) => f.content)])).toEqual([
      ["run-gen-2/2/validate_gate", ["EXIT\nimport x\n"]],
      ["run-gen-2/2/validate_gate_base", ["import x\n"]],
    ]);
    expect(requests[0]?.evaluation).toEqual(["bench/run.py"]);
    // Only deletions: no code to gate. A patch that does not apply: nothing here (VALIDATE reports it).
    expect(await changeTampering(stubGate(), { ...change, patch: "", deleted: ["pkg/__init__.py"] })).toBeUndefined();
    expect(await changeTampering(stubGate(), { ...change, read: () => "something else\n" })).toBeUndefined();
  });
});
