import { describe, expect, it } from "vitest";
import type { Verdict } from "./outcome.js";
import { firstWord, missingCommand, shellArgv, shellOutcome } from "./shell.js";

const facts = { shell: "make check", tests: [], stdout: "", stderr: "", durationMs: 12.5 };

describe("shell runs", () => {
  it("turns exit code 127 into command_not_found, naming the command", () => {
    const v: Verdict = { status: "error", exitCode: 127, reason: "the command was not found" };
    const r = shellOutcome(v, { ...facts, shell: "FOO=1 pytest -q", stderr: "sh: 1: pytest: not found\n" });
    expect(r.verdict.status).toBe("command_not_found");
    expect(r.verdict.reason).toContain('"pytest"');
    expect(r.tests).toEqual([]);
    expect(missingCommand("", "A=1 B=2 tox -e py")).toBe("tox");
    expect(missingCommand("bash: line 1: nox: command not found", "x")).toBe("nox");
    expect(firstWord("  cd sub && make")).toBe("cd");
  });

  it("counts a run without JUnit as one synthetic case, passed or failed", () => {
    const passed = shellOutcome({ status: "passed", exitCode: 0 }, facts);
    expect(passed.tests).toEqual([{ name: "make check", classname: "command", status: "passed", durationMs: 12.5 }]);
    const failed = shellOutcome({ status: "failed", exitCode: 3 }, { ...facts, stderr: "boom\n" });
    expect(failed.tests[0]?.status).toBe("failed");
    expect(failed.tests[0]?.message).toBe("exit code 3\nboom");
  });

  it("keeps JUnit cases and every other verdict as they are", () => {
    const tests = [{ name: "test_a", classname: "t", status: "failed" as const, durationMs: 1 }];
    expect(shellOutcome({ status: "failed", exitCode: 1 }, { ...facts, tests }).tests).toBe(tests);
    for (const status of ["timeout", "oom", "output_limit", "killed", "error"] as const) {
      const v: Verdict = { status, exitCode: null, reason: "x" };
      expect(shellOutcome(v, facts)).toEqual({ verdict: v, tests: [] });
    }
  });
});

describe("shellArgv", () => {
  it("runs a line with sh, and with an image's prologue first in bash, stopping when the prologue fails", () => {
    expect(shellArgv("pytest -q")).toEqual(["sh", "-c", "pytest -q"]);
    const [bash, flag, script] = shellArgv(
      "pytest -q",
      "source /opt/miniconda3/bin/activate && conda activate testbed",
    );
    expect([bash, flag]).toEqual(["bash", "-c"]);
    expect(script?.split("\n")).toEqual([
      `source /opt/miniconda3/bin/activate && conda activate testbed || { echo "loopsmith: the image's prologue failed (exit $?)" >&2; exit 126; }`,
      "pytest -q",
    ]);
  });
});
