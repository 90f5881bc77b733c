/**
 * One task's run through the loop: the state being advanced and the mechanics every phase
 * shares (events, checkpoints, usage, the classification of step errors, and the stop).
 * The phases themselves are in `phases.ts`; the dispatcher is `runLoop` in `loop.ts`.
 */
import {
  LoopsmithError,
  Usage,
  dagProgress,
  hasCode,
  idempotencyKey,
  testSummary,
  type Budget,
  type BuildReply,
  type ExecutionRequest,
  type ExecutionResult,
  type FileChange,
  type Phase,
  type ProviderInfo,
  type StopReason,
  type TaskBrief,
  type TaskScript,
  type TaskEvent,
  type TaskResult,
} from "@loopsmith/shared";
import { addStepUsage, type TaskState } from "./state.js";
import type { LoopIO, Steps } from "./steps.js";
import { finalState, verdictFiles } from "./verdict.js";
import { repoBrief, repoChange } from "./repo/phases.js";
import { taskRecordOf } from "./task-record.js";

/** Sandbox infrastructure failures in a row before the task stops with `error`. */
export const MAX_SANDBOX_ERRORS = 3;

/** Thrown out of the loop when the task must be retried later (the message is redelivered). */
export class RetryLater extends Error {
  override readonly name = "RetryLater";
}

/** What an LLM step's error means for the loop: a final state, or a failed iteration. */
export type LlmOutcome = TaskState | "iteration_failed";

/** A task being advanced by the loop; `s` is its current state. */
export class TaskRun {
  constructor(
    public s: TaskState,
    readonly steps: Steps,
    readonly io: LoopIO,
  ) {}

  /** The idempotency key of a step of the current iteration. */
  key(step: string, attempt = 0): string {
    return idempotencyKey(this.s.task.taskId, this.s.iteration, step, attempt);
  }

  /** The task's own replies for an LLM step request (`Task.script`), or nothing. */
  taskScript(): { script?: TaskScript } {
    return this.s.task.script ? { script: this.s.task.script } : {};
  }

  /** The task's memory scope for a recall request (`Task.memoryScope`), or nothing. */
  recallScope(): { scope?: string } {
    return this.s.task.memoryScope ? { scope: this.s.task.memoryScope } : {};
  }

  /** The parts of the task a prompt may see (never the hidden tests); in repo mode, the map and the picked files. */
  async brief(): Promise<TaskBrief> {
    const t = this.s.task;
    const brief: TaskBrief = { goal: t.goal, language: t.language, files: t.files, acceptanceTests: t.acceptanceTests };
    return t.repo ? { ...brief, repo: await repoBrief(this) } : brief;
  }

  /**
   * A step event that carries the model's validated reply (`data.llm`), so a recorded run
   * holds every reply in order and can be replayed: `callsBefore` is the role's calls before
   * this step, `calls` the calls it used (2 after a re-ask).
   */
  llmData(role: string, callsBefore: number, reply: { value: unknown; usage: Usage; provider: ProviderInfo }): Record<string, unknown> {
    return { llm: { role, callsBefore, calls: reply.usage.calls, value: reply.value, provider: { name: reply.provider.name, model: reply.provider.model, scripted: reply.provider.scripted } } };
  }

  /** The LLM calls this task already made for `role` (re-asks included): a step's `callsBefore`. */
  callsBefore(role: string): number {
    return this.s.usage.byRole[role]?.calls ?? 0;
  }

  /** What is left of the task's budget. */
  budget(): Budget {
    const b: Budget = {};
    const used = this.s.usage.total;
    if (this.s.task.limits.maxCostUsd !== undefined) b.remainingUsd = this.s.task.limits.maxCostUsd - used.costUsd;
    // Every token billed counts, cached ones included (the same sum the providers' estimate uses).
    const tokens = used.inputTokens + used.outputTokens + used.cacheReadTokens + used.cacheWriteTokens;
    if (this.s.task.limits.maxTokens !== undefined) b.remainingTokens = this.s.task.limits.maxTokens - tokens;
    return b;
  }

  /** A sandbox run of `files` for `step`; a retry after a sandbox failure is a new attempt. */
  executionRequest(step: string, files: FileChange[], tests?: string[], attempt = this.s.sandboxErrors): ExecutionRequest {
    const s = this.s;
    return {
      v: 1,
      taskId: s.task.taskId,
      iteration: s.iteration,
      idempotencyKey: this.key(step, attempt),
      language: s.task.language,
      files,
      ...(tests ? { tests } : {}),
      timeoutMs: s.task.limits.runTimeoutMs,
      memoryMb: s.task.limits.memoryMb,
    };
  }

  /** Publishes a progress event with the next sequence number. */
  async emit(kind: TaskEvent["kind"], message: string, extra: Partial<TaskEvent> = {}): Promise<void> {
    const parent = this.s.task.parent;
    const event: TaskEvent = {
      v: 1,
      taskId: this.s.task.taskId,
      seq: this.s.eventSeq,
      at: new Date().toISOString(),
      iteration: this.s.iteration,
      kind,
      message,
      ...(parent ? { parentTaskId: parent.taskId, subtaskId: parent.subtaskId } : {}),
      ...extra,
    };
    this.s = { ...this.s, eventSeq: this.s.eventSeq + 1 };
    await this.io.emit(event);
  }

  /** Moves to `phase` with `patch` applied, and checkpoints. */
  async go(phase: Phase, patch: Partial<TaskState> = {}): Promise<void> {
    this.s = { ...this.s, ...patch, phase };
    await this.io.checkpoint(this.s);
    this.io.heartbeat();
  }

  /** Adds a step's usage to the task's sums and publishes it as a `usage` event. */
  async noteProvider(role: string, reply: { usage: BuildReply["usage"]; provider: ProviderInfo }): Promise<void> {
    const label = `${reply.provider.name}:${reply.provider.model}`;
    const s = this.s;
    this.s = {
      ...s,
      usage: addStepUsage(s.usage, role, s.iteration, reply.usage),
      scripted: s.scripted || reply.provider.scripted,
      providers: s.providers.includes(label) ? s.providers : [...s.providers, label],
    };
    const from = reply.provider.fallbackFrom;
    if (from) {
      await this.emit("warning", `${role}: ${from.name}:${from.model} failed (${from.code}); ${label} answered instead`, { data: { role, provider: reply.provider, fallbackFrom: from } });
    }
    const u = reply.usage;
    const total = this.s.usage.total;
    await this.emit("usage", `${role}: ${u.calls} call${u.calls === 1 ? "" : "s"}, ${u.inputTokens}+${u.outputTokens} tokens, $${u.costUsd.toFixed(4)}; task total $${total.costUsd.toFixed(4)}`, {
      data: { role, provider: reply.provider, call: u, total },
    });
  }

  /** Memory is advisory: a memory failure is logged and the loop goes on without it. */
  async safely<T>(fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (err) {
      this.io.log.warn({ err, taskId: this.s.task.taskId }, "memory step failed; going on without it");
      await this.emit("warning", `memory is unavailable: ${(err as Error).message}`);
      return undefined;
    }
  }

  /**
   * Classifies an LLM step's error: a stop, a failed iteration, or retry later.
   * @throws RetryLater for a retryable infrastructure error (the task message is redelivered)
   */
  async llmFailure(err: unknown, role: string): Promise<LlmOutcome> {
    // Calls that were paid for before the error (an unreadable reply, a re-ask) still count.
    const paid = Usage.safeParse((err as { details?: { usage?: unknown } } | undefined)?.details?.usage);
    if (paid.success && paid.data.calls > 0) this.s = { ...this.s, usage: addStepUsage(this.s.usage, role, this.s.iteration, paid.data) };
    if (hasCode(err, "budget_exceeded")) return this.stop("budget", `stopped: ${err.message}`, err);
    if (hasCode(err, "cancelled")) return this.stop("cancelled", "cancelled");
    if (hasCode(err, "llm_bad_reply")) {
      await this.emit("warning", `the ${role} reply could not be read: ${err.message}`);
      return "iteration_failed";
    }
    if (err instanceof LoopsmithError && err.retryable) throw new RetryLater(`${role}: ${err.message}`, { cause: err });
    const e = err instanceof LoopsmithError ? err : new LoopsmithError("internal", String((err as Error)?.message ?? err), { cause: err });
    return this.stop("error", `stopped: ${e.message}`, e);
  }

  /**
   * Runs exactly the hidden tests once against the final candidate (its own tests left out),
   * retrying a sandbox failure as a new attempt; null when the task has none.
   */
  async score(): Promise<TaskResult["hidden"]> {
    const hidden = this.s.task.hiddenTests;
    if (hidden.length === 0) return null;
    await this.emit("phase", "scoring on the hidden tests", { phase: "score" });
    const files = [...verdictFiles(this.s, { generatedTests: false }).files, ...hidden];
    let r: ExecutionResult | undefined;
    for (let attempt = 0; attempt < MAX_SANDBOX_ERRORS; attempt++) {
      r = await this.steps.execute(this.executionRequest("score", files, hidden.map((f) => f.path), attempt));
      if (r.status !== "sandbox_error") break;
      await this.emit("warning", `the sandbox failed while scoring (${r.reason ?? "unknown"}); trying again`, { phase: "score" });
    }
    const counts = testSummary(r as ExecutionResult);
    return { status: (r as ExecutionResult).status, passed: counts.passed, total: counts.total };
  }

  /** The repo-mode change for the result; a tree that cannot be read leaves it out (with a warning). */
  private async repoChangeSafely(): Promise<TaskResult["repo"]> {
    try {
      return await repoChange(this);
    } catch (err) {
      await this.emit("warning", `the change could not be computed: ${(err as Error).message}`);
      return undefined;
    }
  }

  /** Ends the task: scores a pass, remembers it, records the task, checkpoints, publishes the result. */
  async stop(reason: StopReason, message: string, error?: LoopsmithError): Promise<TaskState> {
    const passed = reason === "passed";
    const hidden = passed ? await this.score() : null;
    const s0 = this.s;
    if (passed && s0.candidate) {
      await this.safely(() =>
        this.steps.rememberSuccess({ v: 1, taskId: s0.task.taskId, iteration: s0.iteration, idempotencyKey: this.key("success"), language: s0.task.language, goal: s0.task.goal, files: s0.candidate?.files ?? [] }),
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
    await this.emit("result", message, { phase: "done", result, ...(s.dag ? { data: { dag: dagProgress(s.dag) } } : {}) });
    return this.s;
  }
}
