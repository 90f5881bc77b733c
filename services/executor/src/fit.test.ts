import { describe, expect, it } from "vitest";
import type { ExecutionResult, SessionObservation } from "@loopsmith/shared/contracts";
import { CutStream, cutNote } from "@loopsmith/shared/text";
import { fitObservation, fitResult, RUN_OUTPUT_LIMIT_BYTES } from "./fit.js";

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
    expect(fitted.stdout).toMatch(/\n\[… [\d,]+ bytes cut …\]\n/);
  });

  it("cuts multi-byte output within its byte budget without splitting a character", () => {
    const r = result("é".repeat(400_000), "€".repeat(400_000));
    const fitted = fitResult(r, 1024 * 1024);
    expect(Buffer.byteLength(JSON.stringify(fitted))).toBeLessThanOrEqual(1024 * 1024);
    expect(fitted.stdout).not.toContain("\uFFFD");
    expect(fitted.stderr).not.toContain("\uFFFD");
    expect(cutOf(fitted.stdout).cut + cutOf(fitted.stdout).kept).toBe(800_000);
    expect(cutOf(fitted.stderr).cut + cutOf(fitted.stderr).kept).toBe(1_200_000);
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

const MAX_PAYLOAD = 1024 * 1024;
const NOTE = /\n\[… ([\d,]+) bytes cut …\]\n/g;
const replyBytes = (o: SessionObservation): number => Buffer.byteLength(JSON.stringify({ ok: true, value: o }));

/** A session run's observation of `output` as the capture keeps it (head and tail past 1 MiB). */
function captured(output: Buffer): SessionObservation {
  const kept = new CutStream({ max: RUN_OUTPUT_LIMIT_BYTES });
  for (let i = 0; i < output.length; i += 64 * 1024) kept.write(output.subarray(i, i + 64 * 1024));
  return {
    output: kept.bytes().toString("utf8"),
    ok: true,
    exitCode: 0,
    timedOut: false,
    totalBytes: kept.total,
    durationMs: 1,
  };
}

/** How many notes `text` carries, the first one's count, and the bytes kept around it. */
function cutOf(text: string): { notes: number; cut: number; kept: number } {
  const notes = [...text.matchAll(NOTE)];
  const note = notes[0];
  return {
    notes: notes.length,
    cut: Number(note?.[1]?.replace(/,/g, "") ?? 0),
    kept: Buffer.byteLength(text) - Buffer.byteLength(note?.[0] ?? ""),
  };
}

describe("the capture's cut and the reply's cut", () => {
  it("keep one note between them that counts every byte cut", () => {
    const whole = 3 * RUN_OUTPUT_LIMIT_BYTES;
    const once = captured(Buffer.from("y".repeat(whole)));
    expect(Buffer.byteLength(once.output)).toBeLessThanOrEqual(RUN_OUTPUT_LIMIT_BYTES);
    expect(cutOf(once.output)).toMatchObject({ notes: 1 });
    expect(cutOf(once.output).cut + cutOf(once.output).kept).toBe(whole);
    const twice = fitObservation(once, 256 * 1024);
    expect(cutOf(twice.output)).toMatchObject({ notes: 1 });
    expect(cutOf(twice.output).cut + cutOf(twice.output).kept).toBe(whole);
    expect(cutNote(5, "bytes")).toBe("\n[… 5 bytes cut …]\n");
  });
});

describe("fitObservation", () => {
  it("leaves a reply that fits alone", () => {
    const o = captured(Buffer.from("hello\n"));
    expect(fitObservation(o, MAX_PAYLOAD)).toBe(o);
  });

  it("fits 50 MB of `yes AAAA` output: head and tail kept, one note counting every byte cut", () => {
    const o = captured(Buffer.from("AAAA\n".repeat(10_000_000)));
    expect(replyBytes(o)).toBeGreaterThan(MAX_PAYLOAD);
    const fitted = fitObservation(o, MAX_PAYLOAD);
    expect(replyBytes(fitted)).toBeLessThanOrEqual(MAX_PAYLOAD);
    expect(fitted.totalBytes).toBe(50_000_000);
    expect(fitted.output.startsWith("AAAA\nAAAA\n")).toBe(true);
    expect(fitted.output.endsWith("AAAA\nAAAA\n")).toBe(true);
    const { notes, cut, kept } = cutOf(fitted.output);
    expect(notes).toBe(1);
    expect(cut + kept).toBe(50_000_000);
    expect(kept).toBeGreaterThan(500_000);
  });

  it("fits output of control bytes, whose JSON is six times longer, and random bytes", () => {
    for (const bytes of [
      Buffer.alloc(5_000_000, 1),
      Buffer.from(Array.from({ length: 5_000_000 }, (_, i) => (i * 7919) % 256)),
    ]) {
      const o = captured(bytes);
      expect(replyBytes(o)).toBeGreaterThan(MAX_PAYLOAD);
      const fitted = fitObservation(o, MAX_PAYLOAD);
      expect(replyBytes(fitted)).toBeLessThanOrEqual(MAX_PAYLOAD);
      expect(cutOf(fitted.output).notes).toBe(1);
      expect(fitted.totalBytes).toBeGreaterThan(Buffer.byteLength(fitted.output));
    }
  });

  it("takes the capture's note with the middle when a larger max_payload keeps more than it", () => {
    // Invalid UTF-8 in the head only: decoded, the head is three times the tail.
    const o = captured(Buffer.concat([Buffer.alloc(3_000_000, 0xff), Buffer.from("z".repeat(3_000_000))]));
    const fitted = fitObservation(o, 2 * MAX_PAYLOAD);
    expect(replyBytes(fitted)).toBeLessThanOrEqual(2 * MAX_PAYLOAD);
    expect(cutOf(fitted.output).notes).toBe(1);
    expect(fitted.output.endsWith("zzz")).toBe(true);
  });

  it("fits a read of a large file the same way, and says the note alone when nothing else fits", () => {
    const output = Array.from({ length: 200_000 }, (_, i) => `${i + 1}: ${"é".repeat(10)}`).join("\n");
    const read: SessionObservation = {
      output,
      ok: true,
      total: 200_000,
      totalBytes: Buffer.byteLength(output),
      durationMs: 1,
    };
    const fitted = fitObservation(read, 256 * 1024);
    expect(replyBytes(fitted)).toBeLessThanOrEqual(256 * 1024);
    expect(fitted.output.startsWith("1: é")).toBe(true);
    expect(fitted.output.endsWith(`200000: ${"é".repeat(10)}`)).toBe(true);
    expect(cutOf(fitted.output).cut + cutOf(fitted.output).kept).toBe(read.totalBytes);
    expect(fitObservation(read, 1_000).output).toMatch(/^\n\[… [\d,]+ bytes cut …\]\n$/);
  });
});
