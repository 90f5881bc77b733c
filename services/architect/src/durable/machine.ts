/**
 * The phase machine every durable job runs through (a task, an improvement run): a table of
 * phases, each a function of the state it starts from and the job's run that returns its
 * {@link PhaseStep}; the dispatcher ({@link runPhases}) carries each step out: its patch, then
 * the checkpoint at the next phase, or the job's end. Since every phase ends with a
 * checkpoint, a job whose runner died resumes at the phase it was in. What the job is (its
 * state, its events' shape, its stop) is its own: the {@link DurableRun} it extends and the
 * {@link PhaseMachine} it hands to the dispatcher.
 */
import type { TaskEvent } from "@loopsmith/shared/contracts";

/** The durable context a run needs: the checkpoint, the events, the heartbeat (`DurableContext`'s). */
export interface RunIO<State> {
  /** Waits for the events emitted so far, then writes the checkpoint (revision-checked). */
  checkpoint(state: State): Promise<void>;
  /** Publishes an event without waiting for its ack (the next checkpoint waits). */
  emit(event: TaskEvent): Promise<void>;
  /** Tells the broker the job is still being worked on. */
  heartbeat(): void;
}

/**
 * What a phase ends with: go on to `next`, or end the job with `End` (the job's own stop).
 * `patch` is applied to the state first either way.
 */
export type PhaseStep<Phase extends string, State, End> = ({ next: Phase } | End) & { patch?: Partial<State> };

/** A durable job's state: at least its next event sequence number. */
export interface Sequenced {
  eventSeq: number;
}

/**
 * A durable job being advanced by {@link runPhases}; `s` is its current state. The mechanics
 * every job shares: state changes in memory, checkpoints inside a phase, and events numbered
 * by the state's `eventSeq`.
 */
export class DurableRun<State extends Sequenced> {
  constructor(
    public s: State,
    readonly io: RunIO<State>,
  ) {}

  /**
   * Changes the state in memory only: what the run's own mechanics must see before the phase
   * ends. The next checkpoint records it.
   */
  update(patch: Partial<State>): void {
    this.s = { ...this.s, ...patch };
  }

  /** Applies `patch` and checkpoints, staying in the current phase (progress inside a phase). */
  async record(patch: Partial<State> = {}): Promise<void> {
    this.s = { ...this.s, ...patch };
    await this.io.checkpoint(this.s);
    this.io.heartbeat();
  }

  /** Publishes `event` with the next sequence number (stamped `v: 1` and now). */
  protected async publish(event: Omit<TaskEvent, "v" | "at" | "seq">): Promise<void> {
    const seq = this.s.eventSeq;
    this.s = { ...this.s, eventSeq: seq + 1 };
    await this.io.emit({ v: 1, at: new Date().toISOString(), seq, ...event } as TaskEvent);
  }
}

/** One job's phase table and the rules around it, for {@link runPhases}. */
export interface PhaseMachine<Phase extends string, State extends Sequenced, Run extends DurableRun<State>, End> {
  /** The phase functions. */
  phases: Record<Phase, (s: State, run: Run) => Promise<PhaseStep<Phase, State, End>>>;
  /** The phase the state is at. */
  phaseOf(s: State): Phase;
  /** The patch that puts a state at `phase`. */
  at(phase: Phase): Partial<State>;
  /**
   * Runs before each phase: the final state to end with (a final state resumed, a cancel, a
   * limit), or undefined to run the phase.
   * @throws HandBack when the job must be handed back (the service is stopping)
   */
  before(run: Run): Promise<State | undefined>;
  /** Ends the job with a phase's `End`; the final state. */
  end(run: Run, end: End): Promise<State>;
}

/**
 * Carries out a phase's step: its patch, then the checkpoint at the next phase, or the end.
 * @returns the final state when the job ended, undefined to go on
 */
export async function advance<Phase extends string, State extends Sequenced, Run extends DurableRun<State>, End>(
  run: Run,
  machine: Pick<PhaseMachine<Phase, State, Run, End>, "at" | "end">,
  step: PhaseStep<Phase, State, End>,
): Promise<State | undefined> {
  if ("next" in step && typeof step.next === "string") {
    await run.record({ ...step.patch, ...machine.at(step.next) });
    return undefined;
  }
  if (step.patch) run.update(step.patch);
  return machine.end(run, step as End);
}

/**
 * Runs a job from the phase its state is at to its final state: before each phase the
 * machine's `before` rule, then the phase, then its step carried out.
 * @throws what a phase or `before` throws: a HandBack (or a retryable error) hands the job
 *   back, and a later delivery resumes it from its last checkpoint
 */
export async function runPhases<Phase extends string, State extends Sequenced, Run extends DurableRun<State>, End>(
  run: Run,
  machine: PhaseMachine<Phase, State, Run, End>,
): Promise<State> {
  for (;;) {
    const ended = await machine.before(run);
    if (ended) return ended;
    const step = await machine.phases[machine.phaseOf(run.s)](run.s, run);
    const final = await advance(run, machine, step);
    if (final) return final;
  }
}
