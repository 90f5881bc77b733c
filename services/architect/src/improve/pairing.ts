/**
 * The pairing of a generation's benchmark runs: the parent's and the candidate's runs case by
 * case, refused (one sentence) when they do not report the same cases. Pure.
 */
import type { CaseOutcome } from "@loopsmith/shared/contracts";
import { quoteId, type CaseRun } from "./bench-output.js";

/** The paired cases of a generation, or one sentence saying why the runs do not pair (`bench_unparsed`). */
export type PairResult = { ok: true; cases: CaseOutcome[] } | { ok: false; error: string };

/** Case ids quoted in one message, at most. */
const QUOTED = 5;

/** Up to `max` case ids, quoted, and how many more there are. */
export function quoteSome(ids: readonly string[], max = QUOTED): string {
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
