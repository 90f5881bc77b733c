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
 */
import type { CaseOutcome } from "@loopsmith/shared";
import { decide } from "../services/architect/src/improve/decision.js";
import { formatTable } from "@loopsmith/cli/ui";

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
