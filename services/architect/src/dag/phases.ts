/**
 * A DAG task's phases (a repo-mode task with `decompose`):
 * PREPARE → RECALL → PLAN (a plan of subtasks, validated; refused once → asked again; refused
 * twice → `invalid_plan`) → SCHEDULE (subtasks as child tasks, `scheduler.ts`) → INTEGRATE
 * (the task's tests on the merged tree) → pass | REFLECT on the integration failure: one
 * subtask re-opened → SCHEDULE … Every step is checkpointed in the task's state (`dag`), so a
 * conductor that dies resumes with finished subtasks kept and running ones re-attached.
 * Each phase is `(s, run) → outcome` like the loop's (`phases.ts`); a pass goes to SCORE there.
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  dagProgress,
  dependencyOrder,
  emptyUsage,
  testSummary,
  validateDagPlan,
  type DagPlan,
  type DagPlanProblem,
  type DagState,
  type Plan,
  type SubtaskState,
  type TaskEvent,
  type TaskInput,
  type TaskLimits,
  type Usage,
} from "@loopsmith/shared/contracts";
import { ownerOfTask } from "@loopsmith/shared/bus";
import { NO_NEED, budgetOver, budgetStopText } from "@loopsmith/shared/llm";
import { dagTexts, runTexts } from "../event-texts.js";
import { briefFromExecution } from "../failure.js";
import { readBaseFile } from "../repo/context.js";
import { repoExecution, repoOf } from "../repo/workspace.js";
import { timeLeftMs } from "../requests.js";
import type { PhaseOutcome, TaskRun } from "../run.js";
import { addStepUsage, type TaskState } from "../state.js";
import type { ChildTasks } from "../steps.js";
import { forCheckpoint } from "../verdict.js";
import { dagOutcome, reopenSubtask, runDag, startDag, type AttemptOutcome, type AttemptRequest } from "./scheduler.js";
import { composeTree, subtaskTestCommand, subtaskTree } from "./tree.js";

/** Backoff between a subtask's attempts, in ms (p-retry: ×2 per retry, times a random factor in [1, 2)). */
export const SUBTASK_BACKOFF = { minMs: 1_000, maxMs: 30_000 };
/** How often a running DAG looks at the task's cancel and the conductor's stop, in ms. */
const WATCH_MS = 250;
/** The shortest wall-clock limit a task may have, in ms (`TaskLimits.timeLimitMs`). */
const MIN_TIME_LIMIT_MS = 1_000;
/** The usage role the children's usage is summed under in the parent's report. */
export const SUBTASKS_ROLE = "subtasks";

function childrenOf(run: TaskRun): ChildTasks {
  if (!run.steps.children)
    throw new LoopsmithError("internal", "this conductor cannot run DAG tasks (no child-task access)");
  return run.steps.children;
}

/** PLAN for a DAG task: a plan of subtasks, validated before anything runs. */
export async function dagPlanPhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  if (!s.task.repo)
    return {
      stop: "error",
      message: dagTexts.needsRepo,
      error: new LoopsmithError("bad_request", "decompose without a repository"),
    };
  await run.emit("phase", dagTexts.planning, { phase: "plan" });
  let problems: DagPlanProblem[] = [];
  for (let ask = 1; ask <= 2; ask++) {
    try {
      const refused = problems;
      const reply = await run.llm("plan", ask === 1 ? "plan" : "replan", (head) =>
        run.steps.decompose({ ...head, iteration: 0, recall: s.recall, previousFailures: [] }, refused),
      );
      const plan: DagPlan = reply.value;
      problems = validateDagPlan(plan);
      if (!problems.length) {
        const dag = startDag(plan);
        await run.emit("step", dagTexts.planned(plan.subtasks.length, plan.summary), {
          phase: "plan",
          data: { dagPlan: plan, dag: dagProgress(dag), ...reply.data },
        });
        return { next: "schedule", patch: { dag, plan: summaryPlan(plan) } };
      }
    } catch (err) {
      const outcome = await run.llmFailure(err, "plan");
      if (outcome !== "iteration_failed") return outcome;
      problems = [{ kind: "unreadable", subtasks: [], message: dagTexts.unreadablePlan((err as Error).message) }];
    }
    await run.emit("warning", dagTexts.refused(ask, problems), { phase: "plan", data: { problems } });
  }
  const error = new LoopsmithError("llm_bad_reply", "invalid plan of subtasks", {
    retryable: false,
    details: { problems },
  });
  return { stop: "invalid_plan", message: dagTexts.invalidPlan(problems), error };
}

/** The one-plan view of a DAG plan (what `show`, the record and reflection prompts see as the task's plan). */
function summaryPlan(plan: DagPlan): Plan {
  return {
    summary: plan.summary.slice(0, 4_000),
    acceptanceCriteria: ["every subtask passes its own tests", "the task's tests pass on the merged tree"],
    steps: plan.subtasks
      .slice(0, 30)
      .map(
        (t) =>
          `${t.id}${t.dependsOn.length ? ` (after ${t.dependsOn.join(", ")})` : ""}: ${t.goal.split("\n")[0]?.slice(0, 900) ?? ""}`,
      ),
    files: [...new Set(plan.subtasks.flatMap((t) => t.files))].slice(0, 50),
  };
}

/** Usage `b` less `a`, field by field (what a subtask's usage grew by). */
function usageDelta(a: Usage | undefined, b: Usage | undefined): Usage {
  const x = a ?? emptyUsage();
  const y = b ?? emptyUsage();
  return {
    calls: y.calls - x.calls,
    inputTokens: y.inputTokens - x.inputTokens,
    outputTokens: y.outputTokens - x.outputTokens,
    cacheReadTokens: y.cacheReadTokens - x.cacheReadTokens,
    cacheWriteTokens: y.cacheWriteTokens - x.cacheWriteTokens,
    costUsd: y.costUsd - x.costUsd,
    latencyMs: y.latencyMs - x.latencyMs,
  };
}

/** The goal a subtask's child task gets: its own goal, what it owns, the interfaces around it, and the whole task's goal. */
function childGoal(plan: DagPlan, id: string, taskGoal: string): string {
  const sub = plan.subtasks.find((t) => t.id === id)!;
  const provided = new Map(plan.subtasks.flatMap((t) => t.provides.map((p) => [p.name, p] as const)));
  return [
    sub.goal,
    "",
    `This is subtask "${sub.id}" of a larger task. Write only these files: ${sub.files.join(", ")}.`,
    sub.acceptanceTests.length
      ? `Its tests (already in the tree): ${sub.acceptanceTests.map((t) => t.path).join(", ")}.`
      : "",
    sub.provides.length
      ? `Provide: ${sub.provides.map((p) => `${p.name}${p.description ? ` = ${p.description}` : ""}`).join("; ")}.`
      : "",
    sub.uses.length
      ? `Build against (already in the tree): ${sub.uses.map((u) => `${u}${provided.get(u)?.description ? ` = ${provided.get(u)?.description}` : ""}`).join("; ")}.`
      : "",
    "",
    `The whole task: ${plan.summary}`,
    "",
    taskGoal.slice(0, 4_000),
  ]
    .filter((l, i, all) => l !== "" || all[i - 1] !== "")
    .join("\n")
    .slice(0, 100_000);
}

/** True once the task's wall-clock limit has passed (never for a task without one). */
function pastTimeLimit(s: TaskState): boolean {
  const left = timeLeftMs(s);
  return left !== undefined && left <= 0;
}

/**
 * The wall-clock limit of a subtask's child task, in ms: the subtask's own limit, no more than
 * what is left of the parent's (at least the contract's 1 s); undefined when neither is set.
 */
export function childTimeLimit(subtaskMs: number | undefined, parentLeftMs: number | undefined): number | undefined {
  if (subtaskMs === undefined && parentLeftMs === undefined) return undefined;
  const ms = Math.min(subtaskMs ?? Number.POSITIVE_INFINITY, parentLeftMs ?? Number.POSITIVE_INFINITY);
  return Math.max(MIN_TIME_LIMIT_MS, Math.ceil(ms));
}

/** The parent's limits less its own wall-clock limit (a child's is set by {@link childTimeLimit}). */
function withoutTimeLimit(limits: TaskLimits): Omit<TaskLimits, "timeLimitMs"> {
  const { timeLimitMs: _parent, ...rest } = limits;
  return rest;
}

/**
 * The outcome of an attempt of `subtask` that cannot start because the task's budget
 * (`budgetOver`: nothing is left of it) or its time is used up (neither is worth another
 * attempt); undefined when it can start.
 */
function cannotStart(run: TaskRun, subtask: string): AttemptOutcome | undefined {
  const spent = budgetOver({ kind: "subtask", id: subtask }, NO_NEED, { budget: run.budget() });
  if (!spent && !pastTimeLimit(run.s)) return undefined;
  return {
    passed: false,
    reason: spent ? "budget" : "time_limit",
    message: spent ? budgetStopText(spent) : dagTexts.timeUsedUp(run.s.task.limits.timeLimitMs ?? 0),
    iterations: 0,
    usage: emptyUsage(),
    retryable: false,
  };
}

/**
 * The child task of one attempt of a subtask: the DAG task's goal narrowed to the subtask, its
 * tree, its repository settings (dependency policy and allowlists, review, audit, memory,
 * script), and what is left of its budget and wall clock (`left`; `childTimeMs`, ms).
 * A subtask's approvals are never interactive: the CLI follows the DAG task, not its
 * children, so a dependency change no allowlist approves stops the child with `needs_approval`.
 */
export function childTaskInput(
  s: TaskState,
  req: AttemptRequest,
  tree: { commit: string; snapshot: string },
  left: { remainingUsd?: number; remainingTokens?: number },
  childTimeMs: number | undefined,
): TaskInput {
  const task = s.task;
  const repo = repoOf(task);
  const plan = s.dag!.plan;
  return {
    v: 1,
    taskId: req.childTaskId,
    goal: childGoal(plan, req.subtask.id, task.goal),
    language: task.language,
    repo: {
      baseCommit: tree.commit,
      snapshot: tree.snapshot,
      ...(repo.name ? { name: `${repo.name} (${req.subtask.id})` } : {}),
      testCommand: subtaskTestCommand(task.language, req.subtask, s.repo?.testCommand ?? repo.testCommand ?? ""),
      setupCommand: s.repo?.setupCommand ?? repo.setupCommand ?? "",
      dependencies: repo.dependencies,
      ...(repo.approvals ? { approvals: { ...repo.approvals, interactive: false } } : {}),
      mapTokens: repo.mapTokens,
      mode: repo.mode,
    },
    review: task.review,
    audit: task.audit,
    memory: task.memory,
    ...(task.memoryScope ? { memoryScope: task.memoryScope } : {}),
    ...(task.script ? { script: task.script } : {}),
    limits: {
      ...withoutTimeLimit(task.limits),
      ...(left.remainingUsd !== undefined ? { maxCostUsd: left.remainingUsd } : {}),
      ...(left.remainingTokens !== undefined ? { maxTokens: Math.floor(left.remainingTokens) } : {}),
      ...(childTimeMs !== undefined ? { timeLimitMs: childTimeMs } : {}),
    },
    source: task.source,
    submittedAt: new Date().toISOString(),
    parent: { taskId: task.taskId, subtaskId: req.subtask.id, attempt: req.attempt },
  };
}

/** Runs one attempt of a subtask as a child task (or re-attaches to it), and reads its outcome. */
async function attemptSubtask(
  s: TaskState,
  run: TaskRun,
  req: AttemptRequest,
  live: Record<string, number>,
  onIteration: () => void,
): Promise<AttemptOutcome> {
  const children = childrenOf(run);
  const task = s.task;
  const repo = repoOf(task);
  const owner = ownerOfTask(task);
  const plan = s.dag!.plan;
  const refused = cannotStart(run, req.subtask.id);
  if (refused) return refused;
  // The task's budget and wall clock are the DAG's: a child is given what is left of them.
  const left = run.budget();
  const timeLeft = timeLeftMs(run.s);
  const childTime = childTimeLimit(task.limits.subtaskTimeLimitMs, timeLeft);
  const root = await run.steps.tree(repo.snapshot, owner);
  const tree = await subtaskTree(plan, req.subtask, req.base, {
    baseTar: await children.getTree(repo.snapshot, owner),
    read: (p) => readBaseFile(root, p),
    put: (name, tar) => children.putTree(name, tar, owner),
  });
  const child = childTaskInput(s, req, tree, left, childTime);
  await children.submit(child, owner);
  live[req.subtask.id] = 0;
  let result;
  try {
    result = await children.result(req.childTaskId, owner, req.signal, (e: TaskEvent) => {
      if (e.iteration > (live[req.subtask.id] ?? 0)) {
        live[req.subtask.id] = e.iteration;
        onIteration();
      }
    });
  } catch (err) {
    // A cancelled parent, or one past its time limit, cancels its children; a stopping conductor
    // leaves them running (they are re-attached).
    if (req.signal.aborted && (run.io.cancelled() || pastTimeLimit(run.s)))
      await children.cancel(req.childTaskId, owner).catch(() => undefined);
    throw err;
  } finally {
    delete live[req.subtask.id];
  }
  const change = result.repo
    ? { patch: result.repo.patch, changed: result.repo.changed, deleted: result.repo.deleted }
    : undefined;
  return {
    passed: result.status === "passed",
    reason: result.stopReason,
    message: result.message.slice(0, 4_000),
    iterations: result.iterations,
    usage: result.usage.total,
    ...(change ? { change } : {}),
    // A child that was cancelled, or that waits for a person, is not retried.
    retryable: result.stopReason !== "cancelled" && result.stopReason !== "needs_approval",
  };
}

/** A subtask's move event: its line, the DAG's progress and the subtask's state (without its `moveSeq`). */
async function emitMove(
  run: TaskRun,
  dag: DagState,
  moved: SubtaskState,
  live: Readonly<Record<string, number>> = {},
): Promise<void> {
  const { moveSeq: _seq, ...subtask } = moved;
  await run.emit("step", dagTexts.move(subtask), {
    phase: "schedule",
    subtaskId: subtask.id,
    data: { dag: dagProgress(dag, live), subtask },
  });
}

/**
 * Records a subtask's move: the checkpoint first, holding the move and the seq its event
 * takes (`moveSeq`), then the event. So an event on the stream always has its move
 * checkpointed: a resumed run neither starts that move again nor announces it twice (one
 * `running` event per attempt, across a conductor that dies). A move checkpointed whose event
 * never reached the stream is announced when the run resumes ({@link announceUnpublished}).
 * The caller emits nothing else meanwhile (the event must take the seq checkpointed).
 */
export async function recordMove(
  run: TaskRun,
  state: DagState,
  changed: SubtaskState,
  live: Readonly<Record<string, number>> = {},
): Promise<void> {
  const previous = new Map((run.s.dag?.subtasks ?? []).map((t) => [t.id, t]));
  const grew = usageDelta(previous.get(changed.id)?.usage, changed.usage);
  const seq = run.s.eventSeq;
  const moved: SubtaskState = { ...changed, moveSeq: seq };
  // The scheduler's state does not follow `moveSeq`: each subtask keeps the one of its last move.
  const dag: DagState = {
    ...state,
    subtasks: state.subtasks.map((t) => {
      if (t.id === changed.id) return moved;
      const last = previous.get(t.id)?.moveSeq;
      return last === undefined ? t : { ...t, moveSeq: last };
    }),
  };
  await run.record({
    dag,
    ...(grew.calls || grew.costUsd ? { usage: addStepUsage(run.s.usage, SUBTASKS_ROLE, run.s.iteration, grew) } : {}),
  });
  await emitMove(run, dag, moved, live);
}

/**
 * On entering SCHEDULE: publishes the event of a move that was checkpointed but never reached
 * the stream (the conductor died between the two, see {@link recordMove}). A resumed run
 * numbers its events after the last one on the stream, so its `eventSeq` is still that move's
 * seq exactly when no event from it on was published; otherwise (and on any first entry) it
 * is past every `moveSeq` and nothing is published again.
 */
export async function announceUnpublished(run: TaskRun): Promise<void> {
  const dag = run.s.dag;
  if (!dag) return;
  const unpublished = dag.subtasks
    .filter((t) => t.moveSeq !== undefined && t.moveSeq >= run.s.eventSeq)
    .sort((a, b) => a.moveSeq! - b.moveSeq!);
  for (const t of unpublished) await emitMove(run, dag, t);
}

/** SCHEDULE: the subtasks that have not finished run as child tasks (see `scheduler.ts`). */
export async function schedulePhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  const dag = s.dag;
  if (!dag)
    throw new LoopsmithError("internal", `task ${s.task.taskId} is in the schedule phase without a plan of subtasks`);
  // From here the task mostly waits on its children: it gives its conductor slot back.
  run.io.release?.();
  const parallel = s.task.parallel ?? (await childrenOf(run).builderReplicas());
  await announceUnpublished(run);
  const open = dag.subtasks.filter((t) => t.status === "pending" || t.status === "running").length;
  await run.emit("phase", dagTexts.scheduling(open, dag.subtasks.length, parallel), {
    phase: "schedule",
    data: { dag: dagProgress(dag), parallel },
  });
  const abort = new AbortController();
  const watch = setInterval(() => {
    if (run.io.cancelled()) abort.abort(new Error("cancelled"));
    else if (pastTimeLimit(run.s)) abort.abort(new Error("the task's time limit passed"));
    else if (run.io.stopping()) abort.abort(new Error("the conductor is stopping"));
    else run.io.heartbeat();
  }, WATCH_MS);
  const live: Record<string, number> = {};
  // While a move is recorded, its event must take the seq checkpointed with it: no progress event in between.
  let recording = false;
  const progress = (): void => {
    const d = run.s.dag;
    if (d && !recording)
      void run
        .emit("step", dagTexts.progress, { phase: "schedule", data: { dag: dagProgress(d, live) } })
        .catch(() => undefined);
  };
  let final: DagState;
  try {
    final = await runDag(
      dag,
      {
        signal: abort.signal,
        cancelled: () => run.io.cancelled(),
        timedOut: () => !run.io.cancelled() && pastTimeLimit(run.s),
        attempt: (req) => attemptSubtask(s, run, req, live, progress),
        record: async (state, changed) => {
          recording = true;
          try {
            await recordMove(run, state, changed, live);
          } finally {
            recording = false;
          }
        },
      },
      { parentTaskId: s.task.taskId, parallel, attempts: s.task.limits.subtaskAttempts, backoff: SUBTASK_BACKOFF },
    );
  } finally {
    clearInterval(watch);
  }
  const outcome = dagOutcome(final);
  if (outcome.status === "cancelled" && run.io.cancelled()) return { stop: "cancelled", message: runTexts.cancelled };
  if (outcome.status !== "passed" && pastTimeLimit(run.s)) {
    const ended = final.subtasks.filter((t) => t.reason === "time_limit" && t.status !== "passed").map((t) => t.id);
    return {
      stop: "time_limit",
      message: dagTexts.timeLimitStop(s.task.limits.timeLimitMs ?? 0, ended, outcome.passed),
    };
  }
  const spent = final.subtasks.find((t) => t.status === "failed" && t.reason === "budget");
  if (outcome.status !== "passed" && spent)
    return { stop: "budget", message: dagTexts.budgetStop(spent.id, spent.message ?? "", outcome.passed) };
  if (outcome.status !== "passed") {
    return {
      stop: "subtask_failed",
      message: dagTexts.subtasksFailed(
        final.subtasks.filter((t) => t.status === "failed"),
        outcome.cancelled,
        outcome.passed,
      ),
    };
  }
  return { next: "integrate", patch: { dag: final, iteration: s.iteration + 1 } };
}

/**
 * INTEGRATE: the task's own test command on the base with every subtask's contribution. A
 * failure goes to the integration reflection, which re-opens one subtask (each at most once);
 * when none can be, or the iteration limit is reached, the task stops with `subtask_failed`.
 */
export async function integratePhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  const dag = s.dag!;
  const task = s.task;
  const root = await run.steps.tree(repoOf(task).snapshot, ownerOfTask(task));
  const states = new Map(dag.subtasks.map((t) => [t.id, t]));
  const merged = composeTree(
    dag.plan,
    dependencyOrder(dag.plan).map((id) => states.get(id)!),
    (p) => readBaseFile(root, p),
  );
  const candidate = {
    files: merged.files,
    deleted: merged.deleted,
    tests: [],
    notes: dag.plan.summary,
    summary: dag.plan.summary.split("\n")[0]?.slice(0, 500) ?? "",
  };
  // The merged tree is the task's candidate from here: the reflection's brief shows it, the result's change is made of it.
  run.update({ candidate });
  await run.emit("phase", dagTexts.integrating(merged.files.length), {
    phase: "integrate",
    data: { dag: dagProgress(dag) },
  });
  const result = await run.sandbox(
    "integrate",
    (attempt) => repoExecution(s, "integrate", candidate, attempt),
    dagTexts.integrationSandboxFailed,
  );
  if (result.status === "sandbox_error" || result.status === "command_not_found") {
    const error = new LoopsmithError(
      result.status === "command_not_found" ? "command_not_found" : "sandbox_error",
      result.reason ?? result.status,
    );
    return { stop: "error", message: dagTexts.integrationCouldNotRun(result.reason ?? result.status), error };
  }
  const lastExecution = forCheckpoint(result);
  const counts = testSummary(result);
  await run.emit("step", dagTexts.integrated(result.status, counts.total, counts.failed), {
    phase: "integrate",
    data: { status: result.status, summary: counts, dag: dagProgress(dag) },
  });
  if (result.status === "passed") return { next: "score", patch: { lastExecution } };

  const failure = briefFromExecution(s.iteration, result);
  const open = dag.subtasks.filter((t) => t.status === "passed" && !dag.reopened.includes(t.id));
  if (!open.length || s.iteration >= task.limits.maxIterations) {
    return {
      stop: "subtask_failed",
      message: dagTexts.mergedFails(failure.failingTests, result.status, open.length > 0),
      patch: { lastExecution },
    };
  }
  await run.emit("phase", dagTexts.reflecting, { phase: "reflect" });
  let chosen;
  try {
    const reply = await run.llm("reflect", "reflect", (head) =>
      run.steps.reflectIntegration({ ...head, dag: dag.plan, reopened: dag.reopened, failure, recall: s.recall }),
    );
    chosen = reply.value;
    await run.emit("step", dagTexts.reflection(chosen.subtaskId, chosen.rootCause), {
      phase: "reflect",
      data: { integrationReflection: chosen, ...reply.data },
    });
  } catch (err) {
    const outcome = await run.llmFailure(err, "reflect");
    if (outcome !== "iteration_failed") return { ...outcome, patch: { lastExecution } };
  }
  if (!chosen || !open.some((t) => t.id === chosen.subtaskId)) {
    const message = dagTexts.badChoice(
      chosen?.subtaskId,
      !!chosen && dag.subtasks.some((t) => t.id === chosen.subtaskId),
    );
    return { stop: "subtask_failed", message, patch: { lastExecution } };
  }
  // The fix plan goes into the subtask's goal, so every later attempt's child task sees it.
  const plan: DagPlan = {
    ...dag.plan,
    subtasks: dag.plan.subtasks.map((t) =>
      t.id === chosen.subtaskId
        ? { ...t, goal: dagTexts.reopenedGoal(t.goal, chosen.rootCause, chosen.fixPlan).slice(0, 8_000) }
        : t,
    ),
  };
  const next = reopenSubtask({ ...dag, plan }, chosen.subtaskId, chosen.rootCause);
  return {
    next: "schedule",
    patch: {
      lastExecution,
      dag: next,
      failures: [...s.failures, failure],
      history: [...s.history, dagTexts.historyIntegration(s.iteration, result.status, chosen.subtaskId)],
    },
  };
}
