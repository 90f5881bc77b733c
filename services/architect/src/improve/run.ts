/**
 * An improvement run as a job of the durable phase machine (`durable/machine.ts`, the one the
 * conductor's tasks run through): CALIBRATE once (a dry run or a `measureOnly` run measures
 * its base parent, `parent.ts`; a benchmarked run calibrates the benchmark on it), then per
 * generation PLAN → IMPLEMENT → VALIDATE → MEASURE → DECIDE (`generation.ts`) → REPORT, each
 * from the last accepted tree. Every phase ends with a checkpoint through the durable context,
 * so a redelivered run resumes at the phase it was in. The run stops after `generations`,
 * before a generation that cannot fit the budget (`budget`), on a cancel (asked before a
 * generation), or when the run cannot go on (`error`); a `measureOnly` run ends after
 * CALIBRATE. Its texts are `improveTexts` (`event-texts.ts`).
 */
import { ImproveSummary, addUsage, type GenerationReport, type RunStopReason } from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { budgetOver, budgetStopText } from "@loopsmith/shared/llm";
import { HandBack, runPhases, type PhaseMachine } from "../durable/index.js";
import { improveTexts, runTexts } from "../event-texts.js";
import { benchShell, readBench, runCommand } from "./commands.js";
import { alphaSpent, calibrate, splitSeedOf } from "./decision.js";
import {
  decidePhase,
  implementPhase,
  measurePhase,
  planPhase,
  validatePhase,
  type GenerationDeps,
} from "./generation.js";
import { ImproveRun, type ImproveContext, type ImproveDeps, type ImproveStep, type RunEnd } from "./improve-run.js";
import { measureParent, parentContext, parentLines } from "./parent.js";
import type { ImprovePhase, ImproveState } from "./state.js";
import type { CaseRun } from "./bench-output.js";

export { ImproveRun, type ImproveContext, type ImproveDeps, type RunEnd } from "./improve-run.js";

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

/** MEASURE before generation 1 of a dry run or a `measureOnly` run: the parent's figures, checkpointed and shown. */
async function measureFirst(run: ImproveRun): Promise<void> {
  const s = run.s.request.settings;
  const tree = run.s.parent.commit.slice(0, 12);
  await run.emit("step", improveTexts.measuringParent(tree, s.bench !== undefined), {
    generation: 0,
    phase: "measure",
  });
  const parent = await measureParent(run.s, run.deps);
  await run.record({ parentMeasure: parent });
  await run.emit("step", improveTexts.parentMeasured(tree, parentLines(parent)), {
    generation: 0,
    phase: "measure",
    parent,
  });
}

/**
 * The calibration of a benchmarked run, checkpointed and shown, with a warning when
 * `--holdout` leaves a set empty.
 * @returns why the run cannot go on, or undefined
 */
async function calibrateRun(run: ImproveRun): Promise<string | undefined> {
  const s = run.s.request.settings;
  await run.emit("step", improveTexts.calibrating(s.calibrationRuns), { generation: 0, phase: "calibrate" });
  const cal = await calibrateParent(run.s, run.deps);
  if (!cal.ok) return cal.error;
  const c = cal.calibration;
  await run.record({ calibration: c });
  await run.emit("step", improveTexts.calibrated(c, s.confirmationFraction), {
    generation: 0,
    phase: "calibrate",
    calibration: c,
  });
  if (c.source === "holdout" && (c.confirmation.length === 0 || c.selection.length === 0))
    await run.emit("warning", c.confirmation.length === 0 ? improveTexts.noConfirmation : improveTexts.noSelection);
  return undefined;
}

/**
 * CALIBRATE, before generation 1: a dry run or a `measureOnly` run measures its parent (a
 * `measureOnly` run ends there); a benchmarked run calibrates (a run with no benchmark has no
 * cases to calibrate: its quality metrics are measured per generation). What is done already
 * is not done again.
 */
async function calibratePhase(s: ImproveState, run: ImproveRun): Promise<ImproveStep> {
  const set = s.request.settings;
  const { measureOnly } = s.request;
  if ((set.dryRun || measureOnly) && !s.parentMeasure && s.generation === 1) await measureFirst(run);
  if (measureOnly)
    return {
      stopReason: "completed",
      message: improveTexts.measuredOnly(run.s.parent.commit.slice(0, 12), run.s.parentMeasure?.ms ?? 0),
    };
  if (!s.calibration && !set.dryRun && s.generation === 1 && set.bench !== undefined) {
    const error = await calibrateRun(run);
    if (error !== undefined) return { stopReason: "error", message: improveTexts.cannotGoOn(error) };
  }
  return { next: "plan" };
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
  return over ? runTexts.stopped(budgetStopText(over)) : undefined;
}

/**
 * A generation's start, before its PLAN: the run ends when its generations are done, when a
 * cancel was asked, or when the budget cannot fit another generation; else the generation is
 * announced and planned.
 */
async function startPhase(s: ImproveState, run: ImproveRun): Promise<ImproveStep> {
  const set = s.request.settings;
  if (s.generation > set.generations) {
    const accepted = s.accepted.map((a) => a.generation);
    return { stopReason: "completed", message: improveTexts.completed(set.generations, accepted) };
  }
  if (run.io.cancelled()) return { stopReason: "cancelled", message: improveTexts.cancelledBefore(s.generation) };
  const stop = budgetStop(s);
  if (stop) return { stopReason: "budget", message: stop };
  const parent = s.parent.commit;
  await run.emit("step", improveTexts.generationStart(s.generation, set.generations, parent.slice(0, 12)), {
    generation: s.generation,
    phase: "start",
    parent,
  });
  return planPhase(run.s, run);
}

/**
 * REPORT: the generation's report stored, the run moved to the next generation (and parent,
 * when accepted) and checkpointed at the next PLAN, then shown; the run ends when the
 * generation said it cannot go on or used up the budget.
 */
async function reportPhase(s: ImproveState, run: ImproveRun): Promise<ImproveStep> {
  const end = s.progress?.end;
  if (!end) throw new LoopsmithError("internal", `generation ${s.generation}: REPORT without the generation's end`);
  const { report, accepted } = end;
  await run.deps.store.putReport(report);
  if (!run.reports.some((r) => r.generation === report.generation)) run.reports.push(report);
  run.endGeneration();
  await run.record({
    phase: "plan",
    generation: s.generation + 1,
    hypothesis: undefined,
    hypothesisUsage: undefined,
    generationErrors: undefined,
    progress: undefined,
    usage: addUsage(s.usage, report.usage),
    maxGenerationUsd: Math.max(s.maxGenerationUsd, report.usage.costUsd),
    // A paired test spent α_j: a benchmark's statistic, or the quality metrics' judgement.
    tests: s.tests + (report.statistic || report.metrics ? 1 : 0),
    parent: accepted ?? s.parent,
    accepted: accepted ? [...s.accepted, { generation: report.generation, tree: accepted }] : s.accepted,
    parentCheck: accepted ? undefined : (end.parentCheck ?? s.parentCheck),
  });
  await run.emit("generation", improveTexts.generationEnded(report.generation, report.decision), {
    generation: report.generation,
    report,
  });
  if (end.fatal) return { stopReason: "error", message: improveTexts.cannotGoOn(report.decision.message) };
  if (end.budget) return { stopReason: "budget", message: runTexts.stopped(report.decision.message) };
  return { next: "plan" };
}

/**
 * Ends the run: its summary checkpointed with the final state (counting the result's event),
 * then published. A runner that dies in between finds the run final and publishes it again.
 */
async function finish(run: ImproveRun, end: RunEnd): Promise<ImproveState> {
  run.update({ status: "final", summary: summarize(run.s, end.stopReason, end.message) });
  await run.io.checkpoint({ ...run.s, eventSeq: run.s.eventSeq + 1 });
  await run.emit("result", end.message, { summary: run.s.summary });
  return run.s;
}

/** The run's phase machine: its table, its phase field, the rule between phases, its end. */
const IMPROVE_MACHINE: PhaseMachine<ImprovePhase, ImproveState, ImproveRun, RunEnd> = {
  phases: {
    calibrate: calibratePhase,
    plan: startPhase,
    implement: implementPhase,
    validate: validatePhase,
    measure: measurePhase,
    decide: decidePhase,
    report: reportPhase,
  },
  phaseOf: (s) => s.phase,
  at: (phase) => ({ phase }),
  // Between phases: a final state ends; a stopping service hands the run back, to resume at its phase.
  before: async (run) => {
    if (run.s.status === "final") return run.s;
    if (run.io.stopping()) throw new HandBack(improveTexts.handBack);
    run.io.heartbeat();
    return undefined;
  },
  end: finish,
};

/**
 * Runs a run from the phase its state is at to its final state (with its summary), its
 * checkpoints and events through `ctx`.
 * @throws HandBack when the service stops; LoopsmithError when retryable (the run resumes at its phase)
 */
export async function runImprove(state: ImproveState, deps: ImproveDeps, ctx: ImproveContext): Promise<ImproveState> {
  const reports: GenerationReport[] = await deps.store.reports(state.request.runId);
  return runPhases(new ImproveRun(state, deps, ctx, reports), IMPROVE_MACHINE);
}
