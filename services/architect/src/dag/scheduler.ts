/**
 * The DAG scheduler of a project-scale task. It runs the subtasks of a validated plan
 * ({@link validateDagPlan}) as child tasks:
 * - a subtask starts as soon as every dependency has passed, at most `parallel` at once
 *   (`p-queue`);
 * - a failed attempt is retried with exponential backoff and full jitter up to the subtask's
 *   own limit (`p-retry`); when the subtask gives up, every subtask that depends on it,
 *   directly or not, is cancelled with reason `dependency_failed`, and independent subtasks
 *   go on;
 * - every change of a subtask's state is recorded (checkpoint, then event) before the next
 *   step, one at a time and in order, so a resumed scheduler finds passed subtasks passed
 *   (not run again) and running ones re-attached to the same child task id (re-attaching
 *   is no move: it records nothing, so it announces nothing again).
 * Nothing here does I/O of its own: running an attempt and recording are the caller's ({@link DagIO}).
 */
import { setMaxListeners } from "node:events";
import PQueue from "p-queue";
import pRetry, { type Options as PRetryOptions } from "p-retry";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  addUsage,
  childTaskId,
  dependenciesOf,
  dependentsOf,
  emptyUsage,
  type DagState,
  type Subtask,
  type SubtaskChange,
  type SubtaskState,
  type Usage,
} from "@loopsmith/shared/contracts";
import { HandBack } from "../durable/index.js";

/** What one attempt of a subtask (one child task) ended with. */
export interface AttemptOutcome {
  passed: boolean;
  /** The child task's stop reason (`passed`, `max_iterations`, `stuck`, `error`, …). */
  reason: string;
  message: string;
  /** Iterations the child task ran. */
  iterations: number;
  usage: Usage;
  /** A passed attempt's change, applied to the tree of the subtasks that depend on it. */
  change?: SubtaskChange;
  /** False when another attempt cannot help (the child task was refused as malformed, say). @defaultValue true */
  retryable?: boolean;
}

/** One attempt to run: the subtask, its attempt number and child task id, and the tree it starts from. */
export interface AttemptRequest {
  subtask: Subtask;
  /** 1 for the first attempt; it goes on counting after a re-open. */
  attempt: number;
  childTaskId: string;
  /** The subtask's dependencies, direct or not, in dependency order, all passed: their changes make its starting tree. */
  base: SubtaskState[];
  /** Aborts when the parent task is cancelled or the conductor stops. */
  signal: AbortSignal;
}

/** The scheduler's I/O. */
export interface DagIO {
  /**
   * Runs one attempt as a child task, or re-attaches to it when a child task with that id
   * exists (a resumed scheduler asks for the attempt it had started). A failed child task is
   * a resolved outcome with `passed: false`; a throw is an infrastructure failure (a retryable
   * `LoopsmithError` counts as a failed attempt and is retried; any other throw ends the subtask).
   */
  attempt(req: AttemptRequest): Promise<AttemptOutcome>;
  /** Records the state after `changed` moved (checkpoint, then event). Called one at a time, in order. */
  record(state: DagState, changed: SubtaskState): Promise<void>;
  /** Fires when the parent task is cancelled or the conductor stops. */
  signal: AbortSignal;
  /** True when the signal fired because the parent task was cancelled (not because the conductor stops). */
  cancelled(): boolean;
  /**
   * True when the signal fired because the parent task's wall-clock limit passed: the
   * subtasks not finished are cancelled with reason `time_limit`, as a cancel would. Absent:
   * never.
   */
  timedOut?(): boolean;
}

/** Scheduling limits. */
export interface DagOptions {
  parentTaskId: string;
  /** Subtasks running at once (≥ 1); the CLI's `--parallel`, by default the builder replicas. */
  parallel: number;
  /** Attempts per subtask (≥ 1), each a child task with its own iteration limit. */
  attempts: number;
  /** Backoff before a retry, in ms: `min(maxMs, minMs · 2^(retry-1))`, times a random factor in [1, 2) (p-retry's `randomize`). */
  backoff: { minMs: number; maxMs: number };
}

/** A failed attempt, as p-retry sees it. */
class AttemptFailed extends Error {
  constructor(readonly outcome: AttemptOutcome) {
    super(outcome.message);
  }
}

const now = (): string => new Date().toISOString();

/** One DAG run: its I/O and limits, the state as it moves, and the queues of work and records. */
interface DagRun {
  io: DagIO;
  opts: DagOptions;
  plan: DagState["plan"];
  subtaskOf: ReadonlyMap<string, Subtask>;
  /** The state now: replaced, never changed in place, at every move. */
  state: DagState;
  /** The first error of a record or of scheduling: the run stops at once and throws it. */
  failure: unknown;
  /** Aborted with {@link DagRun.failure}. */
  broken: AbortController;
  /** The caller's signal or `broken`: one signal for every wait of this run. */
  signal: AbortSignal;
  /** The records, one at a time, in order. */
  records: PQueue;
  /** The subtasks, `parallel` at once. */
  work: PQueue;
  /** The subtasks handed to `work`. */
  queued: Set<string>;
}

/** A subtask's state now. */
function get(run: DagRun, id: string): SubtaskState {
  return run.state.subtasks.find((s) => s.id === id)!;
}

/** Stops the run for `err` (the first one wins). */
function fail(run: DagRun, err: unknown): void {
  run.failure ??= err;
  run.broken.abort(err);
}

/**
 * Moves one subtask (`patch` over its state) and queues the record of the new state.
 * @returns the record's promise; it rejects with the record's error, which also stops the run
 */
function update(run: DagRun, id: string, patch: Partial<SubtaskState>): Promise<void> {
  run.state = { ...run.state, subtasks: run.state.subtasks.map((s) => (s.id === id ? { ...s, ...patch } : s)) };
  const snapshot = run.state;
  const changed = get(run, id);
  return run.records
    .add(() => run.io.record(snapshot, changed))
    .catch((err: unknown) => {
      fail(run, err);
      throw err;
    });
}

/** True when a pending subtask's dependencies have all passed. */
function ready(run: DagRun, s: SubtaskState): boolean {
  return s.status === "pending" && run.subtaskOf.get(s.id)!.dependsOn.every((d) => get(run, d).status === "passed");
}

/** Hands every subtask that can run now (ready, or running to re-attach) to the work queue, once. */
function schedule(run: DagRun): void {
  if (run.signal.aborted) return;
  for (const s of run.state.subtasks) {
    if (run.queued.has(s.id) || !(s.status === "running" || ready(run, s))) continue;
    run.queued.add(s.id);
    run.work.add(() => runSubtask(run, s.id)).catch((err: unknown) => fail(run, err));
  }
}

/**
 * One attempt of a subtask: a new one is recorded as running first; `again` re-attaches to
 * the attempt the state says is running.
 * @throws AttemptFailed when the attempt did not pass; what {@link DagIO.attempt} throws
 */
async function attemptOnce(run: DagRun, id: string, again: boolean): Promise<AttemptOutcome> {
  const { signal } = run;
  const cur = get(run, id);
  const attempt = again ? cur.attempts : cur.attempts + 1;
  const child = childTaskId(run.opts.parentTaskId, id, attempt);
  // A new attempt: the last attempt's reason and message are its own, not this one's.
  if (!again)
    await update(run, id, {
      status: "running",
      attempts: attempt,
      childTaskId: child,
      startedAt: cur.startedAt ?? now(),
      reason: undefined,
      message: undefined,
    });
  const base = dependenciesOf(run.plan, id).map((d) => get(run, d));
  signal.throwIfAborted();
  const outcome = await run.io.attempt({ subtask: run.subtaskOf.get(id)!, attempt, childTaskId: child, base, signal });
  if (!outcome.passed) throw new AttemptFailed(outcome);
  return outcome;
}

/** p-retry's options for a subtask that has used `used` of its attempts: backoff, what is retried, what a failure records. */
function retryOptions(run: DagRun, id: string, used: number): PRetryOptions {
  const { opts, signal } = run;
  return {
    retries: Math.max(0, opts.attempts - used - 1),
    factor: 2,
    minTimeout: opts.backoff.minMs,
    maxTimeout: opts.backoff.maxMs,
    randomize: true,
    signal,
    onFailedAttempt: async ({ error }) => {
      // An attempt cut off by a cancel or a stop is not a failure of the subtask.
      if (signal.aborted) return;
      const o = error instanceof AttemptFailed ? error.outcome : undefined;
      const cur = get(run, id);
      await update(run, id, {
        reason: o?.reason ?? "error",
        message: o?.message ?? error.message,
        iterations: cur.iterations + (o?.iterations ?? 0),
        usage: addUsage(cur.usage ?? emptyUsage(), o?.usage ?? emptyUsage()),
      });
    },
    shouldRetry: ({ error }) =>
      !signal.aborted &&
      (error instanceof AttemptFailed
        ? error.outcome.retryable !== false
        : error instanceof LoopsmithError && error.retryable),
  };
}

/** Records a subtask failed (`err` ended it) and cancels its pending dependents. */
async function failSubtask(run: DagRun, id: string, err: unknown): Promise<void> {
  const cur = get(run, id);
  await update(run, id, {
    status: "failed",
    finishedAt: now(),
    ...(err instanceof AttemptFailed ? {} : { reason: "error", message: (err as Error)?.message ?? String(err) }),
  });
  for (const d of dependentsOf(run.plan, id)) {
    if (get(run, d).status !== "pending") continue;
    await update(run, d, {
      status: "cancelled",
      reason: "dependency_failed",
      message:
        `"${id}" failed after ${cur.attempts - cur.attemptsBefore} attempt(s): ${get(run, id).message ?? ""}`.slice(
          0,
          4_000,
        ),
      finishedAt: now(),
    });
  }
}

/**
 * Runs one subtask to its end (attempts with backoff): passed, then what it unblocks
 * scheduled; or failed, with its dependents cancelled. Nothing is recorded once the run is aborted.
 * @throws the first error of a record
 */
async function runSubtask(run: DagRun, id: string): Promise<void> {
  const reattach = get(run, id).status === "running";
  const used = get(run, id).attempts - get(run, id).attemptsBefore - (reattach ? 1 : 0);
  let first = true;
  try {
    const out = await pRetry(
      () => {
        const again = reattach && first;
        first = false;
        return attemptOnce(run, id, again);
      },
      retryOptions(run, id, used),
    );
    const cur = get(run, id);
    await update(run, id, {
      status: "passed",
      reason: "passed",
      message: out.message,
      iterations: cur.iterations + out.iterations,
      usage: addUsage(cur.usage ?? emptyUsage(), out.usage),
      finishedAt: now(),
      ...(out.change ? { change: out.change } : {}),
    });
    schedule(run);
  } catch (err) {
    if (run.signal.aborted) return;
    await failSubtask(run, id, err);
  }
}

/**
 * After the caller's signal fired: the subtasks not finished are cancelled (reason `cancelled`
 * or `time_limit`).
 * @throws HandBack when the conductor stops (neither a cancel nor the time limit)
 */
async function cancelUnfinished(run: DagRun): Promise<void> {
  const { io } = run;
  const late = !io.cancelled() && (io.timedOut?.() ?? false);
  if (!io.cancelled() && !late) throw new HandBack("the conductor is stopping; the DAG resumes from its checkpoint");
  for (const s of run.state.subtasks) {
    if (s.status === "pending" || s.status === "running")
      await update(run, s.id, {
        status: "cancelled",
        reason: late ? "time_limit" : "cancelled",
        message: late ? "the task's time limit passed" : "the task was cancelled",
        finishedAt: now(),
      });
  }
  await run.records.onIdle();
}

/**
 * Runs the subtasks of `initial` that have not finished, and returns the state when none can
 * run any more: every subtask passed, failed or cancelled.
 * When `io.signal` fires for a cancel or the parent's time limit ({@link DagIO.timedOut}),
 * the subtasks not finished are cancelled (reason `cancelled` or `time_limit`) and the state returned.
 * @throws HandBack when the conductor stops before the run ends (running subtasks stay
 *   `running`, to be re-attached on resume); the first error of `io.record` (the run stops
 *   at once: a move that was not checkpointed must not be built on)
 */
export async function runDag(initial: DagState, io: DagIO, opts: DagOptions): Promise<DagState> {
  if (opts.parallel < 1 || opts.attempts < 1)
    throw new LoopsmithError(
      "bad_request",
      `a DAG run needs parallel ≥ 1 and attempts ≥ 1 (got ${opts.parallel} and ${opts.attempts})`,
    );
  // One signal for every wait of this run (p-retry adds a listener per subtask): the caller's,
  // or this run's own when recording a move failed (the checkpoint cannot be trusted to go on).
  const broken = new AbortController();
  const signal = AbortSignal.any([io.signal, broken.signal]);
  setMaxListeners(initial.plan.subtasks.length * 4 + 10, signal);
  const plan = initial.plan;
  const run: DagRun = {
    io,
    opts,
    plan,
    subtaskOf: new Map(plan.subtasks.map((s) => [s.id, s])),
    state: initial,
    failure: undefined,
    broken,
    signal,
    records: new PQueue({ concurrency: 1 }),
    work: new PQueue({ concurrency: opts.parallel }),
    queued: new Set(),
  };
  schedule(run);
  await run.work.onIdle();
  await run.records.onIdle().catch(() => undefined);
  if (run.failure !== undefined) throw run.failure;
  if (io.signal.aborted) await cancelUnfinished(run);
  return run.state;
}

/** The outcome of a finished DAG run: `passed` when every subtask passed. */
export function dagOutcome(state: DagState): {
  status: "passed" | "failed" | "cancelled";
  passed: string[];
  failed: string[];
  cancelled: string[];
} {
  const ids = (status: SubtaskState["status"]): string[] =>
    state.subtasks.filter((s) => s.status === status).map((s) => s.id);
  const failed = ids("failed");
  const cancelled = ids("cancelled");
  const status = failed.length ? "failed" : cancelled.length ? "cancelled" : "passed";
  return { status, passed: ids("passed"), failed, cancelled };
}

/**
 * Re-opens one passed subtask after the integration run failed on the merged tree (the
 * reflection's choice): it and the subtasks that depend on it go back to `pending`, their
 * changes dropped, each with a fresh attempt limit. A subtask is re-opened at most once.
 * @throws LoopsmithError `bad_request` when the subtask is not in the plan, has not passed, or was re-opened before
 */
export function reopenSubtask(state: DagState, id: string, why: string): DagState {
  const target = state.subtasks.find((s) => s.id === id);
  if (!target) throw new LoopsmithError("bad_request", `cannot re-open "${id}": no such subtask`);
  if (target.status !== "passed")
    throw new LoopsmithError("bad_request", `cannot re-open "${id}": it is ${target.status}, not passed`);
  if (state.reopened.includes(id))
    throw new LoopsmithError("bad_request", `cannot re-open "${id}" again: a subtask is re-opened at most once`);
  const again = new Set([id, ...dependentsOf(state.plan, id)]);
  return {
    ...state,
    reopened: [...state.reopened, id],
    subtasks: state.subtasks.map((s) => {
      if (!again.has(s.id)) return s;
      const { change: _change, finishedAt: _finishedAt, ...rest } = s;
      return {
        ...rest,
        status: "pending",
        attemptsBefore: s.attempts,
        reason: "reopened",
        message: s.id === id ? `re-opened: ${why}`.slice(0, 4_000) : `re-opened with "${id}"`,
      };
    }),
  };
}

/** A fresh DAG state for a validated plan: every subtask pending. */
export function startDag(plan: DagState["plan"]): DagState {
  return {
    plan,
    reopened: [],
    subtasks: plan.subtasks.map((s) => ({
      id: s.id,
      status: "pending",
      attempts: 0,
      attemptsBefore: 0,
      iterations: 0,
    })),
  };
}
