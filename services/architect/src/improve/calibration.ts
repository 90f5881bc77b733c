/**
 * The calibration of a run: each case's flakiness over the runs of the base parent, and the
 * split of the cases into the selection set and the confirmation set. Pure.
 */
import { createHash } from "node:crypto";
import picomatch from "picomatch";
import type { CaseRun } from "./bench-output.js";
import { pairCases } from "./pairing.js";

/** A seed for the split from the run id: the first 32 bits of its SHA-256. */
export function splitSeedOf(runId: string): number {
  return createHash("sha256").update(runId).digest().readUInt32BE(0);
}

/** What the calibration runs and the split give a run (`Calibration` in the contracts). */
export interface CalibrationResult {
  runs: number;
  flaky: string[];
  seed: number;
  source: "fraction" | "holdout" | "none";
  selection: string[];
  confirmation: string[];
  parentFailing: string[];
}

/**
 * Measures each case's flakiness on `runs` of the base parent and splits the cases into the
 * selection set and the confirmation set.
 *
 * - A case is **flaky** when it passed in some runs and failed in others; it is
 *   *parent-failing* when it failed in every run.
 * - `holdout` patterns (picomatch globs over case ids, `*` and `?`; an id is also matched
 *   exactly) name the confirmation cases when given: the rest is the selection set.
 * - Otherwise the split is stratified: within each stratum (passing, failing, flaky on the
 *   parent) the cases are ordered by SHA-256 of `<seed>:<id>` and the first
 *   round(fraction × stratum size) go to confirmation, so each set keeps the parent's pass
 *   rate. The same seed and cases always give the same split. `fraction` 0: no confirmation.
 *
 * @param runs - the calibration runs (at least one), each as `parseBenchOutput` reads it
 * @returns the calibration, or one sentence when the runs do not report the same cases
 */
export function calibrate(
  runs: readonly (readonly CaseRun[])[],
  opts: { fraction: number; holdout: readonly string[]; seed: number },
): { ok: true; calibration: CalibrationResult } | { ok: false; error: string } {
  const paired = pairCases(runs, runs.slice(0, 1));
  if (!paired.ok) return paired;
  const flaky: string[] = [];
  const failing: string[] = [];
  const passing: string[] = [];
  for (const c of paired.cases) {
    if (c.parent.passes === 0) failing.push(c.case);
    else if (c.parent.passes === c.parent.runs) passing.push(c.case);
    else flaky.push(c.case);
  }
  let confirmation: Set<string>;
  let source: CalibrationResult["source"];
  if (opts.holdout.length > 0) {
    const matchers = opts.holdout.map((p) => picomatch(p, { dot: true }));
    const exact = new Set(opts.holdout);
    confirmation = new Set(
      paired.cases.map((c) => c.case).filter((id) => exact.has(id) || matchers.some((m) => m(id))),
    );
    source = "holdout";
  } else if (opts.fraction > 0) {
    const key = (id: string): string => createHash("sha256").update(`${opts.seed}:${id}`).digest("hex");
    confirmation = new Set(
      [passing, failing, flaky].flatMap((stratum) =>
        stratum
          .map((id) => ({ id, k: key(id) }))
          .sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))
          .slice(0, Math.round(opts.fraction * stratum.length))
          .map((x) => x.id),
      ),
    );
    source = "fraction";
  } else {
    confirmation = new Set();
    source = "none";
  }
  const ids = paired.cases.map((c) => c.case);
  return {
    ok: true,
    calibration: {
      runs: runs.length,
      flaky,
      seed: opts.seed,
      source,
      selection: ids.filter((id) => !confirmation.has(id)),
      confirmation: ids.filter((id) => confirmation.has(id)),
      parentFailing: failing,
    },
  };
}
