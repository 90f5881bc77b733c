/** Binary encodings for bulk inserts: the floats PostgreSQL would parse, and the byte layouts. */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { copyBinary, float4Of, vectorArrayParam, writeVector } from "./pg-binary.js";

/** Halfway between 1 and the next 4-byte float (1 + 2^-23); its shortest decimal is above it. */
const HALF_UP = 1 + 2 ** -24;

describe("float4Of", () => {
  it("is Math.fround except on a halfway number, where the side of its decimal form decides", () => {
    // fround rounds 1 + 2^-24 to even (1); strtof("1.0000000596046448") rounds up.
    expect(Math.fround(HALF_UP)).toBe(1);
    expect(String(HALF_UP)).toBe("1.0000000596046448");
    expect(float4Of(HALF_UP)).toBe(1 + 2 ** -23);
    expect(float4Of(-HALF_UP)).toBe(-(1 + 2 ** -23));
    // 0.5 + 2^-25 is halfway between 0.5 and 0.5 + 2^-24; its decimal is again above it.
    expect(float4Of(0.5 + 2 ** -25)).toBe(0.5 + 2 ** -24);
    // A halfway number whose decimal form is exact keeps fround's ties to even: 2^24 + 1 → 2^24.
    expect(String(2 ** 24 + 1)).toBe("16777217");
    expect(float4Of(2 ** 24 + 1)).toBe(2 ** 24);
    expect(float4Of(2 ** 24 + 3)).toBe(2 ** 24 + 4);
    expect(Object.is(float4Of(-0), 0)).toBe(true);
    expect(float4Of(0.1)).toBe(Math.fround(0.1));
    expect(float4Of(1e40)).toBe(Infinity);
    expect(float4Of(Number.NaN)).toBeNaN();
  });

  it("agrees with rounding the decimal form exactly (the strtof rule), on halfway and ordinary numbers", () => {
    // Reference: the 4-byte float nearest to the exact value of the decimal String(x), by
    // BigInt arithmetic in units of 10^-80 (exact for every number drawn here, |x| in [2^-30, 2^22)).
    const units = (text: string): bigint => {
      const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(text);
      if (!m) throw new Error(text);
      const frac = m[3] ?? "";
      const shift = 80 + Number(m[4] ?? 0) - frac.length;
      return (m[1] ? -1n : 1n) * BigInt(`${m[2]}${frac}`) * 10n ** BigInt(shift);
    };
    const nearest = (x: number): number => {
      const f = Math.fround(x);
      if (f === x) return f;
      const next = new Float32Array([f]);
      new Uint32Array(next.buffer)[0]! += Math.abs(x) > Math.abs(f) ? 1 : -1;
      const g = next[0]!;
      // 2 × decimal against lo + hi: the side of the midpoint the decimal is on (ties: fround's even).
      const twice = 2n * units(String(x));
      const sum = units(f.toFixed(80)) + units(g.toFixed(80));
      return twice === sum ? f : twice > sum ? Math.max(f, g) : Math.min(f, g);
    };
    const halfway = fc
      .tuple(fc.integer({ min: 1, max: 2 ** 23 - 1 }), fc.integer({ min: -20, max: 20 }), fc.boolean())
      .map(([m, e, neg]) => (neg ? -1 : 1) * (1 + (2 * m + 1) * 2 ** -24) * 2 ** e);
    fc.assert(
      fc.property(
        fc.oneof(
          halfway,
          fc.double({ min: -1, max: 1, noNaN: true }).filter((x) => Math.abs(x) >= 2 ** -30),
        ),
        (x) => {
          expect(float4Of(x)).toBe(nearest(x));
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

describe("binary layouts", () => {
  it("writes a vector as pgvector's vector_recv reads it", () => {
    const buf = Buffer.alloc(4 + 4 * 3);
    expect(writeVector(buf, 0, [0.5, -2, HALF_UP], 3)).toBe(16);
    expect(buf.readInt16BE(0)).toBe(3);
    expect(buf.readInt16BE(2)).toBe(0);
    expect([buf.readFloatBE(4), buf.readFloatBE(8), buf.readFloatBE(12)]).toEqual([0.5, -2, 1 + 2 ** -23]);
    expect(() => writeVector(buf, 0, [1, 2], 3)).toThrow(/2 numbers where 3/);
  });

  it("makes a one-dimensional vector[] as array_recv reads it", () => {
    const buf = vectorArrayParam(
      [
        [1, 2],
        [3, 4],
      ],
      2,
      12345,
    );
    expect([0, 4, 8, 12, 16].map((o) => buf.readInt32BE(o))).toEqual([1, 0, 12345, 2, 1]);
    expect(buf.readInt32BE(20)).toBe(12);
    expect(buf.readInt16BE(24)).toBe(2);
    expect(buf.readFloatBE(28)).toBe(1);
    expect(buf.readFloatBE(48)).toBe(4);
    expect(buf.length).toBe(20 + 2 * (4 + 12));
  });

  it("encodes COPY rows: header, text as UTF-8, int4, jsonb with its version byte, NULL, vector, trailer", () => {
    const buf = copyBinary(["text", "int4", "jsonb", "text", "vector"], [["é\t\\", -7, '{"a":1}', null, [1]]], 1);
    expect(buf.subarray(0, 11).toString("latin1")).toBe("PGCOPY\n\xff\r\n\0");
    expect(buf.readInt32BE(11)).toBe(0);
    expect(buf.readInt32BE(15)).toBe(0);
    let o = 19;
    expect(buf.readInt16BE(o)).toBe(5);
    o += 2;
    expect(buf.readInt32BE(o)).toBe(4); // "é" is 2 bytes, then a tab and a backslash, unescaped
    expect(buf.subarray(o + 4, o + 8).toString("utf8")).toBe("é\t\\");
    o += 8;
    expect([buf.readInt32BE(o), buf.readInt32BE(o + 4)]).toEqual([4, -7]);
    o += 8;
    expect([buf.readInt32BE(o), buf[o + 4]]).toEqual([8, 1]);
    expect(buf.subarray(o + 5, o + 12).toString()).toBe('{"a":1}');
    o += 12;
    expect(buf.readInt32BE(o)).toBe(-1);
    o += 4;
    expect(buf.readInt32BE(o)).toBe(8);
    expect(buf.readFloatBE(o + 8)).toBe(1);
    o += 12;
    expect(buf.readInt16BE(o)).toBe(-1);
    expect(buf.length).toBe(o + 2);
    expect(() => copyBinary(["int4"], [[2 ** 31]], 1)).toThrow(/32-bit integer/);
    expect(() => copyBinary(["text", "text"], [["a"]], 1)).toThrow(/1 values for 2 columns/);
  });
});
