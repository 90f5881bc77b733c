import { describe, expect, it } from "vitest";
import { CutStream, cutBytes, cutNote, cutText, cutUtf8, findCutNote } from "./cut.js";

/** A deterministic generator (mulberry32), so every chunking is the same on every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `bytes` written to a {@link CutStream} in chunks of 1 to `most` bytes. */
function streamed(bytes: Buffer, max: number, headShare: number, seed: number, most: number): CutStream {
  const next = random(seed);
  const s = new CutStream({ max, headShare });
  for (let at = 0; at < bytes.length;) {
    const n = 1 + Math.floor(next() * most);
    s.write(bytes.subarray(at, at + n));
    at += n;
  }
  return s;
}

/** The kept bytes around the note (the note's count and its bytes), or null when nothing was cut. */
function ends(out: Buffer): { head: Buffer; tail: Buffer; count: number } | null {
  const text = out.toString("latin1");
  const m = /\n\[\u00e2\u0080\u00a6 ([\d,]+) bytes cut \u00e2\u0080\u00a6\]\n/.exec(text);
  if (!m) return null;
  return {
    head: out.subarray(0, m.index),
    tail: out.subarray(m.index + m[0].length),
    count: Number((m[1] ?? "").replace(/,/g, "")),
  };
}

const INPUTS: Record<string, Buffer> = {
  ascii: Buffer.from("line of ascii output\n".repeat(500)),
  "two-byte": Buffer.from("é".repeat(4_001)),
  "three-byte": Buffer.from("日本語のテキスト".repeat(700)),
  "four-byte": Buffer.from("😀a😀😀".repeat(900)),
  mixed: Buffer.from(Array.from({ length: 3_000 }, (_, i) => ["a", "é", "€", "𝄞", "\n"][i % 5]).join("")),
  "invalid UTF-8": Buffer.from(Array.from({ length: 9_000 }, (_, i) => (i * 7919 + 13) % 256)),
  "just fits": Buffer.from("x".repeat(1_000)),
  "one past": Buffer.from("y".repeat(1_001)),
  empty: Buffer.alloc(0),
};

describe("cutNote", () => {
  it("says how much went and in which unit, on a line of its own, and reads back", () => {
    expect(cutNote(1_234_567, "bytes")).toBe("\n[… 1,234,567 bytes cut …]\n");
    expect(cutNote(3, "lines")).toBe("\n[… 3 lines cut …]\n");
    expect(findCutNote(`a${cutNote(98_765, "characters")}b`)).toEqual({ count: 98_765, unit: "characters" });
    expect(findCutNote("nothing cut here")).toBeNull();
  });
});

describe("cutBytes", () => {
  it("returns bytes that fit as they are", () => {
    const b = Buffer.from("short");
    expect(cutBytes(b, { max: 5 })).toBe(b);
  });

  for (const [name, input] of Object.entries(INPUTS)) {
    it(`keeps a prefix and a suffix within max and counts every byte cut: ${name}`, () => {
      for (const [max, headShare] of [
        [1_000, 0.5],
        [257, 0.5],
        [100, 1 / 3],
        [64, 0.6],
      ] as const) {
        const out = cutBytes(input, { max, headShare });
        if (input.length <= max) {
          expect(out.equals(input)).toBe(true);
          continue;
        }
        expect(out.length).toBeLessThanOrEqual(max);
        const cut = ends(out);
        expect(cut).not.toBeNull();
        if (!cut) continue;
        expect(input.subarray(0, cut.head.length).equals(cut.head)).toBe(true);
        expect(input.subarray(input.length - cut.tail.length).equals(cut.tail)).toBe(true);
        expect(cut.head.length + cut.count + cut.tail.length).toBe(input.length);
        // The head is about its share of what the note leaves: of the room beside the note of
        // what went (never more), and at least the share of the room beside a note counting
        // every byte, less one character (3 bytes).
        const room = max - Buffer.byteLength(cutNote(cut.count, "bytes"));
        const least = max - Buffer.byteLength(cutNote(input.length, "bytes"));
        expect(cut.head.length).toBeLessThanOrEqual(Math.floor(room * headShare));
        expect(cut.head.length).toBeGreaterThanOrEqual(Math.floor(least * headShare) - 3);
        // Where no character stands across an end, the cut fills max exactly.
        if (/ascii|just fits|one past/.test(name)) expect(out.length).toBe(max);
        if (!name.includes("invalid")) expect(out.toString("utf8")).not.toContain("\uFFFD");
      }
    });
  }

  it("gives the note alone when max is smaller than the note", () => {
    expect(cutBytes(Buffer.from("z".repeat(50)), { max: 4 }).toString()).toBe(cutNote(50, "bytes"));
  });

  it("refuses a head share outside 0..1", () => {
    expect(() => cutBytes(Buffer.alloc(10), { max: 2, headShare: 1.5 })).toThrow(/headShare/);
  });

  it("cut again with the whole size, takes the earlier note with the middle and counts both cuts", () => {
    const whole = Buffer.from("ab€".repeat(10_000));
    const first = cutBytes(whole, { max: 2_000 });
    for (const max of [2_000, 1_999, 1_500, 300]) {
      const again = cutBytes(first, { max, whole: whole.length });
      const cut = ends(again);
      expect(cut).not.toBeNull();
      if (!cut) continue;
      expect(again.toString("latin1").match(/bytes cut/g)).toHaveLength(1);
      expect(Buffer.concat([cut.head, cut.tail]).toString()).toMatch(/^[ab€]*$/);
      expect(cut.head.length + cut.count + cut.tail.length).toBe(whole.length);
      expect(whole.subarray(0, cut.head.length).equals(cut.head)).toBe(true);
      expect(whole.subarray(whole.length - cut.tail.length).equals(cut.tail)).toBe(true);
    }
  });

  it("cutUtf8 measures a string in UTF-8 bytes", () => {
    const out = cutUtf8("é".repeat(10_000), { max: 1_000 });
    expect(Buffer.byteLength(out)).toBeLessThanOrEqual(1_000);
    expect(out).not.toContain("\uFFFD");
    expect(findCutNote(out)?.unit).toBe("bytes");
    expect(cutUtf8("ééé", { max: 6 })).toBe("ééé");
  });
});

describe("CutStream", () => {
  for (const [name, input] of Object.entries(INPUTS)) {
    it(`gives what cutBytes gives on the same bytes, however they are chunked: ${name}`, () => {
      for (const [max, headShare] of [
        [1_000, 0.5],
        [257, 0.5],
        [100, 1 / 3],
        [4_096, 0.6],
      ] as const) {
        const once = cutBytes(input, { max, headShare });
        for (const [seed, most] of [
          [1, 1],
          [2, 3],
          [3, 17],
          [4, 700],
          [5, 100_000],
        ] as const) {
          const s = streamed(input, max, headShare, seed, most);
          expect(s.bytes().equals(once)).toBe(true);
          expect(s.total).toBe(input.length);
          expect(s.cut).toBe(input.length > max);
        }
      }
    });
  }

  it("holds about max bytes however much passes through it", () => {
    const s = new CutStream({ max: 4_096 });
    const chunk = Buffer.from("0123456789abcdef".repeat(64));
    for (let i = 0; i < 10_000; i++) s.write(chunk);
    const held = (s as unknown as { headBytes: number; tailBytes: number }).headBytes;
    const tail = (s as unknown as { tailBytes: number }).tailBytes;
    expect(held + tail).toBeLessThanOrEqual(4_096 + chunk.length);
    expect(s.total).toBe(10_000 * chunk.length);
    expect(s.bytes().length).toBeLessThanOrEqual(4_096);
  });

  it("says when it passed max as the byte past it arrives", () => {
    const s = new CutStream({ max: 10 });
    expect(s.write(Buffer.from("0123456789"))).toBe(false);
    expect(s.write(Buffer.from("a"))).toBe(true);
  });
});

describe("cutText", () => {
  it("leaves a text within max alone and counts characters, never splitting a surrogate pair", () => {
    expect(cutText("short", { max: 100 })).toBe("short");
    const text = "😀".repeat(1_000);
    for (const max of [100, 101, 333]) {
      const out = cutText(text, { max, headShare: 1 / 3 });
      expect(out.length).toBeLessThanOrEqual(max);
      const note = findCutNote(out);
      expect(note?.unit).toBe("characters");
      const kept = out.replace(/\n\[… [\d,]+ characters cut …\]\n/, "");
      expect(kept).toMatch(/^(😀)+$/u);
      expect(kept.length + (note?.count ?? 0)).toBe(text.length);
    }
  });

  it("keeps the head's share of the room and the tail the rest", () => {
    const text = `HEAD${"x".repeat(10_000)}TAIL`;
    const out = cutText(text, { max: 400, headShare: 1 / 3 });
    const [head, tail] = out.split(/\n\[… [\d,]+ characters cut …\]\n/);
    expect(out.length).toBeLessThanOrEqual(400);
    expect(out.length).toBeGreaterThan(395);
    expect(head?.startsWith("HEAD")).toBe(true);
    expect(tail?.endsWith("TAIL")).toBe(true);
    expect(Math.abs((tail?.length ?? 0) - 2 * (head?.length ?? 0))).toBeLessThanOrEqual(2);
  });

  it("cuts by lines first, counting lines, and by characters when those lines are still too long", () => {
    const numbered = (n: number, width: number): string =>
      Array.from({ length: n }, (_, i) => `${i + 1}: ${"x".repeat(width)}`).join("\n") + "\n";
    const lines = { head: 3, tail: 2 };
    const short = cutText(numbered(10, 1), { max: 1_000, lines });
    expect(short).toBe("1: x\n2: x\n3: x\n[… 5 lines cut …]\n9: x\n10: x\n");
    expect(cutText(numbered(5, 1), { max: 1_000, lines })).toBe(numbered(5, 1));
    const long = cutText(numbered(10, 100), { max: 300, headShare: 0.6, lines });
    expect(long.length).toBeLessThanOrEqual(300);
    expect(long.startsWith("1: x")).toBe(true);
    expect(long.endsWith("x\n")).toBe(true);
    expect(findCutNote(long)?.unit).toBe("characters");
  });
});
