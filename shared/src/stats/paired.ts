/**
 * Paired tests: the one home of the p-values loopsmith decides by (the improver's decision and
 * its metric comparisons, and `loopsmith bench`'s memory on/off comparison). Each compares the
 * same cases on two sides (parent and candidate, memory on and off). The p-values come from
 * stdlib (`@stdlib/stats-binomial-test`, `@stdlib/stats-wilcoxon`); what is decided here is
 * what they do with no evidence, one pair, ties and zeros, once for every caller.
 */
import binomialTest from "@stdlib/stats-binomial-test";
import wilcoxon from "@stdlib/stats-wilcoxon";

/** Which way a test looks: `greater` asks whether the second side is better (one-sided), `two-sided` whether the sides differ. */
export type Alternative = "greater" | "two-sided";

/** A p-value kept in [0, 1] (stdlib's two-sided sums can pass 1 by rounding, or by 2·P for the signed-rank test); 1 when not finite. */
export function clampP(p: number): number {
  return Number.isFinite(p) ? Math.min(1, Math.max(0, p)) : 1;
}

/**
 * The exact sign test on the discordant pairs of a pass/fail comparison: `fixed` pairs pass only
 * on the second side, `broken` only on the first. 1 with no discordant pair.
 * - `greater`: P(X ≥ fixed) for X ~ Binomial(fixed + broken, 1/2) (one-sided);
 * - `two-sided`: the exact McNemar test, stdlib's two-sided binomial test of min(fixed, broken)
 *   (as R's `binom.test`: the sum of the outcomes no more likely than the observed one).
 * Below about 1e-15 stdlib's upper tail `1 − CDF` loses precision (absolute error < 1e-15).
 * @throws RangeError when a count is negative or not an integer
 */
export function signTestP(fixed: number, broken: number, alternative: Alternative): number {
  if (!Number.isInteger(fixed) || !Number.isInteger(broken) || fixed < 0 || broken < 0)
    throw new RangeError(`pair counts must be non-negative integers, got ${fixed} and ${broken}`);
  const n = fixed + broken;
  if (n === 0) return 1;
  return alternative === "greater"
    ? clampP(binomialTest(fixed, n, { p: 0.5, alternative: "greater" }).pValue)
    : clampP(binomialTest(Math.min(fixed, broken), n, { p: 0.5, alternative: "two-sided" }).pValue);
}

/** What {@link signedRankTest} found. */
export interface SignedRank {
  /** The p-value, in [0, 1]. */
  pValue: number;
  /** Pairs whose difference is not 0 (the ones the test ranks). */
  nonZero: number;
  /** The positive ranks weigh more than half the total (W+ > n(n+1)/4): the second side leans better. */
  upward: boolean;
}

/**
 * The Wilcoxon signed-rank test on paired differences (second side minus first; higher is
 * better). Zero differences are dropped ("wilcox" zero method, Wilcoxon 1945), so stdlib uses
 * the exact signed-rank distribution for up to 50 non-zero pairs without tied |d|, else its
 * normal approximation with tie and continuity corrections. With fewer than two non-zero pairs
 * (stdlib needs two) the exact p is used: none gives 1; one gives 1 two-sided, and one-sided
 * 1/2 when it is positive, else 1.
 */
export function signedRankTest(diffs: readonly number[], alternative: Alternative): SignedRank {
  const nz = diffs.filter((d) => d !== 0);
  if (nz.length < 2) {
    const up = nz.length === 1 && (nz[0] ?? 0) > 0;
    return { pValue: alternative === "greater" && up ? 0.5 : 1, nonZero: nz.length, upward: up };
  }
  const r = wilcoxon(nz, { alternative, zeroMethod: "wilcox" });
  return {
    pValue: clampP(r.pValue),
    nonZero: nz.length,
    upward: r.statistic > (nz.length * (nz.length + 1)) / 4,
  };
}
