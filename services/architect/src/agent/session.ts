/**
 * The loop's session container: opened on any executor replica at the start of an
 * iteration's loop, called on that replica, opened again elsewhere (the candidate's files
 * written into it) when the replica is gone, and closed when the attempt ends.
 */
import { LoopsmithError, hasCode } from "@loopsmith/shared/runtime";
import { ownerOfTask } from "@loopsmith/shared/bus";
import { type SessionCall, type SessionObservation } from "@loopsmith/shared/contracts";
import { agentTexts } from "../event-texts.js";
import { repoOf } from "../repo/workspace.js";
import { stepKey } from "../requests.js";
import { HandBack } from "../durable/index.js";
import type { TaskRun } from "../run.js";
import { runTimeoutOf, type TaskState } from "../state.js";
import type { AgentLoopState } from "./loop-state.js";

/** What a tool works with: the state the phase started from, the run, the base tree, and the loop (changed in place). */
export interface LoopContext {
  s: TaskState;
  run: TaskRun;
  /** The base tree on disk. */
  root: string;
  loop: AgentLoopState;
}

/** The session's id: one per task attempt (`<taskId>-<iteration>`, in the characters `SessionOpen` allows). */
export function sessionIdOf(s: TaskState): string {
  return `${s.task.taskId}-${s.iteration}`.replace(/[^A-Za-z0-9_.-]/g, "_").slice(-128);
}

/** True for the errors of a replica that is gone: nothing answers, it went silent, or it no longer has the session. */
export function replicaGone(err: unknown): boolean {
  return hasCode(err, "unavailable", "timeout", "not_found");
}

/** The agent steps, asserting they are there (`explorePhase` checks before any use). */
function agentSteps(run: TaskRun) {
  const { openSession, sessionCall, closeSession } = run.steps;
  if (!openSession || !sessionCall || !closeSession)
    throw new LoopsmithError("internal", "this architect has no executor session steps");
  return { openSession, sessionCall, closeSession };
}

/**
 * Opens the loop's session with the candidate so far (its files over the base, its removals)
 * and records it in `ctx.loop.session`. `step` and `attempt` make its idempotency key.
 * @throws HandBack when no executor can open it now (retryable); the LoopsmithError otherwise
 */
export async function openSession(ctx: LoopContext, step: string, attempt: number): Promise<void> {
  const { s, run, loop } = ctx;
  const repo = repoOf(s.task);
  const setupCommand = s.repo?.setupCommand ?? repo.setupCommand ?? "";
  try {
    const opened = await agentSteps(run).openSession({
      v: 1,
      taskId: s.task.taskId,
      iteration: s.iteration,
      idempotencyKey: stepKey(s, step, attempt),
      sessionId: sessionIdOf(s),
      owner: ownerOfTask(s.task),
      language: s.task.language,
      base: { snapshot: repo.snapshot, commit: repo.baseCommit, ...(setupCommand ? { setupCommand } : {}) },
      files: loop.files,
      deleted: loop.deleted,
      memoryMb: s.task.limits.memoryMb,
      timeoutMs: runTimeoutOf(s),
      ...(repo.image ? { image: repo.image } : {}),
    });
    loop.session = { sessionId: opened.sessionId, executorId: opened.executorId };
    await run.emit("step", agentTexts.sessionOpened(opened.executorId, opened.files, opened.durationMs), {
      phase: "explore",
      data: { session: loop.session },
    });
  } catch (err) {
    if (err instanceof LoopsmithError && err.retryable) throw new HandBack(`session: ${err.message}`, { cause: err });
    throw err;
  }
}

/**
 * One call in the loop's session. A replica that is gone ({@link replicaGone}) is replaced
 * once: the session is opened again (the candidate's files written into it) and the call
 * sent again.
 * @throws HandBack when the call fails again for a retryable reason; the LoopsmithError otherwise
 */
export async function callSession(ctx: LoopContext, call: SessionCall["call"]): Promise<SessionObservation> {
  const { run, loop } = ctx;
  const steps = agentSteps(run);
  if (!loop.session) await openSession(ctx, "session_open", loop.step);
  const send = () => {
    const session = loop.session as NonNullable<AgentLoopState["session"]>;
    return steps.sessionCall(session.executorId, { v: 1, sessionId: session.sessionId, call });
  };
  try {
    return await send();
  } catch (err) {
    if (!replicaGone(err)) throw err;
    const gone = loop.session?.executorId ?? "";
    await run.emit("warning", agentTexts.sessionLost(gone, (err as Error).message), { phase: "explore" });
    loop.session = undefined;
    await openSession(ctx, "session_reopen", loop.step);
    try {
      return await send();
    } catch (again) {
      if (again instanceof LoopsmithError && again.retryable)
        throw new HandBack(`session call: ${again.message}`, { cause: again });
      throw again;
    }
  }
}
