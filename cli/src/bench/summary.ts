/**
 * The totals of a `loopsmith bench` run (`summary.json`): per arm
 * (pass@1, iterations, tokens, USD, wall time, memory's use: `memory-use.ts`) and, for `--memory ab`, the paired comparison
 * of the two arms with exact tests: the shared paired tests (`@loopsmith/shared/stats`), which the
 * architect's improvement decision uses too: the exact McNemar test on the discordant pairs, and
 * the Wilcoxon signed-rank test on the paired differences.
 *
 * Every function is pure. A case with several result lines for the same arm (a resumed run,
 * a retried task) counts once: its LAST line in the input order.
 */
import { signedRankTest, signTestP } from "@loopsmith/shared/stats";
import {
  ArmSummary,
  BenchSummary,
  PairedSummary,
  type BenchArm,
  type BenchResult,
  type RunFormat,
  type ProviderLabel,
  type SkippedLine,
} from "./types.js";
import { BUSY_MACHINE_PCT, type MachineState } from "./machine.js";
import { summarizeArmMemory } from "./memory-use.js";

/**
 * The result that counts for each (case, arm): the last line of it in `results`, in the order
 * of first appearance of the (case, arm).
 */
export function lastResults(results: readonly BenchResult[]): BenchResult[] {
  const byKey = new Map<string, BenchResult>();
  for (const r of results) {
    const key = `${r.arm}\u0000${r.caseId}`;
    byKey.set(key, r);
  }
  return [...byKey.values()];
}

/** Mean of `xs`; 0 for none (summaries stay JSON: no NaN). */
function mean(xs: readonly number[]): number {
  if (!xs.length) return 0;
  // Summed in sorted order, so the same values in another order give the same mean.
  return [...xs].sort((a, b) => a - b).reduce((s, x) => s + x, 0) / xs.length;
}

/** Nearest-rank percentile (`q` in (0, 1]): the ⌈q·n⌉-th smallest value; 0 for none. */
export function nearestRank(xs: readonly number[], q: number): number {
  if (!xs.length) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1] ?? 0;
}

function countBy(keys: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out;
}

/**
 * The totals of one arm's results (results of other arms must not be mixed in: pass one
 * arm's lines). Units: iterations, tokens and USD per task; wall time in ms (mean over tasks).
 * - `passAt1` = passed / tasks (hidden tests; one sample per task), `visiblePassRate` the same
 *   over the visible tests; both 0 with no task;
 * - `p90Iterations`: nearest-rank 90th percentile;
 * - `errors`: tasks whose status is `error`; of the tasks that did not pass, `infraErrors`
 *   failed on the infrastructure ({@link isInfraError}) and `agentFailures` are the rest;
 * - `stopReasons`, `iterationsHistogram`: tasks per stop reason, per iteration count;
 * - `memory`: memory's use over the lines that record it (`summarizeArmMemory`, with `utility`
 *   per `<kind>:<id>`), absent when none does.
 */
export function summarizeArm(
  results: readonly BenchResult[],
  machine?: MachineState,
  utility?: ReadonlyMap<string, number | null>,
): ArmSummary {
  const rs = lastResults(results);
  const memory = summarizeArmMemory(rs, utility);
  const n = rs.length;
  const iterations = rs.map((r) => r.iterations);
  const passed = rs.filter((r) => r.passed).length;
  const infra = rs.filter((r) => !r.passed && isInfraError(r, machine)).length;
  return ArmSummary.parse({
    tasks: n,
    passed,
    passAt1: n ? passed / n : 0,
    visiblePassRate: n ? rs.filter((r) => r.visiblePassed).length / n : 0,
    meanIterations: mean(iterations),
    p90Iterations: nearestRank(iterations, 0.9),
    tokensInPerTask: mean(rs.map((r) => r.tokensIn)),
    tokensOutPerTask: mean(rs.map((r) => r.tokensOut)),
    usdPerTask: mean(rs.map((r) => r.costUsd)),
    meanWallMs: mean(rs.map((r) => r.wallMs)),
    errors: rs.filter((r) => r.status === "error").length,
    infraErrors: infra,
    agentFailures: n - passed - infra,
    stopReasons: countBy(rs.map((r) => r.stopReason)),
    iterationsHistogram: countBy(iterations.map(String)),
    ...(memory ? { memory } : {}),
  });
}

/**
 * Error codes that say the infrastructure failed, not the agent: the sandbox (a container or
 * an image the engine does not have), the bus (a call that found no service or ran out of
 * time), the database. The codes are `ErrorCode`'s (shared/src/runtime/errors.ts).
 */
export const INFRA_ERROR_CODES: ReadonlySet<string> = new Set(["sandbox_error", "unavailable", "timeout", "db_error"]);

/**
 * A result that did not pass because of the infrastructure: its error code is one of
 * {@link INFRA_ERROR_CODES}, or it ran out of the bench's task time (`task_timeout`) while the
 * machine was over {@link BUSY_MACHINE_PCT} % busy over the run.
 */
export function isInfraError(r: Pick<BenchResult, "errorCode">, machine?: MachineState): boolean {
  if (!r.errorCode) return false;
  if (INFRA_ERROR_CODES.has(r.errorCode)) return true;
  return r.errorCode === "task_timeout" && (machine?.busyPct ?? 0) > BUSY_MACHINE_PCT;
}

/**
 * Exact McNemar p-value, two-sided: the exact binomial test of min(b, c) successes in b + c
 * trials with p = 0.5 (stdlib's two-sided method, as R's `binom.test`). 1 with no discordant pair.
 * @param onlyOn - pairs that pass with memory on only
 * @param onlyOff - pairs that pass with memory off only
 */
export function mcnemarExactP(onlyOn: number, onlyOff: number): number {
  return signTestP(onlyOn, onlyOff, "two-sided");
}

/**
 * Wilcoxon signed-rank test, two-sided, on paired differences; zero differences dropped
 * (the "wilcox" zero method). null when every difference is 0 (or there is none); 1 with a
 * single non-zero difference (stdlib needs two values; the exact p of one pair is 1). Exact
 * for up to 50 non-zero pairs without tied |d|, else stdlib's normal approximation.
 */
export function signedRankP(diffs: readonly number[]): number | null {
  const r = signedRankTest(diffs, "two-sided");
  return r.nonZero === 0 ? null : r.pValue;
}

/**
 * The paired comparison of a `--memory ab` run: the `on` and `off` results of the cases that
 * have both (paired by `caseId`, last line of each arm counts). Differences are on − off:
 * `passDiff` = (onlyOn − onlyOff) / pairs, `meanIterationsDiff` in iterations per task,
 * `meanTokensDiff` in tokens (in + out) per task; all 0 with no pair.
 * - `mcnemarP`: exact McNemar, two-sided ({@link mcnemarExactP}); 1 with no discordant pair;
 * - `iterationsP`, `tokensP`: Wilcoxon signed-rank, two-sided ({@link signedRankP}); null
 *   when every difference is 0.
 */
export function pairedSummary(on: readonly BenchResult[], off: readonly BenchResult[]): PairedSummary {
  const offBy = new Map(lastResults(off).map((r) => [r.caseId, r]));
  const pairs: [BenchResult, BenchResult][] = [];
  for (const a of lastResults(on)) {
    const b = offBy.get(a.caseId);
    if (b) pairs.push([a, b]);
  }
  const n = pairs.length;
  let bothPass = 0;
  let onlyOn = 0;
  let onlyOff = 0;
  let neither = 0;
  for (const [a, b] of pairs) {
    if (a.passed && b.passed) bothPass++;
    else if (a.passed) onlyOn++;
    else if (b.passed) onlyOff++;
    else neither++;
  }
  const iterDiffs = pairs.map(([a, b]) => a.iterations - b.iterations);
  const tokenDiffs = pairs.map(([a, b]) => a.tokensIn + a.tokensOut - (b.tokensIn + b.tokensOut));
  return PairedSummary.parse({
    pairs: n,
    bothPass,
    onlyOn,
    onlyOff,
    neither,
    passDiff: n ? (onlyOn - onlyOff) / n : 0,
    mcnemarP: mcnemarExactP(onlyOn, onlyOff),
    meanIterationsDiff: mean(iterDiffs),
    iterationsP: signedRankP(iterDiffs),
    meanTokensDiff: mean(tokenDiffs),
    tokensP: signedRankP(tokenDiffs),
  });
}

/** What {@link summarize} needs besides the results. */
export interface SummaryInput {
  /** Every line of `results.jsonl` (a resumed run's repeated lines included: the last counts). */
  results: readonly BenchResult[];
  runId: string;
  /** The dataset file as the user named it. */
  dataset: string;
  format: RunFormat;
  provider: { label: ProviderLabel; name: string; model: string };
  /** The no-model sentence ({@link simulatedNotice}); taken as given when present. */
  notice?: string;
  memory: "on" | "off" | "ab";
  concurrency: number;
  /** ISO-8601. */
  startedAt: string;
  /** ISO-8601. */
  finishedAt: string;
  skipped: readonly SkippedLine[];
  /** The machine the run ran on, when measured. */
  machine?: MachineState;
  /** Memory's utility of the memories shown, per `<kind>:<id>` (null: not measured), read at the end of the run. */
  utility?: ReadonlyMap<string, number | null>;
}

/** The sentence every output of a run carries when no model answered (`scripted`, `simulated`). */
export function simulatedNotice(label: ProviderLabel): string | undefined {
  if (label === "model") return undefined;
  return `${label.toUpperCase()} RUN: no model was called (the ${label} provider answered from the dataset); this measures the harness and memory, not a model.`;
}

/** The arms a memory mode runs. */
export function armsOf(memory: "on" | "off" | "ab"): BenchArm[] {
  return memory === "ab" ? ["off", "on"] : [memory];
}

/**
 * `summary.json` of a run. `wallMs` = finishedAt − startedAt (ms, at least 0); `tasksPerMin` =
 * tasks counted (one per case and arm, the last line) / wall minutes, 0 when no wall time
 * passed. `arms` holds the arms the memory mode runs (an arm with no result has zero totals),
 * `paired` only for `ab`. `notice` is the given one, else {@link simulatedNotice} of the
 * provider (none for a model).
 */
export function summarize(input: SummaryInput): BenchSummary {
  const rs = lastResults(input.results);
  const wallMs = Math.max(0, Date.parse(input.finishedAt) - Date.parse(input.startedAt)) || 0;
  const arms: BenchSummary["arms"] = {};
  for (const arm of armsOf(input.memory))
    arms[arm] = summarizeArm(
      rs.filter((r) => r.arm === arm),
      input.machine,
      input.utility,
    );
  const notice = input.notice ?? simulatedNotice(input.provider.label);
  return BenchSummary.parse({
    v: 1,
    runId: input.runId,
    dataset: input.dataset,
    format: input.format,
    provider: input.provider,
    ...(notice ? { notice } : {}),
    memory: input.memory,
    concurrency: input.concurrency,
    startedAt: input.startedAt,
    finishedAt: input.finishedAt,
    wallMs,
    tasksPerMin: wallMs > 0 ? rs.length / (wallMs / 60_000) : 0,
    arms,
    ...(input.memory === "ab"
      ? {
          paired: pairedSummary(
            rs.filter((r) => r.arm === "on"),
            rs.filter((r) => r.arm === "off"),
          ),
        }
      : {}),
    skippedLines: input.skipped.map((s) => ({ line: s.line, message: s.message })),
    ...(input.machine ? { machine: input.machine } : {}),
  });
}
