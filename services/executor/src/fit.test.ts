import { describe, expect, it } from "vitest";
import type { ExecutionResult } from "@loopsmith/shared";
import { fitResult, headTail } from "./fit.js";

const result = (stdout: string, stderr: string): ExecutionResult => ({
  status: "passed",
  exitCode: 0,
  durationMs: 1,
  tests: [],
  stdout,
  stderr,
  truncated: false,
});

describe("fitResult", () => {
  it("leaves a small result alone", () => {
    const r = result("a", "b");
    expect(fitResult(r, 1024 * 1024)).toBe(r);
  });

  it("keeps head and tail of both streams so the JSON fits", () => {
    const r = result(`HEAD${"o".repeat(900_000)}TAIL`, `\u0001${"e".repeat(900_000)}END`);
    const fitted = fitResult(r, 1024 * 1024);
    expect(Buffer.byteLength(JSON.stringify(fitted))).toBeLessThanOrEqual(1024 * 1024);
    expect(fitted.truncated).toBe(true);
    expect(fitted.stdout.startsWith("HEAD")).toBe(true);
    expect(fitted.stdout.endsWith("TAIL")).toBe(true);
    expect(fitted.stderr.endsWith("END")).toBe(true);
    expect(fitted.stdout).toMatch(/bytes cut/);
  });

  it("headTail respects its byte budget with multi-byte text", () => {
    const cut = headTail("é".repeat(10_000), 1000);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(1000);
    expect(cut).not.toContain("\uFFFD");
  });

  it("fits a run of 90 000 test cases: failing cases first, the whole run counted in summary", () => {
    const tests: ExecutionResult["tests"] = Array.from({ length: 90_000 }, (_, i) => ({
      name: `test_case_${i}`,
      classname: "test_many.TestMany",
      status: i % 9_000 === 4_500 ? "failed" : "passed",
      ...(i % 9_000 === 4_500 ? { message: `AssertionError: case ${i}` } : {}),
      durationMs: 0.1,
    }));
    const r: ExecutionResult = { ...result("x".repeat(500_000), ""), status: "failed", exitCode: 1, tests };
    const fitted = fitResult(r, 1024 * 1024);
    expect(Buffer.byteLength(JSON.stringify(fitted))).toBeLessThanOrEqual(1024 * 1024);
    expect(fitted.summary).toEqual({ total: 90_000, passed: 89_990, failed: 10, error: 0, skipped: 0 });
    expect(fitted.tests.length).toBeLessThan(90_000);
    expect(fitted.tests.slice(0, 10).every((t) => t.status === "failed")).toBe(true);
    expect(fitted.truncated).toBe(true);
  });
});
