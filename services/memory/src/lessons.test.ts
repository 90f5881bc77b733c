import { describe, expect, it } from "vitest";
import { DEMOTE_AFTER, demotionOf, utilityOf } from "./lessons.js";

describe("a memory's utility estimate", () => {
  it("is the difference of Laplace-smoothed pass rates, with its standard error", () => {
    // Shown to 8 tasks, 6 passed; 10 comparable tasks not shown it, 3 passed.
    const { utility, stderr } = utilityOf(8, 6, 10, 3);
    expect(utility).toBeCloseTo(7 / 10 - 4 / 12, 12);
    expect(stderr).toBeCloseTo(Math.sqrt((0.7 * 0.3) / 10 + ((4 / 12) * (8 / 12)) / 12), 12);
    expect(utilityOf(0, 0, 10, 3)).toEqual({ utility: null, stderr: null });
    // No comparable task: the baseline is the prior's 1/2.
    expect(utilityOf(1, 1, 0, 0).utility).toBeCloseTo(2 / 3 - 1 / 2, 12);
  });

  it(`demotes after ${DEMOTE_AFTER} tasks none of which passed, or a reliably negative utility, and not before`, () => {
    expect(demotionOf(DEMOTE_AFTER - 1, 0, 0, 0)).toBeUndefined();
    expect(demotionOf(DEMOTE_AFTER, 0, 0, 0)).toBe(`recalled in ${DEMOTE_AFTER} tasks, none of which passed`);
    // 1 of 40 passed against 90 of 100: reliably negative.
    expect(demotionOf(40, 1, 100, 90)).toMatch(/^utility -0\.8\d ± 0\.\d\d is reliably negative$/);
    // 5 of 10 against 6 of 10: negative, but within the noise.
    expect(demotionOf(10, 5, 10, 6)).toBeUndefined();
    expect(demotionOf(10, 9, 10, 2)).toBeUndefined();
  });
});
