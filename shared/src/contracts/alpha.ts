/**
 * Alpha spending of an improvement run: the level of each paired test so that the
 * chance of any false accept in the whole run stays at most the run's `alpha`. The architect's
 * decision and the CLI's reports and small-benchmark warning both use it.
 */

import type { ALPHA_SPENDINGS } from "./values.js";

/** How a run spends its `alpha` over its tests (`ImproveSettings.alphaSpending`). */
export type AlphaSpending = (typeof ALPHA_SPENDINGS)[number];

/**
 * The level α_j of the run's j-th paired test (j ≥ 1), given the run's budget `alpha` and its
 * `generations` G (a run makes at most one test per generation, so j ≤ G).
 *
 * - `harmonic`: α_j = alpha / (j · H_G), H_G = Σ_{i=1..G} 1/i. Σ_{j ≤ G} α_j = alpha.
 * - `basel`: α_j = alpha · 6 / (π² j²). Σ_{j ≥ 1} α_j = alpha (Euler's sum Σ 1/j² = π²/6), for
 *   any number of tests.
 * - `none`: α_j = alpha (each test on its own; no run-level guarantee).
 *
 * With Σ α_j ≤ alpha, the union bound (Bonferroni) gives P(any false accept in the run) ≤ alpha
 * however many tests the run makes: each test's false-accept chance, conditional on the run so
 * far, is ≤ its α_j, and j is fixed by the run so far (a predictable sequence). Only generations
 * that reach the benchmark spend; a rejected-before-bench generation spends nothing.
 *
 * @throws RangeError when `alpha` is not in (0, 1], or `j` or `generations` is not a positive integer
 */
export function testAlpha(alpha: number, j: number, generations: number, rule: AlphaSpending): number {
  if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`alpha must be in (0, 1], got ${alpha}`);
  if (!Number.isInteger(j) || j < 1) throw new RangeError(`the test index must be a positive integer, got ${j}`);
  if (!Number.isInteger(generations) || generations < 1)
    throw new RangeError(`generations must be a positive integer, got ${generations}`);
  if (rule === "none") return alpha;
  if (rule === "basel") return (alpha * 6) / (Math.PI ** 2 * j * j);
  let h = 0;
  for (let i = 1; i <= generations; i++) h += 1 / i;
  return alpha / (j * h);
}
