/**
 * The decision on a generation's quality metrics, {@link judgeMetrics}: a pure function of the
 * parent's and the candidate's measurements (the rules are in `metrics.ts`'s header, beside the
 * metrics' defaults and the measuring).
 */
import { signedRankTest, signTestP as signTest } from "@loopsmith/shared/stats";
import type { MetricOutcome, QualityBenchmarks, QualityMetric, QualityReport } from "@loopsmith/shared/contracts";
import { metricSettings, type Measurement } from "./metrics.js";

/** Settings of {@link judgeMetrics}. */
export interface JudgeOptions {
  /** α_j of this generation's test (the run's alpha spending). */
  alpha: number;
  benchmarks: QualityBenchmarks;
  language: QualityReport["language"];
  /** Metrics whose tool configuration the candidate changed ({@link changedToolConfig}). */
  configChanged?: ReadonlyArray<{ metric: QualityMetric; file: string }>;
}

/** The outcome of {@link judgeMetrics}. */
export interface QualityDecision {
  verdict: "accepted" | "rejected";
  reason: "accepted" | "metric_regressed" | "no_improvement";
  message: string;
  report: QualityReport;
}

function meanOf(xs: readonly number[]): number {
  return xs.length ? [...xs].sort((a, b) => a - b).reduce((s, x) => s + x, 0) / xs.length : 0;
}

function fmt(x: number): string {
  return String(Number(x.toPrecision(3)));
}

/** One-sided exact sign test: P(X ≥ fixed), X ~ Binomial(fixed + broken, 1/2); 1 with no discordant case. */
export function signTestP(fixed: number, broken: number): number {
  return signTest(fixed, broken, "greater");
}

/** Per side: each case's verdict over the repeats (passes only when it passed in every one) and whether the repeats agreed. */
function merge(runs: ReadonlyArray<Record<string, boolean>>): { cases: Map<string, boolean>; stable: boolean } {
  const cases = new Map<string, boolean>();
  let stable = true;
  const keys = new Set(runs.flatMap((r) => Object.keys(r)));
  for (const k of keys) {
    const seen = runs.map((r) => r[k]);
    if (seen.some((v) => v !== seen[0])) stable = false;
    cases.set(
      k,
      seen.every((v) => v === true),
    );
  }
  return { cases, stable };
}

/** A metric's settings, as {@link metricSettings} gives them. */
type MetricSetting = ReturnType<typeof metricSettings>[number];

/** What every outcome of a metric says: its settings and the tools that measured it. */
type OutcomeBase = Pick<MetricOutcome, "metric" | "direction" | "unit" | "weight" | "tolerance" | "tool">;

/** One metric's outcome and its term of the weighted improvement (0 when unavailable). */
interface Judged {
  outcome: MetricOutcome;
  gain: number;
}

/** The metric's values in each run of a side where it was measured. */
function valuesOf(runs: readonly Measurement[], m: QualityMetric): number[] {
  return runs.flatMap((r) => {
    const x = r[m];
    return x?.status === "ok" ? [x.value] : [];
  });
}

/**
 * Judges a generation on its quality metrics (rules in `metrics.ts`'s header).
 * @param parentRuns - one {@link Measurement} per repeat of the parent
 * @param candidateRuns - the same for the candidate, in the same order
 * @throws RangeError when `alpha` is not in (0, 1]
 */
export function judgeMetrics(
  parentRuns: readonly Measurement[],
  candidateRuns: readonly Measurement[],
  opts: JudgeOptions,
): QualityDecision {
  if (!(opts.alpha > 0 && opts.alpha <= 1)) throw new RangeError(`alpha must be in (0, 1], got ${opts.alpha}`);
  const settings = metricSettings(opts.benchmarks);
  const available = (m: QualityMetric): boolean =>
    parentRuns.length > 0 &&
    candidateRuns.length > 0 &&
    [...parentRuns, ...candidateRuns].every((r) => r[m]?.status === "ok");
  const weighted = settings.filter((s) => s.weight > 0 && available(s.metric)).length;
  const level = opts.alpha / Math.max(1, weighted);
  const outcomes: MetricOutcome[] = [];
  let weightedImprovement = 0;
  for (const s of settings) {
    const changedCfg = (opts.configChanged ?? []).filter((c) => c.metric === s.metric).map((c) => c.file);
    const judged = available(s.metric)
      ? judgeMeasured(s, parentRuns, candidateRuns, level, changedCfg)
      : { outcome: unavailableOutcome(s, parentRuns, candidateRuns, changedCfg), gain: 0 };
    if (available(s.metric)) weightedImprovement += judged.gain;
    outcomes.push(judged.outcome);
  }
  return metricsVerdict(outcomes, weightedImprovement, opts.language, Math.max(1, parentRuns.length));
}

/** The settings of `s` and the tools that measured it on each side. */
function outcomeBase(
  s: MetricSetting,
  parentRuns: readonly Measurement[],
  candidateRuns: readonly Measurement[],
): OutcomeBase {
  const m = s.metric;
  const toolOf = (runs: readonly Measurement[]): string | undefined => {
    const r = runs.find((x) => x[m]?.tool);
    return r?.[m]?.tool ?? undefined;
  };
  return {
    metric: m,
    direction: s.direction,
    unit: s.unit,
    weight: s.weight,
    tolerance: s.tolerance,
    tool: {
      ...(toolOf(parentRuns) ? { parent: toolOf(parentRuns) } : {}),
      ...(toolOf(candidateRuns) ? { candidate: toolOf(candidateRuns) } : {}),
    },
  };
}

/** A metric not measured on some run of a side: why; regressed only when the candidate changed its configuration. */
function unavailableOutcome(
  s: MetricSetting,
  parentRuns: readonly Measurement[],
  candidateRuns: readonly Measurement[],
  changedCfg: readonly string[],
): MetricOutcome {
  const m = s.metric;
  const why = (["parent", "candidate"] as const)
    .flatMap((side) => {
      const runs = side === "parent" ? parentRuns : candidateRuns;
      const bad = runs.find((r) => r[m]?.status !== "ok")?.[m];
      return bad && bad.status === "unavailable"
        ? [`${side}: ${bad.reason}`]
        : runs.length
          ? []
          : [`${side}: not measured`];
    })
    .join("; ");
  return {
    ...outcomeBase(s, parentRuns, candidateRuns),
    status: "unavailable",
    reason: why || "not measured",
    parentValues: valuesOf(parentRuns, m),
    candidateValues: valuesOf(candidateRuns, m),
    test: "none",
    improved: false,
    // A changed configuration of a metric that could not be measured is still a change of its rules.
    regressed: changedCfg.length > 0,
    note: changedCfg.length
      ? `the candidate changed ${m}'s configuration (${changedCfg.join(", ")}); the metric is unavailable: ${why}`
      : `unavailable: ${why}`,
  };
}

/** A metric measured on every run of both sides: its value's or its cases' judgement, a changed configuration noted. */
function judgeMeasured(
  s: MetricSetting,
  parentRuns: readonly Measurement[],
  candidateRuns: readonly Measurement[],
  level: number,
  changedCfg: readonly string[],
): Judged {
  const base = outcomeBase(s, parentRuns, candidateRuns);
  const judged =
    s.kind === "value"
      ? judgeValue(s, base, valuesOf(parentRuns, s.metric), valuesOf(candidateRuns, s.metric), level, changedCfg)
      : judgeCases(s, base, parentRuns, candidateRuns, level, changedCfg);
  if (changedCfg.length)
    judged.outcome.note = `the candidate changed ${s.metric}'s configuration (${changedCfg.join(", ")}): each metric is measured under the parent's rules, so its configuration may not change. ${judged.outcome.note}`;
  return judged;
}

/** A `value` metric (complexity): deterministic and better, else the one-sided signed-rank test per repeat. */
function judgeValue(
  s: MetricSetting,
  base: OutcomeBase,
  pv: number[],
  cv: number[],
  level: number,
  changedCfg: readonly string[],
): Judged {
  const delta = meanOf(cv) - meanOf(pv);
  const better = s.direction === "higher" ? delta : -delta;
  const deterministic = pv.every((v) => v === pv[0]) && cv.every((v) => v === cv[0]);
  let pValue: number | undefined;
  let improved: boolean;
  if (deterministic) improved = better > 1e-9;
  else {
    const diffs = pv.map((p, i) => ((cv[i] ?? p) - p) * (s.direction === "higher" ? 1 : -1));
    pValue = signedRankTest(diffs, "greater").pValue;
    improved = pValue < level && better > 0;
  }
  const regressed = better < -s.tolerance || changedCfg.length > 0;
  const gain = s.weight * (better / Math.max(1, Math.abs(meanOf(pv))));
  const outcome: MetricOutcome = {
    ...base,
    status: "measured",
    parentValues: pv,
    candidateValues: cv,
    delta,
    test: deterministic ? "deterministic" : "signed_rank",
    ...(pValue !== undefined ? { pValue, alpha: level } : {}),
    improved,
    regressed,
    note: `${fmt(meanOf(pv))} → ${fmt(meanOf(cv))} ${s.unit} (${s.direction} is better, tolerance ${s.tolerance})`,
  };
  return { outcome, gain };
}

/**
 * The cases fixed and broken between the merged sides, and how many were compared: for
 * `findings`, a finding gone is fixed and a new one broken; for `outcomes`, keyed pass/fail
 * (a new failing case broken when `newFailingBreaks`).
 */
function compareCases(
  s: MetricSetting,
  p: Map<string, boolean>,
  c: Map<string, boolean>,
): { fixed: string[]; broken: string[]; compared: number } {
  const fixed: string[] = [];
  const broken: string[] = [];
  if (s.kind === "findings") {
    // A finding is a failing case: one gone is fixed, one new is broken.
    for (const k of p.keys()) if (!c.has(k)) fixed.push(k);
    for (const k of c.keys()) if (!p.has(k)) broken.push(k);
    return { fixed, broken, compared: new Set([...p.keys(), ...c.keys()]).size };
  }
  let compared = 0;
  for (const [k, before] of p) {
    const after = c.get(k);
    if (after === undefined) continue;
    compared += 1;
    if (!before && after) fixed.push(k);
    if (before && !after) broken.push(k);
  }
  if (s.newFailingBreaks)
    for (const [k, after] of c)
      if (!p.has(k)) {
        compared += 1;
        if (!after) broken.push(k);
      }
  return { fixed, broken, compared };
}

/** A metric with cases: fixed against broken, exact for a deterministic static analyser, else the one-sided sign test. */
function judgeCases(
  s: MetricSetting,
  base: OutcomeBase,
  parentRuns: readonly Measurement[],
  candidateRuns: readonly Measurement[],
  level: number,
  changedCfg: readonly string[],
): Judged {
  const m = s.metric;
  const pv = valuesOf(parentRuns, m);
  const cv = valuesOf(candidateRuns, m);
  const caseRuns = (runs: readonly Measurement[]): Array<Record<string, boolean>> =>
    runs.map((r) => {
      const x = r[m];
      return x?.status === "ok" ? (x.cases ?? {}) : {};
    });
  const p = merge(caseRuns(parentRuns));
  const c = merge(caseRuns(candidateRuns));
  const { fixed, broken, compared } = compareCases(s, p.cases, c.cases);
  const deterministic = s.static && p.stable && c.stable;
  const pValue = deterministic ? undefined : signTestP(fixed.length, broken.length);
  const improved = deterministic ? fixed.length > broken.length : (pValue ?? 1) < level && fixed.length > broken.length;
  const regressed = broken.length > s.tolerance || changedCfg.length > 0;
  const gain = s.weight * ((fixed.length - broken.length) / Math.max(1, compared));
  const shown = broken.slice(0, 10).map((k) => k.replace(/#1$/, ""));
  const outcome: MetricOutcome = {
    ...base,
    status: "measured",
    parentValues: pv,
    candidateValues: cv,
    delta: meanOf(cv) - meanOf(pv),
    test: deterministic ? "deterministic" : "sign_exact",
    cases: compared,
    fixed: fixed.length,
    broken: broken.length,
    ...(shown.length ? { brokenCases: shown } : {}),
    ...(pValue !== undefined ? { pValue, alpha: level } : {}),
    improved,
    regressed,
    note: `${fmt(meanOf(pv))} → ${fmt(meanOf(cv))} ${s.unit}: fixed ${fixed.length}, broke ${broken.length} of ${compared} (${deterministic ? "deterministic" : `one-sided sign test p = ${fmt(pValue ?? 1)}, level ${fmt(level)}`}; tolerance ${s.tolerance})${shown.length ? `; broken: ${shown.slice(0, 3).join(", ")}${broken.length > 3 ? ", …" : ""}` : ""}`,
  };
  return { outcome, gain };
}

/** The decision from the metrics' outcomes: `metric_regressed`, accepted, or `no_improvement`, with the report. */
function metricsVerdict(
  outcomes: MetricOutcome[],
  weightedImprovement: number,
  language: QualityReport["language"],
  repeats: number,
): QualityDecision {
  const regressed = outcomes.filter((o) => o.regressed).map((o) => o.metric);
  const improved = outcomes.filter((o) => o.improved && o.weight > 0).map((o) => o.metric);
  const report: QualityReport = { language, repeats, metrics: outcomes, weightedImprovement, regressed, improved };
  const line = (o: MetricOutcome): string => `${o.metric}: ${o.note}`;
  const unavailable = outcomes.filter((o) => o.status === "unavailable").map((o) => o.metric);
  const tail = unavailable.length ? ` Unavailable: ${unavailable.join(", ")}.` : "";
  if (regressed.length)
    return {
      verdict: "rejected",
      reason: "metric_regressed",
      message: `Regressed beyond tolerance: ${outcomes
        .filter((o) => o.regressed)
        .map(line)
        .join("; ")}.${tail}`,
      report,
    };
  const summary = `weighted improvement ${fmt(weightedImprovement)}; ${outcomes
    .filter((o) => o.status === "measured")
    .map(line)
    .join("; ")}`;
  if (improved.length && weightedImprovement > 0)
    return {
      verdict: "accepted",
      reason: "accepted",
      message: `Accepted (improved: ${improved.join(", ")}): ${summary}.${tail}`,
      report,
    };
  return {
    verdict: "rejected",
    reason: "no_improvement",
    message: `No improvement (${improved.length ? "the weighted improvement is not positive" : "no metric with a weight improved significantly"}): ${summary}.${tail}`,
    report,
  };
}
