import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "@loopsmith/shared/runtime";
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

describe("an await nothing can settle (Node's silent exit 13)", () => {
  // A module as the CLI's main is: the guard, then a top-level await. Run through tsx.
  const program = (body: string): string => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-unsettled-"));
    const file = join(dir, "main.mts");
    const errors = pathToFileURL(fileURLToPath(new URL("./errors.ts", import.meta.url))).href;
    writeFileSync(
      file,
      `import { reportUnsettledExit } from ${JSON.stringify(errors)};\nlet settled = false;\nreportUnsettledExit(() => settled, { json: true, command: "loopsmith demo" });\n${body}\n`,
    );
    return file;
  };
  const runIt = (file: string) =>
    spawnSync(process.execPath, ["--import", "tsx", file], { encoding: "utf8", timeout: 30_000 });

  it("is reported as an internal error naming the command, exit 3, one JSON error line", () => {
    const r = runIt(program("await new Promise(() => {});\nsettled = true;"));
    expect(r.status).toBe(3);
    expect(r.stderr).toContain("loopsmith: internal error: `loopsmith demo` stopped while waiting");
    expect(r.stderr).toContain("Node exit 13");
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] as string)).toMatchObject({ kind: "error", code: "internal", exitCode: 3 });
  }, 30_000);

  it("leaves a command that settled alone, whatever its exit code", () => {
    const ok = runIt(program("await new Promise((r) => setTimeout(r, 10));\nsettled = true;"));
    expect([ok.status, ok.stdout, ok.stderr]).toEqual([0, "", ""]);
    const failed = runIt(program("settled = true;\nprocess.exitCode = 1;"));
    expect([failed.status, failed.stdout]).toEqual([1, ""]);
  }, 30_000);
});
