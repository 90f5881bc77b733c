/**
 * The loop's phases, one function each. A phase advances `run.s` and checkpoints with
 * `run.go(next)`; it returns a final state when the task stops, or nothing to go on.
 * RECALL → PLAN → BUILD → GATE → REVIEW? → EXECUTE → (pass: stop) | (fail: REMEMBER → REFLECT → BUILD …)
 */
import { LoopsmithError, testSummary, type Candidate, type FailureBrief, type Plan } from "@loopsmith/shared";
import { briefFromError, briefFromExecution, briefFromFindings, errorTextOf } from "./failure.js";
import { MAX_SANDBOX_ERRORS, type TaskRun } from "./run.js";
import type { TaskState } from "./state.js";
import { fallbackPlan, forCheckpoint, verdictFiles } from "./verdict.js";
import { applyCandidate, baseReader, policyOf, repoExecution } from "./repo/phases.js";
import { evaluationNames, findingPlace, gateChange, tamperingConcerns } from "./tampering.js";

/** A phase's outcome: a final state (the task stopped), or undefined (go on). */
export type PhaseOutcome = TaskState | undefined;

const EMPTY_CANDIDATE = { files: [], tests: [], notes: "" };

/** RECALL: similar past failures and successes for the goal (not this task's own). */
export async function recallPhase(run: TaskRun): Promise<PhaseOutcome> {
  const s = run.s;
  if (s.task.memory === "off") {
    await run.emit("step", "memory is off for this task: nothing recalled", { phase: "recall" });
    await run.go("plan");
    return undefined;
  }
  await run.emit("phase", "recalling similar past tasks", { phase: "recall" });
  const recall = await run.safely(() => run.steps.recall({ v: 1, taskId: s.task.taskId, language: s.task.language, text: s.task.goal, k: 3, excludeSameTask: true, ...run.recallScope() }));
  if (recall) await run.emit("step", `recalled ${recall.failures.length} failures and ${recall.successes.length} successes`, { phase: "recall", data: { failureIds: recall.failures.map((f) => f.id) } });
  await run.go("plan", recall ? { recall } : {});
  return undefined;
}

/** PLAN (role `spec` when the task has no visible tests): one call; a fallback plan when unreadable. */
export async function planPhase(run: TaskRun): Promise<PhaseOutcome> {
  const s = run.s;
  await run.emit("phase", "planning", { phase: "plan" });
  let plan: Plan;
  let replyData: Record<string, unknown> = {};
  try {
    const role = s.task.acceptanceTests.length || s.task.repo ? "plan" : "spec";
    const callsBefore = run.callsBefore(role);
    const reply = await run.steps.plan({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: run.key("plan"), callsBefore, ...run.taskScript(), task: await run.brief(), recall: s.recall, previousFailures: s.replanned ? s.failures.slice(-3) : [], budget: run.budget() });
    await run.noteProvider(role, reply);
    plan = reply.value;
    replyData = run.llmData(role, callsBefore, reply);
  } catch (err) {
    const outcome = await run.llmFailure(err, "plan");
    if (outcome !== "iteration_failed") return outcome;
    plan = fallbackPlan(run.s);
  }
  await run.emit("step", `plan: ${plan.summary}`, { phase: "plan", data: { plan, ...replyData } });
  if (plan.decompose && s.task.repo && !s.task.parent && !s.replanned) {
    // Too big for one change, the planner says: the task goes on as a DAG task (dag/phases.ts).
    await run.emit("step", "the goal is too big for one change: planning it as subtasks", { phase: "plan" });
    await run.go("plan", { task: { ...run.s.task, decompose: true } });
    return undefined;
  }
  await run.go("build", { plan, iteration: Math.max(1, run.s.iteration) });
  return undefined;
}

/** BUILD: a candidate from the plan, the last failure and its reflection. */
export async function buildPhase(run: TaskRun): Promise<PhaseOutcome> {
  const s = run.s;
  await run.emit("iteration", `iteration ${s.iteration} of at most ${s.task.limits.maxIterations}`);
  await run.emit("phase", "building a candidate", { phase: "build" });
  try {
    const callsBefore = run.callsBefore("build");
    const reply = await run.steps.build({
      v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: run.key("build"), callsBefore, ...run.taskScript(), task: await run.brief(), plan: s.plan ?? fallbackPlan(s),
      ...(s.candidate && s.failure ? { previous: { candidate: s.candidate, failure: s.failure, ...(s.reflection ? { reflection: s.reflection } : {}) } } : {}),
      history: s.history, recall: s.recall, budget: run.budget(),
    });
    await run.noteProvider("build", reply);
    const data = { provider: reply.provider, ...run.llmData("build", callsBefore, reply) };
    if (s.task.repo) return await applyRepoCandidate(run, reply.value, data);
    const c = reply.value;
    await run.emit("step", `candidate: ${c.files.map((f) => f.path).join(", ")}${c.tests.length ? ` + tests ${c.tests.map((f) => f.path).join(", ")}` : ""}`, { phase: "build", data });
    await run.go("gate", { candidate: c });
  } catch (err) {
    const outcome = await run.llmFailure(err, "build");
    if (outcome !== "iteration_failed") return outcome;
    await run.go("remember", { failure: briefFromError(run.s.iteration, "llm_bad_reply", (err as Error).message) });
  }
  return undefined;
}

/**
 * GATE: the deterministic static check; a blocked candidate is a failed iteration, never run.
 * The gate is told the evaluation's names (the test command's words, the test files'
 * paths). In repo mode a tampering finding the base file already had is not the change's
 * (`gateChange`). A candidate the gate passes with evaluation-tampering concerns (non-blocking
 * `tampering.*` findings) goes to review even when the task's review is off.
 */
export async function gatePhase(run: TaskRun): Promise<PhaseOutcome> {
  const s = run.s;
  await run.emit("phase", "static safety gate", { phase: "gate" });
  if (s.task.repo) {
    const stop = await repoPolicy(run);
    if (stop !== "run") return stop;
  }
  const files = [...(s.candidate?.files ?? []), ...(s.candidate?.tests ?? [])];
  if (files.length === 0) {
    await run.emit("step", "gate passed (nothing to check: the change only deletes files)", { phase: "gate" });
    await run.go(s.task.review ? "review" : "execute", { concerns: [] });
    return undefined;
  }
  const evaluation = evaluationNames([s.repo?.testCommand ?? s.task.repo?.testCommand], [...s.task.acceptanceTests, ...s.task.hiddenTests].map((f) => f.path));
  const request = { v: 1 as const, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: run.key("gate"), language: s.task.language, files, evaluation };
  const verdict = await gateChange(run.steps.gate, request, s.task.repo ? await baseReader(run) : undefined, run.key("gate_base"));
  if (verdict.blocked) {
    const blockers = verdict.findings.filter((f) => f.severity === "blocker").map((f) => `${f.message}${f.path ? ` (${findingPlace(f)})` : ""}`);
    await run.emit("step", `gate blocked the candidate: ${blockers.join("; ")}`, { phase: "gate", data: { findings: verdict.findings } });
    await run.go("remember", { failure: briefFromFindings(s.iteration, "blocked", verdict.findings) });
    return undefined;
  }
  const concerns = tamperingConcerns(verdict).slice(0, 50);
  if (concerns.length === 0) {
    await run.emit("step", `gate passed (${verdict.findings.length} findings)`, { phase: "gate" });
    await run.go(s.task.review ? "review" : "execute", { concerns: [] });
    return undefined;
  }
  const listed = concerns.slice(0, 5).map((f) => `${f.message} (${findingPlace(f)})`).join("; ");
  await run.emit(
    "step",
    `gate passed (${verdict.findings.length} findings) with possible evaluation tampering; the candidate goes to review${s.task.review ? "" : " although the task's review is off"}: ${listed}${concerns.length > 5 ? ` and ${concerns.length - 5} more` : ""}`,
    { phase: "gate", data: { concerns } },
  );
  await run.go("review", { concerns });
  return undefined;
}

/**
 * REVIEW (when the task asks for it, or the gate had evaluation-tampering concerns): a
 * `blocker` finding fails the iteration without running; so does a review that does not
 * approve a candidate with concerns (the review decides what the gate could not). The
 * review's findings are the failure the builder sees, and the step event says why.
 */
export async function reviewPhase(run: TaskRun): Promise<PhaseOutcome> {
  const s = run.s;
  const concerns = s.concerns ?? [];
  await run.emit("phase", concerns.length ? "reviewing the candidate (the gate saw possible evaluation tampering)" : "reviewing the candidate", { phase: "review" });
  try {
    const callsBefore = run.callsBefore("review");
    const reply = await run.steps.review({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: run.key("review"), callsBefore, ...run.taskScript(), task: await run.brief(), plan: s.plan ?? fallbackPlan(s), candidate: s.candidate ?? EMPTY_CANDIDATE, ...(concerns.length ? { concerns } : {}), budget: run.budget() });
    await run.noteProvider("review", reply);
    const review = reply.value;
    let blockers = review.findings.filter((f) => f.severity === "blocker");
    if (blockers.length === 0 && concerns.length > 0 && !review.approved) {
      // Not approved with concerns: the review's own findings say why; the gate's concerns when it gave none.
      blockers = review.findings.length ? review.findings : concerns;
    }
    const why = blockers.map((f) => `${f.message}${f.path ? ` (${findingPlace(f)})` : ""}`).join("; ");
    await run.emit("step", `review: ${review.approved ? "approved" : "not approved"}, score ${review.score.toFixed(2)}${why ? `: ${why}` : ""}`, { phase: "review", data: { review, ...(concerns.length ? { concerns } : {}), ...run.llmData("review", callsBefore, reply) } });
    if (blockers.length > 0) {
      await run.go("remember", { failure: briefFromFindings(s.iteration, "blocked", blockers.map((f) => ({ ...f, severity: "blocker" as const }))) });
      return undefined;
    }
  } catch (err) {
    const outcome = await run.llmFailure(err, "review");
    if (outcome !== "iteration_failed") return outcome;
  }
  await run.go("execute");
  return undefined;
}

/**
 * EXECUTE: the visible and generated tests in a fresh sandbox. A sandbox failure is not the
 * candidate's: it is retried as a new attempt (at most {@link MAX_SANDBOX_ERRORS} in a row).
 */
export async function executePhase(run: TaskRun): Promise<PhaseOutcome> {
  await run.emit("phase", "running the tests in the sandbox", { phase: "execute" });
  let request;
  if (run.s.task.repo) {
    request = repoExecution(run, "execute", run.s.candidate);
  } else {
    const { files, ignored, tests } = verdictFiles(run.s);
    if (ignored.length && run.s.sandboxErrors === 0) {
      await run.emit("warning", `the candidate's ${ignored.join(", ")} ${ignored.length === 1 ? "was" : "were"} not used: a candidate may not configure the test runner or replace the acceptance tests`, { phase: "execute", data: { ignored } });
    }
    request = run.executionRequest("execute", files, tests);
  }
  const result = await run.steps.execute(request);
  if (result.status === "command_not_found") {
    return run.stop("error", `stopped: the test command is not found in the sandbox: ${result.reason ?? ""}`, new LoopsmithError("command_not_found", result.reason ?? "command not found"));
  }
  if (result.status === "sandbox_error") {
    const n = run.s.sandboxErrors + 1;
    await run.emit("warning", `the sandbox failed (${result.reason ?? "unknown"}); not counted against the candidate`, { phase: "execute" });
    if (n >= MAX_SANDBOX_ERRORS) return run.stop("error", `stopped: the sandbox failed ${n} times in a row: ${result.reason ?? ""}`, new LoopsmithError("sandbox_error", result.reason ?? "sandbox failure"));
    await run.go("execute", { sandboxErrors: n });
    return undefined;
  }
  run.s = { ...run.s, sandboxErrors: 0, lastExecution: forCheckpoint(result) };
  const failing = result.tests.filter((t) => t.status === "failed" || t.status === "error").map((t) => t.name);
  const shown = failing.slice(0, 20);
  await run.emit("step", `iteration ${run.s.iteration}: ${result.status}${failing.length ? `; failing tests: ${shown.join(", ")}${failing.length > shown.length ? ` and ${failing.length - shown.length} more` : ""}` : ""} (${testSummary(result).total} tests, ${Math.round(result.durationMs)} ms)`, {
    phase: "execute",
    data: { status: result.status, failingTests: shown, summary: result.summary, tests: result.tests.slice(0, 100).map((t) => ({ name: t.name, status: t.status })) },
  });
  if (result.status === "passed") {
    run.s = { ...run.s, history: [...run.s.history, `iteration ${run.s.iteration}: passed`] };
    return run.stop("passed", `passed after ${run.s.iteration} iteration${run.s.iteration === 1 ? "" : "s"}`);
  }
  await run.go("remember", { failure: briefFromExecution(run.s.iteration, result) });
  return undefined;
}

/** Longest code sent to memory with a failure, in characters (`FailureRecord.code`'s limit). */
const MEMORY_CODE_CHARS = 50_000;

/** The candidate's files (not its tests) as one text for memory, or "" when there is none. */
function codeOf(candidate: TaskState["candidate"]): string {
  return (candidate?.files ?? []).map((f) => f.content).join("\n").slice(0, MEMORY_CODE_CHARS);
}

/** REMEMBER: store the failure, recall similar ones, apply the circuit breaker and the iteration limit. */
export async function rememberPhase(run: TaskRun): Promise<PhaseOutcome> {
  const s = run.s;
  await run.emit("phase", "remembering the failure", { phase: "remember" });
  const failure = s.failure ?? briefFromError(s.iteration, "unknown", "no failure recorded");
  const code = codeOf(s.candidate);
  const errorText = s.lastExecution && failure.status !== "blocked" && failure.status !== "llm_bad_reply" ? errorTextOf(s.lastExecution) : failure.output.slice(0, 2_000) || failure.status;
  const stored = await run.safely(() =>
    run.steps.rememberFailure({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: run.key("failure"), language: s.task.language, goal: s.task.goal, errorText, failingTests: failure.failingTests, outputTail: failure.output.slice(-4_000), status: failure.status, ...(code ? { code } : {}), ...(s.task.owner ? { owner: s.task.owner } : {}) }),
  );
  const signature = stored?.signature ?? `${failure.status}: ${errorText.split("\n")[0] ?? ""}`.slice(0, 300);
  const withSig: FailureBrief = { ...failure, signature };
  // The goal, the error, the failing tests and the code each count in recall (memory builds one text of them).
  const recall = s.task.memory === "off" ? undefined : await run.safely(() => run.steps.recall({ v: 1, taskId: s.task.taskId, language: s.task.language, text: s.task.goal, errorText, failingTests: failure.failingTests, ...(code ? { code } : {}), k: 3, excludeSameTask: true, ...run.recallScope() }));
  const same = s.lastSignature === signature ? s.sameSignatureCount + 1 : 1;
  if (stored) await run.emit("step", `failure stored in memory (signature: ${signature})`, { phase: "remember", data: { failureId: stored.id, signature } });
  if (recall) await run.emit("step", `recalled ${recall.failures.length} similar failures`, { phase: "recall", data: { failureIds: recall.failures.map((f) => f.id) } });
  run.s = {
    ...run.s,
    failure: withSig,
    failures: [...run.s.failures, withSig],
    failureIds: stored ? [...run.s.failureIds, stored.id] : run.s.failureIds,
    ...(stored ? { failureId: stored.id } : {}),
    history: [...run.s.history, `iteration ${s.iteration}: ${failure.status} (${signature})${failure.failingTests.length ? ` failing ${failure.failingTests.join(", ")}` : ""}`],
    lastSignature: signature,
    sameSignatureCount: same,
    ...(recall ? { recall } : {}),
  };
  const limits = s.task.limits;
  if (same >= limits.stuckAfter) {
    if (limits.replanOnStuck && !run.s.replanned && s.iteration < limits.maxIterations) {
      await run.emit("warning", `the same error ${same} times in a row; re-planning once`);
      await run.go("plan", { replanned: true, sameSignatureCount: 0, iteration: s.iteration + 1, reflection: undefined });
      return undefined;
    }
    return run.stop("stuck", `stopped: the same error signature ${same} times in a row (${signature})`);
  }
  if (s.iteration >= limits.maxIterations) return run.stop("max_iterations", `stopped after ${s.iteration} iterations without passing`);
  // Reflect on a candidate that ran or was blocked; a step that produced no candidate goes straight on.
  const reflectable = run.s.candidate && failure.status !== "llm_bad_reply" && failure.status !== "edit_failed";
  await run.go(reflectable ? "reflect" : "build", reflectable ? {} : { iteration: s.iteration + 1 });
  return undefined;
}

/** REFLECT: root cause, hypothesis and fix plan for the next build; attached to the stored failure. */
export async function reflectPhase(run: TaskRun): Promise<PhaseOutcome> {
  const s = run.s;
  await run.emit("phase", "reflecting on the failure", { phase: "reflect" });
  try {
    const callsBefore = run.callsBefore("reflect");
    const reply = await run.steps.reflect({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: run.key("reflect"), callsBefore, ...run.taskScript(), task: await run.brief(), plan: s.plan ?? fallbackPlan(s), candidate: s.candidate ?? EMPTY_CANDIDATE, failure: s.failure ?? briefFromError(s.iteration, "unknown", ""), recall: s.recall, budget: run.budget() });
    await run.noteProvider("reflect", reply);
    await run.emit("step", `reflection: ${reply.value.rootCause}`, { phase: "reflect", data: { reflection: reply.value, ...run.llmData("reflect", callsBefore, reply) } });
    const failureId = run.s.failureId;
    if (failureId) {
      await run.safely(() => run.steps.attachFix({ v: 1, taskId: s.task.taskId, iteration: s.iteration, idempotencyKey: run.key("fix"), failureId, reflection: reply.value }));
    }
    await run.go("build", { reflection: reply.value, iteration: s.iteration + 1 });
  } catch (err) {
    const outcome = await run.llmFailure(err, "reflect");
    if (outcome !== "iteration_failed") return outcome;
    await run.go("build", { reflection: undefined, iteration: s.iteration + 1 });
  }
  return undefined;
}

/** Repo mode, after BUILD: the edits applied to the tree, or an `edit_failed` iteration fed back to the builder. */
async function applyRepoCandidate(run: TaskRun, reply: Candidate, data: Record<string, unknown>): Promise<PhaseOutcome> {
  const applied = await applyCandidate(run, reply);
  if (!applied.ok) {
    await run.emit("step", `the edits could not be applied: ${(applied.message ?? "").split("\n")[0] ?? ""}`, { phase: "build", data });
    await run.go("remember", { candidate: applied.candidate, failure: briefFromError(run.s.iteration, "edit_failed", applied.message ?? "") });
    return undefined;
  }
  const c = applied.candidate;
  const what = [...c.files.map((f) => f.path), ...(c.deleted ?? []).map((p) => `-${p}`)];
  await run.emit("step", `candidate: ${c.summary ?? "edits"} (${what.join(", ") || "no change"})`, { phase: "build", data });
  await run.go("gate", { candidate: c });
  return undefined;
}

/** Repo mode, before the gate: runner configuration blocks; dependencies follow the task's policy. */
async function repoPolicy(run: TaskRun): Promise<PhaseOutcome | "run"> {
  const { decision, diff } = await policyOf(run);
  if (decision.action === "run") return "run";
  await run.emit("step", `${decision.reason}\n${diff}`, { phase: "gate", data: { policy: decision.action, paths: decision.paths, diff } });
  if (decision.action === "ask") return run.stop("needs_approval", `stopped for approval: ${decision.reason}`);
  const failure = briefFromFindings(run.s.iteration, "blocked", [{ severity: "blocker", message: decision.reason, rule: "repo-policy" }]);
  await run.go("remember", { failure: { ...failure, output: `${failure.output}\n${diff}`.slice(0, 8_000) } });
  return undefined;
}
