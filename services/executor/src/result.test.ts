import { describe, expect, it } from "vitest";
import type { ExecutionRequest } from "@loopsmith/shared/contracts";
import { MAX_TESTS_REPORTED, precheck, resultOf } from "./result.js";
import type { RunPlan } from "./repo-run.js";
import type { RawRun } from "./sandbox.js";

const req = (extra: Partial<ExecutionRequest> = {}): ExecutionRequest => ({
  v: 1,
  taskId: "t",
  iteration: 1,
  idempotencyKey: "t/1/execute",
  language: "python",
  files: [{ path: "test_a.py", content: "def test_a():\n    pass\n" }],
  timeoutMs: 10_000,
  memoryMb: 512,
  ...extra,
});
const spec = {
  image: "i",
  kind: "python",
  memoryBytes: 1,
  cpus: 1,
  pidsLimit: 1,
  tmpfsMb: 1,
  seccomp: "",
  labels: {},
} as const;
const plan: RunPlan = { argv: ["python3", "-m", "pytest"], runner: "pytest", env: {}, spec };
const junit = (cases: string) =>
  Buffer.from(`<testsuites><testsuite name="pytest">${cases}</testsuite></testsuites>`).toString("base64");
const raw = (exitCode: number, result?: string, extra: Partial<RawRun> = {}): RawRun => ({
  trailer: { phase: "run", exitCode, signal: null, durationMs: 12.3456, stragglers: 0, ...(result ? { result } : {}) },
  stdout: Buffer.from("out"),
  stderr: Buffer.from("err"),
  truncated: false,
  stopReason: null,
  oomKilled: false,
  containerExitCode: 0,
  wallMs: 40,
  ...extra,
});

describe("precheck", () => {
  it("blocks a request whose named test files are not in the workspace, unless it runs on a base tree", () => {
    expect(precheck(req(), 16 * 1024 * 1024)).toBeUndefined();
    const missing = precheck(req({ tests: ["test_a.py", "test_b.py"] }), 16 * 1024 * 1024);
    expect(missing?.result).toMatchObject({
      status: "blocked",
      reason: "the test files to run are not in the workspace: test_b.py",
    });
    expect(
      precheck(
        req({ tests: ["test_b.py"], base: { snapshot: "s", commit: "c".repeat(40) } } as Partial<ExecutionRequest>),
        16 * 1024 * 1024,
      ),
    ).toBeUndefined();
  });

  it("blocks files larger than the workspace", () => {
    const big = req({ files: [{ path: "big.py", content: "x".repeat(4096) }] });
    expect(precheck(big, 1024)?.result.status).toBe("blocked");
  });
});

describe("resultOf", () => {
  it("reads the JUnit file back into test cases, with the summary and the command's own duration", () => {
    const cases =
      '<testcase classname="test_a" name="test_ok" time="0.01"/><testcase classname="test_a" name="test_bad" time="0.02"><failure message="boom">x</failure></testcase>';
    const { result, stdout } = resultOf(raw(1, junit(cases)), plan, req());
    expect(result.status).toBe("failed");
    expect(result.tests.map((t) => [t.name, t.status])).toEqual([
      ["test_ok", "passed"],
      ["test_bad", "failed"],
    ]);
    expect(result.summary).toEqual({ total: 2, passed: 1, failed: 1, error: 0, skipped: 0 });
    expect(result.durationMs).toBe(12.346);
    expect(result.stdout).toBe("out");
    expect(stdout.toString()).toBe("out");
  });

  it("lists at most MAX_TESTS_REPORTED cases, the failing one among them, and counts them all", () => {
    const many = Array.from({ length: MAX_TESTS_REPORTED + 5 }, (_, i) =>
      i === MAX_TESTS_REPORTED + 2
        ? `<testcase classname="c" name="t${i}" time="0"><failure message="late">x</failure></testcase>`
        : `<testcase classname="c" name="t${i}" time="0"/>`,
    ).join("");
    const { result } = resultOf(raw(1, junit(many)), plan, req());
    expect(result.tests).toHaveLength(MAX_TESTS_REPORTED);
    expect(result.tests.some((t) => t.name === `t${MAX_TESTS_REPORTED + 2}` && t.status === "failed")).toBe(true);
    expect(result.summary).toMatchObject({ total: MAX_TESTS_REPORTED + 5, failed: 1 });
  });

  it("says when a failed setup left the run without its dependency layer, and reports the setup", () => {
    const withSetup: RunPlan = { ...plan, setup: { key: "k", status: "failed", durationMs: 3, message: "pip failed" } };
    const { result } = resultOf(raw(2), withSetup, req());
    expect(result.status).toBe("error");
    expect(result.reason).toMatch(/the setup command failed, so the run had no dependency layer/);
    expect(result.setup).toMatchObject({ status: "failed" });
  });

  it("uses wall time when the supervisor sent no trailer", () => {
    const { result } = resultOf(raw(0, undefined, { trailer: null, stopReason: "timeout" }), plan, req());
    expect(result.status).toBe("timeout");
    expect(result.durationMs).toBe(40);
  });
});
