/**
 * A DAG task's phases (a repo-mode task with `decompose`):
 * PREPARE → RECALL → PLAN (a plan of subtasks, validated; refused once → asked again; refused
 * twice → `invalid_plan`) → SCHEDULE (subtasks as child tasks, `scheduler.ts`) → INTEGRATE
 * (the task's tests on the merged tree) → pass | REFLECT on the integration failure: one
 * subtask re-opened → SCHEDULE … Every step is checkpointed in the task's state (`dag`), so a
 * conductor that dies resumes with finished subtasks kept and running ones re-attached.
 */
import {
  LoopsmithError,
  dagProgress,
  dependencyOrder,
  emptyUsage,
  ownerOfTask,
  testSummary,
  validateDagPlan,
  type DagPlan,
  type DagPlanProblem,
  type DagState,
  type Plan,
  type SubtaskState,
  type TaskEvent,
  type TaskInput,
  type Usage,
} from "@loopsmith/shared";
import { briefFromExecution } from "../failure.js";
import type { PhaseOutcome } from "../phases.js";
import { readBaseFile } from "../repo/context.js";
import { repoExecution, repoOf } from "../repo/phases.js";
import { MAX_SANDBOX_ERRORS, RetryLater, type TaskRun } from "../run.js";
import { addStepUsage } from "../state.js";
import type { ChildTasks } from "../steps.js";
import { forCheckpoint } from "../verdict.js";
import { DagHandBack, dagOutcome, reopenSubtask, runDag, startDag, type AttemptOutcome, type AttemptRequest } from "./scheduler.js";
import { composeTree, subtaskTestCommand, subtaskTree } from "./tree.js";

/** Backoff between a subtask's attempts, in ms (p-retry: ×2 per retry, times a random factor in [1, 2)). */
export const SUBTASK_BACKOFF = { minMs: 1_000, maxMs: 30_000 };
/** How often a running DAG looks at the task's cancel and the conductor's stop, in ms. */
const WATCH_MS = 250;
/** The usage role the children's usage is summed under in the parent's report. */
export const SUBTASKS_ROLE = "subtasks";

function childrenOf(run: TaskRun): ChildTasks {
  if (!run.steps.children) throw new LoopsmithError("internal", "this conductor cannot run DAG tasks (no child-task access)");
  return run.steps.children;
}

/** One line about a subtask's move, for its event. */
function moveLine(s: SubtaskState): string {
  const why = s.reason && s.reason !== "passed" ? ` (${s.reason}${s.message ? `: ${s.message.split("\n")[0]?.slice(0, 200)}` : ""})` : "";
  // A running subtask with a reason: its attempt just failed, and another follows after the backoff.
  if (s.status === "running") return why ? `subtask ${s.id}: attempt ${s.attempts} failed${why}; trying again` : `subtask ${s.id}: running, attempt ${s.attempts}`;
  return `subtask ${s.id}: ${s.status}${why}`;
}

/** PLAN for a DAG task: a plan of subtasks, validated before anything runs. */
export async function dagPlanPhase(run: TaskRun): Promise<PhaseOutcome> {
  const s = run.s;
  if (!s.task.repo) return run.stop("error", "stopped: a decomposed task needs repo mode (give a repository; an empty one works)", new LoopsmithError("bad_request", "decompose without a repository"));
  await run.emit("phase", "planning subtasks", { phase: "plan" });
  let problems: DagPlanProblem[] = [];
  for (let ask = 1; ask <= 2; ask++) {
    let plan: DagPlan;
    try {
      const callsBefore = run.callsBefore("plan");
      const reply = await run.steps.decompose({ v: 1, taskId: s.task.taskId, iteration: 0, idempotencyKey: run.key(ask === 1 ? "plan" : "replan"), callsBefore, ...run.taskScript(), task: await run.brief(), recall: s.recall, previousFailures: [], budget: run.budget() }, problems);
      await run.noteProvider("plan", reply);
      plan = reply.value;
      problems = validateDagPlan(plan);
      if (!problems.length) {
        const dag = startDag(plan);
        await run.emit("step", `${plan.subtasks.length} subtasks: ${plan.summary}`, { phase: "plan", data: { dagPlan: plan, dag: dagProgress(dag), ...run.llmData("plan", callsBefore, reply) } });
        await run.go("schedule", { dag, plan: summaryPlan(plan) });
        return undefined;
      }
    } catch (err) {
      const outcome = await run.llmFailure(err, "plan");
      if (outcome !== "iteration_failed") return outcome;
      problems = [{ kind: "unreadable", subtasks: [], message: `the reply was not a plan of subtasks: ${(err as Error).message}` }];
    }
    await run.emit("warning", `the plan of subtasks was refused (${ask === 1 ? "asking again" : "for the second time"}): ${problems.map((p) => p.message).join("; ")}`, { phase: "plan", data: { problems } });
  }
  return run.stop("invalid_plan", `stopped: the plan of subtasks failed validation twice: ${problems.map((p) => p.message).join("; ")}`, new LoopsmithError("llm_bad_reply", "invalid plan of subtasks", { retryable: false, details: { problems } }));
}

/** The one-plan view of a DAG plan (what `show`, the record and reflection prompts see as the task's plan). */
function summaryPlan(plan: DagPlan): Plan {
  return {
    summary: plan.summary.slice(0, 4_000),
    acceptanceCriteria: ["every subtask passes its own tests", "the task's tests pass on the merged tree"],
    steps: plan.subtasks.slice(0, 30).map((t) => `${t.id}${t.dependsOn.length ? ` (after ${t.dependsOn.join(", ")})` : ""}: ${t.goal.split("\n")[0]?.slice(0, 900) ?? ""}`),
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
    sub.acceptanceTests.length ? `Its tests (already in the tree): ${sub.acceptanceTests.map((t) => t.path).join(", ")}.` : "",
    sub.provides.length ? `Provide: ${sub.provides.map((p) => `${p.name}${p.description ? ` = ${p.description}` : ""}`).join("; ")}.` : "",
    sub.uses.length ? `Build against (already in the tree): ${sub.uses.map((u) => `${u}${provided.get(u)?.description ? ` = ${provided.get(u)?.description}` : ""}`).join("; ")}.` : "",
    "",
    `The whole task: ${plan.summary}`,
    "",
    taskGoal.slice(0, 4_000),
  ]
    .filter((l, i, all) => l !== "" || all[i - 1] !== "")
    .join("\n")
    .slice(0, 100_000);
}

/** Runs one attempt of a subtask as a child task (or re-attaches to it), and reads its outcome. */
async function attemptSubtask(run: TaskRun, req: AttemptRequest, live: Record<string, number>, onIteration: () => void): Promise<AttemptOutcome> {
  const children = childrenOf(run);
  const task = run.s.task;
  const repo = repoOf(task);
  const owner = ownerOfTask(task);
  const plan = run.s.dag!.plan;
  // The task's budget is the DAG's: a child may spend what is left of it when it starts.
  const left = run.budget();
  if ((left.remainingUsd !== undefined && left.remainingUsd <= 0) || (left.remainingTokens !== undefined && left.remainingTokens <= 0)) {
    return { passed: false, reason: "budget", message: "the task's budget is used up", iterations: 0, usage: emptyUsage(), retryable: false };
  }
  const root = await run.steps.tree(repo.snapshot, owner);
  const tree = await subtaskTree(plan, req.subtask, req.base, {
    baseTar: await children.getTree(repo.snapshot, owner),
    read: (p) => readBaseFile(root, p),
    put: (name, tar) => children.putTree(name, tar, owner),
  });
  const child: TaskInput = {
    v: 1,
    taskId: req.childTaskId,
    goal: childGoal(plan, req.subtask.id, task.goal),
    language: task.language,
    repo: {
      baseCommit: tree.commit,
      snapshot: tree.snapshot,
      ...(repo.name ? { name: `${repo.name} (${req.subtask.id})` } : {}),
      testCommand: subtaskTestCommand(task.language, req.subtask, run.s.repo?.testCommand ?? repo.testCommand ?? ""),
      setupCommand: run.s.repo?.setupCommand ?? repo.setupCommand ?? "",
      dependencies: repo.dependencies,
      mapTokens: repo.mapTokens,
    },
    review: task.review,
    memory: task.memory,
    ...(task.memoryScope ? { memoryScope: task.memoryScope } : {}),
    ...(task.script ? { script: task.script } : {}),
    limits: {
      ...task.limits,
      ...(left.remainingUsd !== undefined ? { maxCostUsd: left.remainingUsd } : {}),
      ...(left.remainingTokens !== undefined ? { maxTokens: Math.floor(left.remainingTokens) } : {}),
    },
    source: task.source,
    submittedAt: new Date().toISOString(),
    parent: { taskId: task.taskId, subtaskId: req.subtask.id, attempt: req.attempt },
  };
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
    // A cancelled parent cancels its children; a stopping conductor leaves them running (they are re-attached).
    if (req.signal.aborted && run.io.cancelled()) await children.cancel(req.childTaskId, owner).catch(() => undefined);
    throw err;
  } finally {
    delete live[req.subtask.id];
  }
  const change = result.repo ? { patch: result.repo.patch, changed: result.repo.changed, deleted: result.repo.deleted } : undefined;
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
async function emitMove(run: TaskRun, dag: DagState, moved: SubtaskState, live: Readonly<Record<string, number>> = {}): Promise<void> {
  const { moveSeq: _seq, ...subtask } = moved;
  await run.emit("step", moveLine(subtask), { phase: "schedule", subtaskId: subtask.id, data: { dag: dagProgress(dag, live), subtask } });
}

/**
 * Records a subtask's move: the checkpoint first, holding the move and the seq its event
 * takes (`moveSeq`), then the event. So an event on the stream always has its move
 * checkpointed: a resumed run neither starts that move again nor announces it twice (one
 * `running` event per attempt, across a conductor that dies). A move checkpointed whose event
 * never reached the stream is announced when the run resumes ({@link announceUnpublished}).
 * The caller emits nothing else meanwhile (the event must take the seq checkpointed).
 */
export async function recordMove(run: TaskRun, state: DagState, changed: SubtaskState, live: Readonly<Record<string, number>> = {}): Promise<void> {
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
  run.s = { ...run.s, dag, ...(grew.calls || grew.costUsd ? { usage: addStepUsage(run.s.usage, SUBTASKS_ROLE, run.s.iteration, grew) } : {}) };
  await run.io.checkpoint(run.s);
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
  const unpublished = dag.subtasks.filter((t) => t.moveSeq !== undefined && t.moveSeq >= run.s.eventSeq).sort((a, b) => a.moveSeq! - b.moveSeq!);
  for (const t of unpublished) await emitMove(run, dag, t);
}

/** SCHEDULE: the subtasks that have not finished run as child tasks (see `scheduler.ts`). */
export async function schedulePhase(run: TaskRun): Promise<PhaseOutcome> {
  const dag = run.s.dag;
  if (!dag) throw new LoopsmithError("internal", `task ${run.s.task.taskId} is in the schedule phase without a plan of subtasks`);
  // From here the task mostly waits on its children: it gives its conductor slot back.
  run.io.release?.();
  const parallel = run.s.task.parallel ?? (await childrenOf(run).builderReplicas());
  await announceUnpublished(run);
  const open = dag.subtasks.filter((t) => t.status === "pending" || t.status === "running").length;
  await run.emit("phase", `running ${open} of ${dag.subtasks.length} subtasks, ${parallel} at a time`, { phase: "schedule", data: { dag: dagProgress(dag), parallel } });
  const abort = new AbortController();
  const watch = setInterval(() => {
    if (run.io.cancelled() || run.io.stopping()) abort.abort(new Error(run.io.cancelled() ? "cancelled" : "the conductor is stopping"));
    else run.io.heartbeat();
  }, WATCH_MS);
  const live: Record<string, number> = {};
  // While a move is recorded, its event must take the seq checkpointed with it: no progress event in between.
  let recording = false;
  const progress = (): void => {
    const d = run.s.dag;
    if (d && !recording) void run.emit("step", "subtask progress", { phase: "schedule", data: { dag: dagProgress(d, live) } }).catch(() => undefined);
  };
  let final: DagState;
  try {
    final = await runDag(
      dag,
      {
        signal: abort.signal,
        cancelled: () => run.io.cancelled(),
        attempt: (req) => attemptSubtask(run, req, live, progress),
        record: async (state, changed) => {
          recording = true;
          try {
            await recordMove(run, state, changed, live);
          } finally {
            recording = false;
          }
        },
      },
      { parentTaskId: run.s.task.taskId, parallel, attempts: run.s.task.limits.subtaskAttempts, backoff: SUBTASK_BACKOFF },
    );
  } catch (err) {
    if (err instanceof DagHandBack) throw new RetryLater(err.message);
    throw err;
  } finally {
    clearInterval(watch);
  }
  const outcome = dagOutcome(final);
  if (outcome.status === "cancelled" && run.io.cancelled()) return run.stop("cancelled", "cancelled");
  const spent = final.subtasks.find((t) => t.status === "failed" && t.reason === "budget");
  if (outcome.status !== "passed" && spent) {
    return run.stop("budget", `stopped: the task's budget was used up while subtask ${spent.id} ran; built: ${outcome.passed.join(", ") || "none"}`);
  }
  if (outcome.status !== "passed") {
    const failed = final.subtasks.filter((t) => t.status === "failed").map((t) => `${t.id} (${t.reason ?? "failed"}: ${(t.message ?? "").split("\n")[0]?.slice(0, 200)})`);
    return run.stop("subtask_failed", `stopped: subtask ${failed.join(", ")} gave up; cancelled: ${outcome.cancelled.join(", ") || "none"}; built: ${outcome.passed.join(", ") || "none"}`);
  }
  await run.go("integrate", { dag: final, iteration: run.s.iteration + 1 });
  return undefined;
}

/**
 * INTEGRATE: the task's own test command on the base with every subtask's contribution. A
 * failure goes to the integration reflection, which re-opens one subtask (each at most once);
 * when none can be, or the iteration limit is reached, the task stops with `subtask_failed`.
 */
export async function integratePhase(run: TaskRun): Promise<PhaseOutcome> {
  const dag = run.s.dag!;
  const task = run.s.task;
  const root = await run.steps.tree(repoOf(task).snapshot, ownerOfTask(task));
  const states = new Map(dag.subtasks.map((t) => [t.id, t]));
  const merged = composeTree(dag.plan, dependencyOrder(dag.plan).map((id) => states.get(id)!), (p) => readBaseFile(root, p));
  const candidate = { files: merged.files, deleted: merged.deleted, tests: [], notes: dag.plan.summary, summary: dag.plan.summary.split("\n")[0]?.slice(0, 500) ?? "" };
  run.s = { ...run.s, candidate };
  await run.emit("phase", `integrating: the task's tests on the merged tree (${merged.files.length} files changed)`, { phase: "integrate", data: { dag: dagProgress(dag) } });
  let result = await run.steps.execute(repoExecution(run, "integrate", candidate, 0));
  for (let attempt = 1; result.status === "sandbox_error" && attempt < MAX_SANDBOX_ERRORS; attempt++) {
    await run.emit("warning", `the sandbox failed on the integration run (${result.reason ?? "unknown"}); trying again`, { phase: "integrate" });
    result = await run.steps.execute(repoExecution(run, "integrate", candidate, attempt));
  }
  if (result.status === "sandbox_error" || result.status === "command_not_found") {
    return run.stop("error", `stopped: the integration run could not run: ${result.reason ?? result.status}`, new LoopsmithError(result.status === "command_not_found" ? "command_not_found" : "sandbox_error", result.reason ?? result.status));
  }
  run.s = { ...run.s, lastExecution: forCheckpoint(result) };
  const counts = testSummary(result);
  await run.emit("step", `integration: ${result.status} (${counts.total} tests, ${counts.failed} failing)`, { phase: "integrate", data: { status: result.status, summary: counts, dag: dagProgress(dag) } });
  if (result.status === "passed") return run.stop("passed", `passed: ${dag.subtasks.length} subtasks built and the task's tests pass on the merged tree`);

  const failure = briefFromExecution(run.s.iteration, result);
  const open = dag.subtasks.filter((t) => t.status === "passed" && !dag.reopened.includes(t.id));
  if (!open.length || run.s.iteration >= task.limits.maxIterations) {
    return run.stop("subtask_failed", `stopped: the task's tests fail on the merged tree (${failure.failingTests.slice(0, 10).join(", ") || result.status}) and ${open.length ? "the iteration limit is reached" : "every subtask was re-opened once already"}`);
  }
  await run.emit("phase", "reflecting on the integration failure", { phase: "reflect" });
  let chosen;
  try {
    const callsBefore = run.callsBefore("reflect");
    const reply = await run.steps.reflectIntegration({ v: 1, taskId: task.taskId, iteration: run.s.iteration, idempotencyKey: run.key("reflect"), callsBefore, ...run.taskScript(), task: await run.brief(), dag: dag.plan, reopened: dag.reopened, failure, recall: run.s.recall, budget: run.budget() });
    await run.noteProvider("reflect", reply);
    chosen = reply.value;
    await run.emit("step", `reflection: re-open ${chosen.subtaskId}: ${chosen.rootCause}`, { phase: "reflect", data: { integrationReflection: chosen, ...run.llmData("reflect", callsBefore, reply) } });
  } catch (err) {
    const outcome = await run.llmFailure(err, "reflect");
    if (outcome !== "iteration_failed") return outcome;
  }
  if (!chosen || !open.some((t) => t.id === chosen.subtaskId)) {
    const why = chosen ? `the reflection chose "${chosen.subtaskId}", which ${dag.subtasks.some((t) => t.id === chosen.subtaskId) ? "was re-opened before" : "is not a subtask"}` : "the reflection could not be read";
    return run.stop("subtask_failed", `stopped: the task's tests fail on the merged tree and ${why}`);
  }
  // The fix plan goes into the subtask's goal, so every later attempt's child task sees it.
  const plan: DagPlan = { ...dag.plan, subtasks: dag.plan.subtasks.map((t) => (t.id === chosen.subtaskId ? { ...t, goal: `${t.goal}\n\nThe integration run failed after this subtask passed: ${chosen.rootCause}\nFix: ${chosen.fixPlan}`.slice(0, 8_000) } : t)) };
  const next = reopenSubtask({ ...dag, plan }, chosen.subtaskId, chosen.rootCause);
  run.s = { ...run.s, failures: [...run.s.failures, failure], history: [...run.s.history, `integration ${run.s.iteration}: ${result.status}; re-opened ${chosen.subtaskId}`] };
  await run.go("schedule", { dag: next });
  return undefined;
}
