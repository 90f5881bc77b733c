/**
 * A generation's MEASURE and DECIDE phases on a validated candidate: a dry run's account of
 * what it would need, the repository's quality metrics when the run has no benchmark, else the
 * benchmark on parent and candidate; then (DECIDE, from what MEASURE checkpointed) the paired
 * decision, an accepted candidate stored as the next parent.
 */
import { getSnapshot, ownerOfTask, putSnapshot } from "@loopsmith/shared/bus";
import { snapshotName, type GenerationReport } from "@loopsmith/shared/contracts";
import { benchBoth } from "./commands.js";
import { decideGeneration, futile, neededFixes, pairCases, runDecideOptions } from "./decision.js";
import { changedToolConfig, measureBoth, metricSettings, type Measurement } from "./metrics.js";
import type { CaseRun } from "./bench-output.js";
import { improveTexts } from "../event-texts.js";
import { judgeMetrics } from "./metrics-judge.js";
import { candidateSnapshot } from "../tree.js";
import type { Tree } from "./state.js";
import { rejected, reportOf, type GenerationOutcome, type GenerationRun } from "./generation-record.js";
import type { Validated, Workspace } from "./generation-validate.js";

class GenerationTimeout extends Error {}

/** Throws {@link GenerationTimeout} once `g` is past its time limit (between runs). */
function deadlineCheck(g: GenerationRun): () => void {
  return () => {
    if (Date.now() > g.deadline) throw new GenerationTimeout();
  };
}

/** The generation rejected `timeout` when `err` is the deadline's; any other error is thrown again. */
function timedOut(g: GenerationRun, v: Validated, err: unknown, while_: string): GenerationOutcome {
  if (!(err instanceof GenerationTimeout)) throw err;
  const limit = `${Math.round(g.state.request.settings.generationTimeoutMs / 1000)} s`;
  return {
    ...rejected(g, "timeout", `the generation passed its time limit of ${limit} while ${while_}`, v.checkPart),
    parentCheck: v.parentCheck,
  };
}

/** `g` rejected with `reason` after the parent's check was measured (kept while the parent stays). */
function rejectedChecked(
  g: GenerationRun,
  v: Validated,
  reason: Parameters<typeof rejected>[1],
  message: string,
  part: Partial<GenerationReport>,
): GenerationOutcome {
  return { ...rejected(g, reason, message, part), parentCheck: v.parentCheck };
}

/** The accepted candidate's snapshot, stored as the next parent, and its report. */
async function acceptCandidate(
  g: GenerationRun,
  v: Validated,
  part: Partial<GenerationReport>,
  message: string,
): Promise<GenerationOutcome> {
  const { state, deps } = g;
  const owner = ownerOfTask(state.request);
  const snap = await candidateSnapshot(
    await getSnapshot(deps.nc, state.parent.snapshot, owner),
    v.overlay.files,
    v.overlay.deleted,
  );
  const accepted: Tree = { commit: snap.id, snapshot: snapshotName(snap.id) };
  await putSnapshot(deps.nc, accepted.snapshot, snap.tar, owner);
  return {
    report: reportOf(g, {
      ...part,
      candidate: snap.id,
      decision: { verdict: "accepted", reason: "accepted", message },
    }),
    accepted,
  };
}

/**
 * A dry run's end: the candidate is not measured; the message says how it would be judged
 * (the quality metrics, or the fixes the benchmark's test would need).
 */
export function dryRunOutcome(g: GenerationRun, v: Validated): GenerationOutcome {
  const s = g.state.request.settings;
  const start = "dry run: the candidate is not measured (the parent was, before this generation).";
  const message =
    s.bench === undefined
      ? `${start} With no benchmark it would be judged on the repository's metrics (${metricSettings(s.benchmarks)
          .map((m) => m.metric)
          .join(
            ", ",
          )}): accepted when none regresses beyond its tolerance and some weighted metric improves significantly`
      : `${start} To be accepted it would need, over ${s.repeats} run(s) per side, at least ${neededFixes(s.alpha)} case(s) fixed with none broken beyond the tolerance of ${s.tolerance} (exact McNemar, two-sided, p < ${s.alpha}), or a significant signed-rank gain on a scored benchmark`;
  return {
    report: reportOf(g, { ...v.checkPart, decision: { verdict: "dry_run", reason: "dry_run", message } }),
    parentCheck: v.parentCheck,
  };
}

/** What MEASURE leaves for DECIDE: each side's runs, in order (as checkpointed: `GenerationProgress.measured`). */
export interface Measured<T = unknown> {
  parent: T[];
  candidate: T[];
}

/**
 * MEASURE with no benchmark: the repository's quality metrics on parent and candidate,
 * `repeats` times each, interleaved.
 * @returns the measurements, or the generation's outcome (past its time limit)
 * @throws LoopsmithError from the executor calls
 */
export async function measureMetrics(
  g: GenerationRun,
  ws: Workspace,
  v: Validated,
): Promise<{ measured: Measured<Measurement> } | { outcome: GenerationOutcome }> {
  const s = g.state.request.settings;
  await g.deps.emit(improveTexts.measuringMetrics(g.n, s.repeats), { generation: g.n, phase: "bench" });
  try {
    return { measured: await measureBoth(ws.ctx, g.state.parent, v.overlay, deadlineCheck(g)) };
  } catch (err) {
    return { outcome: timedOut(g, v, err, "measuring") };
  }
}

/** DECIDE with no benchmark: the quality metrics MEASURE took, judged by {@link judgeMetrics}. */
export async function decideMetrics(
  g: GenerationRun,
  ws: Workspace,
  v: Validated,
  measured: Measured,
): Promise<GenerationOutcome> {
  const { state } = g;
  const s = state.request.settings;
  const m = measured as Measured<Measurement>;
  const opts = runDecideOptions(state);
  const after = new Map(v.overlay.files.map((f) => [f.path, f.content]));
  const configChanged = changedToolConfig(
    [...v.change.changed, ...v.change.deleted].map((path) => ({ path, before: ws.read(path), after: after.get(path) })),
    metricSettings(s.benchmarks).map((metric) => metric.metric),
  );
  const q = judgeMetrics(m.parent, m.candidate, {
    alpha: opts.alpha,
    benchmarks: s.benchmarks,
    language: state.request.language,
    configChanged,
  });
  const metricsPart = { ...v.checkPart, metrics: q.report };
  if (q.verdict !== "accepted") return rejectedChecked(g, v, q.reason, q.message, metricsPart);
  return acceptCandidate(g, v, metricsPart, q.message);
}

/**
 * MEASURE with the run's benchmark: parent and candidate interleaved, `repeats` times each
 * (stopping early only to reject, {@link futile}). A parent whose benchmark output cannot be
 * read ends the run (`fatal`).
 * @returns each side's case runs, or the generation's outcome
 * @throws LoopsmithError from the executor calls
 */
export async function measureBenchmark(
  g: GenerationRun,
  ws: Workspace,
  v: Validated,
): Promise<{ measured: Measured<CaseRun[]> } | { outcome: GenerationOutcome }> {
  const { state } = g;
  const s = state.request.settings;
  await g.deps.emit(improveTexts.benchmarking(g.n, s.repeats), { generation: g.n, phase: "bench" });
  let bench: Awaited<ReturnType<typeof benchBoth>>;
  try {
    const enough = (p: Parameters<typeof futile>[0], c: Parameters<typeof futile>[1]): boolean =>
      futile(p, c, runDecideOptions(state));
    bench = await benchBoth(ws.ctx, state.parent, v.overlay, deadlineCheck(g), enough);
  } catch (err) {
    return { outcome: timedOut(g, v, err, "benchmarking") };
  }
  if (bench.ok) return { measured: { parent: bench.parent, candidate: bench.candidate } };
  const onParent = bench.side === "parent";
  if (bench.status === "tampering" && !onParent) {
    const message = `the candidate's benchmark run cannot be trusted: ${bench.error}`;
    return { outcome: rejectedChecked(g, v, "tampering", message, v.checkPart) };
  }
  const whose = onParent ? "the PARENT's" : "the candidate's";
  const message = `${whose} benchmark output cannot be read: ${bench.error}`;
  return { outcome: { ...rejectedChecked(g, v, "bench_unparsed", message, v.checkPart), fatal: onParent } };
}

/** DECIDE with the run's benchmark: the case runs MEASURE took, paired, then {@link decideGeneration}. */
export async function decideBenchmark(
  g: GenerationRun,
  v: Validated,
  measured: Measured,
  benchCommand: string,
): Promise<GenerationOutcome> {
  const s = g.state.request.settings;
  const m = measured as Measured<CaseRun[]>;
  const paired = pairCases(m.parent, m.candidate);
  if (!paired.ok) return rejectedChecked(g, v, "bench_unparsed", paired.error, v.checkPart);
  const d = decideGeneration(paired.cases, runDecideOptions(g.state));
  const benchPart = {
    ...v.checkPart,
    bench: { command: benchCommand, format: s.benchFormat, repeats: s.repeats, cases: d.cases },
    statistic: { ...d.statistic, repeatsRun: m.parent.length },
  };
  if (d.verdict !== "accepted") return rejectedChecked(g, v, d.reason, d.message, benchPart);
  return acceptCandidate(g, v, benchPart, d.message);
}
