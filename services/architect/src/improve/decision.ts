/**
 * The decision of a generation: pair the parent's and the candidate's benchmark
 * runs case by case, then keep the candidate only when it broke no more cases than the
 * tolerance and a paired test says it is better. Pure functions: no I/O, no clock, no LLM;
 * the p-values come from the shared paired tests (`@loopsmith/shared/stats`, over stdlib).
 */
import { clampP, signedRankTest, signTestP } from "@loopsmith/shared/stats";

import type { SetStatistic, CaseOutcome, Statistic } from "@loopsmith/shared/contracts";
import { testAlpha, type AlphaSpending } from "@loopsmith/shared/contracts";

// The run's alpha spending rule lives in shared (the CLI's warning and reports use it too).
export { testAlpha, type AlphaSpending };
import type { CaseRun } from "./bench-output.js";
import { pairCases, quoteSome } from "./pairing.js";

// The pairing of the runs and the calibration are beside this file; their names are exported from here too.
export { pairCases, type PairResult } from "./pairing.js";
export { calibrate, splitSeedOf, type CalibrationResult } from "./calibration.js";

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
 * Rules (the order is the order of the checks):
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
    const { pValue, upward, nonZero } = signedRankTest(diffs, "two-sided");
    const effect = mean(diffs);
    statistic = { test: "wilcoxon", cases: n, fixed, broken, pValue, alpha, effect, nonZero };
    significant = pValue < alpha && effect > 0 && upward;
    summary = `mean score difference ${effect > 0 ? "+" : ""}${fmt(effect)} over ${n} cases (${nonZero} changed; Wilcoxon signed-rank p = ${fmt(pValue)}, alpha ${alpha}; fixed ${fixed}, broke ${broken})`;
  } else {
    const pValue = signTestP(fixed, broken, "two-sided");
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
  for (let n = 1; n < 1100; n++) if (signTestP(n, 0, "two-sided") < alpha) return n;
  return 1100;
}

// ---------------------------------------------------------------------------------------------
// Selection and confirmation sets, flaky cases, and the run's error budget.
// ---------------------------------------------------------------------------------------------

/** Σ_{i ≤ j} α_i: the run's budget spent once its j-th test is made (see {@link testAlpha}). */
export function alphaSpent(alpha: number, j: number, generations: number, rule: AlphaSpending): number {
  let s = 0;
  for (let i = 1; i <= j; i++) s += testAlpha(alpha, i, generations, rule);
  return s;
}

/** The settings of {@link decideGeneration}. */
export interface GenerationDecideOptions {
  /** α_j: the level of this generation's selection test (see {@link testAlpha}). */
  alpha: number;
  /** The run's budget `alpha`: the level of the confirmation test. */
  confirmationAlpha: number;
  /** Cases that may pass on the parent and fail on the candidate (flaky cases not counted). */
  tolerance: number;
  /** The confirmation cases; every other case is a selection case. */
  confirmation: ReadonlySet<string>;
  /** Flaky cases (calibration), left out of the pass/fail test and of the regression count. */
  flaky: ReadonlySet<string>;
  /** This test's place among the run's tests, and the budget spent with it (reported only). */
  testIndex?: number;
  alphaSpent?: number;
}

/** The outcome of {@link decideGeneration}: a {@link Decision} that may be `overfit`, with its cases marked. */
export interface GenerationDecision extends Omit<Decision, "reason"> {
  reason: Decision["reason"] | "overfit";
  /** The paired cases, each marked with its set and, when flaky, `flaky`. */
  cases: CaseOutcome[];
}

/** ln C(n, k), summed exactly enough for the case counts of a benchmark. */
function lnChoose(n: number, k: number): number {
  let s = 0;
  for (let i = 1; i <= k; i++) s += Math.log((n - k + i) / i);
  return s;
}

/**
 * One-sided Fisher exact test (Fisher 1922) that the confirmation set's fix rate
 * `fixedC / failingC` is LOWER than the selection set's `fixedS / failingS`: the hypergeometric
 * P(X ≤ fixedC), X the confirmation fixes when fixedS + fixedC fixes fall at random among the
 * failingS + failingC parent-failing cases.
 */
export function fixRateP(fixedS: number, failingS: number, fixedC: number, failingC: number): number {
  const total = failingS + failingC;
  const fixes = fixedS + fixedC;
  if (failingC === 0 || total === 0) return 1;
  const denom = lnChoose(total, failingC);
  let p = 0;
  for (let x = Math.max(0, failingC - (total - fixes)); x <= Math.min(fixedC, fixes); x++)
    p += Math.exp(lnChoose(fixes, x) + lnChoose(total - fixes, failingC - x) - denom);
  return clampP(p);
}

function setStatistic(
  test: SetStatistic["test"],
  cases: number,
  parentFailing: number,
  fixed: number,
  broken: number,
  pValue: number,
  alpha: number,
  passed: boolean,
): SetStatistic {
  return { test, cases, parentFailing, fixed, broken, pValue, alpha, passed };
}

/**
 * Decides a generation of a run with selection and confirmation sets: the selection set must say better at
 * the generation's α_j, and the held-out confirmation set must confirm it.
 *
 * 1. Flaky cases are marked and leave the test: they count neither as fixed nor as broken, on
 *    either set. A case is flaky when the calibration found it so, or when the parent's own runs
 *    of this generation disagree (leaving those out only removes cases the candidate could have
 *    "fixed", so it cannot add a false accept). A case passes on a side when it passed in every
 *    run (as {@link decide}).
 * 2. Regression: broken cases of both sets > `tolerance` → `regression`. The message quotes
 *    broken SELECTION ids only, and counts the confirmation's (its ids never reach a prompt).
 * 3. Selection (pass/fail): one-sided exact sign test (exact McNemar, McNemar 1947) on its
 *    discordant pairs, P(X ≥ fixed | fixed + broken, 1/2) < α_j with fixed > broken.
 *    Scored cases: one-sided Wilcoxon signed-rank (`greater`) < α_j with a positive mean
 *    difference. Not passed → `no_improvement`.
 * 4. Confirmation, at the run's `confirmationAlpha` (its job is to catch overfitting; the
 *    run-level error bound already holds through step 3, since an accept needs both):
 *    - no confirmation case: confirmed (no split);
 *    - pass/fail with enough discordant pairs that the sign test can reach the level
 *      (0.5^d < level, d = fixed + broken; 5 pairs at 0.05): the one-sided sign test on them;
 *    - too few discordant pairs, some parent-failing case: the fix rate must be consistent
 *      with the selection's: fixed > broken and the one-sided Fisher exact test
 *      ({@link fixRateP}) does not find the confirmation's fix rate lower at the level;
 *    - no parent-failing case and no discordant pair: nothing can confirm or refute; confirmed
 *      (the message says so);
 *    - scored: one-sided Wilcoxon on the confirmation cases when it can reach the level
 *      (≥ 5 non-zero pairs at 0.05), else a positive mean difference.
 *    Not confirmed → `overfit`.
 *
 * @throws RangeError as {@link decide} for `alpha`, `confirmationAlpha` or `tolerance`
 */
export function decideGeneration(cases: readonly CaseOutcome[], opts: GenerationDecideOptions): GenerationDecision {
  const { alpha, confirmationAlpha: alphaC, tolerance, confirmation } = opts;
  if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`alpha must be in (0, 1], got ${alpha}`);
  if (!(alphaC > 0 && alphaC <= 1)) throw new RangeError(`confirmationAlpha must be in (0, 1], got ${alphaC}`);
  if (!Number.isInteger(tolerance) || tolerance < 0)
    throw new RangeError(`tolerance must be a non-negative integer, got ${tolerance}`);
  const marked = markCases(cases, opts);
  const sel = tally(marked, (c) => !confirmation.has(c.case));
  const con = tally(marked, (c) => confirmation.has(c.case));
  const tested = [...sel.tested, ...con.tested];
  const scored =
    tested.length > 0 &&
    tested.every(
      (c) =>
        c.parent.runs > 0 &&
        c.candidate.runs > 0 &&
        c.parent.scores.length === c.parent.runs &&
        c.candidate.scores.length === c.candidate.runs,
    );
  const sets = scored ? scoredSets(sel, con, tested, alpha, alphaC) : passFailSets(sel, con, tested, alpha, alphaC);
  const statistic: Statistic = {
    test: scored ? "wilcoxon" : "mcnemar_exact",
    cases: marked.length,
    fixed: sel.fixed.length + con.fixed.length,
    broken: sel.broken.length + con.broken.length,
    pValue: sets.sel.pValue,
    alpha,
    effect: sets.effect,
    ...(sets.nonZero !== undefined ? { nonZero: sets.nonZero } : {}),
    selection: sets.sel,
    ...(con.cases.length > 0 ? { confirmation: sets.con } : {}),
    ...(opts.testIndex !== undefined ? { testIndex: opts.testIndex } : {}),
    ...(opts.alphaSpent !== undefined ? { alphaSpent: opts.alphaSpent } : {}),
    flaky: marked.filter((c) => c.flaky).length,
  };
  return generationVerdict({ statistic, cases: marked }, sets, { sel, con, scored, tolerance, alphaC });
}

/** The cases marked with their set (when the run has a confirmation set) and, when flaky, `flaky`. */
function markCases(cases: readonly CaseOutcome[], opts: GenerationDecideOptions): CaseOutcome[] {
  const { confirmation, flaky } = opts;
  return cases.map((c) => ({
    ...c,
    ...(confirmation.size > 0
      ? { set: confirmation.has(c.case) ? ("confirmation" as const) : ("selection" as const) }
      : {}),
    // Flaky from the calibration, or seen flaky now: the parent's own runs of this generation disagree.
    ...(flaky.has(c.case) || (c.parent.passes > 0 && c.parent.passes < c.parent.runs) ? { flaky: true } : {}),
  }));
}

/** One set's cases: all, those tested (not flaky), the fixed and broken ids, the parent-failing count. */
interface Tally {
  cases: CaseOutcome[];
  tested: CaseOutcome[];
  fixed: string[];
  broken: string[];
  failing: number;
}

/** The {@link Tally} of the marked cases `inSet` picks. */
function tally(marked: readonly CaseOutcome[], inSet: (c: CaseOutcome) => boolean): Tally {
  const t: Tally = { cases: [], tested: [], fixed: [], broken: [], failing: 0 };
  for (const c of marked) {
    if (!inSet(c)) continue;
    t.cases.push(c);
    if (c.flaky) continue;
    t.tested.push(c);
    const before = passesOn(c.parent);
    const after = passesOn(c.candidate);
    if (!before) t.failing += 1;
    if (before && !after) t.broken.push(c.case);
    if (!before && after) t.fixed.push(c.case);
  }
  return t;
}

/** Both sets' tests, the effect over the tested cases and, scored, the changed scores; `conNote` explains a confirmation without its test. */
interface SetTests {
  sel: SetStatistic;
  con: SetStatistic;
  effect: number;
  nonZero?: number;
  conNote: string;
}

/** Per case: mean candidate score − mean parent score. */
function diffs(cs: readonly CaseOutcome[]): number[] {
  return cs.map((c) => mean(c.candidate.scores) - mean(c.parent.scores));
}

/** `statistic`'s fields of `t` as a {@link SetStatistic}. */
function statOf(
  test: SetStatistic["test"],
  t: Tally,
  p: { pValue: number; alpha: number; passed: boolean },
): SetStatistic {
  return setStatistic(test, t.cases.length, t.failing, t.fixed.length, t.broken.length, p.pValue, p.alpha, p.passed);
}

/** Scored cases: the one-sided signed-rank test on each set (the confirmation's when it can reach its level). */
function scoredSets(sel: Tally, con: Tally, tested: readonly CaseOutcome[], alpha: number, alphaC: number): SetTests {
  const ds = diffs(sel.tested);
  const r = signedRankTest(ds, "greater");
  const m = ds.length ? mean(ds) : 0;
  const selStat = statOf("wilcoxon", sel, { pValue: r.pValue, alpha, passed: r.pValue < alpha && m > 0 });
  const dc = diffs(con.tested);
  const rc = signedRankTest(dc, "greater");
  const mc = dc.length ? mean(dc) : 0;
  let conStat: SetStatistic;
  let conNote = "";
  if (con.cases.length === 0) conStat = setStatistic("none", 0, 0, 0, 0, 1, alphaC, true);
  else if (0.5 ** rc.nonZero < alphaC)
    conStat = statOf("wilcoxon", con, { pValue: rc.pValue, alpha: alphaC, passed: rc.pValue < alphaC && mc > 0 });
  else {
    conStat = statOf("none", con, { pValue: 1, alpha: alphaC, passed: mc > 0 });
    conNote = ` (too few changed scores for the signed-rank test: mean difference ${fmt(mc)})`;
  }
  const effect = tested.length ? mean(diffs(tested)) : 0;
  return { sel: selStat, con: conStat, effect, nonZero: r.nonZero + rc.nonZero, conNote };
}

/** Pass/fail cases: the one-sided exact sign test on the selection; the confirmation's test as the rules say. */
function passFailSets(sel: Tally, con: Tally, tested: readonly CaseOutcome[], alpha: number, alphaC: number): SetTests {
  const fs = sel.fixed.length;
  const bs = sel.broken.length;
  const ps = signTestP(fs, bs, "greater");
  const selStat = setStatistic("sign_exact", sel.cases.length, sel.failing, fs, bs, ps, alpha, ps < alpha && fs > bs);
  const fc = con.fixed.length;
  const bc = con.broken.length;
  let conStat: SetStatistic;
  let conNote = "";
  if (con.cases.length === 0) conStat = setStatistic("none", 0, 0, 0, 0, 1, alphaC, true);
  else if (0.5 ** (fc + bc) < alphaC) {
    const pc = signTestP(fc, bc, "greater");
    conStat = setStatistic("sign_exact", con.cases.length, con.failing, fc, bc, pc, alphaC, pc < alphaC && fc > bc);
  } else if (con.failing > 0) {
    const pr = fixRateP(fs, sel.failing, fc, con.failing);
    conStat = setStatistic("fix_rate", con.cases.length, con.failing, fc, bc, pr, alphaC, fc > bc && pr >= alphaC);
    conNote = ` (too few discordant pairs for the sign test: fix rate ${fc}/${con.failing} against the selection's ${fs}/${sel.failing}, one-sided Fisher p = ${fmt(pr)}, level ${alphaC})`;
  } else {
    conStat = setStatistic("none", con.cases.length, 0, fc, bc, 1, alphaC, bc === 0);
    conNote = " (no parent-failing case to confirm on)";
  }
  const n = tested.length;
  const effect = n === 0 ? 0 : (fs + fc - bs - bc) / n;
  return { sel: selStat, con: conStat, effect, conNote };
}

/** The verdict from the sets' tests, in the rules' order: regression, selection, confirmation, accepted. */
function generationVerdict(
  base: Pick<GenerationDecision, "statistic" | "cases">,
  sets: SetTests,
  ctx: { sel: Tally; con: Tally; scored: boolean; tolerance: number; alphaC: number },
): GenerationDecision {
  const { sel, con, scored, tolerance, alphaC } = ctx;
  const { sel: selStat, con: conStat, conNote } = sets;
  const { broken, flaky } = base.statistic;
  const flakyNote = flaky ? `; ${flaky} flaky case(s) left out` : "";
  const selText = `selection: fixed ${selStat.fixed}, broke ${selStat.broken} of ${selStat.cases} (${scored ? "one-sided signed-rank" : "one-sided exact sign test"} p = ${fmt(selStat.pValue)}, α_j ${fmt(selStat.alpha)})`;
  const conText =
    con.cases.length === 0
      ? "no confirmation set"
      : `confirmation: fixed ${conStat.fixed}, broke ${conStat.broken} of ${conStat.cases}, ${conStat.parentFailing} failing on the parent${conStat.test === "sign_exact" ? ` (one-sided exact sign test p = ${fmt(conStat.pValue)}, level ${alphaC})` : conStat.test === "wilcoxon" ? ` (one-sided signed-rank p = ${fmt(conStat.pValue)}, level ${alphaC})` : ""}${conNote}`;
  const summary = `${selText}; ${conText}${flakyNote}`;
  if (broken > tolerance) {
    const shown = sel.broken.length ? `: ${quoteSome(sel.broken)}` : "";
    const hidden = con.broken.length ? ` (${con.broken.length} of them held out)` : "";
    return {
      ...base,
      verdict: "rejected",
      reason: "regression",
      message: `The candidate broke ${broken} case${broken === 1 ? "" : "s"} that passed on the parent, more than the tolerance of ${tolerance}${hidden}${shown}. ${summary}.`,
    };
  }
  if (!selStat.passed)
    return {
      ...base,
      verdict: "rejected",
      reason: "no_improvement",
      message: `No improvement on the selection set (${selStat.fixed + selStat.broken === 0 && !scored ? "no case changed outcome" : "not significant at α_j"}): ${summary}.`,
    };
  if (!conStat.passed)
    return {
      ...base,
      verdict: "rejected",
      reason: "overfit",
      message: `Overfit: the selection set says better but the held-out confirmation set does not confirm it. ${summary}.`,
    };
  return { ...base, verdict: "accepted", reason: "accepted", message: `Accepted: ${summary}.` };
}

/**
 * Whether a generation's benchmark may stop before `repeats` runs per side: only to REJECT,
 * when the selection set cannot reach its level even now: the one-sided sign test with the
 * selection's fixed cases so far and none broken is not below α_j. More runs can only turn a
 * candidate's unanimous pass into a fail, so the fixed count can grow only where the parent
 * fails a case it passed so far (a flaky case). Stopping to reject never adds a false accept:
 * on the same outcomes, an early-stopped generation that is accepted would also be accepted
 * with every repeat, and a stopped one is not accepted. A close call runs every repeat.
 * Scored benchmarks always run every repeat.
 */
export function futile(
  parentRuns: readonly (readonly CaseRun[])[],
  candidateRuns: readonly (readonly CaseRun[])[],
  opts: GenerationDecideOptions,
): boolean {
  const paired = pairCases(parentRuns, candidateRuns);
  if (!paired.ok) return false;
  if (paired.cases.some((c) => c.parent.scores.length > 0)) return false;
  const sel = decideGeneration(paired.cases, opts).statistic.selection;
  return sel !== undefined && signTestP(sel.fixed, 0, "greater") >= opts.alpha;
}

/** The parts of a run's state {@link runDecideOptions} reads. */
export interface RunDecisionState {
  request: { settings: { alpha: number; tolerance: number; generations: number; alphaSpending: AlphaSpending } };
  calibration?: { flaky: readonly string[]; confirmation: readonly string[] } | undefined;
  /** Paired tests the run made before this generation. */
  tests: number;
}

/** The options of {@link decideGeneration} for the run's next test: α_j, the sets, the flaky cases. */
export function runDecideOptions(state: RunDecisionState): GenerationDecideOptions {
  const s = state.request.settings;
  const j = state.tests + 1;
  return {
    alpha: testAlpha(s.alpha, j, s.generations, s.alphaSpending),
    confirmationAlpha: s.alpha,
    tolerance: s.tolerance,
    confirmation: new Set(state.calibration?.confirmation ?? []),
    flaky: new Set(state.calibration?.flaky ?? []),
    testIndex: j,
    alphaSpent: alphaSpent(s.alpha, j, s.generations, s.alphaSpending),
  };
}
