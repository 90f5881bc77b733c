/**
 * A generation's IMPLEMENT phase: its repo-mode task on the parent tree, sent to the conductor's
 * queue like any client's and followed to its result (the reviews of its REVIEW phase recorded
 * as they come), or cancelled once the generation passes its time limit.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  REVIEWS_KEPT,
  Review,
  addUsage,
  type GenerationReview,
  type Hypothesis,
  type TaskEvent,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { DEFAULT_OWNER, submitTask, followEvents } from "@loopsmith/shared/bus";
import { NO_NEED, budgetOver, budgetStopText } from "@loopsmith/shared/llm";
import { improveTexts } from "../event-texts.js";
import { taskGoal } from "./hypothesis.js";
import { generationError, rejected, type GenerationOutcome, type GenerationRun } from "./generation-record.js";
import type { Workspace } from "./generation-validate.js";

/**
 * The LLM review a task's event carries: the `step` event of its REVIEW phase, whose
 * `data.review` is the reviewer's {@link Review}, with the event's iteration; undefined for any
 * other event (a review whose reply could not be read has none). Pure.
 */
export function reviewOfEvent(event: TaskEvent): GenerationReview | undefined {
  if (event.kind !== "step" || event.phase !== "review") return undefined;
  const parsed = Review.safeParse(event.data?.review);
  if (!parsed.success) return undefined;
  const { approved, score, findings } = parsed.data;
  return { iteration: event.iteration, approved, score, findings };
}

/**
 * `reviews` with `review` added: it replaces an earlier review of the same iteration (a
 * review phase that ran again after a redelivery), and only the last {@link REVIEWS_KEPT}
 * are kept, in order. Pure.
 */
export function addReview(reviews: readonly GenerationReview[], review: GenerationReview): GenerationReview[] {
  return [...reviews.filter((r) => r.iteration !== review.iteration), review].slice(-REVIEWS_KEPT);
}

/** Waits for a task's result event, passing each earlier event to `seen`; undefined when `ms` passed first. */
async function waitForResult(
  nc: NatsConnection,
  owner: string,
  taskId: string,
  ms: number,
  seen: (event: TaskEvent) => void,
): Promise<TaskResult | undefined> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), Math.max(0, ms));
  try {
    for await (const e of followEvents(nc, owner, taskId, abort.signal)) {
      if (e.kind === "result" && e.result) return e.result;
      seen(e);
    }
    return undefined;
  } catch (err) {
    // NATS went away while waiting: the run resumes from its checkpoint (the task is durable).
    throw new LoopsmithError("unavailable", `lost the events of task ${taskId}: ${(err as Error)?.message ?? err}`, {
      cause: err,
      retryable: true,
    });
  } finally {
    clearTimeout(timer);
  }
}

/** The generation's task: its goal from the hypothesis, the parent tree, the check as its test command. */
async function submitGenerationTask(
  g: GenerationRun,
  ws: Workspace,
  hypothesis: Hypothesis,
  remainingUsd: number | undefined,
  owner: string,
): Promise<void> {
  const { request } = g.state;
  const s = request.settings;
  await submitTask(
    g.deps.nc,
    {
      v: 1,
      taskId: g.taskId,
      goal: taskGoal(request, g.n, hypothesis, ws.check),
      language: request.language,
      review: s.review,
      limits: {
        maxIterations: s.maxIterations,
        runTimeoutMs: s.commandTimeoutMs,
        memoryMb: 1_024,
        ...(remainingUsd !== undefined ? { maxCostUsd: remainingUsd } : {}),
      },
      repo: {
        baseCommit: g.state.parent.commit,
        snapshot: g.state.parent.snapshot,
        ...(request.repo.name ? { name: request.repo.name } : {}),
        testCommand: ws.check,
        setupCommand: ws.ctx.setupCommand,
        dependencies: s.dependencies === "allow" ? "allow" : "reject",
        mapTokens: request.repo.mapTokens,
        testTimeoutMs: s.commandTimeoutMs,
        // A generation's change is one-shot edits for now: its guards and reports were built
        // and measured on them; agent mode for generations is not yet judged.
        mode: "oneshot",
      },
      submittedAt: new Date().toISOString(),
    },
    owner,
  );
}

/**
 * IMPLEMENT: sends the generation's task with what is left of the run's USD budget as its
 * limit and waits for its result until the generation's deadline, its usage and (when it
 * ended in error) its error recorded. Ends the generation instead when the hypothesis used up
 * the budget (`budget`: the task would run with no limit) or the deadline passed (`timeout`,
 * the task cancelled).
 * @returns the task's result, or the generation's outcome
 * @throws LoopsmithError (retryable) when the task's events are lost
 */
export async function implement(
  g: GenerationRun,
  ws: Workspace,
  hypothesis: Hypothesis,
): Promise<{ result: TaskResult } | { outcome: GenerationOutcome }> {
  const { state, deps, rec, n, taskId } = g;
  const { request } = state;
  const s = request.settings;
  const remainingUsd = s.budgetUsd !== undefined ? s.budgetUsd - state.usage.costUsd - rec.usage.costUsd : undefined;
  // The hypothesis spent the rest of the run's budget: the task would run with no limit at all.
  const over =
    remainingUsd !== undefined
      ? budgetOver({ kind: "generation", generation: n }, NO_NEED, {
          budget: { remainingUsd },
          totalUsd: s.budgetUsd,
        })
      : undefined;
  if (over) return { outcome: { ...rejected(g, "budget", budgetStopText(over), { hypothesis }), budget: true } };
  const owner = request.owner ?? DEFAULT_OWNER;
  await submitGenerationTask(g, ws, hypothesis, remainingUsd, owner);
  await deps.emit(improveTexts.implementing(n, taskId), { generation: n, phase: "implement", taskId });
  const result = await waitForResult(deps.nc, owner, taskId, g.deadline - Date.now(), (event) => {
    const review = reviewOfEvent(event);
    if (review) rec.reviews = addReview(rec.reviews, review);
  });
  if (!result) {
    await deps.cancelTask(taskId, owner).catch((err: unknown) => {
      deps.log.warn({ err, taskId }, "could not cancel the generation's task");
      rec.errors.push(generationError("implement", err));
    });
    const limit = `${Math.round(s.generationTimeoutMs / 1000)} s`;
    const message = `the generation passed its time limit of ${limit} while its task was running`;
    return { outcome: rejected(g, "timeout", message, { hypothesis }) };
  }
  rec.usage = addUsage(rec.usage, result.usage.total);
  // The task ended in error (its own infrastructure, a model that failed): what it said.
  if (result.status === "error")
    rec.errors.push(
      generationError(
        "implement",
        result.error
          ? new LoopsmithError(result.error.code, `task ${taskId}: ${result.error.message}`)
          : new LoopsmithError("internal", `task ${taskId}: ${result.message}`),
      ),
    );
  return { result };
}
