/**
 * The small-benchmark warning `loopsmith improve` prints before generation 1: the
 * cases a perfect fix needs, and the one line.
 */
import { describe, expect, it } from "vitest";
import { fixesNeeded, smallBenchmarkWarning } from "./reports.js";

describe("the small-benchmark warning", () => {
  const calibration = (selectionFailing: number, selectionPassing = 10) => ({
    runs: 3,
    flaky: [],
    seed: 1,
    source: "fraction" as const,
    selection: [
      ...Array.from({ length: selectionFailing }, (_, i) => `f${i}`),
      ...Array.from({ length: selectionPassing }, (_, i) => `p${i}`),
    ],
    confirmation: ["f-held", "p-held"],
    parentFailing: [...Array.from({ length: selectionFailing }, (_, i) => `f${i}`), "f-held"],
  });

  it("needs the least n with 0.5^n below alpha", () => {
    expect([fixesNeeded(0.05), fixesNeeded(0.125), fixesNeeded(0.0164), fixesNeeded(1)]).toEqual([5, 4, 6, 1]);
    for (const a of [0.3, 0.05, 0.01, 0.001]) {
      const n = fixesNeeded(a);
      expect(0.5 ** n).toBeLessThan(a);
      expect(0.5 ** (n - 1)).toBeGreaterThanOrEqual(a);
    }
  });

  it("warns when no generation can reach significance, naming the figures and the remedies", () => {
    // --alpha 0.05 harmonic over 3 generations: α_1 = 0.05 / (1 + 1/2 + 1/3) = 0.0273; 4 failing
    // selection cases give p = 0.0625 at best; 6 are needed (0.5^6 = 0.0156).
    const line = smallBenchmarkWarning(calibration(4), { alpha: 0.05, generations: 3, alphaSpending: "harmonic" });
    expect(line).toBe(
      "warning: no generation of this run can be accepted: the selection set has 4 case(s) failing on the parent (of 14); a perfect fix gives p = 0.0625 at best (one-sided exact sign test), not below generation 1's level 0.0273 (--alpha 0.05 spent harmonic over 3 generation(s)); 6 failing selection case(s) are needed. Add failing cases to the benchmark, or use --alpha above 0.115, fewer --generations or a smaller --confirmation-fraction.",
    );
    expect(line).not.toContain("\n");
    // One generation at --alpha: fewer generations would not help, so the line does not offer it.
    expect(smallBenchmarkWarning(calibration(3), { alpha: 0.05, generations: 1, alphaSpending: "harmonic" })).toMatch(
      /level 0\.0500 .* use --alpha above 0\.125, a smaller --confirmation-fraction\.$/,
    );
  });

  it("says from which test on a perfect fix is out of reach, and is silent when it is in reach throughout", () => {
    // 6 failing: p = 0.0156 is below α_1 = 0.0273 but not α_2 = 0.0136; 7 reach α_3 = 0.00909.
    const line = smallBenchmarkWarning(calibration(6), { alpha: 0.05, generations: 3, alphaSpending: "harmonic" });
    expect(line).toMatch(
      /^warning: only the first 1 benchmarked generation\(s\) of 3 can be accepted: .*p = 0\.0156 .*test 2 /,
    );
    expect(line).toContain("7 failing selection case(s) would reach the last generation's level 0.00909");
    expect(
      smallBenchmarkWarning(calibration(8), { alpha: 0.05, generations: 3, alphaSpending: "harmonic" }),
    ).toBeUndefined();
    expect(
      smallBenchmarkWarning(calibration(5), { alpha: 0.05, generations: 9, alphaSpending: "none" }),
    ).toBeUndefined();
  });
});
