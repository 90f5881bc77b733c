/**
 * The loop's phases, one function each: `(s, run) → outcome`. A phase reads the state it
 * starts from (`s`), calls steps, reports events through the run, and returns where to go
 * next with what changed (`{ next, patch }`) or how the task stops; the run checkpoints
 * (`run.ts`). RECALL → PLAN → BUILD → GATE → REVIEW? → AUDIT? → EXECUTE → (pass: SCORE → stop)
 * | (fail: REMEMBER → REFLECT → BUILD …). Texts are in `event-texts.ts`.
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  testSummary,
  type Candidate,
  type ExecutionRequest,
  type FailureBrief,
  type Plan,
} from "@loopsmith/shared/contracts";
import { candidatePhase, isAgentTask } from "./agent/explore.js";
import { beforeExecute } from "./audit.js";
import { dagTexts, loopTexts, runTexts } from "./event-texts.js";
import { distilLessons } from "./lessons.js";
import { briefFromError, briefFromExecution, briefFromFindings, errorTextOf } from "./failure.js";
import { approveDependencies } from "./repo/approval.js";
import { applyCandidate, baseReader, policyOf, repoExecution } from "./repo/workspace.js";
import { executionRequest, recallScope, stepKey, treeBase } from "./requests.js";
import { MAX_SANDBOX_ERRORS, type PhaseOutcome, type TaskRun } from "./run.js";
import type { TaskState } from "./state.js";
import { evaluationNames, gateChange, tamperingConcerns } from "./tampering.js";
import { fallbackPlan, forCheckpoint, verdictFiles } from "./verdict.js";

const EMPTY_CANDIDATE = { files: [], tests: [], notes: "" };

/**
 * Where RECALL goes: PLAN; in agent mode straight to EXPLORE, iteration 1 (the model finds
 * the files itself, and a plan's summary and file list would only repeat the goal to it).
 */
function afterRecall(s: TaskState): PhaseOutcome {
  // A task that may decompose plans first (the plan decides whether it becomes a DAG).
  return isAgentTask(s) && !s.task.decompose
    ? { next: "explore", patch: { iteration: Math.max(1, s.iteration) } }
    : { next: "plan" };
}

/** RECALL: similar past failures and successes for the goal (not this task's own). */
export async function recallPhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  if (s.task.memory === "off") {
    await run.emit("step", loopTexts.memoryOff, { phase: "recall" });
    return afterRecall(s);
  }
  await run.emit("phase", loopTexts.recalling, { phase: "recall" });
  const recall = await run.safely(() =>
    run.steps.recall({
      v: 1,
      taskId: s.task.taskId,
      language: s.task.language,
      text: s.task.goal,
      k: 3,
      excludeSameTask: true,
      iteration: s.iteration,
      ...recallScope(s),
    }),
  );
  if (!recall) return afterRecall(s);
  await run.emit("step", loopTexts.recalled(recall.failures.length, recall.successes.length), {
    phase: "recall",
    data: { failureIds: recall.failures.map((f) => f.id) },
  });
  const after = afterRecall(s);
  return { ...after, patch: { ...after.patch, recall } };
}

/** PLAN (role `spec` when the task has no visible tests): one call; a fallback plan when unreadable. */
export async function planPhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  await run.emit("phase", loopTexts.planning, { phase: "plan" });
  let plan: Plan;
  let data: Record<string, unknown> = {};
  try {
    const role = s.task.acceptanceTests.length || s.task.repo ? "plan" : "spec";
    const reply = await run.llm(role, "plan", (head) =>
      run.steps.plan({ ...head, recall: s.recall, previousFailures: s.replanned ? s.failures.slice(-3) : [] }),
    );
    plan = reply.value;
    data = reply.data;
  } catch (err) {
    const outcome = await run.llmFailure(err, "plan");
    if (outcome !== "iteration_failed") return outcome;
    plan = fallbackPlan(s);
  }
  await run.emit("step", loopTexts.plan(plan.summary), { phase: "plan", data: { plan, ...data } });
  if (plan.decompose && s.task.repo && !s.task.parent && !s.replanned) {
    // Too big for one change, the planner says: the task goes on as a DAG task (dag/phases.ts).
    await run.emit("step", loopTexts.tooBig, { phase: "plan" });
    return { next: "plan", patch: { task: { ...s.task, decompose: true } } };
  }
  return { next: candidatePhase(s), patch: { plan, iteration: Math.max(1, s.iteration) } };
}

/** BUILD: a candidate from the plan, the last failure and its reflection. */
export async function buildPhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  await run.emit("iteration", loopTexts.iteration(s.iteration, s.task.limits.maxIterations));
  await run.emit("phase", loopTexts.building, { phase: "build" });
  try {
    // The builder sees a blocked candidate and why it was blocked, and that it is not in the tree.
    const failure =
      s.task.repo && s.failure?.status === "blocked"
        ? { ...s.failure, output: `${s.failure.output}\n\n${loopTexts.blockedNotApplied}` }
        : s.failure;
    const previous =
      s.candidate && failure
        ? {
            previous: {
              candidate: s.candidate,
              failure,
              ...(s.reflection ? { reflection: s.reflection } : {}),
            },
          }
        : {};
    const reply = await run.llm("build", "build", (head) =>
      run.steps.build({ ...head, plan: s.plan ?? fallbackPlan(s), ...previous, history: s.history, recall: s.recall }),
    );
    const data = { provider: reply.provider, ...reply.data };
    if (s.task.repo) return await applyRepoCandidate(s, run, reply.value, data);
    const c = reply.value;
    await run.emit(
      "step",
      loopTexts.candidate(
        c.files.map((f) => f.path),
        c.tests.map((f) => f.path),
      ),
      { phase: "build", data },
    );
    return { next: "gate", patch: { candidate: c } };
  } catch (err) {
    const outcome = await run.llmFailure(err, "build");
    if (outcome !== "iteration_failed") return outcome;
    return {
      next: "remember",
      patch: { failure: briefFromError(s.iteration, "llm_bad_reply", (err as Error).message) },
    };
  }
}

/** Repo mode, after BUILD: the edits applied to the tree, or an `edit_failed` iteration fed back to the builder. */
async function applyRepoCandidate(
  s: TaskState,
  run: TaskRun,
  reply: Candidate,
  data: Record<string, unknown>,
): Promise<PhaseOutcome> {
  // Over the tree the iteration starts from: never a blocked candidate's.
  const applied = await applyCandidate({ ...s, candidate: treeBase(s) }, run.steps, reply);
  const message = applied.message ?? "";
  if (!applied.ok) {
    await run.emit("step", loopTexts.editsFailed(message), { phase: "build", data });
    return {
      next: "remember",
      patch: { candidate: applied.candidate, failure: briefFromError(s.iteration, "edit_failed", message) },
    };
  }
  const c = applied.candidate;
  await run.emit(
    "step",
    loopTexts.repoCandidate(
      c.summary,
      c.files.map((f) => f.path),
      c.deleted ?? [],
    ),
    { phase: "build", data },
  );
  return { next: "gate", patch: { candidate: c } };
}

/**
 * GATE: the deterministic static check; a blocked candidate is a failed iteration, never run.
 * The gate is told the evaluation's names (the test command's words, the test files'
 * paths). In repo mode a tampering finding the base file already had is not the change's
 * (`gateChange`). A candidate the gate passes with evaluation-tampering concerns (non-blocking
 * `tampering.*` findings) goes to review even when the task's review is off.
 */
export async function gatePhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  await run.emit("phase", loopTexts.gate, { phase: "gate" });
  if (s.task.repo) {
    const stop = await repoPolicy(s, run);
    if (stop) return stop;
  }
  const afterGate = s.task.review ? "review" : beforeExecute(s);
  const files = [...(s.candidate?.files ?? []), ...(s.candidate?.tests ?? [])];
  if (files.length === 0) {
    await run.emit("step", loopTexts.gateNothing, { phase: "gate" });
    return { next: afterGate, patch: { concerns: [] } };
  }
  const evaluation = evaluationNames(
    [s.repo?.testCommand ?? s.task.repo?.testCommand],
    [...s.task.acceptanceTests, ...s.task.hiddenTests].map((f) => f.path),
  );
  const request = {
    v: 1 as const,
    taskId: s.task.taskId,
    iteration: s.iteration,
    idempotencyKey: stepKey(s, "gate"),
    language: s.task.language,
    files,
    evaluation,
  };
  const verdict = await gateChange(
    run.steps.gate,
    request,
    s.task.repo ? await baseReader(s, run.steps) : undefined,
    stepKey(s, "gate_base"),
  );
  if (verdict.blocked) {
    await run.emit("step", loopTexts.gateBlocked(verdict.findings.filter((f) => f.severity === "blocker")), {
      phase: "gate",
      data: { findings: verdict.findings },
    });
    return { next: "remember", patch: { failure: briefFromFindings(s.iteration, "blocked", verdict.findings) } };
  }
  const concerns = tamperingConcerns(verdict).slice(0, 50);
  if (concerns.length === 0) {
    await run.emit("step", loopTexts.gatePassed(verdict.findings.length), { phase: "gate" });
    return { next: afterGate, patch: { concerns: [] } };
  }
  await run.emit("step", loopTexts.gateConcerns(verdict.findings.length, concerns, s.task.review), {
    phase: "gate",
    data: { concerns },
  });
  return { next: "review", patch: { concerns } };
}

/** Repo mode, before the gate: runner configuration blocks; dependencies follow the task's policy. Undefined: the gate runs. */
async function repoPolicy(s: TaskState, run: TaskRun): Promise<PhaseOutcome | undefined> {
  const { decision, diff } = await policyOf(s, run.steps);
  if (decision.action === "run") return undefined;
  await run.emit("step", loopTexts.policy(decision.reason, diff), {
    phase: "gate",
    data: { policy: decision.action, paths: decision.paths, diff },
  });
  // Allowlisted, approved before, or asked about (waiting for a person on a terminal, else stopping with needs_approval).
  if (decision.action === "ask") return approveDependencies(s, run, decision, diff);
  const failure = briefFromFindings(s.iteration, "blocked", [
    { severity: "blocker", message: decision.reason, rule: "repo-policy" },
  ]);
  return { next: "remember", patch: { failure: { ...failure, output: `${failure.output}\n${diff}`.slice(0, 8_000) } } };
}

/**
 * REVIEW (when the task asks for it, or the gate had evaluation-tampering concerns): a
 * `blocker` finding fails the iteration without running; so does a review that does not
 * approve a candidate with concerns (the review decides what the gate could not), and so
 * does an unreadable review of one: a candidate with concerns runs, and can pass and be
 * committed, only after an approving review. The review's findings (else the concerns) are
 * the failure the builder sees, and the step event says why.
 */
export async function reviewPhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  const concerns = s.concerns ?? [];
  await run.emit("phase", loopTexts.reviewing(concerns.length > 0), { phase: "review" });
  try {
    const reply = await run.llm("review", "review", (head) =>
      run.steps.review({
        ...head,
        plan: s.plan ?? fallbackPlan(s),
        candidate: s.candidate ?? EMPTY_CANDIDATE,
        ...(concerns.length ? { concerns } : {}),
      }),
    );
    const review = reply.value;
    let blockers = review.findings.filter((f) => f.severity === "blocker");
    if (blockers.length === 0 && concerns.length > 0 && !review.approved) {
      // Not approved with concerns: the review's own findings say why; the gate's concerns when it gave none.
      blockers = review.findings.length ? review.findings : concerns;
    }
    await run.emit("step", loopTexts.review(review.approved, review.score, blockers), {
      phase: "review",
      data: { review, ...(concerns.length ? { concerns } : {}), ...reply.data },
    });
    if (blockers.length > 0) {
      return {
        next: "remember",
        patch: {
          failure: briefFromFindings(
            s.iteration,
            "blocked",
            blockers.map((f) => ({ ...f, severity: "blocker" as const })),
          ),
        },
      };
    }
  } catch (err) {
    const outcome = await run.llmFailure(err, "review");
    if (outcome !== "iteration_failed") return outcome;
    // An unreadable review approves nothing: a candidate with tampering concerns does not run.
    if (concerns.length > 0) {
      await run.emit("step", loopTexts.reviewUnreadConcerns(concerns.length), {
        phase: "review",
        data: { concerns },
      });
      return {
        next: "remember",
        patch: {
          failure: briefFromFindings(
            s.iteration,
            "blocked",
            concerns.map((f) => ({ ...f, severity: "blocker" as const })),
          ),
        },
      };
    }
  }
  return { next: beforeExecute(s) };
}

/**
 * EXECUTE: the visible and generated tests in a fresh sandbox. A sandbox failure is not the
 * candidate's: it is retried as a new attempt (`run.sandbox`, at most {@link MAX_SANDBOX_ERRORS} in a row).
 */
export async function executePhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  await run.emit("phase", loopTexts.executing, { phase: "execute" });
  let request: (attempt: number) => ExecutionRequest;
  if (s.task.repo) {
    request = (attempt) => repoExecution(s, "execute", s.candidate, attempt);
  } else {
    const { files, ignored, tests } = verdictFiles(s);
    // Said once: not again when the phase resumes after a sandbox failure.
    if (ignored.length && s.sandboxErrors === 0)
      await run.emit("warning", loopTexts.ignored(ignored), { phase: "execute", data: { ignored } });
    request = (attempt) => executionRequest(s, "execute", files, tests, attempt);
  }
  const result = await run.sandbox("execute", request, loopTexts.sandboxFailed);
  if (result.status === "command_not_found") {
    return {
      stop: "error",
      message: loopTexts.commandNotFound(result.reason ?? ""),
      error: new LoopsmithError("command_not_found", result.reason ?? "command not found"),
    };
  }
  if (result.status === "sandbox_error") {
    return {
      stop: "error",
      message: loopTexts.sandboxGaveUp(MAX_SANDBOX_ERRORS, result.reason),
      error: new LoopsmithError("sandbox_error", result.reason ?? "sandbox failure"),
    };
  }
  const failing = result.tests.filter((t) => t.status === "failed" || t.status === "error").map((t) => t.name);
  const shown = failing.slice(0, 20);
  await run.emit(
    "step",
    loopTexts.executed(s.iteration, result.status, failing, shown, testSummary(result).total, result.durationMs),
    {
      phase: "execute",
      data: {
        status: result.status,
        failingTests: shown,
        summary: result.summary,
        tests: result.tests.slice(0, 100).map((t) => ({ name: t.name, status: t.status })),
      },
    },
  );
  const lastExecution = forCheckpoint(result);
  const ran = s.task.repo && s.candidate ? { lastRunCandidate: s.candidate } : {};
  if (result.status === "passed")
    return {
      next: "score",
      patch: { lastExecution, ...ran, history: [...s.history, loopTexts.historyPassed(s.iteration)] },
    };
  return { next: "remember", patch: { lastExecution, ...ran, failure: briefFromExecution(s.iteration, result) } };
}

/**
 * SCORE, after a pass (of EXECUTE, or of a DAG task's INTEGRATE): exactly the hidden tests,
 * once, against the final candidate (its own generated tests left out), with the sandbox
 * retry; then the task stops as passed. Nothing to run when the task has no hidden tests.
 */
export async function scorePhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  // A pass after failures: what the failures taught, as lessons in memory (advisory).
  await distilLessons(s, run);
  const message = s.dag
    ? dagTexts.passed(s.dag.subtasks.length)
    : loopTexts.passed(s.iteration, s.concerns?.length ?? 0);
  const hidden = s.task.hiddenTests;
  if (hidden.length === 0) return { stop: "passed", message, hidden: null };
  await run.emit("phase", runTexts.scoring, { phase: "score" });
  const files = [...verdictFiles(s, { generatedTests: false }).files, ...hidden];
  const paths = hidden.map((f) => f.path);
  const r = await run.sandbox(
    "score",
    (attempt) => executionRequest(s, "score", files, paths, attempt),
    runTexts.scoreSandboxFailed,
  );
  const counts = testSummary(r);
  return { stop: "passed", message, hidden: { status: r.status, passed: counts.passed, total: counts.total } };
}

/** Longest code sent to memory with a failure, in characters (`FailureRecord.code`'s limit). */
const MEMORY_CODE_CHARS = 50_000;

/** The candidate's files (not its tests) as one text for memory, or "" when there is none. */
function codeOf(candidate: TaskState["candidate"]): string {
  return (candidate?.files ?? [])
    .map((f) => f.content)
    .join("\n")
    .slice(0, MEMORY_CODE_CHARS);
}

/** REMEMBER: store the failure, recall similar ones, apply the circuit breaker and the iteration limit. */
export async function rememberPhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  await run.emit("phase", loopTexts.remembering, { phase: "remember" });
  const failure = s.failure ?? briefFromError(s.iteration, "unknown", "no failure recorded");
  const code = codeOf(s.candidate);
  const errorText =
    s.lastExecution && failure.status !== "blocked" && failure.status !== "llm_bad_reply"
      ? errorTextOf(s.lastExecution)
      : failure.output.slice(0, 2_000) || failure.status;
  const stored = await run.safely(() =>
    run.steps.rememberFailure({
      v: 1,
      taskId: s.task.taskId,
      iteration: s.iteration,
      idempotencyKey: stepKey(s, "failure"),
      language: s.task.language,
      goal: s.task.goal,
      errorText,
      failingTests: failure.failingTests,
      outputTail: failure.output.slice(-4_000),
      status: failure.status,
      ...(code ? { code } : {}),
      ...(s.task.owner ? { owner: s.task.owner } : {}),
    }),
  );
  const signature = stored?.signature ?? `${failure.status}: ${errorText.split("\n")[0] ?? ""}`.slice(0, 300);
  const withSig: FailureBrief = { ...failure, signature };
  // The goal, the error, the failing tests and the code each count in recall (memory builds one text of them).
  const recall =
    s.task.memory === "off"
      ? undefined
      : await run.safely(() =>
          run.steps.recall({
            v: 1,
            taskId: s.task.taskId,
            language: s.task.language,
            text: s.task.goal,
            errorText,
            failingTests: failure.failingTests,
            ...(code ? { code } : {}),
            k: 3,
            excludeSameTask: true,
            iteration: s.iteration,
            ...recallScope(s),
          }),
        );
  const same = s.lastSignature === signature ? s.sameSignatureCount + 1 : 1;
  if (stored)
    await run.emit("step", loopTexts.stored(signature), {
      phase: "remember",
      data: { failureId: stored.id, signature },
    });
  if (recall)
    await run.emit("step", loopTexts.recalledSimilar(recall.failures.length), {
      phase: "recall",
      data: { failureIds: recall.failures.map((f) => f.id) },
    });
  const remembered: Partial<TaskState> = {
    failure: withSig,
    failures: [...s.failures, withSig],
    failureIds: stored ? [...s.failureIds, stored.id] : s.failureIds,
    ...(stored ? { failureId: stored.id } : {}),
    history: [...s.history, loopTexts.historyFailed(s.iteration, failure.status, signature, failure.failingTests)],
    lastSignature: signature,
    sameSignatureCount: same,
    ...(recall ? { recall } : {}),
  };
  const limits = s.task.limits;
  if (same >= limits.stuckAfter) {
    if (limits.replanOnStuck && !s.replanned && s.iteration < limits.maxIterations) {
      await run.emit("warning", loopTexts.replanning(same));
      return {
        next: "plan",
        patch: {
          ...remembered,
          replanned: true,
          sameSignatureCount: 0,
          iteration: s.iteration + 1,
          reflection: undefined,
        },
      };
    }
    return { stop: "stuck", message: loopTexts.stuck(same, signature), patch: remembered };
  }
  if (s.iteration >= limits.maxIterations)
    return { stop: "max_iterations", message: loopTexts.maxIterations(s.iteration, failure), patch: remembered };
  // Reflect on a candidate that ran or was blocked; a step that produced no candidate goes straight on.
  const reflectable = s.candidate && failure.status !== "llm_bad_reply" && failure.status !== "edit_failed";
  return reflectable
    ? { next: "reflect", patch: remembered }
    : { next: candidatePhase(s), patch: { ...remembered, iteration: s.iteration + 1 } };
}

/** REFLECT: root cause, hypothesis and fix plan for the next build; attached to the stored failure. */
export async function reflectPhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  await run.emit("phase", loopTexts.reflecting, { phase: "reflect" });
  try {
    const reply = await run.llm("reflect", "reflect", (head) =>
      run.steps.reflect({
        ...head,
        plan: s.plan ?? fallbackPlan(s),
        candidate: s.candidate ?? EMPTY_CANDIDATE,
        failure: s.failure ?? briefFromError(s.iteration, "unknown", ""),
        recall: s.recall,
      }),
    );
    const reflection = reply.value;
    await run.emit("step", loopTexts.reflection(reflection.rootCause), {
      phase: "reflect",
      data: { reflection, ...reply.data },
    });
    const failureId = s.failureId;
    if (failureId)
      await run.safely(() =>
        run.steps.attachFix({
          v: 1,
          taskId: s.task.taskId,
          iteration: s.iteration,
          idempotencyKey: stepKey(s, "fix"),
          failureId,
          reflection,
        }),
      );
    return { next: candidatePhase(s), patch: { reflection, iteration: s.iteration + 1 } };
  } catch (err) {
    const outcome = await run.llmFailure(err, "reflect");
    if (outcome !== "iteration_failed") return outcome;
    return { next: candidatePhase(s), patch: { reflection: undefined, iteration: s.iteration + 1 } };
  }
}
