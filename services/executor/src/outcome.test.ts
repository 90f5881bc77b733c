import { describe, expect, it } from "vitest";
import { verdict, type Outcome } from "./outcome.js";

const base: Outcome = {
  runner: "pytest",
  stopReason: null,
  oomKilled: false,
  trailer: { phase: "run", exitCode: 0, signal: null, durationMs: 5, stragglers: 0 },
  containerExitCode: 0,
  tests: [],
  timeoutMs: 1000,
  memoryMb: 128,
};
const exit = (exitCode: number, runner: Outcome["runner"] = "pytest"): Outcome => ({
  ...base,
  runner,
  trailer: { phase: "run", exitCode, signal: null, durationMs: 5, stragglers: 0 },
});

describe("verdict", () => {
  it("maps pytest exit codes", () => {
    expect(verdict(exit(0)).status).toBe("passed");
    expect(verdict(exit(1)).status).toBe("failed");
    for (const code of [2, 3, 4, 5]) expect(verdict(exit(code)).status, String(code)).toBe("error");
  });

  it("maps custom commands and node", () => {
    expect(verdict(exit(3, "custom")).status).toBe("failed");
    expect(verdict(exit(127, "custom")).status).toBe("error");
    expect(verdict(exit(1, "node")).status).toBe("error"); // no test ran: it could not load
    const ran = {
      ...exit(1, "node"),
      tests: [
        { name: "a", classname: "", status: "failed" as const, durationMs: 0 },
        { name: "b", classname: "", status: "passed" as const, durationMs: 0 },
      ],
    };
    expect(verdict(ran).status).toBe("failed");
    const onlyFailing = {
      ...exit(1, "node"),
      tests: [
        { name: "adds", classname: "test", status: "failed" as const, durationMs: 0, message: "ERR_TEST_FAILURE" },
      ],
    };
    expect(verdict(onlyFailing).status).toBe("failed");
    const fileLevel = {
      ...exit(1, "node"),
      tests: [{ name: "/workspace/bad.test.js", classname: "test", status: "failed" as const, durationMs: 0 }],
    };
    expect(verdict(fileLevel).status).toBe("error");
  });

  it("puts the executor's own stops first, then the OOM killer, then signals", () => {
    expect(verdict({ ...base, stopReason: "timeout", oomKilled: true }).status).toBe("timeout");
    expect(verdict({ ...base, stopReason: "output_limit" }).status).toBe("output_limit");
    expect(verdict({ ...base, stopReason: "cancelled" }).status).toBe("killed");
    expect(verdict({ ...base, oomKilled: true }).status).toBe("oom");
    const segv = verdict({
      ...base,
      trailer: { phase: "run", exitCode: null, signal: 11, durationMs: 1, stragglers: 0 },
    });
    expect(segv).toMatchObject({ status: "killed", exitCode: 139 });
    expect(segv.reason).toContain("SIGSEGV");
    expect(verdict({ ...base, trailer: null, containerExitCode: 137 }).status).toBe("killed");
    expect(
      verdict({
        ...base,
        trailer: { phase: "setup", error: "ENOSPC", exitCode: null, signal: null, durationMs: 0, stragglers: 0 },
      }).status,
    ).toBe("blocked");
  });
});
