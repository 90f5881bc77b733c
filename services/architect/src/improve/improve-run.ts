/**
 * An improvement run as a job of the durable phase machine (`durable/machine.ts`): its state,
 * its deps and durable context, its events, and the record of the generation running now,
 * kept in memory while this delivery runs it and checkpointed after each phase as the state's
 * `progress`. The phases are in `run.ts` (CALIBRATE, REPORT) and `generation.ts` (PLAN …
 * DECIDE).
 */
import {
  ERRORS_KEPT,
  emptyUsage,
  type GenerationError,
  type GenerationPhase,
  type GenerationReport,
  type Hypothesis,
  type RunStopReason,
  type Usage,
} from "@loopsmith/shared/contracts";
import { DurableRun, type DurableContext, type PhaseStep, type RunIO } from "../durable/index.js";
import { runEvent, type RunEventKind } from "./events.js";
import {
  closePhase,
  generationTaskId,
  type GenerationDeps,
  type GenerationOutcome,
  type GenerationRecord,
  type GenerationRun,
} from "./generation-record.js";
import { prepareWorkspace, type Workspace } from "./generation-validate.js";
import { shownToModel } from "./hypothesis.js";
import type { GenerationProgress, ImprovePhase, ImproveState, ImproveStore } from "./state.js";

/** What a run needs from the outside beyond its durable context: a generation's deps and the store. */
export interface ImproveDeps extends Omit<
  GenerationDeps,
  "saveHypothesis" | "saveError" | "emit" | "rejectedFrom" | "log"
> {
  store: ImproveStore;
}

/** The durable context a run uses (`DurableContext`'s checkpoint, events, cancel, stop and log). */
export type ImproveContext = RunIO<ImproveState> & Pick<DurableContext<ImproveState>, "cancelled" | "stopping" | "log">;

/** How a run ends: its stop reason and message. */
export interface RunEnd {
  stopReason: RunStopReason;
  message: string;
}

/** What a phase of a run ends with: the next phase, or the run's end. */
export type ImproveStep = PhaseStep<ImprovePhase, ImproveState, RunEnd>;

/** Rejected attempts of earlier runs shown to the hypothesis prompt. */
const REJECTED_SHOWN = 10;

/** The report phase a machine phase's time counts under (`GenerationReport.phasesMs`). */
const REPORT_PHASE: Partial<Record<ImprovePhase, GenerationPhase>> = {
  implement: "implement",
  validate: "validate",
  measure: "bench",
  decide: "decide",
};

/** A running generation's parts that only this delivery holds: its record, deadline and workspace. */
interface Running {
  n: number;
  rec: GenerationRecord;
  startedAt: string;
  deadline: number;
  ws?: { ws: Workspace } | { outcome: GenerationOutcome };
}

/** An improvement run being advanced by the phase machine; `s` is its current state. */
export class ImproveRun extends DurableRun<ImproveState> {
  private running: Running | undefined;

  /** @param reports - the run's reports so far (REPORT adds each new one) */
  constructor(
    s: ImproveState,
    readonly deps: ImproveDeps,
    override readonly io: ImproveContext,
    readonly reports: GenerationReport[],
  ) {
    super(s, io);
  }

  /** The confirmation cases, which the model never sees. */
  held(): ReadonlySet<string> {
    return new Set(this.s.calibration?.confirmation ?? []);
  }

  /** Publishes an event of the run with the next sequence number. */
  async emit(kind: RunEventKind, message: string, data?: Record<string, unknown>): Promise<void> {
    await this.publish(runEvent(this.s, kind, message, data));
  }

  /**
   * The generation running now, its record taken from the checkpoint when this delivery did
   * not start it (its deadline counted from now: a resumed generation gets its full time).
   */
  generation(): GenerationRun {
    const s = this.s;
    if (this.running?.n !== s.generation) {
      const p = s.progress;
      const rec: GenerationRecord = {
        phase: REPORT_PHASE[s.phase] ?? "plan",
        mark: Date.now(),
        phasesMs: { ...p?.phasesMs },
        usage: p?.usage ?? s.hypothesisUsage ?? emptyUsage(),
        ...(s.hypothesis ? { hypothesis: s.hypothesis } : {}),
        reviews: [...(p?.reviews ?? [])],
        errors: [...(s.generationErrors ?? [])],
      };
      const deadline = Date.now() + s.request.settings.generationTimeoutMs;
      this.running = { n: s.generation, rec, startedAt: p?.startedAt ?? new Date().toISOString(), deadline };
    }
    const { n, rec, startedAt, deadline } = this.running;
    const taskId = generationTaskId(s.request.runId, n);
    return { state: s, deps: this.generationDeps(), rec, startedAt, n, taskId, deadline };
  }

  /** The parent tree the running generation works in (prepared once a delivery). */
  async workspace(g: GenerationRun): Promise<{ ws: Workspace } | { outcome: GenerationOutcome }> {
    const running = this.running as Running;
    running.ws ??= await prepareWorkspace(g);
    return running.ws;
  }

  /** The state's patch that checkpoints the running generation's record, with `extra` (a phase's outcome). */
  progressPatch(extra: Partial<GenerationProgress> = {}): Partial<ImproveState> {
    const g = this.generation();
    closePhase(g.rec);
    const progress: GenerationProgress = {
      ...this.s.progress,
      startedAt: g.startedAt,
      phasesMs: { ...g.rec.phasesMs },
      usage: g.rec.usage,
      reviews: g.rec.reviews,
      ...extra,
    };
    return { progress, generationErrors: g.rec.errors.slice(-ERRORS_KEPT) };
  }

  /** The step that ends the running generation with `end`: on to REPORT, with its record. */
  toReport(end: GenerationOutcome): ImproveStep {
    return { next: "report", patch: this.progressPatch({ end }) };
  }

  /** Forgets the running generation (REPORT recorded it). */
  endGeneration(): void {
    this.running = undefined;
  }

  /** A generation's deps over this run: its events, its checkpoints, the other runs' attempts. */
  private generationDeps(): GenerationDeps {
    return {
      ...this.deps,
      log: this.io.log,
      emit: (message, data) => this.emit("step", message, data),
      saveHypothesis: (h: Hypothesis, usage: Usage) =>
        this.record({ hypothesis: h, hypothesisUsage: usage, ...this.progressPatch({ usage }) }),
      // The error that ends this attempt, after the errors the last checkpoint holds: the
      // phase it ended runs again and records its own errors again.
      saveError: (error: GenerationError) =>
        this.record({ generationErrors: [...(this.s.generationErrors ?? []), error].slice(-ERRORS_KEPT) }),
      rejectedFrom: async (parent) =>
        shownToModel(await this.deps.store.rejectedFrom(parent, this.s.request.runId, REJECTED_SHOWN), this.held()),
    };
  }
}
