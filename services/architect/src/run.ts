/**
 * One task's run through the loop: its state and the mechanics that are the task's own: its
 * events' shape, usage, the model call, the classification of step errors, the sandbox retry,
 * and the stop. What every durable job shares (events numbered by the state, `update`,
 * `record` inside a phase, the checkpoint after one) is {@link DurableRun}'s, and the
 * dispatcher over the phase table is `runPhases` (both in `durable/machine.ts`), driven by
 * `runLoop` in `loop.ts`. A phase (`phases.ts`, `repo/phases.ts`, `dag/phases.ts`) is a
 * function of the state it starts from and this run, and returns its {@link PhaseOutcome}.
 */
import { LoopsmithError, hasCode } from "@loopsmith/shared/runtime";
import {
  Usage,
  dagProgress,
  repoModeOf,
  type Budget,
  type ExecutionRequest,
  type ExecutionResult,
  type Phase,
  type ProviderInfo,
  type StopReason,
  type TaskBrief,
  type TaskEvent,
  type TaskResult,
  type TaskScript,
} from "@loopsmith/shared/contracts";
import { closeSession } from "./agent/close.js";
import { runTexts } from "./event-texts.js";
import { repoBrief, repoChange } from "./repo/workspace.js";
import { budgetLeft, stepKey, taskScript, treeBase } from "./requests.js";
import { addStepUsage, type TaskState } from "./state.js";
import type { LoopIO, Steps } from "./steps.js";
import { taskRecordOf } from "./task-record.js";
import { finalState } from "./verdict.js";
import { DurableRun, HandBack, advance, type PhaseMachine, type PhaseStep } from "./durable/index.js";

/** Sandbox infrastructure failures in a row before the task stops with `error`. */
export const MAX_SANDBOX_ERRORS = 3;

/** How a task stops: the stop reason, its message, the error that caused it, and (passed) the hidden tests' score. */
export interface Stop {
  stop: StopReason;
  message: string;
  error?: LoopsmithError;
  hidden?: TaskResult["hidden"];
}

/**
 * What a phase ends with: go on to `next`, or stop. `patch` is applied to the state first
 * either way; the run then checkpoints (go on) or ends the task (stop).
 */
export type PhaseOutcome = PhaseStep<Phase, TaskState, Stop>;

/** A phase: from the state it starts at (`run.s` when it starts), with the run's mechanics. */
export type PhaseFn = (s: TaskState, run: TaskRun) => Promise<PhaseOutcome>;

/** What an LLM step's error means for the loop: a stop, or a failed iteration. */
export type LlmOutcome = Stop | "iteration_failed";

/** The fields every LLM step request starts with (`PlanRequest`, `BuildRequest`, …). */
export interface LlmHead {
  v: 1;
  taskId: string;
  iteration: number;
  idempotencyKey: string;
  /** The role's calls before this step (re-asks included): a scripted reply's index. */
  callsBefore: number;
  script?: TaskScript;
  task: TaskBrief;
  budget: Budget;
}

/** An LLM step's validated reply as the phases use it; `data` is its step event's `llm` record. */
export interface LlmReply<T> {
  value: T;
  provider: ProviderInfo;
  data: Record<string, unknown>;
}

/** How a task's step is carried out: its phase field, and its stop ({@link TaskRun.stop}). */
export const TASK_STEPS: Pick<PhaseMachine<Phase, TaskState, TaskRun, Stop>, "at" | "end"> = {
  at: (phase) => ({ phase }),
  end: (run, stop) => run.stop(stop),
};

/** A task being advanced by the loop; `s` is its current state. */
export class TaskRun extends DurableRun<TaskState> {
  constructor(
    s: TaskState,
    readonly steps: Steps,
    override readonly io: LoopIO,
  ) {
    super(s, io);
  }

  /**
   * The parts of the task a prompt may see (never the hidden tests); in repo mode, the map and
   * the picked files, from the tree the next candidate starts from (`treeBase`: never a blocked
   * change). In agent mode the map only: the model reads the files it wants, and the opening
   * message goes again with every turn.
   */
  async brief(): Promise<TaskBrief> {
    const t = this.s.task;
    const brief: TaskBrief = { goal: t.goal, language: t.language, files: t.files, acceptanceTests: t.acceptanceTests };
    if (!t.repo) return brief;
    const repo = await repoBrief({ ...this.s, candidate: treeBase(this.s) }, this.steps);
    return { ...brief, repo: repoModeOf(t) === "agent" ? { ...repo, files: [] } : repo };
  }

  /** What is left of the task's budget now (usage grows as steps are paid for). */
  budget(): Budget {
    return budgetLeft(this.s);
  }

  /**
   * Carries out a phase's outcome: its patch, then the checkpoint at the next phase, or the
   * stop. @returns the final state when the task stopped, undefined to go on
   */
  advance(outcome: PhaseOutcome): Promise<TaskState | undefined> {
    return advance(this, TASK_STEPS, outcome);
  }

  /** Publishes a progress event with the next sequence number. */
  async emit(kind: TaskEvent["kind"], message: string, extra: Partial<TaskEvent> = {}): Promise<void> {
    const parent = this.s.task.parent;
    await this.publish({
      taskId: this.s.task.taskId,
      iteration: this.s.iteration,
      kind,
      message,
      ...(parent ? { parentTaskId: parent.taskId, subtaskId: parent.subtaskId } : {}),
      ...extra,
    });
  }

  /**
   * One LLM step of `role`: the request starts with the {@link LlmHead} of the step (key of
   * `step` in this iteration, `.attempt` after it when `attempt` is not 0: an agent loop's turn number); the reply's usage is added and published. Errors are thrown
   * as they come: the phase hands them to {@link llmFailure}.
   */
  async llm<T>(
    role: string,
    step: string,
    call: (head: LlmHead) => Promise<{ value: T; usage: Usage; provider: ProviderInfo }>,
    attempt = 0,
  ): Promise<LlmReply<T>> {
    const s = this.s;
    const callsBefore = s.usage.byRole[role]?.calls ?? 0;
    const head: LlmHead = {
      v: 1,
      taskId: s.task.taskId,
      iteration: s.iteration,
      idempotencyKey: stepKey(s, step, attempt),
      callsBefore,
      ...taskScript(s),
      task: await this.brief(),
      budget: this.budget(),
    };
    const reply = await call(head);
    await this.noteProvider(role, reply);
    // The step event carries the validated reply, so a recorded run holds every reply in order
    // and can be replayed: `calls` is what this step used (2 after a re-ask).
    const p = reply.provider;
    const llm = {
      role,
      callsBefore,
      calls: reply.usage.calls,
      value: reply.value,
      provider: { name: p.name, model: p.model, scripted: p.scripted },
    };
    return { value: reply.value, provider: p, data: { llm } };
  }

  /** Adds a step's usage to the task's sums and publishes it as a `usage` event. */
  private async noteProvider(role: string, reply: { usage: Usage; provider: ProviderInfo }): Promise<void> {
    const label = runTexts.providerLabel(reply.provider);
    const s = this.s;
    this.s = {
      ...s,
      usage: addStepUsage(s.usage, role, s.iteration, reply.usage),
      scripted: s.scripted || reply.provider.scripted,
      providers: s.providers.includes(label) ? s.providers : [...s.providers, label],
    };
    const from = reply.provider.fallbackFrom;
    if (from)
      await this.emit("warning", runTexts.fallback(role, from, label), {
        data: { role, provider: reply.provider, fallbackFrom: from },
      });
    const total = this.s.usage.total;
    await this.emit("usage", runTexts.usage(role, reply.usage, total), {
      data: { role, provider: reply.provider, call: reply.usage, total },
    });
  }

  /**
   * Classifies an LLM step's error: a stop, or a failed iteration. Calls that were paid for
   * before the error (an unreadable reply, a re-ask) still count.
   * @throws HandBack for a retryable infrastructure error (the task message is redelivered)
   */
  async llmFailure(err: unknown, role: string): Promise<LlmOutcome> {
    const paid = Usage.safeParse((err as { details?: { usage?: unknown } } | undefined)?.details?.usage);
    if (paid.success && paid.data.calls > 0)
      this.s = { ...this.s, usage: addStepUsage(this.s.usage, role, this.s.iteration, paid.data) };
    // The budget check's own sentence (`budgetStopText`): it names the limit the call would pass.
    if (hasCode(err, "budget_exceeded")) return { stop: "budget", message: runTexts.stopped(err.message), error: err };
    if (hasCode(err, "cancelled")) return { stop: "cancelled", message: runTexts.cancelled };
    if (hasCode(err, "llm_bad_reply")) {
      await this.emit("warning", runTexts.replyUnreadable(role, err.message));
      return "iteration_failed";
    }
    if (err instanceof LoopsmithError && err.retryable) throw new HandBack(`${role}: ${err.message}`, { cause: err });
    const e =
      err instanceof LoopsmithError
        ? err
        : new LoopsmithError("internal", String((err as Error)?.message ?? err), { cause: err });
    return { stop: "error", message: runTexts.stopped(e.message), error: e };
  }

  /** Memory is advisory: a memory failure is logged and the loop goes on without it. */
  async safely<T>(fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (err) {
      this.io.log.warn({ err, taskId: this.s.task.taskId }, "memory step failed; going on without it");
      await this.emit("warning", runTexts.memoryUnavailable((err as Error).message));
      return undefined;
    }
  }

  /**
   * A sandbox run, with the one retry of a sandbox failure (`sandbox_error`: the
   * infrastructure's, never the candidate's). The attempt number is the state's
   * `sandboxErrors` (the failures in a row so far), so each try has its own idempotency key.
   * After a failure the run warns (`retrying`'s text), checkpoints the new count, and tries
   * again: a conductor killed in between resumes the phase at the next attempt number. At
   * most {@link MAX_SANDBOX_ERRORS} failures in a row: the last is returned without a
   * warning (the phase stops with its own text). Any other result resets the count (the
   * phase's checkpoint records it).
   * @param phase - the phase the warnings are reported in
   * @param request - the request of an attempt (0 for the first)
   */
  async sandbox(
    phase: Phase,
    request: (attempt: number) => ExecutionRequest,
    retrying: (reason?: string) => string,
  ): Promise<ExecutionResult> {
    for (;;) {
      const attempt = this.s.sandboxErrors;
      const result = await this.steps.execute(request(attempt));
      if (result.status !== "sandbox_error") {
        this.update({ sandboxErrors: 0 });
        return result;
      }
      if (attempt + 1 >= MAX_SANDBOX_ERRORS) return result;
      await this.emit("warning", retrying(result.reason), { phase });
      await this.record({ sandboxErrors: attempt + 1 });
    }
  }

  /** The repo-mode change for the result; a tree that cannot be read leaves it out (with a warning). */
  private async repoChangeSafely(): Promise<TaskResult["repo"]> {
    try {
      return await repoChange(this.s, this.steps);
    } catch (err) {
      await this.emit("warning", runTexts.changeUncomputable((err as Error).message));
      return undefined;
    }
  }

  /** Ends the task: remembers a pass, records the task, checkpoints, publishes the result. */
  async stop(end: Stop): Promise<TaskState> {
    const { stop: reason, message, error, hidden = null } = end;
    // An agent loop's session ends with the task (a cancel, a stop mid-loop).
    const session = this.s.agent?.session;
    if (session) {
      await closeSession(this.steps, this.io.log, session);
      this.update({ agent: this.s.agent ? { ...this.s.agent, session: undefined } : undefined });
    }
    const s0 = this.s;
    if (reason === "passed" && s0.candidate) {
      const files = s0.candidate.files;
      await this.safely(() =>
        this.steps.rememberSuccess({
          v: 1,
          taskId: s0.task.taskId,
          iteration: s0.iteration,
          idempotencyKey: stepKey(s0, "success"),
          language: s0.task.language,
          goal: s0.task.goal,
          files,
        }),
      );
    }
    const change = s0.task.repo ? await this.repoChangeSafely() : undefined;
    this.s = finalState(this.s, reason, message, error, hidden, change);
    const s = this.s;
    const result = s.result as TaskResult;
    await this.safely(() => this.steps.recordTask(taskRecordOf(s, reason)));
    // Checkpoint the final state first, then publish the result (message id `taskId:result`):
    // a conductor that dies in between finds the task final and publishes the result again.
    await this.io.checkpoint({ ...s, eventSeq: s.eventSeq + 1 });
    await this.emit("result", message, {
      phase: "done",
      result,
      ...(s.dag ? { data: { dag: dagProgress(s.dag) } } : {}),
    });
    return this.s;
  }
}
