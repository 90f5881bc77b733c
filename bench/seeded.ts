/**
 * A seeded source of uniform numbers in [0, 1) for the benchmarks (pure-rand's
 * Mersenne Twister, MT19937), so every run of a benchmark draws the same data.
 */
import { uniformFloat64 } from "pure-rand/distribution/uniformFloat64";
import { mersenne } from "pure-rand/generator/mersenne";

/** A generator of uniform numbers in [0, 1), the same sequence for the same `seed` (an integer). */
export function seeded(seed: number): () => number {
  const gen = mersenne(seed);
  return () => uniformFloat64(gen);
}
