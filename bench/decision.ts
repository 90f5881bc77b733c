/**
 * `npm run bench:decision`: how often the improvement decision accepts a change that does
 * nothing real, and how often it accepts one that does, by simulation over the decision code
 * itself (services/architect/src/improve/decision.ts). Baselines, in the same run: the naive
 * rule "accept when the candidate passes more cases than the parent", which is what a
 * single-run comparison does.
 *
 * Candidates on a benchmark of N cases, P of them passing on the parent:
 * - noise: every case's outcome is a fair coin on each run (a flaky benchmark, a coin-flip change);
 * - lucky: only failing cases flip, each passing with probability 1/2 (a change that cannot break
 *   anything but fixes nothing for real; the hardest null case);
 * - no-op: identical outcomes;
 * - real k: k failing cases fixed for good, the rest unchanged.
 *
 * Prints the acceptance rate of each, per repeats setting, for the decision and the baseline.
 *
 * Then the run-level simulation, over the run's whole pipeline as the improver
 * runs it: calibration runs of the parent (flaky cases), the seeded stratified split, each
 * generation benchmarked repeat by repeat with the early stop (`futile`), and
 * `decideGeneration` at the run's α_j. Benchmark: 60 cases, 20 passing and 32 failing for good
 * on the parent, 8 flaky (passing each run with probability 0.5, 0.7, 0.8 or 0.9, on both sides). Beside it, today's rule
 * (`decide` at alpha 0.05 for every generation, every repeat, all cases):
 * - noise: 100 generations whose candidates change nothing (outcomes distributed as the
 *   parent's): the share of runs with ANY accept, over `--runs` runs (default 1,000);
 * - real fix of k failing cases (at random: the split puts some in each set): the acceptance
 *   rate at the run's first test, and at its 20th, in 10- and 100-generation runs;
 * - the benchmark runs spent per generation (both sides, calibration shared out).
 */
import { mean } from "simple-statistics";
import type { CaseOutcome } from "@loopsmith/shared/contracts";
import type { CaseRun } from "../services/architect/src/improve/bench-output.js";
import {
  alphaSpent,
  calibrate,
  decide,
  decideGeneration,
  futile,
  pairCases,
  testAlpha,
  type AlphaSpending,
  type GenerationDecideOptions,
} from "../services/architect/src/improve/decision.js";
import { formatTable } from "@loopsmith/cli/ui";
import { cpuTimes, machineLine, referenceMs } from "./machine.js";

const TRIALS = Number(process.argv.find((a) => a.startsWith("--trials="))?.split("=")[1] ?? 2_000);
const N = 30;
const PASSING = 12;

/** A seeded generator (mulberry32), so the figures are the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Kind = "noise" | "lucky" | "no-op" | "real 4" | "real 8";

function outcomes(kind: Kind, repeats: number, rand: () => number): CaseOutcome[] {
  return Array.from({ length: N }, (_, i) => {
    const passesBefore = i < PASSING;
    const runs = (p: (r: number) => boolean) => Array.from({ length: repeats }, (_, r) => p(r)).filter(Boolean).length;
    const parent = kind === "noise" ? runs(() => rand() < 0.5) : passesBefore ? repeats : 0;
    let candidate: number;
    if (kind === "noise") candidate = runs(() => rand() < 0.5);
    else if (kind === "lucky") candidate = passesBefore ? repeats : runs(() => rand() < 0.5);
    else if (kind === "no-op") candidate = parent;
    else candidate = passesBefore || i < PASSING + Number(kind.split(" ")[1]) ? repeats : 0;
    return {
      case: `c${i}`,
      parent: { passes: parent, runs: repeats, scores: [] },
      candidate: { passes: candidate, runs: repeats, scores: [] },
    };
  });
}

const kinds: Kind[] = ["noise", "lucky", "no-op", "real 4", "real 8"];
const rows: string[][] = [];
for (const repeats of [1, 3]) {
  for (const kind of kinds) {
    const rand = rng(repeats * 1000 + kinds.indexOf(kind));
    let accepted = 0;
    let naive = 0;
    for (let t = 0; t < TRIALS; t++) {
      const cases = outcomes(kind, repeats, rand);
      if (decide(cases, { alpha: 0.05, tolerance: 0 }).verdict === "accepted") accepted += 1;
      const sum = (side: "parent" | "candidate") => cases.reduce((s, c) => s + c[side].passes, 0);
      if (sum("candidate") > sum("parent")) naive += 1;
    }
    rows.push([String(repeats), kind, (accepted / TRIALS).toFixed(4), (naive / TRIALS).toFixed(4)]);
  }
}
console.log(
  `decision acceptance rate over ${TRIALS} simulated candidates each (${N} cases, ${PASSING} passing on the parent, alpha 0.05, tolerance 0)`,
);
const header = ["repeats", "change", "decision", "naive (more passes = better)"];
for (const line of formatTable([header, ...rows], { align: ["right", "left", "right"] })) console.log(line);

// ---------------------------------------------------------------------------------------------
// Run-level simulation: calibration, held-out confirmation set, early stop, alpha spending
// ---------------------------------------------------------------------------------------------

const RUNS = Number(process.argv.find((a) => a.startsWith("--runs="))?.split("=")[1] ?? 1_000);
const RUN_GENERATIONS = 100;
const REPEATS = 3;
const CALIBRATION = 3;
const ALPHA = 0.05;
const RN = 60;
const R_PASS = 20;
const R_FLAKY = 8;
/** The flaky cases' pass probabilities per run, in turn. */
const FLAKY_P = [0.5, 0.7, 0.8, 0.9];
const caseId = (i: number): string => `c${String(i).padStart(2, "0")}`;
/** Case i: 0..19 pass, 20..27 flaky, 28..59 fail (unless fixed). */
const kindOf = (i: number): "pass" | "flaky" | "fail" =>
  i < R_PASS ? "pass" : i < R_PASS + R_FLAKY ? "flaky" : "fail";

/** One benchmark run of a side: `fixed` failing cases pass for good. */
function benchRun(rand: () => number, fixed: ReadonlySet<number>): CaseRun[] {
  return Array.from({ length: RN }, (_, i) => {
    const k = kindOf(i);
    const p = FLAKY_P[(i - R_PASS) % FLAKY_P.length] ?? 0.5;
    return { case: caseId(i), pass: k === "pass" || fixed.has(i) || (k === "flaky" && rand() < p) };
  });
}

interface Gen {
  accepted: boolean;
  /** Benchmark runs spent, both sides. */
  runs: number;
}

/** Today's rule: every repeat, all cases, two-sided exact McNemar at alpha 0.05. */
function todayGeneration(rand: () => number, fixed: ReadonlySet<number>): Gen {
  const parent: CaseRun[][] = [];
  const candidate: CaseRun[][] = [];
  for (let r = 0; r < REPEATS; r++) {
    parent.push(benchRun(rand, new Set()));
    candidate.push(benchRun(rand, fixed));
  }
  const paired = pairCases(parent, candidate);
  if (!paired.ok) throw new Error(paired.error);
  return { accepted: decide(paired.cases, { alpha: ALPHA, tolerance: 0 }).verdict === "accepted", runs: 2 * REPEATS };
}

/** The improver's rule: repeats until futile or `REPEATS`, then `decideGeneration` on the sets at α_j. */
function newGeneration(rand: () => number, fixed: ReadonlySet<number>, opts: GenerationDecideOptions): Gen {
  const parent: CaseRun[][] = [];
  const candidate: CaseRun[][] = [];
  for (let r = 0; r < REPEATS; r++) {
    parent.push(benchRun(rand, new Set()));
    candidate.push(benchRun(rand, fixed));
    if (r + 1 < REPEATS && futile(parent, candidate, opts)) break;
  }
  const paired = pairCases(parent, candidate);
  if (!paired.ok) throw new Error(paired.error);
  const d = decideGeneration(paired.cases as CaseOutcome[], opts);
  return { accepted: d.verdict === "accepted", runs: 2 * parent.length };
}

/** The calibration of a simulated run: flaky cases and the split (seeded per run). */
function runCalibration(rand: () => number, seed: number): { confirmation: Set<string>; flaky: Set<string> } {
  const runs = Array.from({ length: CALIBRATION }, () => benchRun(rand, new Set()));
  const c = calibrate(runs, { fraction: 0.3, holdout: [], seed });
  if (!c.ok) throw new Error(c.error);
  return { confirmation: new Set(c.calibration.confirmation), flaky: new Set(c.calibration.flaky) };
}

function options(
  cal: { confirmation: Set<string>; flaky: Set<string> },
  j: number,
  generations: number,
  rule: AlphaSpending,
): GenerationDecideOptions {
  return {
    alpha: testAlpha(ALPHA, j, generations, rule),
    confirmationAlpha: ALPHA,
    tolerance: 0,
    confirmation: cal.confirmation,
    flaky: cal.flaky,
  };
}

const before = cpuTimes();
const refMs = referenceMs();
const started = Date.now();

// Noise: 100 generations of candidates that change nothing.
const noise = { today: 0, harmonic: 0, basel: 0 };
const spent = { today: [] as number[], harmonic: [] as number[] };
for (let run = 0; run < RUNS; run++) {
  const rand = rng(1_000_003 + run);
  let today = false;
  let runsToday = 0;
  for (let g = 1; g <= RUN_GENERATIONS && !today; g++) {
    const gen = todayGeneration(rand, new Set());
    runsToday += gen.runs;
    today = gen.accepted;
  }
  noise.today += today ? 1 : 0;
  spent.today.push(runsToday / RUN_GENERATIONS);
  for (const rule of ["harmonic", "basel"] as const) {
    const cal = runCalibration(rand, run);
    let any = false;
    let runsNew = CALIBRATION;
    for (let g = 1; g <= RUN_GENERATIONS && !any; g++) {
      const gen = newGeneration(rand, new Set(), options(cal, g, RUN_GENERATIONS, rule));
      runsNew += gen.runs;
      any = gen.accepted;
    }
    noise[rule] += any ? 1 : 0;
    if (rule === "harmonic") spent.harmonic.push(runsNew / RUN_GENERATIONS);
  }
}

// Power: a real fix of k failing cases, at the run's test j of a G-generation run.
const POWER_TRIALS = Math.max(200, Math.round(RUNS));
const FAILING = Array.from({ length: RN - R_PASS - R_FLAKY }, (_, i) => R_PASS + R_FLAKY + i);
const ks = [2, 4, 6, 8, 12, 16, 24];
const powerRows: string[][] = [];
const fixRuns: Record<string, number[]> = { today: [], new: [] };
for (const k of ks) {
  const acc = { today: 0, g10: 0, g100: 0, g100j20: 0 };
  for (let t = 0; t < POWER_TRIALS; t++) {
    const rand = rng(7_000_000 + k * 10_000 + t);
    const shuffled = [...FAILING].sort(() => rand() - 0.5);
    const fixed = new Set(shuffled.slice(0, k));
    const today = todayGeneration(rand, fixed);
    acc.today += today.accepted ? 1 : 0;
    const cal = runCalibration(rand, t);
    const g10 = newGeneration(rand, fixed, options(cal, 1, 10, "harmonic"));
    acc.g10 += g10.accepted ? 1 : 0;
    acc.g100 += newGeneration(rand, fixed, options(cal, 1, 100, "harmonic")).accepted ? 1 : 0;
    acc.g100j20 += newGeneration(rand, fixed, options(cal, 20, 100, "harmonic")).accepted ? 1 : 0;
    if (k === 8) {
      fixRuns.today?.push(today.runs);
      fixRuns.new?.push(g10.runs);
    }
  }
  const pct = (n: number): string => `${((100 * n) / POWER_TRIALS).toFixed(1)}%`;
  powerRows.push([String(k), pct(acc.today), pct(acc.g10), pct(acc.g100), pct(acc.g100j20)]);
}
const after = cpuTimes();

console.log("");
console.log(
  `run-level simulation: ${RN} cases (${R_PASS} pass, ${RN - R_PASS - R_FLAKY} fail, ${R_FLAKY} flaky, passing each run at ${FLAKY_P.join("/")}), up to ${REPEATS} repeats per side, ${CALIBRATION} calibration runs, 30% held out, run alpha ${ALPHA}`,
);
console.log(
  `alpha spent per test: harmonic over 100 generations α_1 = ${testAlpha(ALPHA, 1, 100, "harmonic").toPrecision(3)}, α_20 = ${testAlpha(ALPHA, 20, 100, "harmonic").toPrecision(3)}, Σ_100 = ${alphaSpent(ALPHA, 100, 100, "harmonic").toPrecision(3)}; basel α_1 = ${testAlpha(ALPHA, 1, 100, "basel").toPrecision(3)}, Σ_100 = ${alphaSpent(ALPHA, 100, 100, "basel").toPrecision(3)}`,
);
const share = (n: number): string => `${((100 * n) / RUNS).toFixed(1)}% (${n}/${RUNS})`;
for (const line of formatTable(
  [
    ["100 generations of noise", "runs with any false accept"],
    ["today's rule (alpha 0.05 per generation)", share(noise.today)],
    ["run-level, harmonic spending", share(noise.harmonic)],
    ["run-level, basel spending", share(noise.basel)],
  ],
  { align: ["left", "right"] },
))
  console.log(line);
console.log("");
console.log(`real fix of k failing cases: acceptance rate over ${POWER_TRIALS} trials each`);
for (const line of formatTable(
  [["k", "today's rule", "new, test 1 of 10", "new, test 1 of 100", "new, test 20 of 100"], ...powerRows],
  { align: ["right", "right", "right", "right", "right"] },
))
  console.log(line);
console.log("");
console.log("benchmark runs per generation (both sides; calibration shared out over the run)");
for (const line of formatTable(
  [
    ["candidate", "today's rule", "run-level rule"],
    ["noise (100-generation runs)", mean(spent.today).toFixed(2), mean(spent.harmonic).toFixed(2)],
    ["real fix of 8", mean(fixRuns.today ?? [0]).toFixed(2), mean(fixRuns.new ?? [0]).toFixed(2)],
  ],
  { align: ["left", "right", "right"] },
))
  console.log(line);
console.log(`${machineLine(refMs, before, after)}; ${((Date.now() - started) / 1000).toFixed(0)} s`);
