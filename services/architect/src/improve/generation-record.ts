/**
 * What a generation records as it runs, and its report: the deps a generation needs, how it
 * ended, the phase clock, the errors it met, and the report built from them. The phases of a
 * generation (`generation.ts` and the files beside it) all record into one
 * {@link GenerationRun}.
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  ERRORS_KEPT,
  GenerationReport,
  emptyUsage,
  type DecisionReason,
  type ExecutionRequest,
  type ExecutionResult,
  type GateRequest,
  type GenerationError,
  type GenerationPhase,
  type GenerationReview,
  type GateResult,
  type Hypothesis,
  type Usage,
} from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type LlmProvider } from "@loopsmith/shared/llm";
import type { GenerationEnd, ImproveState } from "./state.js";

/** What a generation needs from the outside. */
export interface GenerationDeps {
  nc: NatsConnection;
  provider: LlmProvider;
  execute(req: ExecutionRequest): Promise<ExecutionResult>;
  /** The reviewer's static gate (its evaluation-tampering rules judge the change in VALIDATE). */
  gate(req: GateRequest): Promise<GateResult>;
  /** The directory holding a snapshot's tree, from `owner`'s store. */
  tree(snapshot: string, owner: string): Promise<string>;
  cacheDir?: string;
  /** Asks the conductor to stop a task (a generation past its time limit). */
  /** Cancels one of `owner`'s tasks. */
  cancelTask(taskId: string, owner: string): Promise<void>;
  /** Publishes a progress event of the run. */
  emit(message: string, data: Record<string, unknown>): Promise<void>;
  /** Checkpoints the hypothesis (and its usage) so a resumed generation does not ask again. */
  saveHypothesis(h: Hypothesis, usage: Usage): Promise<void>;
  /**
   * Checkpoints an error that ends this attempt of the generation before the run resumes it
   * (a retryable one), so the resumed generation's report lists it.
   */
  saveError(error: GenerationError): Promise<void>;
  /** Rejected generations of other runs from the same parent tree (the run's memory of failed attempts). */
  rejectedFrom(parent: string): Promise<GenerationReport[]>;
  log: Logger;
}

/** How a generation ended: its report and what the run takes from it (checkpointed: {@link GenerationEnd}). */
export type GenerationOutcome = GenerationEnd;

/** The task id of generation `n` of a run. */
export function generationTaskId(runId: string, n: number): string {
  return `${runId}-gen-${n}`;
}

/** Longest error message a report keeps, in characters (the contract's limit). */
const ERROR_MESSAGE_MAX = 2_000;

/**
 * `err` as a report's {@link GenerationError} met in `phase`: a LoopsmithError's code and
 * message, another Error's message (code `internal`), anything else as text; the message
 * cut to 2,000 characters with `…`. Pure.
 */
export function generationError(phase: GenerationPhase, err: unknown, retried = false): GenerationError {
  const code = err instanceof LoopsmithError ? err.code : "internal";
  const message = clipMessage(err instanceof Error ? err.message : String(err));
  return { phase, code, message, ...(retried ? { retried } : {}) };
}

/** `text` cut to {@link ERROR_MESSAGE_MAX} characters, the last one `…` when cut. */
export function clipMessage(text: string): string {
  return text.length > ERROR_MESSAGE_MAX ? `${text.slice(0, ERROR_MESSAGE_MAX - 1)}…` : text;
}

/**
 * The errors a report keeps: all of them when there are at most {@link ERRORS_KEPT}, else the
 * first ERRORS_KEPT − 1 and the last (the one that ended the generation). Pure.
 */
export function keptErrors(errors: readonly GenerationError[]): GenerationError[] {
  if (errors.length <= ERRORS_KEPT) return [...errors];
  return [...errors.slice(0, ERRORS_KEPT - 1), ...errors.slice(-1)];
}
/**
 * What a generation records as it goes, for its report: the phase it is in and each phase's
 * wall time, its LLM usage, its hypothesis, the reviews of its task and the errors met.
 */
export interface GenerationRecord {
  phase: GenerationPhase;
  /** When the running phase's clock last started, epoch ms. */
  mark: number;
  /** Wall time per phase so far, ms (the running phase's up to `mark`). */
  phasesMs: Record<string, number>;
  usage: Usage;
  hypothesis?: Hypothesis;
  reviews: GenerationReview[];
  errors: GenerationError[];
}

/** Adds the running phase's time since its clock's mark to `phasesMs` and restarts the clock. */
export function closePhase(rec: GenerationRecord): void {
  const now = Date.now();
  rec.phasesMs[rec.phase] = (rec.phasesMs[rec.phase] ?? 0) + (now - rec.mark);
  rec.mark = now;
}

/** Ends the running phase (its time recorded) and starts `next`. */
export function beginPhase(rec: GenerationRecord, next: GenerationPhase): void {
  closePhase(rec);
  rec.phase = next;
}

/** The report of a generation from what `rec` recorded (the running phase's clock closed) and `part`. */
export function recordedReport(
  state: ImproveState,
  rec: GenerationRecord,
  startedAt: string,
  part: Partial<GenerationReport> & Pick<GenerationReport, "decision">,
): GenerationReport {
  closePhase(rec);
  return GenerationReport.parse({
    v: 1,
    runId: state.request.runId,
    generation: state.generation,
    parent: state.parent.commit,
    taskId: generationTaskId(state.request.runId, state.generation),
    usage: rec.usage,
    phasesMs: { ...rec.phasesMs },
    ...(rec.reviews.length ? { reviews: rec.reviews } : {}),
    ...(rec.errors.length ? { errors: keptErrors(rec.errors) } : {}),
    startedAt,
    finishedAt: new Date().toISOString(),
    ...part,
  });
}

/** One running generation: its state, its deps, what it records, its task and its deadline. */
export interface GenerationRun {
  state: ImproveState;
  deps: GenerationDeps;
  rec: GenerationRecord;
  /** When the generation started, ISO 8601. */
  startedAt: string;
  /** The generation's number. */
  n: number;
  /** The generation's task id ({@link generationTaskId}). */
  taskId: string;
  /** When the generation passes its time limit, epoch ms. */
  deadline: number;
}

/** The report of `g` with `part` (its running phase's clock closed). */
export function reportOf(
  g: GenerationRun,
  part: Partial<GenerationReport> & Pick<GenerationReport, "decision">,
): GenerationReport {
  return recordedReport(g.state, g.rec, g.startedAt, part);
}

/**
 * `g` rejected with `reason`: its report with `part`. An infrastructure error (`error`: no
 * check command, judging code that cannot be read) is listed among the report's errors too.
 */
export function rejected(
  g: GenerationRun,
  reason: DecisionReason,
  message: string,
  part: Partial<GenerationReport> = {},
): GenerationOutcome {
  if (reason === "error") g.rec.errors.push({ phase: g.rec.phase, message: clipMessage(message) });
  return { report: reportOf(g, { ...part, decision: { verdict: "rejected", reason, message } }) };
}

/**
 * A generation ended by an error that retrying cannot fix, thrown outside its phases: its
 * report (with the errors of earlier attempts the run checkpointed; the phase of this one is
 * not known, so it is in the decision's message only), and the run goes on.
 */
export function errorReport(state: ImproveState, err: unknown, startedAt: string): GenerationReport {
  const e =
    err instanceof LoopsmithError
      ? err
      : new LoopsmithError("internal", (err as Error)?.message ?? String(err), { cause: err });
  const errors = state.generationErrors ?? [];
  return GenerationReport.parse({
    v: 1,
    runId: state.request.runId,
    generation: state.generation,
    parent: state.parent.commit,
    taskId: generationTaskId(state.request.runId, state.generation),
    ...(state.hypothesis ? { hypothesis: state.hypothesis } : {}),
    decision: { verdict: "rejected", reason: "error", message: `${e.code}: ${e.message}` },
    ...(errors.length ? { errors: keptErrors(errors) } : {}),
    usage: state.hypothesisUsage ?? emptyUsage(),
    phasesMs: {},
    startedAt,
    finishedAt: new Date().toISOString(),
  });
}
