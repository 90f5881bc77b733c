/**
 * The decision of a generation (issue #10): pair the parent's and the candidate's benchmark
 * runs case by case, then keep the candidate only when it broke no more cases than the
 * tolerance and a paired test says it is better. Pure functions: no I/O, no clock, no LLM;
 * the p-values come from stdlib (`@stdlib/stats-binomial-test`, `@stdlib/stats-wilcoxon`).
 */
import binomialTest from "@stdlib/stats-binomial-test";
import wilcoxon from "@stdlib/stats-wilcoxon";
import type { CaseOutcome, Statistic } from "@loopsmith/shared";
import { quoteId, type CaseRun } from "./bench-output.js";

/** The paired cases of a generation, or one sentence saying why the runs do not pair (`bench_unparsed`). */
export type PairResult = { ok: true; cases: CaseOutcome[] } | { ok: false; error: string };

/** Case ids quoted in one message, at most. */
const QUOTED = 5;

function quoteSome(ids: readonly string[], max = QUOTED): string {
  const shown = ids.slice(0, max).map(quoteId).join(", ");
  return ids.length > max ? `${shown} and ${ids.length - max} more` : shown;
}

function runName(side: "parent" | "candidate", index: number, total: number): string {
  return `${side === "parent" ? "Parent" : "Candidate"} run ${index + 1} of ${total}`;
}

/**
 * Pairs the benchmark runs of the two sides of a generation, case by case.
 *
 * Each inner array is one run (one repeat) of one side, as read by `parseBenchOutput` or
 * `casesFromTests`. Every run of both sides must report exactly the case ids of the parent's
 * first run, each once; otherwise the error names the first missing or extra case and the run
 * (the generation is then rejected `bench_unparsed`, per `DecisionReason` in the contracts:
 * "other cases than the parent's").
 *
 * @returns one `CaseOutcome` per case, sorted by case id (code-unit order): per side the runs,
 *   the passes and the scores the runs reported, in run order.
 */
export function pairCases(
  parentRuns: readonly (readonly CaseRun[])[],
  candidateRuns: readonly (readonly CaseRun[])[],
): PairResult {
  const reference = parentRuns[0];
  if (reference === undefined) return { ok: false, error: "The parent has no benchmark run to compare." };
  if (candidateRuns.length === 0) return { ok: false, error: "The candidate has no benchmark run to compare." };
  const outcomes = new Map<string, CaseOutcome>();
  for (const c of reference) {
    outcomes.set(c.case, {
      case: c.case,
      parent: { passes: 0, runs: 0, scores: [] },
      candidate: { passes: 0, runs: 0, scores: [] },
    });
  }
  const sides = [
    ["parent", parentRuns],
    ["candidate", candidateRuns],
  ] as const;
  for (const [side, runs] of sides) {
    for (let r = 0; r < runs.length; r++) {
      const run = runs[r] ?? [];
      const name = runName(side, r, runs.length);
      const ids = new Set<string>();
      for (const c of run) {
        if (ids.has(c.case)) return { ok: false, error: `${name} reports case ${quoteId(c.case)} twice.` };
        ids.add(c.case);
      }
      const extra = [...ids].filter((id) => !outcomes.has(id));
      if (extra.length > 0) {
        return {
          ok: false,
          error: `${name} reports case${extra.length > 1 ? "s" : ""} ${quoteSome(extra, 3)} that parent run 1 does not.`,
        };
      }
      const missing = [...outcomes.keys()].filter((id) => !ids.has(id));
      if (missing.length > 0) {
        return {
          ok: false,
          error: `Case${missing.length > 1 ? "s" : ""} ${quoteSome(missing, 3)} of parent run 1 ${missing.length > 1 ? "are" : "is"} missing from ${name.toLowerCase()}.`,
        };
      }
      for (const c of run) {
        const tally = outcomes.get(c.case)?.[side];
        if (tally === undefined) continue;
        tally.runs += 1;
        if (c.pass) tally.passes += 1;
        if (c.score !== undefined) tally.scores.push(c.score);
      }
    }
  }
  const cases = [...outcomes.values()].sort((a, b) => (a.case < b.case ? -1 : a.case > b.case ? 1 : 0));
  return { ok: true, cases };
}

/** Settings of {@link decide}: `alpha` and `tolerance` of `ImproveSettings`. */
export interface DecideOptions {
  /** Significance level, in (0, 1]; the p-value must be strictly below it. */
  alpha: number;
  /** Cases that may pass on the parent and fail on the candidate (a non-negative integer). */
  tolerance: number;
}

/** The outcome of {@link decide}: `GenerationReport.decision` plus its `statistic`. */
export interface Decision {
  verdict: "accepted" | "rejected";
  reason: "accepted" | "regression" | "no_improvement";
  /** One or two sentences with the figures. */
  message: string;
  statistic: Statistic;
}

/**
 * A case passes on a side when it passed in every one of that side's runs (none: fails). A
 * case that passes only sometimes is not fixed, and a passing case that fails once is broken:
 * a nondeterministic candidate must not win on its lucky runs (bench/decision.ts measures it).
 */
export function passesOn(side: CaseOutcome["parent"]): boolean {
  return side.runs > 0 && side.passes === side.runs;
}

/** The least of 1 and a p-value (stdlib's two-sided sums can pass 1 by rounding, or by 2·P for the signed-rank test). */
function clampP(p: number): number {
  return Number.isFinite(p) ? Math.min(1, Math.max(0, p)) : 1;
}

/** Wilcoxon signed-rank test on the paired differences: two-sided p, and whether the ranks lean upward. */
function signedRank(diffs: readonly number[]): { pValue: number; upward: boolean; nonZero: number } {
  const nz = diffs.filter((d) => d !== 0);
  // One non-zero pair: the exact two-sided p is 1 (stdlib refuses fewer than two values).
  if (nz.length < 2) return { pValue: 1, upward: nz.length === 1 && (nz[0] ?? 0) > 0, nonZero: nz.length };
  // Zeros are dropped here ("wilcox" zero method, Wilcoxon 1945) so stdlib sees none and uses
  // the exact signed-rank distribution for n ≤ 50 without tied |d|; else its normal approximation
  // with tie correction and continuity correction.
  const r = wilcoxon(nz, { alternative: "two-sided", zeroMethod: "wilcox" });
  return { pValue: clampP(r.pValue), upward: r.statistic > (nz.length * (nz.length + 1)) / 4, nonZero: nz.length };
}

/**
 * Exact McNemar p-value: the two-sided exact binomial test of min(fixed, broken) successes in
 * fixed + broken trials with p = 0.5 (stdlib's two-sided method, as R's `binom.test`: the sum
 * of the outcomes no more likely than the observed one). 1 with no discordant pair. Below
 * about 1e-15 stdlib's upper tail `1 − CDF` loses precision (absolute error < 1e-15).
 */
function mcnemarP(fixed: number, broken: number): number {
  const n = fixed + broken;
  if (n === 0) return 1;
  return clampP(binomialTest(Math.min(fixed, broken), n, { p: 0.5, alternative: "two-sided" }).pValue);
}

function mean(xs: readonly number[]): number {
  // Summed in sorted order so the same scores in another run order give the same mean.
  return [...xs].sort((a, b) => a - b).reduce((s, x) => s + x, 0) / xs.length;
}

function fmt(x: number): string {
  return String(Number(x.toPrecision(3)));
}

/**
 * Decides a generation from its paired cases (see {@link pairCases}).
 *
 * Rules (issue #10; the order is the order of the checks):
 * 1. A case *passes* on a side when it passed in every run of that side (unanimous over the
 *    repeats: a flaky case is neither fixed by a candidate that passes it sometimes nor kept
 *    by one that fails it once).
 * 2. `broken` = cases passing on the parent and not on the candidate; `fixed` = the reverse.
 *    `broken > tolerance` → rejected `regression`, whatever the test says (the message gives
 *    the counts and up to 5 broken ids).
 * 3. Scored benchmark (every run of every case has a score; higher is better): d_i =
 *    mean(candidate scores) − mean(parent scores). Wilcoxon signed-rank test (Wilcoxon 1945),
 *    two-sided, zero differences dropped (the "wilcox" zero method), exact for up to 50
 *    non-zero pairs without tied |d|, else the normal approximation. `statistic.test` =
 *    `wilcoxon`, `effect` = mean of all d_i, `nonZero` = count of d_i ≠ 0. Accepted only when
 *    p < alpha, the positive ranks outweigh the negative ones (W+ > n(n+1)/4) and the mean
 *    difference is > 0 (so neither a few large losses nor many tiny ones can hide behind the
 *    other statistic). Unchanged cases do not block acceptance: 8 gains and 12 ties is an
 *    improvement. Fewer than two non-zero pairs: p = 1.
 * 4. Otherwise pass/fail: exact McNemar test (McNemar 1947, exact conditional form), i.e. the
 *    two-sided exact binomial test of min(fixed, broken) in fixed + broken trials at p = 0.5.
 *    `effect` = (candidate passes − parent passes) / cases. Accepted only when p < alpha and
 *    fixed > broken; no discordant pair gives p = 1, and a tie is never accepted.
 * Anything not accepted and not a regression is `no_improvement`.
 *
 * @throws RangeError when `alpha` is not in (0, 1] or `tolerance` is not a non-negative integer.
 */
export function decide(cases: readonly CaseOutcome[], opts: DecideOptions): Decision {
  const { alpha, tolerance } = opts;
  if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`alpha must be in (0, 1], got ${alpha}`);
  if (!Number.isInteger(tolerance) || tolerance < 0)
    throw new RangeError(`tolerance must be a non-negative integer, got ${tolerance}`);
  const fixedIds: string[] = [];
  const brokenIds: string[] = [];
  for (const c of cases) {
    const before = passesOn(c.parent);
    const after = passesOn(c.candidate);
    if (before && !after) brokenIds.push(c.case);
    if (!before && after) fixedIds.push(c.case);
  }
  const fixed = fixedIds.length;
  const broken = brokenIds.length;
  const n = cases.length;
  const scored =
    n > 0 &&
    cases.every(
      (c) =>
        c.parent.runs > 0 &&
        c.candidate.runs > 0 &&
        c.parent.scores.length === c.parent.runs &&
        c.candidate.scores.length === c.candidate.runs,
    );

  let statistic: Statistic;
  let significant: boolean;
  let summary: string;
  if (scored) {
    const diffs = cases.map((c) => mean(c.candidate.scores) - mean(c.parent.scores));
    const { pValue, upward, nonZero } = signedRank(diffs);
    const effect = mean(diffs);
    statistic = { test: "wilcoxon", cases: n, fixed, broken, pValue, alpha, effect, nonZero };
    significant = pValue < alpha && effect > 0 && upward;
    summary = `mean score difference ${effect > 0 ? "+" : ""}${fmt(effect)} over ${n} cases (${nonZero} changed; Wilcoxon signed-rank p = ${fmt(pValue)}, alpha ${alpha}; fixed ${fixed}, broke ${broken})`;
  } else {
    const pValue = mcnemarP(fixed, broken);
    statistic = {
      test: "mcnemar_exact",
      cases: n,
      fixed,
      broken,
      pValue,
      alpha,
      effect: n === 0 ? 0 : (fixed - broken) / n,
    };
    significant = pValue < alpha && fixed > broken;
    summary = `fixed ${fixed} and broke ${broken} of ${n} cases (exact McNemar p = ${fmt(pValue)}, alpha ${alpha})`;
  }

  if (broken > tolerance) {
    const message = `The candidate broke ${broken} case${broken === 1 ? "" : "s"} that passed on the parent, more than the tolerance of ${tolerance}: ${quoteSome(brokenIds)}. It ${summary}.`;
    return { verdict: "rejected", reason: "regression", message, statistic };
  }
  if (significant)
    return { verdict: "accepted", reason: "accepted", message: `Accepted: the candidate ${summary}.`, statistic };
  const why =
    scored && statistic.nonZero === 0
      ? "no case's score changed"
      : !scored && fixed + broken === 0
        ? "no case changed outcome"
        : statistic.pValue < alpha
          ? "the significant change is not an improvement"
          : "the difference is not significant";
  return {
    verdict: "rejected",
    reason: "no_improvement",
    message: `No improvement (${why}): the candidate ${summary}.`,
    statistic,
  };
}

/**
 * The least n such that n fixed and 0 broken cases give an exact two-sided McNemar p < alpha
 * (2·0.5^n < alpha): 6 for alpha 0.05 (p = 0.03125), 8 for 0.01. Dry runs report it as the
 * evidence a change would need. Uses the same stdlib test as {@link decide}.
 *
 * @throws RangeError when `alpha` is not in (0, 1].
 */
export function neededFixes(alpha: number): number {
  if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`alpha must be in (0, 1], got ${alpha}`);
  // p falls by half per case and reaches 0 (underflow) before n = 1100, below any alpha > 0.
  for (let n = 1; n < 1100; n++) if (mcnemarP(n, 0) < alpha) return n;
  return 1100;
}
