/**
 * An improvement run: generations in order, each from the last accepted tree, each report
 * checkpointed before the next starts. The run stops after `generations`, before a generation
 * that cannot fit the budget (`budget`), on a cancel, or when the run cannot go on (`error`).
 */
import {
  ImproveSummary,
  LoopsmithError,
  addUsage,
  type GenerationReport,
  type Hypothesis,
  type RunStopReason,
  type Usage,
} from "@loopsmith/shared";
import { errorReport, runGeneration, type GenerationDeps } from "./generation.js";
import type { ImproveState, ImproveStore } from "./state.js";

/** The run's I/O beyond a generation's. */
export interface RunIO extends Omit<GenerationDeps, "saveHypothesis" | "emit" | "rejectedFrom"> {
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

/** Thrown when the service stops between generations: the run's message is handed back. */
export class HandBack extends Error {}

/** The run's summary from its state. */
export function summarize(state: ImproveState, stopReason: RunStopReason, message: string): ImproveSummary {
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

  while (state.generation <= s.generations) {
    if (io.cancelled()) return finish("cancelled", `cancelled before generation ${state.generation}`);
    if (io.stopping()) throw new HandBack();
    if (s.budgetUsd !== undefined && !state.hypothesis) {
      const left = s.budgetUsd - state.usage.costUsd;
      if (left <= 0 || state.maxGenerationUsd > left) {
        return finish(
          "budget",
          `stopped before generation ${state.generation}: $${left.toFixed(4)} of the $${s.budgetUsd} budget left, and a generation has cost up to $${state.maxGenerationUsd.toFixed(4)}`,
        );
      }
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
      outcome = await runGeneration(state, reports, {
        ...io,
        emit: async (message, data) => save(await io.publish(state, "step", message, data)),
        saveHypothesis: (h: Hypothesis, usage: Usage) => save({ ...state, hypothesis: h, hypothesisUsage: usage }),
        rejectedFrom: (parent) => io.store.rejectedFrom(parent, state.request.runId, REJECTED_SHOWN),
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
      usage: addUsage(state.usage, report.usage),
      maxGenerationUsd: Math.max(state.maxGenerationUsd, report.usage.costUsd),
      parent: accepted ?? state.parent,
      accepted: accepted ? [...state.accepted, { generation: report.generation, tree: accepted }] : state.accepted,
      parentCheck: accepted ? undefined : (outcome?.parentCheck ?? state.parentCheck),
    };
    await save(next);
    const line = `generation ${report.generation}: ${report.decision.verdict} (${report.decision.reason}) — ${report.decision.message}`;
    await save(await io.publish(state, "generation", line, { generation: report.generation, report }));
    if (outcome?.fatal) return finish("error", `the run cannot go on: ${report.decision.message}`);
  }
  const kept = state.accepted.length;
  return finish(
    "completed",
    `${s.generations} generation(s): ${kept} accepted${kept ? ` (${state.accepted.map((a) => a.generation).join(", ")})` : ""}`,
  );
}
