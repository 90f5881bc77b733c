import { describe, expect, it } from "vitest";
import { clampP, signedRankTest, signTestP } from "./paired.js";

describe("signTestP", () => {
  it("is the exact one-sided sign test and the exact two-sided McNemar test", () => {
    expect(signTestP(5, 0, "greater")).toBeCloseTo(1 / 32, 12);
    expect(signTestP(5, 0, "two-sided")).toBeCloseTo(1 / 16, 12);
    expect(signTestP(1, 1, "greater")).toBeCloseTo(0.75, 12);
    expect(signTestP(1, 1, "two-sided")).toBe(1);
    // P(X >= 2) for X ~ Binomial(6, 1/2) = 57/64.
    expect(signTestP(2, 4, "greater")).toBeCloseTo(57 / 64, 12);
    // Two-sided: the outcomes no more likely than 2 of 6: 0, 1, 2, 4, 5, 6 -> (1+6+15)*2/64.
    expect(signTestP(2, 4, "two-sided")).toBeCloseTo(44 / 64, 12);
  });

  it("gives 1 with no discordant pair, and refuses counts that are not counts", () => {
    expect(signTestP(0, 0, "greater")).toBe(1);
    expect(signTestP(0, 0, "two-sided")).toBe(1);
    expect(() => signTestP(-1, 2, "greater")).toThrow(RangeError);
    expect(() => signTestP(1.5, 2, "two-sided")).toThrow(RangeError);
  });
});

describe("signedRankTest", () => {
  it("is the exact signed-rank test, zeros dropped", () => {
    // n = 3, all positive: W+ = 6, the largest of 8 equally likely sign patterns.
    const up = signedRankTest([1, 2, 3], "greater");
    expect(up.pValue).toBeCloseTo(0.125, 12);
    expect([up.nonZero, up.upward]).toEqual([3, true]);
    expect(signedRankTest([0, 1, 0, 2, 3], "greater")).toEqual(up);
    expect(signedRankTest([1, 2, 3], "two-sided").pValue).toBeCloseTo(0.25, 12);
    const down = signedRankTest([-1, -2, -3], "greater");
    expect(down.pValue).toBe(1);
    expect(down.upward).toBe(false);
  });

  it("uses the exact p with fewer than two non-zero pairs", () => {
    expect(signedRankTest([], "greater")).toEqual({ pValue: 1, nonZero: 0, upward: false });
    expect(signedRankTest([0, 0], "two-sided")).toEqual({ pValue: 1, nonZero: 0, upward: false });
    expect(signedRankTest([0, 2], "greater")).toEqual({ pValue: 0.5, nonZero: 1, upward: true });
    expect(signedRankTest([2], "two-sided")).toEqual({ pValue: 1, nonZero: 1, upward: true });
    expect(signedRankTest([-2], "greater")).toEqual({ pValue: 1, nonZero: 1, upward: false });
  });
});

describe("clampP", () => {
  it("keeps a p-value in [0, 1], and 1 when it is not a number", () => {
    expect(clampP(1.0000000002)).toBe(1);
    expect(clampP(-1e-17)).toBe(0);
    expect(clampP(Number.NaN)).toBe(1);
    expect(clampP(0.3)).toBe(0.3);
  });
});
