import { describe, expect, it } from "vitest";
import { ErrorCode } from "@loopsmith/shared";
import {
  EXIT_CODE_MEANINGS,
  ExitCode,
  exitCodeForError,
  exitCodeForExecution,
  exitCodeForResult,
} from "./exit-codes.js";
import { CliError, errorObject } from "./errors.js";

describe("exit codes", () => {
  it("one meaning per code, and the documented numbers", () => {
    expect(ExitCode).toEqual({ ok: 0, failed: 1, usage: 2, infrastructure: 3, interrupted: 130 });
    expect(
      Object.keys(EXIT_CODE_MEANINGS)
        .map(Number)
        .sort((a, b) => a - b),
    ).toEqual([0, 1, 2, 3, 130]);
  });

  it("usage and configuration errors are 2, infrastructure 3, a cancel 130; every error code has one", () => {
    for (const code of ["bad_request", "not_found", "config_invalid", "workspace_invalid", "llm_auth"])
      expect(exitCodeForError(code)).toBe(2);
    for (const code of ["unavailable", "timeout", "sandbox_error", "db_error", "internal", "llm_overloaded"])
      expect(exitCodeForError(code)).toBe(3);
    expect(exitCodeForError("cancelled")).toBe(130);
    expect(exitCodeForError("ENOENT")).toBe(3);
    for (const code of ErrorCode.options) expect(Object.values(ExitCode)).toContain(exitCodeForError(code));
  });

  it("a task result: passed 0, failed (tests or a limit) 1, cancelled 130, error by its code", () => {
    expect(exitCodeForResult({ status: "passed" })).toBe(0);
    expect(exitCodeForResult({ status: "failed" })).toBe(1);
    expect(exitCodeForResult({ status: "cancelled" })).toBe(130);
    expect(exitCodeForResult({ status: "error", error: { code: "llm_auth", message: "", retryable: false } })).toBe(2);
    expect(exitCodeForResult({ status: "error", error: { code: "unavailable", message: "", retryable: true } })).toBe(
      3,
    );
    expect(exitCodeForResult({ status: "error" })).toBe(3);
  });

  it("a sandbox run: passed 0, sandbox_error 3, anything else 1", () => {
    expect(exitCodeForExecution({ status: "passed" })).toBe(0);
    expect(exitCodeForExecution({ status: "sandbox_error" })).toBe(3);
    expect(exitCodeForExecution({ status: "timeout" })).toBe(1);
  });

  it("the --json error object", () => {
    expect(errorObject(new CliError("unavailable", "no NATS", { taskId: "t-1" }))).toEqual({
      kind: "error",
      code: "unavailable",
      message: "no NATS",
      exitCode: 3,
      taskId: "t-1",
    });
    expect(errorObject(new TypeError("x is undefined"))).toEqual({
      kind: "error",
      code: "internal",
      message: "unexpected error: x is undefined",
      exitCode: 3,
    });
  });
});
