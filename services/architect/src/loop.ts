/**
 * The loop of one task, as a resumable state machine:
 * RECALL → PLAN → BUILD → GATE → REVIEW? → EXECUTE → (pass: SCORE → DONE)
 *                                                  → (fail: REMEMBER → REFLECT → BUILD …)
 * Every phase ends with a checkpoint, so a conductor that dies resumes at the phase it was in.
 * Steps are injected ({@link Steps}); this file does no I/O of its own.
 */
import {
  LoopsmithError,
  Usage,
  hasCode,
  trimToTokens,
  type Budget,
  type BuildReply,
  type ExecutionResult,
  type FailureBrief,
  type FileChange,
  type Phase,
  type Plan,
  type ProviderInfo,
  type StopReason,
  type TaskBrief,
  type TaskEvent,
  type TaskResult,
} from "@loopsmith/shared";
import { briefFromError, briefFromExecution, briefFromFindings, errorTextOf } from "./failure.js";
import { addStepUsage, type TaskState } from "./state.js";
import type { LoopIO, Steps } from "./steps.js";

/** Sandbox infrastructure failures in a row before the task stops with `error`. */
export const MAX_SANDBOX_ERRORS = 3;

/** Thrown out of the loop when the task must be retried later (the message is redelivered). */
export class RetryLater extends Error {
  override readonly name = "RetryLater";
}

const key = (s: TaskState, step: string): string => `${s.task.taskId}/${s.iteration}/${step}`;

function brief(s: TaskState): TaskBrief {
  const t = s.task;
  return { goal: t.goal, language: t.language, files: t.files, acceptanceTests: t.acceptanceTests };
}

function budgetOf(s: TaskState): Budget {
  const b: Budget = {};
  const used = s.usage.total;
  if (s.task.limits.maxCostUsd !== undefined) b.remainingUsd = s.task.limits.maxCostUsd - used.costUsd;
  // Every token billed counts, cached ones included (the same sum the providers' estimate uses).
  const tokens = used.inputTokens + used.outputTokens + used.cacheReadTokens + used.cacheWriteTokens;
  if (s.task.limits.maxTokens !== undefined) b.remainingTokens = s.task.limits.maxTokens - tokens;
  return b;
}

/** The files an execution gets: starting files, the candidate over them, its tests and the visible tests. */
export function workspaceFiles(s: TaskState, extra: FileChange[] = []): FileChange[] {
  const byPath = new Map<string, FileChange>();
  for (const f of [...s.task.files, ...(s.candidate?.files ?? []), ...(s.candidate?.tests ?? []), ...s.task.acceptanceTests, ...extra]) {
    byPath.set(f.path, f);
  }
  return [...byPath.values()];
}

/** A plan made from the task alone, used when the planner's reply could not be read. */
export function fallbackPlan(s: TaskState): Plan {
  const firstLine = s.task.goal.split("\n").find((l) => l.trim()) ?? s.task.goal;
  return { summary: firstLine.slice(0, 500), acceptanceCriteria: [], steps: ["Implement the goal."], files: s.task.files.map((f) => f.path) };
}

/** Runs one task from its current phase to a final state. */
export async function runLoop(state: TaskState, steps: Steps, io: LoopIO): Promise<TaskState> {
  let s = state;

  const emit = async (kind: TaskEvent["kind"], message: string, extra: Partial<TaskEvent> = {}): Promise<void> => {
    const event: TaskEvent = {
      v: 1,
      taskId: s.task.taskId,
      seq: s.eventSeq,
      at: new Date().toISOString(),
      iteration: s.iteration,
      kind,
      message,
      ...extra,
    };
    s = { ...s, eventSeq: s.eventSeq + 1 };
    await io.emit(event);
  };
  const go = async (phase: Phase, patch: Partial<TaskState> = {}): Promise<void> => {
    s = { ...s, ...patch, phase };
    await io.checkpoint(s);
    io.heartbeat();
  };
  /** Adds a step's usage to the task's sums and publishes it as a `usage` event. */
  const noteProvider = async (role: string, reply: { usage: BuildReply["usage"]; provider: ProviderInfo }): Promise<void> => {
    const label = `${reply.provider.name}:${reply.provider.model}`;
    s = {
      ...s,
      usage: addStepUsage(s.usage, role, s.iteration, reply.usage),
      scripted: s.scripted || reply.provider.scripted,
      providers: s.providers.includes(label) ? s.providers : [...s.providers, label],
    };
    const u = reply.usage;
    const total = s.usage.total;
    await emit("usage", `${role}: ${u.calls} call${u.calls === 1 ? "" : "s"}, ${u.inputTokens}+${u.outputTokens} tokens, $${u.costUsd.toFixed(4)}; task total $${total.costUsd.toFixed(4)}`, {
      data: { role, provider: reply.provider, call: u, total },
    });
  };
  const stop = async (reason: StopReason, message: string, error?: LoopsmithError): Promise<TaskState> => {
    const passed = reason === "passed";
    const hiddenFiles = s.task.hiddenTests;
    let hidden: TaskResult["hidden"] = null;
    if (passed && hiddenFiles.length > 0) {
      await emit("phase", "scoring on the hidden tests", { phase: "score" });
      const r = await steps.execute(executionRequest(s, "score", [...workspaceFiles(s).filter((f) => !isGeneratedTest(s, f)), ...hiddenFiles]));
      hidden = { status: r.status, passed: r.tests.filter((t) => t.status === "passed").length, total: r.tests.length };
    }
    if (passed && s.candidate) {
      await safely(() =>
        steps.rememberSuccess({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: key(s, "success"), language: s.task.language, goal: s.task.goal, files: s.candidate?.files ?? [] }),
      );
    }
    s = finalState(s, reason, message, error, hidden);
    const result = s.result as TaskResult;
    await safely(() =>
      steps.recordTask({
        v: 1,
        taskId: s.task.taskId,
        goal: s.task.goal,
        language: s.task.language,
        status: result.status,
        stopReason: reason,
        iterations: s.iteration,
        usage: s.usage.total,
        durationMs: result.durationMs,
        scripted: s.scripted,
        finishedAt: new Date().toISOString(),
      }),
    );
    // Checkpoint the final state first, then publish the result (message id `taskId:result`):
    // a conductor that dies in between finds the task final and publishes the result again.
    await io.checkpoint({ ...s, eventSeq: s.eventSeq + 1 });
    await emit("result", message, { phase: "done", result });
    return s;
  };
  /** Memory is advisory: a memory failure is logged and the loop goes on without it. */
  const safely = async <T>(fn: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await fn();
    } catch (err) {
      io.log.warn({ err, taskId: s.task.taskId }, "memory step failed; going on without it");
      await emit("warning", `memory is unavailable: ${(err as Error).message}`);
      return undefined;
    }
  };
  /** Classifies an LLM step's error: a stop, a failed iteration, or retry later. */
  const llmFailure = async (err: unknown, role: string): Promise<TaskState | "iteration_failed"> => {
    // Calls that were paid for before the error (an unreadable reply, a re-ask) still count.
    const paid = Usage.safeParse((err as { details?: { usage?: unknown } } | undefined)?.details?.usage);
    if (paid.success && paid.data.calls > 0) s = { ...s, usage: addStepUsage(s.usage, role, s.iteration, paid.data) };
    if (hasCode(err, "budget_exceeded")) return stop("budget", `stopped: ${err.message}`, err);
    if (hasCode(err, "cancelled")) return stop("cancelled", "cancelled");
    if (hasCode(err, "llm_bad_reply")) {
      await emit("warning", `the ${role} reply could not be read: ${err.message}`);
      return "iteration_failed";
    }
    if (err instanceof LoopsmithError && err.retryable) throw new RetryLater(`${role}: ${err.message}`, { cause: err });
    const e = err instanceof LoopsmithError ? err : new LoopsmithError("internal", String((err as Error)?.message ?? err), { cause: err });
    return stop("error", `stopped: ${e.message}`, e);
  };

  for (;;) {
    if (s.status === "final") return s;
    if (io.cancelled()) return stop("cancelled", "cancelled on request");
    if (io.stopping()) throw new RetryLater("the conductor is stopping; the task resumes from its checkpoint");
    io.heartbeat();
    switch (s.phase) {
      case "recall": {
        await emit("phase", "recalling similar past tasks", { phase: "recall" });
        const recall = await safely(() =>
          steps.recall({ v: 1, taskId: s.task.taskId, language: s.task.language, text: s.task.goal, k: 3, excludeSameTask: true }),
        );
        if (recall) await emit("step", `recalled ${recall.failures.length} failures and ${recall.successes.length} successes`, { phase: "recall", data: { failureIds: recall.failures.map((f) => f.id) } });
        await go("plan", recall ? { recall } : {});
        break;
      }
      case "plan": {
        await emit("phase", "planning", { phase: "plan" });
        let plan: Plan;
        try {
          const reply = await steps.plan({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: key(s, "plan"), task: brief(s), recall: s.recall, previousFailures: s.replanned ? s.failures.slice(-3) : [], budget: budgetOf(s) });
          await noteProvider(s.task.acceptanceTests.length ? "plan" : "spec", reply);
          plan = reply.value;
        } catch (err) {
          const outcome = await llmFailure(err, "plan");
          if (outcome !== "iteration_failed") return outcome;
          plan = fallbackPlan(s);
        }
        await emit("step", `plan: ${plan.summary}`, { phase: "plan", data: { plan } });
        await go("build", { plan, iteration: Math.max(1, s.iteration) });
        break;
      }
      case "build": {
        await emit("iteration", `iteration ${s.iteration} of at most ${s.task.limits.maxIterations}`);
        await emit("phase", "building a candidate", { phase: "build" });
        try {
          const reply = await steps.build({
            v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: key(s, "build"), task: brief(s), plan: s.plan ?? fallbackPlan(s),
            ...(s.candidate && s.failure ? { previous: { candidate: s.candidate, failure: s.failure, ...(s.reflection ? { reflection: s.reflection } : {}) } } : {}),
            history: s.history, recall: s.recall, budget: budgetOf(s),
          });
          await noteProvider("build", reply);
          await emit("step", `candidate: ${reply.value.files.map((f) => f.path).join(", ")}${reply.value.tests.length ? ` + tests ${reply.value.tests.map((f) => f.path).join(", ")}` : ""}`, { phase: "build", data: { provider: reply.provider } });
          await go("gate", { candidate: reply.value });
        } catch (err) {
          const outcome = await llmFailure(err, "build");
          if (outcome !== "iteration_failed") return outcome;
          await go("remember", { failure: briefFromError(s.iteration, "llm_bad_reply", (err as Error).message) });
        }
        break;
      }
      case "gate": {
        await emit("phase", "static safety gate", { phase: "gate" });
        const files = [...(s.candidate?.files ?? []), ...(s.candidate?.tests ?? [])];
        const verdict = await steps.gate({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: key(s, "gate"), language: s.task.language, files });
        if (verdict.blocked) {
          await emit("step", `gate blocked the candidate: ${verdict.findings.filter((f) => f.severity === "blocker").map((f) => f.message).join("; ")}`, { phase: "gate", data: { findings: verdict.findings } });
          await go("remember", { failure: briefFromFindings(s.iteration, "blocked", verdict.findings) });
        } else {
          await emit("step", `gate passed (${verdict.findings.length} findings)`, { phase: "gate" });
          await go(s.task.review ? "review" : "execute");
        }
        break;
      }
      case "review": {
        await emit("phase", "reviewing the candidate", { phase: "review" });
        try {
          const reply = await steps.review({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: key(s, "review"), task: brief(s), plan: s.plan ?? fallbackPlan(s), candidate: s.candidate ?? { files: [], tests: [], notes: "" }, budget: budgetOf(s) });
          await noteProvider("review", reply);
          const blockers = reply.value.findings.filter((f) => f.severity === "blocker");
          await emit("step", `review: ${reply.value.approved ? "approved" : "not approved"}, score ${reply.value.score.toFixed(2)}`, { phase: "review", data: { review: reply.value } });
          if (blockers.length > 0) {
            await go("remember", { failure: briefFromFindings(s.iteration, "blocked", blockers) });
            break;
          }
        } catch (err) {
          const outcome = await llmFailure(err, "review");
          if (outcome !== "iteration_failed") return outcome;
        }
        await go("execute");
        break;
      }
      case "execute": {
        await emit("phase", "running the tests in the sandbox", { phase: "execute" });
        const result = await steps.execute(executionRequest(s, "execute", workspaceFiles(s)));
        if (result.status === "sandbox_error") {
          const n = s.sandboxErrors + 1;
          await emit("warning", `the sandbox failed (${result.reason ?? "unknown"}); not counted against the candidate`, { phase: "execute" });
          if (n >= MAX_SANDBOX_ERRORS) return stop("error", `stopped: the sandbox failed ${n} times in a row: ${result.reason ?? ""}`, new LoopsmithError("sandbox_error", result.reason ?? "sandbox failure"));
          await go("execute", { sandboxErrors: n });
          break;
        }
        s = { ...s, sandboxErrors: 0, lastExecution: forCheckpoint(result) };
        const failing = result.tests.filter((t) => t.status === "failed" || t.status === "error").map((t) => t.name);
        await emit("step", `iteration ${s.iteration}: ${result.status}${failing.length ? `; failing tests: ${failing.join(", ")}` : ""} (${result.tests.length} tests, ${Math.round(result.durationMs)} ms)`, {
          phase: "execute",
          data: { status: result.status, failingTests: failing, tests: result.tests.map((t) => ({ name: t.name, status: t.status })) },
        });
        if (result.status === "passed") {
          s = { ...s, history: [...s.history, `iteration ${s.iteration}: passed`] };
          return stop("passed", `passed after ${s.iteration} iteration${s.iteration === 1 ? "" : "s"}`);
        }
        await go("remember", { failure: briefFromExecution(s.iteration, result) });
        break;
      }
      case "remember": {
        await emit("phase", "remembering the failure", { phase: "remember" });
        const failure = s.failure ?? briefFromError(s.iteration, "unknown", "no failure recorded");
        const errorText = s.lastExecution && failure.status !== "blocked" && failure.status !== "llm_bad_reply" ? errorTextOf(s.lastExecution) : failure.output.slice(0, 2_000) || failure.status;
        const stored = await safely(() =>
          steps.rememberFailure({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: key(s, "failure"), language: s.task.language, goal: s.task.goal, errorText, failingTests: failure.failingTests, outputTail: failure.output.slice(-4_000), status: failure.status }),
        );
        const signature = stored?.signature ?? `${failure.status}: ${errorText.split("\n")[0] ?? ""}`.slice(0, 300);
        const withSig: FailureBrief = { ...failure, signature };
        const recall = await safely(() =>
          steps.recall({ v: 1, taskId: s.task.taskId, language: s.task.language, text: `${signature}\n${s.task.goal}`, errorText, k: 3, excludeSameTask: false }),
        );
        const same = s.lastSignature === signature ? s.sameSignatureCount + 1 : 1;
        if (stored) await emit("step", `failure stored as ${stored.id} (signature: ${signature})`, { phase: "remember", data: { failureId: stored.id, signature } });
        if (recall) await emit("step", `recalled ${recall.failures.length} similar failures`, { phase: "recall", data: { failureIds: recall.failures.map((f) => f.id) } });
        s = {
          ...s,
          failure: withSig,
          failures: [...s.failures, withSig],
          failureIds: stored ? [...s.failureIds, stored.id] : s.failureIds,
          ...(stored ? { failureId: stored.id } : {}),
          history: [...s.history, `iteration ${s.iteration}: ${failure.status} (${signature})${failure.failingTests.length ? ` failing ${failure.failingTests.join(", ")}` : ""}`],
          lastSignature: signature,
          sameSignatureCount: same,
          ...(recall ? { recall } : {}),
        };
        if (same >= s.task.limits.stuckAfter) {
          if (s.task.limits.replanOnStuck && !s.replanned && s.iteration < s.task.limits.maxIterations) {
            await emit("warning", `the same error ${same} times in a row; re-planning once`);
            await go("plan", { replanned: true, sameSignatureCount: 0, iteration: s.iteration + 1, reflection: undefined });
            break;
          }
          return stop("stuck", `stopped: the same error signature ${same} times in a row (${signature})`);
        }
        if (s.iteration >= s.task.limits.maxIterations) return stop("max_iterations", `stopped after ${s.iteration} iterations without passing`);
        // Reflect on a candidate that ran or was blocked; a step that produced no candidate goes straight on.
        const reflectable = s.candidate && failure.status !== "llm_bad_reply";
        await go(reflectable ? "reflect" : "build", reflectable ? {} : { iteration: s.iteration + 1 });
        break;
      }
      case "reflect": {
        await emit("phase", "reflecting on the failure", { phase: "reflect" });
        try {
          const reply = await steps.reflect({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: key(s, "reflect"), task: brief(s), plan: s.plan ?? fallbackPlan(s), candidate: s.candidate ?? { files: [], tests: [], notes: "" }, failure: s.failure ?? briefFromError(s.iteration, "unknown", ""), recall: s.recall, budget: budgetOf(s) });
          await noteProvider("reflect", reply);
          await emit("step", `reflection: ${reply.value.rootCause}`, { phase: "reflect", data: { reflection: reply.value } });
          const failureId = s.failureId;
          if (failureId) {
            await safely(() => steps.attachFix({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: key(s, "fix"), failureId, reflection: reply.value }));
          }
          await go("build", { reflection: reply.value, iteration: s.iteration + 1 });
        } catch (err) {
          const outcome = await llmFailure(err, "reflect");
          if (outcome !== "iteration_failed") return outcome;
          await go("build", { reflection: undefined, iteration: s.iteration + 1 });
        }
        break;
      }
      case "score":
      case "done":
        return stop(s.result?.stopReason ?? "error", s.result?.message ?? "finished");
    }
  }
}

/** The state with its final result; pure. */
export function finalState(s: TaskState, reason: StopReason, message: string, error?: LoopsmithError, hidden: TaskResult["hidden"] = null): TaskState {
  const passed = reason === "passed";
  const result: TaskResult = {
    v: 1,
    taskId: s.task.taskId,
    status: passed ? "passed" : reason === "cancelled" ? "cancelled" : reason === "error" ? "error" : "failed",
    stopReason: reason,
    iterations: s.iteration,
    files: s.candidate?.files ?? [],
    tests: s.candidate?.tests ?? [],
    lastExecution: s.lastExecution ? { status: s.lastExecution.status, tests: s.lastExecution.tests, durationMs: s.lastExecution.durationMs } : null,
    hidden,
    failureIds: s.failureIds,
    usage: s.usage,
    scripted: s.scripted,
    providers: s.providers,
    durationMs: Date.now() - s.startedAtMs,
    message,
    ...(error ? { error: error.toData() } : {}),
  };
  return { ...s, status: "final", phase: "done", result };
}

/** Output kept in a checkpoint per stream, in characters (head and tail); the state must fit a NATS message. */
export const CHECKPOINT_OUTPUT_CHARS = 16_000;

/** An execution result small enough to checkpoint: stdout and stderr trimmed, test messages capped. */
export function forCheckpoint(r: ExecutionResult): ExecutionResult {
  const cut = (t: string): string => (t.length > CHECKPOINT_OUTPUT_CHARS ? trimToTokens(t, CHECKPOINT_OUTPUT_CHARS / 4) : t);
  const trimmed = r.stdout.length > CHECKPOINT_OUTPUT_CHARS || r.stderr.length > CHECKPOINT_OUTPUT_CHARS;
  return {
    ...r,
    stdout: cut(r.stdout),
    stderr: cut(r.stderr),
    truncated: r.truncated || trimmed,
    tests: r.tests.slice(0, 500).map((t) => (t.message && t.message.length > 2_000 ? { ...t, message: t.message.slice(0, 2_000) } : t)),
  };
}

function isGeneratedTest(s: TaskState, f: FileChange): boolean {
  return (s.candidate?.tests ?? []).some((t) => t.path === f.path);
}

function executionRequest(s: TaskState, step: string, files: FileChange[]) {
  return {
    v: 1 as const,
    taskId: s.task.taskId,
    iteration: s.iteration,
    idempotencyKey: `${s.task.taskId}/${s.iteration}/${step}${s.sandboxErrors ? `_retry${s.sandboxErrors}` : ""}`,
    language: s.task.language,
    files,
    timeoutMs: s.task.limits.runTimeoutMs,
    memoryMb: s.task.limits.memoryMb,
  };
}

