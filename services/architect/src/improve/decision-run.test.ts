/**
 * The decision of a run with selection and confirmation sets (decision.ts): the calibration and the seeded stratified split, the
 * selection test at α_j, the confirmation test (sign test or fix rate) and `overfit`, the
 * run's alpha spending, and early stopping only to reject. Fabricated paired outcomes.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import type { CaseOutcome } from "@loopsmith/shared/contracts";
import type { CaseRun } from "./bench-output.js";
import {
  alphaSpent,
  calibrate,
  decideGeneration,
  fixRateP,
  futile,
  testAlpha,
  type GenerationDecideOptions,
} from "./decision.js";

const id = (i: number) => `c${String(i).padStart(3, "0")}`;
const many = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));

function pf(c: string, parent: boolean, candidate: boolean): CaseOutcome {
  return {
    case: c,
    parent: { passes: parent ? 1 : 0, runs: 1, scores: [] },
    candidate: { passes: candidate ? 1 : 0, runs: 1, scores: [] },
  };
}

function opts(confirmation: string[], over: Partial<GenerationDecideOptions> = {}): GenerationDecideOptions {
  return {
    alpha: 0.05,
    confirmationAlpha: 0.05,
    tolerance: 0,
    confirmation: new Set(confirmation),
    flaky: new Set(),
    ...over,
  };
}

/** 40 cases: c000–c003 pass on the parent; of the 36 failing, c004–c028 are selection, c029–c039 confirmation. */
const CONFIRMATION = many(11, (i) => id(29 + i));
const fixedBy = (fix: (i: number) => boolean) => many(40, (i) => pf(id(i), i < 4, i < 4 || fix(i)));

describe("decideGeneration: selection and confirmation sets", () => {
  it("rejects overfit a candidate fixing exactly the selection's failing cases; accepts the real fix", () => {
    const overfit = decideGeneration(
      fixedBy((i) => i < 29),
      opts(CONFIRMATION),
    );
    expect(overfit.reason).toBe("overfit");
    expect(overfit.statistic.selection).toMatchObject({ test: "sign_exact", fixed: 25, broken: 0, passed: true });
    expect(overfit.statistic.confirmation).toMatchObject({ fixed: 0, parentFailing: 11, passed: false });
    const real = decideGeneration(
      fixedBy(() => true),
      opts(CONFIRMATION),
    );
    expect(real.reason).toBe("accepted");
    // 11 discordant confirmation pairs: the sign test, p = 0.5^11.
    expect(real.statistic.confirmation).toMatchObject({ test: "sign_exact", fixed: 11, passed: true });
    expect(real.statistic.confirmation?.pValue).toBeCloseTo(0.5 ** 11, 12);
    expect(real.cases.filter((c) => c.set === "confirmation").map((c) => c.case)).toEqual(CONFIRMATION);
  });

  it("with too few discordant confirmation pairs, compares fix rates (one-sided Fisher)", () => {
    // Selection fixes 10 of 25 failing, confirmation 2 of 11: rates 0.4 and 0.18, consistent at 0.05.
    const fixes = new Set([...many(10, (i) => 4 + i), 29, 30]);
    const d = decideGeneration(
      fixedBy((i) => fixes.has(i)),
      opts(CONFIRMATION),
    );
    expect(d.statistic.confirmation?.test).toBe("fix_rate");
    expect(d.reason).toBe("accepted");
    // The Fisher tail by hand: P(X ≤ 2), X ~ Hypergeometric(36 failing, 12 fixed, 11 drawn).
    const C = (n: number, k: number): number => (k < 0 || k > n ? 0 : k === 0 ? 1 : (C(n - 1, k - 1) * n) / k);
    const tail = [0, 1, 2].reduce((s, x) => s + (C(12, x) * C(24, 11 - x)) / C(36, 11), 0);
    expect(d.statistic.confirmation?.pValue).toBeCloseTo(tail, 12);
    expect(fixRateP(10, 25, 2, 11)).toBeCloseTo(tail, 12);
  });

  it("counts a case whose parent runs disagree in this generation as flaky", () => {
    const twice = (c: string, parent: number, candidate: number): CaseOutcome => ({
      case: c,
      parent: { passes: parent, runs: 2, scores: [] },
      candidate: { passes: candidate, runs: 2, scores: [] },
    });
    const d = decideGeneration([twice("a", 1, 0), twice("b", 2, 0), twice("c", 0, 2)], opts([]));
    expect(d.cases.map((c) => c.flaky ?? false)).toEqual([true, false, false]);
    expect(d.statistic).toMatchObject({ fixed: 1, broken: 1, flaky: 1 });
  });

  it("leaves flaky cases out of both tests and of the regression count", () => {
    const cases = fixedBy((i) => i < 8);
    cases[0] = pf(id(0), true, false); // a flaky parent-passing case fails on the candidate
    const flaky = new Set([id(0)]);
    const withFlaky = decideGeneration(cases, opts([], { flaky }));
    expect(withFlaky.statistic).toMatchObject({ broken: 0, fixed: 4, flaky: 1 });
    expect(withFlaky.cases[0]?.flaky).toBe(true);
    expect(decideGeneration(cases, opts([])).reason).toBe("regression");
  });

  it("quotes broken selection ids and only counts broken held-out ones", () => {
    const cases = many(20, (i) => pf(id(i), true, i !== 3 && i !== 15));
    const d = decideGeneration(cases, opts([id(15)]));
    expect(d.reason).toBe("regression");
    expect(d.message).toContain('"c003"');
    expect(d.message).not.toContain("c015");
    expect(d.message).toContain("1 of them held out");
  });

  it("accepted ⇒ selection p < α_j and fixed > broken (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.boolean(), fc.boolean()), { minLength: 1, maxLength: 60 }),
        fc.double({ min: 0.001, max: 0.2, noNaN: true }),
        (rows, alpha) => {
          const cases = rows.map(([p, c], i) => pf(id(i), p, c));
          const confirmation = rows.flatMap(([, , held], i) => (held ? [id(i)] : []));
          const d = decideGeneration(cases, opts(confirmation, { alpha }));
          if (d.verdict === "accepted") {
            const s = d.statistic.selection;
            expect(s && s.pValue < alpha && s.fixed > s.broken).toBe(true);
            expect(d.statistic.confirmation?.passed ?? true).toBe(true);
          }
          if (d.reason === "overfit") expect(d.statistic.selection?.passed).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("calibrate", () => {
  const run = (pass: (i: number) => boolean, n = 50): CaseRun[] => many(n, (i) => ({ case: id(i), pass: pass(i) }));

  it("finds the flaky cases and splits each stratum 70/30, the same for the same seed", () => {
    const runs = [run((i) => i < 20), run((i) => i < 20 || i === 45), run((i) => i < 20 && i !== 7)];
    const a = calibrate(runs, { fraction: 0.3, holdout: [], seed: 7 });
    if (!a.ok) throw new Error(a.error);
    expect(a.calibration.flaky).toEqual([id(7), id(45)]);
    expect(a.calibration.parentFailing).toHaveLength(29);
    const conf = new Set(a.calibration.confirmation);
    // 19 stable passing → 6, 29 failing → 9, 2 flaky → 1.
    expect(many(50, id).filter((c, i) => conf.has(c) && i < 20 && i !== 7)).toHaveLength(6);
    expect(a.calibration.parentFailing.filter((c) => conf.has(c))).toHaveLength(9);
    expect(a.calibration.flaky.filter((c) => conf.has(c))).toHaveLength(1);
    expect(a.calibration.selection.length + a.calibration.confirmation.length).toBe(50);
    const again = calibrate(runs, { fraction: 0.3, holdout: [], seed: 7 });
    expect(again).toEqual(a);
    const other = calibrate(runs, { fraction: 0.3, holdout: [], seed: 8 });
    expect(other.ok && other.calibration.confirmation).not.toEqual(a.calibration.confirmation);
  });

  it("takes the user's holdout patterns as the confirmation set", () => {
    const c = calibrate([run(() => false, 12)], { fraction: 0.3, holdout: ["c00?", "c011"], seed: 1 });
    expect(c.ok && c.calibration).toMatchObject({ source: "holdout", confirmation: [...many(10, id), id(11)] });
  });

  it("refuses runs that report other cases", () => {
    expect(calibrate([run(() => true, 5), run(() => true, 6)], { fraction: 0.3, holdout: [], seed: 1 }).ok).toBe(false);
  });
});

describe("the run's error budget", () => {
  it("spends at most alpha over any number of tests", () => {
    for (const G of [1, 3, 10, 100]) {
      expect(alphaSpent(0.05, G, G, "harmonic")).toBeCloseTo(0.05, 12);
      expect(alphaSpent(0.05, G, G, "basel")).toBeLessThan(0.05);
    }
    expect(alphaSpent(0.05, 10_000, 100, "basel")).toBeLessThan(0.05);
    expect(testAlpha(0.05, 1, 1, "basel")).toBeCloseTo((0.05 * 6) / Math.PI ** 2, 12);
    expect(testAlpha(0.05, 2, 3, "harmonic")).toBeCloseTo(0.05 / (2 * (1 + 1 / 2 + 1 / 3)), 12);
    expect(testAlpha(0.05, 7, 3, "none")).toBe(0.05);
    expect(() => testAlpha(0.05, 0, 3, "harmonic")).toThrow(RangeError);
  });
});

describe("futile", () => {
  const runs = (pass: (i: number) => boolean): CaseRun[][] => [many(20, (i) => ({ case: id(i), pass: pass(i) }))];

  it("stops a benchmark early only when the runs so far already reject", () => {
    const o = opts([]);
    // The parent passes 5; a candidate that fixes nothing, or breaks one, cannot be accepted.
    expect(
      futile(
        runs((i) => i < 5),
        runs((i) => i < 5),
        o,
      ),
    ).toBe(true);
    expect(
      futile(
        runs((i) => i < 5),
        runs((i) => i < 4),
        o,
      ),
    ).toBe(true);
    // Fixing 10 is on the way to acceptance: keep measuring.
    expect(
      futile(
        runs((i) => i < 5),
        runs((i) => i < 15),
        o,
      ),
    ).toBe(false);
  });
});
