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
import { errorReport, runGeneration, type GenerationDeps } from "./generation.js";
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

/**
 * Runs the generations left in `state` and returns the final state (with its summary).
 * @throws HandBack when the service stops; LoopsmithError when retryable
 */
export async function runImprove(initial: ImproveState, revision: number, io: RunIO): Promise<ImproveState> {
  let state = initial;
  let rev = revision;
  const save = async (next: ImproveState): Promise<void> => {
    rev = await io.store.update(next, rev);
    state = next;
  };
  const s = state.request.settings;
  const finish = async (stopReason: RunStopReason, message: string): Promise<ImproveState> => {
    const summary = summarize(state, stopReason, message);
    await save({ ...state, status: "final", summary });
    await save(await io.publish(state, "result", message, { summary }));
    return state;
  };
  const reports = await io.store.reports(state.request.runId);
  const measureOnly = state.request.measureOnly;

  // A dry run shows the parent's figures before its one generation; a measureOnly run is just that.
  if ((s.dryRun || measureOnly) && !state.parentMeasure && state.generation === 1) {
    const tree = state.parent.commit.slice(0, 12);
    const what = s.bench !== undefined ? "the benchmark, once" : "the quality metrics";
    await save(
      await io.publish(state, "step", `measuring the parent ${tree}: ${what}`, { generation: 0, phase: "measure" }),
    );
    const parent = await measureParent(state, io);
    await save({ ...state, parentMeasure: parent });
    await save(
      await io.publish(state, "step", `the parent ${tree}: ${parentLines(parent).join("; ")}`, {
        generation: 0,
        phase: "measure",
        parent,
      }),
    );
  }
  if (measureOnly)
    return finish(
      "completed",
      `measured ${state.parent.commit.slice(0, 12)} in ${Math.round((state.parentMeasure?.ms ?? 0) / 100) / 10} s; no generation (measure only)`,
    );

  // A run with no benchmark has no cases to calibrate: its quality metrics are measured per generation.
  if (!state.calibration && !s.dryRun && state.generation === 1 && s.bench !== undefined) {
    await save(
      await io.publish(state, "step", `calibration: the benchmark ${s.calibrationRuns} time(s) on the parent`, {
        generation: 0,
        phase: "calibrate",
      }),
    );
    const cal = await calibrateParent(state, io);
    if (!cal.ok) return finish("error", `the run cannot go on: ${cal.error}`);
    const c = cal.calibration;
    await save({ ...state, calibration: c });
    const line = `calibration: ${c.selection.length} selection and ${c.confirmation.length} confirmation case(s) (${c.source === "holdout" ? "--holdout" : `${Math.round(s.confirmationFraction * 100)}% held out, stratified, seed ${c.seed}`}); ${c.flaky.length} flaky case(s) left out of the test${c.flaky.length ? `: ${c.flaky.slice(0, 10).join(", ")}${c.flaky.length > 10 ? ", …" : ""}` : ""}`;
    await save(await io.publish(state, "step", line, { generation: 0, phase: "calibrate", calibration: c }));
    if (c.source === "holdout" && (c.confirmation.length === 0 || c.selection.length === 0))
      await save(
        await io.publish(
          state,
          "warning",
          c.confirmation.length === 0
            ? "--holdout matches no case: the run has no confirmation set"
            : "--holdout matches every case: no selection case is left, so no generation can be accepted",
        ),
      );
  }
  const held = new Set(state.calibration?.confirmation ?? []);

  while (state.generation <= s.generations) {
    if (io.cancelled()) return finish("cancelled", `cancelled before generation ${state.generation}`);
    if (io.stopping()) throw new HandBack();
    // The run's budget: the dearest generation so far is the estimate of the next.
    if (s.budgetUsd !== undefined && !state.hypothesis) {
      const over = budgetOver(
        { kind: "generation", generation: state.generation },
        { usd: state.maxGenerationUsd, tokens: 0, basis: "dearest" },
        { budget: { remainingUsd: s.budgetUsd - state.usage.costUsd }, totalUsd: s.budgetUsd },
      );
      if (over) return finish("budget", `stopped: ${budgetStopText(over)}`);
    }
    const startedAt = new Date().toISOString();
    await save(
      await io.publish(
        state,
        "step",
        `generation ${state.generation} of ${s.generations} from ${state.parent.commit.slice(0, 12)}`,
        { generation: state.generation, phase: "start", parent: state.parent.commit },
      ),
    );
    let report: GenerationReport;
    let outcome: Awaited<ReturnType<typeof runGeneration>> | undefined;
    try {
      // The model sees the selection set only: held-out cases leave the reports its prompt reads.
      outcome = await runGeneration(state, shownToModel(reports, held), {
        ...io,
        emit: async (message, data) => save(await io.publish(state, "step", message, data)),
        saveHypothesis: (h: Hypothesis, usage: Usage) => save({ ...state, hypothesis: h, hypothesisUsage: usage }),
        saveError: (error: GenerationError) =>
          save({ ...state, generationErrors: [...(state.generationErrors ?? []), error].slice(-ERRORS_KEPT) }),
        rejectedFrom: async (parent) =>
          shownToModel(await io.store.rejectedFrom(parent, state.request.runId, REJECTED_SHOWN), held),
      });
      report = outcome.report;
    } catch (err) {
      if (err instanceof LoopsmithError && err.retryable) throw err;
      io.log.error({ err, generation: state.generation }, "generation failed; the run goes on from the same parent");
      report = errorReport(state, err, startedAt);
    }
    await io.store.putReport(report);
    reports.push(report);
    const accepted = outcome?.accepted;
    const next: ImproveState = {
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
    };
    await save(next);
    const line = `generation ${report.generation}: ${report.decision.verdict} (${report.decision.reason}) — ${report.decision.message}`;
    await save(await io.publish(state, "generation", line, { generation: report.generation, report }));
    if (outcome?.fatal) return finish("error", `the run cannot go on: ${report.decision.message}`);
    if (outcome?.budget) return finish("budget", `stopped: ${report.decision.message}`);
  }
  const kept = state.accepted.length;
  return finish(
    "completed",
    `${s.generations} generation(s): ${kept} accepted${kept ? ` (${state.accepted.map((a) => a.generation).join(", ")})` : ""}`,
  );
}
