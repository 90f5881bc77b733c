import { describe, expect, it } from "vitest";
import { OBSERVATION_CUT, cutObservation, renderObservation } from "./observe.js";

const numbered = (n: number, width = 10): string =>
  Array.from({ length: n }, (_, i) => `${i + 1}: ${"x".repeat(width)}`).join("\n") + "\n";

describe("cutObservation", () => {
  it("leaves an output within the rule as it is", () => {
    const text = numbered(100);
    expect(cutObservation(text)).toBe(text);
  });

  it("keeps the first 60 and the last 40 lines and says what was cut, line numbers intact", () => {
    const text = numbered(2_000);
    const out = cutObservation(text);
    const lines = out.split("\n");
    expect(lines[0]).toBe(`1: ${"x".repeat(10)}`);
    expect(lines[59]).toBe(`60: ${"x".repeat(10)}`);
    // Lines 61..1960 went.
    expect(lines[60]).toBe("[… 1,900 lines cut …]");
    expect(lines[61]).toBe(`1961: ${"x".repeat(10)}`);
    expect(out.trimEnd().split("\n").at(-1)).toBe(`2000: ${"x".repeat(10)}`);
    expect(out.length).toBeLessThanOrEqual(OBSERVATION_CUT.maxChars);
  });

  it("cuts by characters when the kept lines are still too long, and never passes the limit", () => {
    const text = numbered(300, 400);
    for (const rule of [OBSERVATION_CUT, { ...OBSERVATION_CUT, maxChars: 4_000 }]) {
      const out = cutObservation(text, rule);
      expect(out.length).toBeLessThanOrEqual(rule.maxChars);
      expect(out.startsWith("1: x")).toBe(true);
      const note = /\n\[… ([\d,]+) characters cut …\]\n/.exec(out);
      expect(note).not.toBeNull();
      // The note counts every character that went: the kept ones and it make up the whole.
      expect(out.length - (note?.[0].length ?? 0) + Number(note?.[1]?.replace(/,/g, ""))).toBe(text.length);
      expect(out.trimEnd().endsWith("x")).toBe(true);
      // The head keeps about 60 % of the room, the tail the rest.
      const [head = "", tail = ""] = out.split(note?.[0] ?? "");
      expect(head.length / (head.length + tail.length)).toBeCloseTo(0.6, 2);
    }
  });

  it("cuts one very long line in its middle", () => {
    const text = "a".repeat(5_000) + "b".repeat(5_000);
    const out = cutObservation(text);
    expect(out.length).toBeLessThanOrEqual(OBSERVATION_CUT.maxChars);
    expect(out.startsWith("aaa")).toBe(true);
    expect(out.endsWith("bbb")).toBe(true);
    expect(out).toMatch(/\n\[… [\d,]+ characters cut …\]\n/);
  });
});

describe("renderObservation", () => {
  it("puts a run's exit code above its output and says when the sandbox capped it", () => {
    const text = renderObservation("run", { output: "boom", ok: false, exitCode: 2, totalBytes: 9_000, durationMs: 1 });
    expect(text).toBe("exit code 2\nboom\n[the sandbox kept 4 of 9,000 bytes of output]");
    expect(
      renderObservation("run", { output: "", ok: false, exitCode: null, timedOut: true, totalBytes: 0, durationMs: 1 }),
    ).toMatch(/^killed: it passed its timeout/);
  });

  it("says the executor's cut of a read or a search too", () => {
    const read = renderObservation("read", {
      output: "1: a",
      ok: true,
      total: 9,
      totalBytes: 2_000_000,
      durationMs: 1,
    });
    expect(read).toBe("1: a\n[the sandbox kept 4 of 2,000,000 bytes of output]");
    const whole = renderObservation("search", { output: "a:1: x", ok: true, total: 1, totalBytes: 6, durationMs: 1 });
    expect(whole).toBe("1 matches\na:1: x");
  });
});
