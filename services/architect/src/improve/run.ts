/**
 * An improvement run: generations in order, each from the last accepted tree, each report
 * checkpointed before the next starts. The run stops after `generations`, before a generation
 * that cannot fit the budget (`budget`), on a cancel, or when the run cannot go on (`error`).
 * A dry run measures its base parent first (`parent.ts`); a `measureOnly` run does only that.
 */
import {
  ERRORS_KEPT,
  ImproveSummary,
  LoopsmithError,
  addUsage,
  type GenerationError,
  type GenerationReport,
  type Hypothesis,
  type RunStopReason,
  type Usage,
} from "@loopsmith/shared";
import { budgetOver, budgetStopText } from "@loopsmith/shared/llm";
import { benchShell, readBench, runCommand } from "./commands.js";
import { alphaSpent, calibrate, splitSeedOf } from "./decision.js";
import { errorReport, runGeneration, type GenerationDeps, type GenerationOutcome } from "./generation.js";
import { measureParent, parentContext, parentLines } from "./parent.js";
import { shownToModel } from "./hypothesis.js";
import type { ImproveState, ImproveStore } from "./state.js";
import type { CaseRun } from "./bench-output.js";
import { HandBack } from "../durable/index.js";

/** The run's I/O beyond a generation's. */
export interface RunIO extends Omit<GenerationDeps, "saveHypothesis" | "saveError" | "emit" | "rejectedFrom"> {
  store: ImproveStore;
  /** Publishes an event of the run (`kind`, message, data); returns when it is stored. */
  publish(
    state: ImproveState,
    kind: "step" | "generation" | "warning" | "result",
    message: string,
    data?: Record<string, unknown>,
  ): Promise<ImproveState>;
  /** True once a cancel was asked for. */
  cancelled(): boolean;
  /** True when the service is stopping: the run hands back before its next generation. */
  stopping(): boolean;
}

/** Rejected attempts of earlier runs shown to the hypothesis prompt. */
const REJECTED_SHOWN = 10;

/**
 * Before generation 1: runs the benchmark `calibrationRuns` times on the base parent
 * (task id `<runId>-gen-0`, so the executor's idempotency keys answer a resumed run the same),
 * measures each case's flakiness and splits the cases into the selection and confirmation sets.
 * @returns the calibration, or one sentence when the benchmark cannot be read on the parent
 * @throws LoopsmithError from the executor call (retryable: the run resumes here)
 */
export async function calibrateParent(
  state: ImproveState,
  io: Pick<GenerationDeps, "execute" | "tree">,
): Promise<{ ok: true; calibration: NonNullable<ImproveState["calibration"]> } | { ok: false; error: string }> {
  const { request } = state;
  const s = request.settings;
  const ctx = await parentContext(state, io);
  if (s.bench === undefined) return { ok: false, error: "the run has no benchmark to calibrate" };
  const shell = benchShell(s.bench, s.benchJunit);
  const runs: CaseRun[][] = [];
  for (let k = 0; k < s.calibrationRuns; k++) {
    const read = readBench(await runCommand(ctx, "bench_parent", shell, state.parent, undefined, k), s.benchFormat);
    if (!read.ok) return { ok: false, error: `calibration run ${k + 1} of the parent: ${read.error}` };
    runs.push(read.cases);
  }
  const cal = calibrate(runs, {
    fraction: s.confirmationFraction,
    holdout: s.holdout,
    seed: s.splitSeed ?? splitSeedOf(request.runId),
  });
  return cal.ok ? { ok: true, calibration: cal.calibration } : cal;
}

/** The run's summary from its state. */
export function summarize(state: ImproveState, stopReason: RunStopReason, message: string): ImproveSummary {
  const s = state.request.settings;
  return ImproveSummary.parse({
    v: 1,
    runId: state.request.runId,
    status: stopReason === "completed" ? "done" : stopReason === "error" ? "error" : "stopped",
    stopReason,
    generations: state.generation - 1,
    accepted: state.accepted.map((a) => a.generation),
    head: state.parent.commit,
    usage: state.usage,
    message,
    ...(state.calibration ? { calibration: state.calibration } : {}),
    ...(state.parentMeasure ? { parent: state.parentMeasure } : {}),
    alpha: {
      budget: s.alpha,
      spent: state.tests > 0 ? alphaSpent(s.alpha, state.tests, s.generations, s.alphaSpending) : 0,
      tests: state.tests,
    },
  });
}

/** A run as it goes: its state and the revision it was last stored at. */
interface RunLoop {
  state: ImproveState;
  rev: number;
  io: RunIO;
}

/** Stores `next` as the run's state (compare-and-swap on the revision). */
async function save(r: RunLoop, next: ImproveState): Promise<void> {
  r.rev = await r.io.store.update(next, r.rev);
  r.state = next;
}

/** Publishes an event of the run and stores the state it returns. */
async function publish(
  r: RunLoop,
  kind: "step" | "generation" | "warning" | "result",
  message: string,
  data?: Record<string, unknown>,
): Promise<void> {
  await save(r, await r.io.publish(r.state, kind, message, data));
}

/** Ends the run: its summary stored with the final state, then published; the final state. */
async function finish(r: RunLoop, stopReason: RunStopReason, message: string): Promise<ImproveState> {
  const summary = summarize(r.state, stopReason, message);
  await save(r, { ...r.state, status: "final", summary });
  await publish(r, "result", message, { summary });
  return r.state;
}

/** MEASURE before generation 1 of a dry run or a `measureOnly` run: the parent's figures, stored and shown. */
async function measureFirst(r: RunLoop): Promise<void> {
  const s = r.state.request.settings;
  const tree = r.state.parent.commit.slice(0, 12);
  const what = s.bench !== undefined ? "the benchmark, once" : "the quality metrics";
  await publish(r, "step", `measuring the parent ${tree}: ${what}`, { generation: 0, phase: "measure" });
  const parent = await measureParent(r.state, r.io);
  await save(r, { ...r.state, parentMeasure: parent });
  await publish(r, "step", `the parent ${tree}: ${parentLines(parent).join("; ")}`, {
    generation: 0,
    phase: "measure",
    parent,
  });
}

/**
 * CALIBRATE before generation 1 of a benchmarked run: the calibration stored and shown, with a
 * warning when `--holdout` leaves a set empty.
 * @returns why the run cannot go on, or undefined
 */
async function calibrateRun(r: RunLoop): Promise<string | undefined> {
  const s = r.state.request.settings;
  await publish(r, "step", `calibration: the benchmark ${s.calibrationRuns} time(s) on the parent`, {
    generation: 0,
    phase: "calibrate",
  });
  const cal = await calibrateParent(r.state, r.io);
  if (!cal.ok) return cal.error;
  const c = cal.calibration;
  await save(r, { ...r.state, calibration: c });
  const line = `calibration: ${c.selection.length} selection and ${c.confirmation.length} confirmation case(s) (${c.source === "holdout" ? "--holdout" : `${Math.round(s.confirmationFraction * 100)}% held out, stratified, seed ${c.seed}`}); ${c.flaky.length} flaky case(s) left out of the test${c.flaky.length ? `: ${c.flaky.slice(0, 10).join(", ")}${c.flaky.length > 10 ? ", …" : ""}` : ""}`;
  await publish(r, "step", line, { generation: 0, phase: "calibrate", calibration: c });
  if (c.source === "holdout" && (c.confirmation.length === 0 || c.selection.length === 0))
    await publish(
      r,
      "warning",
      c.confirmation.length === 0
        ? "--holdout matches no case: the run has no confirmation set"
        : "--holdout matches every case: no selection case is left, so no generation can be accepted",
    );
  return undefined;
}

/** The budget stop before the next generation (the dearest so far is its estimate), or undefined. */
function budgetStop(state: ImproveState): string | undefined {
  const s = state.request.settings;
  // A generation that has its hypothesis already started: it resumes.
  if (s.budgetUsd === undefined || state.hypothesis) return undefined;
  const over = budgetOver(
    { kind: "generation", generation: state.generation },
    { usd: state.maxGenerationUsd, tokens: 0, basis: "dearest" },
    { budget: { remainingUsd: s.budgetUsd - state.usage.costUsd }, totalUsd: s.budgetUsd },
  );
  return over ? `stopped: ${budgetStopText(over)}` : undefined;
}

/**
 * The run's next generation, announced, run with the run's checkpoints as its deps; its report
 * (an error's report when it failed in a way retrying cannot fix).
 * @throws LoopsmithError when retryable
 */
async function nextGeneration(
  r: RunLoop,
  reports: readonly GenerationReport[],
  held: ReadonlySet<string>,
): Promise<{ report: GenerationReport; outcome?: GenerationOutcome }> {
  const { io } = r;
  const s = r.state.request.settings;
  const startedAt = new Date().toISOString();
  await publish(
    r,
    "step",
    `generation ${r.state.generation} of ${s.generations} from ${r.state.parent.commit.slice(0, 12)}`,
    {
      generation: r.state.generation,
      phase: "start",
      parent: r.state.parent.commit,
    },
  );
  try {
    // The model sees the selection set only: held-out cases leave the reports its prompt reads.
    const outcome = await runGeneration(r.state, shownToModel(reports, held), {
      ...io,
      emit: (message, data) => publish(r, "step", message, data),
      saveHypothesis: (h: Hypothesis, usage: Usage) => save(r, { ...r.state, hypothesis: h, hypothesisUsage: usage }),
      saveError: (error: GenerationError) =>
        save(r, { ...r.state, generationErrors: [...(r.state.generationErrors ?? []), error].slice(-ERRORS_KEPT) }),
      rejectedFrom: async (parent) =>
        shownToModel(await io.store.rejectedFrom(parent, r.state.request.runId, REJECTED_SHOWN), held),
    });
    return { report: outcome.report, outcome };
  } catch (err) {
    if (err instanceof LoopsmithError && err.retryable) throw err;
    io.log.error({ err, generation: r.state.generation }, "generation failed; the run goes on from the same parent");
    return { report: errorReport(r.state, err, startedAt) };
  }
}

/** REPORT: the generation's report stored, the run moved to the next generation (and parent, when accepted), and shown. */
async function recordGeneration(
  r: RunLoop,
  reports: GenerationReport[],
  report: GenerationReport,
  outcome: GenerationOutcome | undefined,
): Promise<void> {
  const { state } = r;
  await r.io.store.putReport(report);
  reports.push(report);
  const accepted = outcome?.accepted;
  await save(r, {
    ...state,
    generation: state.generation + 1,
    hypothesis: undefined,
    hypothesisUsage: undefined,
    generationErrors: undefined,
    usage: addUsage(state.usage, report.usage),
    maxGenerationUsd: Math.max(state.maxGenerationUsd, report.usage.costUsd),
    // A paired test spent α_j: a benchmark's statistic, or the quality metrics' judgement.
    tests: state.tests + (report.statistic || report.metrics ? 1 : 0),
    parent: accepted ?? state.parent,
    accepted: accepted ? [...state.accepted, { generation: report.generation, tree: accepted }] : state.accepted,
    parentCheck: accepted ? undefined : (outcome?.parentCheck ?? state.parentCheck),
  });
  const line = `generation ${report.generation}: ${report.decision.verdict} (${report.decision.reason}) — ${report.decision.message}`;
  await publish(r, "generation", line, { generation: report.generation, report });
}

/**
 * Runs the generations left in `state` and returns the final state (with its summary).
 * @throws HandBack when the service stops; LoopsmithError when retryable
 */
export async function runImprove(initial: ImproveState, revision: number, io: RunIO): Promise<ImproveState> {
  const r: RunLoop = { state: initial, rev: revision, io };
  const s = initial.request.settings;
  const reports = await io.store.reports(initial.request.runId);
  const measureOnly = initial.request.measureOnly;

  // A dry run shows the parent's figures before its one generation; a measureOnly run is just that.
  if ((s.dryRun || measureOnly) && !r.state.parentMeasure && r.state.generation === 1) await measureFirst(r);
  if (measureOnly)
    return finish(
      r,
      "completed",
      `measured ${r.state.parent.commit.slice(0, 12)} in ${Math.round((r.state.parentMeasure?.ms ?? 0) / 100) / 10} s; no generation (measure only)`,
    );

  // A run with no benchmark has no cases to calibrate: its quality metrics are measured per generation.
  if (!r.state.calibration && !s.dryRun && r.state.generation === 1 && s.bench !== undefined) {
    const error = await calibrateRun(r);
    if (error !== undefined) return finish(r, "error", `the run cannot go on: ${error}`);
  }
  const held = new Set(r.state.calibration?.confirmation ?? []);

  while (r.state.generation <= s.generations) {
    if (io.cancelled()) return finish(r, "cancelled", `cancelled before generation ${r.state.generation}`);
    if (io.stopping()) throw new HandBack();
    const stop = budgetStop(r.state);
    if (stop) return finish(r, "budget", stop);
    const { report, outcome } = await nextGeneration(r, reports, held);
    await recordGeneration(r, reports, report, outcome);
    if (outcome?.fatal) return finish(r, "error", `the run cannot go on: ${report.decision.message}`);
    if (outcome?.budget) return finish(r, "budget", `stopped: ${report.decision.message}`);
  }
  const kept = r.state.accepted.length;
  return finish(
    r,
    "completed",
    `${s.generations} generation(s): ${kept} accepted${kept ? ` (${r.state.accepted.map((a) => a.generation).join(", ")})` : ""}`,
  );
}
