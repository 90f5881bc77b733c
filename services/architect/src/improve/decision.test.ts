import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { CaseOutcome, Statistic } from "@loopsmith/shared/contracts";
import type { CaseRun } from "./bench-output.js";
import { decide, neededFixes, pairCases } from "./decision.js";

/** A case with one run per side, or `runs` runs with the given passes; scores when given (one per run). */
function pf(
  id: string,
  parent: boolean | number,
  candidate: boolean | number,
  runs = 1,
  scores?: { parent: number[]; candidate: number[] },
): CaseOutcome {
  const n = (v: boolean | number) => (typeof v === "number" ? v : v ? runs : 0);
  return {
    case: id,
    parent: { passes: n(parent), runs, scores: scores?.parent ?? [] },
    candidate: { passes: n(candidate), runs, scores: scores?.candidate ?? [] },
  };
}

/** A scored case, one run per side, passing on both. */
const scored = (id: string, parent: number, candidate: number) =>
  pf(id, true, true, 1, { parent: [parent], candidate: [candidate] });

const id = (i: number) => `case-${String(i).padStart(3, "0")}`;
const many = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));

/** A seeded PRNG in [0, 1) (Numerical Recipes LCG), so "random" inputs are the same on every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

/** Two-sided exact binomial p at p = 0.5: the outcomes no more likely than k, counted with BigInt C(n, i). */
function exactP(k: number, n: number): number {
  const c: bigint[] = [1n];
  for (let i = 1; i <= n; i++) c.push(((c[i - 1] ?? 0n) * BigInt(n - i + 1)) / BigInt(i));
  const obs = c[k] ?? 0n;
  const num = c.filter((x) => x <= obs).reduce((s, x) => s + x, 0n);
  return Math.min(1, Number(num) / 2 ** n);
}

/** p-values agree to 1e-9 relative; stdlib's upper tail `1 − CDF` loses precision below ~1e-15. */
const expectP = (actual: number, expected: number) =>
  expect(Math.abs(actual - expected)).toBeLessThanOrEqual(1e-9 * expected + 1e-15);

const passes = (s: CaseOutcome["parent"]) => s.runs > 0 && s.passes === s.runs;

describe("pairCases", () => {
  const run = (...xs: [string, boolean, number?][]): CaseRun[] =>
    xs.map(([c, pass, score]) => (score === undefined ? { case: c, pass } : { case: c, pass, score }));

  it("aggregates repeats per side, sorted by case id, scores in run order", () => {
    const parent = [
      run(["b", true, 1], ["a", false, 0]),
      run(["a", true, 2], ["b", true, 3]),
      run(["b", false, 5], ["a", false, 4]),
    ];
    const r = pairCases(parent, [
      run(["a", true, 7], ["b", false, 9]),
      run(["b", true, 8], ["a", true, 6]),
      run(["a", true, 5], ["b", false, 4]),
    ]);
    const a = {
      case: "a",
      parent: { passes: 1, runs: 3, scores: [0, 2, 4] },
      candidate: { passes: 3, runs: 3, scores: [7, 6, 5] },
    };
    expect(r).toEqual({
      ok: true,
      cases: [
        a,
        {
          case: "b",
          parent: { passes: 2, runs: 3, scores: [1, 3, 5] },
          candidate: { passes: 1, runs: 3, scores: [9, 8, 4] },
        },
      ],
    });
    if (r.ok) for (const c of r.cases) CaseOutcome.parse(c);
  });

  it("keeps only the scores the runs reported", () => {
    const r = pairCases([run(["a", true, 1]), run(["a", true])], [run(["a", true]), run(["a", true])]);
    expect(r.ok && r.cases[0]).toEqual({
      case: "a",
      parent: { passes: 2, runs: 2, scores: [1] },
      candidate: { passes: 2, runs: 2, scores: [] },
    });
  });

  it("names a case missing from, or added by, the candidate", () => {
    const r = pairCases([run(["a", true], ["b", true], ["c", false])], [run(["a", true], ["b", true])]);
    expect(!r.ok && r.error).toBe('Case "c" of parent run 1 is missing from candidate run 1 of 1.');
    const extra = pairCases([run(["a", true])], [run(["a", true]), run(["a", true], ["zz", true])]);
    expect(!extra.ok && extra.error).toBe('Candidate run 2 of 2 reports case "zz" that parent run 1 does not.');
  });

  it("checks every repeat of the parent too", () => {
    const missing = pairCases([run(["a", true], ["b", true]), run(["a", true])], [run(["a", true], ["b", true])]);
    expect(!missing.ok && missing.error).toBe('Case "b" of parent run 1 is missing from parent run 2 of 2.');
    const extra = pairCases([run(["a", true]), run(["a", true], ["b", false], ["c", false])], [run(["a", true])]);
    expect(!extra.ok && extra.error).toBe('Parent run 2 of 2 reports cases "b", "c" that parent run 1 does not.');
  });

  it("refuses a duplicate within a run and a side with no run", () => {
    const dup = pairCases([run(["a", true])], [run(["a", true], ["a", false])]);
    expect(!dup.ok && dup.error).toMatch(/Candidate run 1 of 1 reports case "a" twice/);
    expect(pairCases([], [run(["a", true])]).ok).toBe(false);
    expect(pairCases([run(["a", true])], []).ok).toBe(false);
  });

  it("counts passes and runs exactly (property)", () => {
    const side = fc.array(fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }), { minLength: 1, maxLength: 5 });
    fc.assert(
      fc.property(side, side, (parent, candidate) => {
        const ids = ["d", "a", "c", "b"];
        const toRuns = (runs: boolean[][]) => runs.map((r) => r.map((pass, i) => ({ case: ids[i] ?? "", pass })));
        const r = pairCases(toRuns(parent), toRuns(candidate));
        expect(r.ok && r.cases.map((c) => c.case)).toEqual(["a", "b", "c", "d"]);
        for (const c of r.ok ? r.cases : []) {
          const i = ids.indexOf(c.case);
          expect(c.parent).toEqual({ runs: parent.length, passes: parent.filter((x) => x[i]).length, scores: [] });
          expect(c.candidate).toEqual({
            runs: candidate.length,
            passes: candidate.filter((x) => x[i]).length,
            scores: [],
          });
        }
      }),
    );
  });
});

describe("decide: pass/fail (exact McNemar)", () => {
  const opts = { alpha: 0.05, tolerance: 0 };

  it("a do-nothing candidate is no_improvement with p = 1", () => {
    const cases = many(20, (i) => pf(id(i), i % 3 === 0, i % 3 === 0));
    const d = decide(cases, opts);
    expect(d).toMatchObject({ verdict: "rejected", reason: "no_improvement" });
    expect(d.statistic).toEqual({
      test: "mcnemar_exact",
      cases: 20,
      fixed: 0,
      broken: 0,
      pValue: 1,
      alpha: 0.05,
      effect: 0,
    });
    expect(d.message).toMatch(/no case changed outcome/);
  });

  it("fixing 8 of 20 failing cases and breaking none is accepted with p = 2·0.5^8", () => {
    const cases = [...many(20, (i) => pf(id(i), false, i < 8)), ...many(10, (i) => pf(id(100 + i), true, true))];
    const d = decide(cases, opts);
    expect(d).toMatchObject({
      verdict: "accepted",
      reason: "accepted",
      statistic: { fixed: 8, broken: 0, cases: 30, pValue: 2 * 0.5 ** 8 },
    });
    expect(d.statistic.effect).toBeCloseTo(8 / 30, 12);
    expect(d.message).toMatch(/fixed 8 and broke 0 of 30/);
    Statistic.parse(d.statistic);
  });

  it("fixing 10 and breaking 1 is a regression at tolerance 0, tested at tolerance 1", () => {
    const cases = [
      ...many(10, (i) => pf(id(i), false, true)),
      pf("broken-one", true, false),
      ...many(5, (i) => pf(id(50 + i), false, false)),
    ];
    const strict = decide(cases, opts);
    expect(strict).toMatchObject({ verdict: "rejected", reason: "regression" });
    expect(strict.message).toMatch(
      /broke 1 case that passed on the parent, more than the tolerance of 0: "broken-one"/,
    );
    const lenient = decide(cases, { alpha: 0.05, tolerance: 1 });
    expect(lenient.reason).toBe("accepted");
    expect(lenient.statistic.pValue).toBeCloseTo((2 * (1 + 11)) / 2 ** 11, 15); // 0.01171875
    expect(lenient.statistic.effect).toBeCloseTo(9 / 16, 12);
    // Same counts at alpha 0.01: p ≥ alpha.
    expect(decide(cases, { alpha: 0.01, tolerance: 1 }).reason).toBe("no_improvement");
  });

  it("a regression message lists at most 5 ids", () => {
    const d = decide(
      many(8, (i) => pf(id(i), true, false)),
      opts,
    );
    expect(d.reason).toBe("regression");
    expect(d.message).toContain('"case-000", "case-001", "case-002", "case-003", "case-004" and 3 more');
    expect(d.message).not.toContain("case-005");
  });

  it("p-values match hand-computed exact binomial values", () => {
    // [fixed, broken, p]: 2/32; 2/64; 2·(1+9+36)/512; 2·(1+15+105+455)/2^15; ties and n = 1 give 1.
    const table: [number, number, number][] = [
      [5, 0, 0.0625],
      [6, 0, 0.03125],
      [7, 2, 92 / 512],
      [12, 3, 1152 / 32768],
      [3, 3, 1],
      [4, 3, 1],
      [1, 0, 1],
    ];
    for (const [fixed, broken, p] of table) {
      const cases = [...many(fixed, (i) => pf(`f${i}`, false, true)), ...many(broken, (i) => pf(`b${i}`, true, false))];
      expect(decide(cases, { alpha: 0.05, tolerance: 100 }).statistic.pValue).toBeCloseTo(p, 14);
    }
  });

  it("a significant fall within the tolerance is not an improvement, nor is a tie", () => {
    const falls = many(8, (i) => pf(id(i), true, false));
    expect(decide(falls, { alpha: 0.05, tolerance: 10 })).toMatchObject({
      reason: "no_improvement",
      statistic: { pValue: 2 / 256 },
    });
    const tie = [...many(9, (i) => pf(`f${i}`, false, true)), ...many(9, (i) => pf(`b${i}`, true, false))];
    expect(decide(tie, { alpha: 0.5, tolerance: 100 }).verdict).toBe("rejected");
  });

  it("a case passes on a side only when every run passed it", () => {
    // 3 of 4 is not a pass; 4 of 4 is. 3/4 → 4/4 fixes, 4/4 → 3/4 breaks, 1/3 → 2/3 neither, 0/2 → 2/2 fixes.
    const d = decide([pf("a", 3, 4, 4), pf("b", 4, 3, 4), pf("c", 1, 2, 3), pf("d", 0, 2, 2)], {
      alpha: 0.05,
      tolerance: 5,
    });
    expect(d.statistic).toMatchObject({ fixed: 2, broken: 1 });
  });

  it("falls back to pass/fail when any run lacks a score", () => {
    expect(
      decide(
        many(12, (i) => pf(id(i), false, true, 2, { parent: [0, 0], candidate: i === 3 ? [1] : [1, 1] })),
        opts,
      ).statistic.test,
    ).toBe("mcnemar_exact");
  });

  it("coin-flip candidates are rejected", () => {
    for (const seed of [1, 2, 3, 42, 2024]) {
      const rand = rng(seed);
      const cases = many(200, (i) => pf(id(i), rand() < 0.5, rand() < 0.5));
      expect(decide(cases, opts).reason).toBe("regression");
      expect(decide(cases, { alpha: 0.05, tolerance: 1000 })).toMatchObject({
        verdict: "rejected",
        reason: "no_improvement",
      });
    }
  });

  it("refuses invalid settings", () => {
    for (const bad of [
      { alpha: 0, tolerance: 0 },
      { alpha: 1.5, tolerance: 0 },
      { alpha: 0.05, tolerance: -1 },
      { alpha: 0.05, tolerance: 0.5 },
    ]) {
      expect(() => decide([], bad)).toThrow(RangeError);
    }
    expect(decide([], opts)).toMatchObject({ reason: "no_improvement", statistic: { cases: 0, pValue: 1, effect: 0 } });
  });
});

describe("decide: scored (Wilcoxon signed-rank)", () => {
  const opts = { alpha: 0.05, tolerance: 0 };

  it("consistent positive differences are accepted with the exact p (all 12 signs positive: 2/2^12)", () => {
    const d = decide(
      many(12, (i) => scored(id(i), 0.5, 0.5 + 0.01 * (i + 1))),
      opts,
    );
    expect(d).toMatchObject({ reason: "accepted", statistic: { test: "wilcoxon", nonZero: 12 } });
    expect(d.statistic.pValue).toBeCloseTo(2 / 4096, 12);
    expect(d.statistic.effect).toBeCloseTo(0.065, 12);
    Statistic.parse(d.statistic);
  });

  it("averages repeats and drops zero differences", () => {
    const changed = many(10, (i) => pf(id(i), true, true, 2, { parent: [1, 3], candidate: [2 + i, 4 + i] }));
    const same = many(3, (i) => pf(`same${i}`, true, true, 2, { parent: [5, 7], candidate: [7, 5] }));
    const d = decide([...changed, ...same], opts);
    // 13 differences: three 0s (same scores, other order), then 1..10 → mean 55/13; exact p = 2/2^10.
    expect(d).toMatchObject({ reason: "accepted", statistic: { nonZero: 10 } });
    expect(d.statistic.effect).toBeCloseTo(55 / 13, 12);
    expect(d.statistic.pValue).toBeCloseTo(2 / 1024, 12);
  });

  it("random-sign differences are rejected", () => {
    for (const seed of [7, 8, 9]) {
      const rand = rng(seed);
      const cases = many(40, (i) => scored(id(i), 10, 10 + (rand() - 0.5)));
      expect(decide(cases, opts).statistic.pValue).toBeGreaterThanOrEqual(0.05);
      expect(decide(cases, opts).verdict).toBe("rejected");
    }
  });

  it("identical scores are no_improvement; gains on a minority of cases with the rest unchanged are accepted", () => {
    expect(
      decide(
        many(10, (i) => scored(id(i), i, i)),
        opts,
      ),
    ).toMatchObject({ reason: "no_improvement", statistic: { pValue: 1, nonZero: 0, effect: 0 } });
    // 8 gains (1..8), 12 unchanged: p = 2/2^8 < alpha; mean difference 36/20 = 1.8.
    const d = decide([...many(8, (i) => scored(id(i), 0, i + 1)), ...many(12, (i) => scored(`same${i}`, 1, 1))], opts);
    expect([d.reason, d.statistic.nonZero, d.statistic.effect, d.statistic.pValue.toFixed(10)]).toEqual([
      "accepted",
      8,
      1.8,
      (2 / 256).toFixed(10),
    ]);
  });

  it("more cases gaining a little is not enough when fewer lose a lot", () => {
    // 11 tiny gains, 10 large losses: median +0.01 but W+ = 66 < 115.5 and the mean is negative; p ≈ 0.089.
    const cases = [
      ...many(11, (i) => scored(`up${i}`, 0, 0.01 * (i + 1))),
      ...many(10, (i) => scored(`down${i}`, 0, -(10 + i))),
    ];
    const d = decide(cases, { alpha: 0.1, tolerance: 0 });
    expect([d.statistic.effect < 0, d.statistic.pValue < 0.1, d.reason]).toEqual([true, true, "no_improvement"]);
  });

  it("many small gains do not hide one large loss", () => {
    // 12 gains of 1, one loss of 100: the ranks lean upward (p < 0.05) but the mean is negative.
    const cases = [...many(12, (i) => scored(`up${i}`, 0, 1 + i / 100)), scored("down", 0, -100)];
    const d = decide(cases, opts);
    expect([d.statistic.effect < 0, d.reason]).toEqual([true, "no_improvement"]);
  });

  it("a score gain that breaks a passing case is a regression", () => {
    expect(
      decide(
        [...many(12, (i) => scored(id(i), 0, i + 1)), pf("fell", true, false, 1, { parent: [1], candidate: [2] })],
        opts,
      ).reason,
    ).toBe("regression");
  });
});

describe("neededFixes", () => {
  it("is the least n with 2·0.5^n < alpha (strictly: alpha 0.03125 = 2·0.5^6 needs 7)", () => {
    expect([0.05, 0.01, 0.5, 0.03125].map(neededFixes)).toEqual([6, 8, 3, 7]);
    expect(() => neededFixes(0)).toThrow(RangeError);
  });

  it("n fixes are accepted by decide and n − 1 are not (property)", () => {
    fc.assert(
      fc.property(fc.double({ min: 1e-6, max: 0.5, noNaN: true }), (alpha) => {
        const fixes = (k: number) =>
          decide(
            many(k, (i) => pf(id(i), false, true)),
            { alpha, tolerance: 0 },
          ).reason;
        expect([fixes(neededFixes(alpha)), fixes(neededFixes(alpha) - 1)]).toEqual(["accepted", "no_improvement"]);
      }),
    );
  });
});

describe("decide: properties over random paired outcomes", () => {
  const alphaArb = fc.double({ min: 0.001, max: 0.5, noNaN: true });
  const toleranceArb = fc.integer({ min: 0, max: 3 });
  /** Per case: runs per side and passes per side. */
  const caseArb = fc.integer({ min: 1, max: 3 }).chain((runs) =>
    fc.record({
      runs: fc.constant(runs),
      parent: fc.integer({ min: 0, max: runs }),
      candidate: fc.integer({ min: 0, max: runs }),
    }),
  );
  const outcomesArb = fc
    .array(caseArb, { maxLength: 60, size: "max" })
    .map((xs) => xs.map((x, i) => pf(id(i), x.parent, x.candidate, x.runs)));
  /** Biased towards improvements, so acceptances happen (fast-check favours the bounds, so 10 is rare). */
  const improvingArb = fc
    .array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 20 })), { minLength: 1, maxLength: 60, size: "max" })
    .map((xs) => xs.map(([p, r], i) => pf(id(i), p, p ? r !== 10 : r > 8)));
  const swap = (cs: CaseOutcome[]) => cs.map((c) => ({ ...c, parent: c.candidate, candidate: c.parent }));

  it("accepted ⇒ p < alpha, broken ≤ tolerance, fixed > broken; counts and p are exact", () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof(outcomesArb, improvingArb), alphaArb, toleranceArb, (cases, alpha, tolerance) => {
        const d = decide(cases, { alpha, tolerance });
        const fixed = cases.filter((c) => !passes(c.parent) && passes(c.candidate)).length;
        const broken = cases.filter((c) => passes(c.parent) && !passes(c.candidate)).length;
        expect(d.statistic).toMatchObject({ test: "mcnemar_exact", cases: cases.length, fixed, broken, alpha });
        expectP(d.statistic.pValue, exactP(Math.min(fixed, broken), fixed + broken));
        expect(d.reason === "regression").toBe(broken > tolerance);
        if (d.verdict === "accepted") {
          accepted++;
          expect([d.statistic.pValue < alpha, broken <= tolerance, fixed > broken]).toEqual([true, true, true]);
          // The reverse change is never accepted.
          expect(decide(swap(cases), { alpha, tolerance }).verdict).toBe("rejected");
        }
        Statistic.parse(d.statistic);
      }),
      { numRuns: 300 },
    );
    expect(accepted).toBeGreaterThan(20);
  });

  it("identical sides are never accepted", () => {
    fc.assert(
      fc.property(outcomesArb, alphaArb, toleranceArb, (cases, alpha, tolerance) => {
        const d = decide(
          cases.map((c) => ({ ...c, candidate: c.parent })),
          { alpha, tolerance },
        );
        expect(d).toMatchObject({ reason: "no_improvement", statistic: { pValue: 1 } });
      }),
    );
  });

  it("scored: accepted ⇒ p < alpha and mean difference > 0; identical or reversed is not accepted", () => {
    const diffs = fc.array(fc.integer({ min: -20, max: 40 }), { minLength: 1, maxLength: 60 });
    fc.assert(
      fc.property(diffs, alphaArb, (ds, alpha) => {
        const cases = ds.map((x, i) => scored(id(i), 100, 100 + x));
        const d = decide(cases, { alpha, tolerance: 0 });
        expect(d.statistic.test).toBe("wilcoxon");
        expect(d.statistic.nonZero).toBe(ds.filter((x) => x !== 0).length);
        if (d.verdict === "accepted") {
          expect([d.statistic.pValue < alpha, d.statistic.effect > 0]).toEqual([true, true]);
          expect(decide(swap(cases), { alpha, tolerance: 0 }).verdict).toBe("rejected");
        }
        expect(
          decide(
            cases.map((c) => ({ ...c, candidate: c.parent })),
            { alpha, tolerance: 0 },
          ).verdict,
        ).toBe("rejected");
      }),
    );
  });
});
