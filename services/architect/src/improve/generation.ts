/**
 * One generation of an improvement run, phase by phase: PLAN (one hypothesis) → IMPLEMENT (a
 * repo-mode task on the parent tree, until the check passes or a limit stops it) → VALIDATE
 * (guards on the change, then the check's test counts against the parent's) → MEASURE (the
 * benchmark, or the quality metrics, on parent and candidate, interleaved, in the sandbox) →
 * DECIDE (paired statistics). The first phase that says no ends the generation with its reason
 * code; nothing of a rejected candidate becomes a parent. Infrastructure errors that may pass
 * (`retryable`) are thrown, so the run's message is redelivered and the generation starts
 * again from the checkpoint. Each phase is a function of its own file beside this one.
 */
import { LoopsmithError, addUsage, emptyUsage, type GenerationReport, type Hypothesis } from "@loopsmith/shared";
import { buildRepoMap } from "../repo/map.js";
import { summarizeJudgingCode } from "./judging-code.js";
import { failingOnParent, hypothesize } from "./hypothesis.js";
import type { ImproveState } from "./state.js";
import {
  beginPhase,
  generationError,
  generationTaskId,
  recordedReport,
  type GenerationDeps,
  type GenerationOutcome,
  type GenerationRecord,
  type GenerationRun,
} from "./generation-record.js";
import { implement } from "./generation-implement.js";
import { prepareWorkspace, screenChange, validateCandidate, type Workspace } from "./generation-validate.js";
import { dryRunOutcome, judgeOnBenchmark, judgeOnMetrics } from "./generation-measure.js";

export {
  errorReport,
  generationError,
  generationTaskId,
  keptErrors,
  type GenerationDeps,
  type GenerationOutcome,
} from "./generation-record.js";
export { addReview, reviewOfEvent } from "./generation-implement.js";
export { checkedTestsEdited } from "./generation-validate.js";

/**
 * Runs generation `state.generation` from `state.parent`. Its report has the time of each
 * phase it went through, the reviews of its task and every error met (with the errors of
 * earlier attempts the run checkpointed, `state.generationErrors`). An error that retrying
 * cannot fix ends the generation with reason `error` (the run goes on); a retryable one is
 * checkpointed with `deps.saveError` (when that fails too, it is only logged) and thrown.
 * @param reports - the run's earlier reports (the hypothesis prompt shows them)
 * @throws LoopsmithError when retryable (the run resumes later from its checkpoint)
 */
export async function runGeneration(
  state: ImproveState,
  reports: readonly GenerationReport[],
  deps: GenerationDeps,
): Promise<GenerationOutcome> {
  const rec: GenerationRecord = {
    phase: "plan",
    mark: Date.now(),
    phasesMs: {},
    usage: state.hypothesisUsage ?? emptyUsage(),
    ...(state.hypothesis ? { hypothesis: state.hypothesis } : {}),
    reviews: [],
    errors: [...(state.generationErrors ?? [])],
  };
  const startedAt = new Date().toISOString();
  try {
    return await generationSteps(state, reports, deps, rec, startedAt);
  } catch (err) {
    if (err instanceof LoopsmithError && err.retryable) {
      await deps
        .saveError(generationError(rec.phase, err, true))
        .catch((saveErr: unknown) =>
          deps.log.warn({ err: saveErr, generation: state.generation }, "could not checkpoint the generation's error"),
        );
      throw err;
    }
    deps.log.error({ err, generation: state.generation }, "generation failed; the run goes on from the same parent");
    const e =
      err instanceof LoopsmithError
        ? err
        : new LoopsmithError("internal", (err as Error)?.message ?? String(err), { cause: err });
    rec.errors.push(generationError(rec.phase, e));
    return {
      report: recordedReport(state, rec, startedAt, {
        ...(rec.hypothesis ? { hypothesis: rec.hypothesis } : {}),
        decision: { verdict: "rejected", reason: "error", message: `${e.code}: ${e.message}` },
      }),
    };
  }
}

/**
 * PLAN: the hypothesis the generation already has (checkpointed before a redelivery), or one
 * asked of the model from the parent's repo map, the run's earlier reports, the rejected
 * attempts of other runs from the same parent and the cases failing on it; checkpointed with
 * its usage before the generation goes on.
 */
async function plan(g: GenerationRun, ws: Workspace, reports: readonly GenerationReport[]): Promise<Hypothesis> {
  const { state, deps, rec } = g;
  if (rec.hypothesis) return rec.hypothesis;
  const { request } = state;
  const s = request.settings;
  const map = await buildRepoMap({
    root: ws.root,
    commit: state.parent.commit,
    files: ws.files,
    goal: s.goal,
    maxTokens: request.repo.mapTokens,
    ...(deps.cacheDir ? { cacheDir: deps.cacheDir } : {}),
  });
  const remaining = s.budgetUsd !== undefined ? Math.max(0, s.budgetUsd - state.usage.costUsd) : undefined;
  const asked = await hypothesize(deps.provider, {
    request,
    generation: g.n,
    taskId: g.taskId,
    map: map.text,
    reports,
    earlier: await deps.rejectedFrom(state.parent.commit),
    failing: failingOnParent(reports, state.parent.commit),
    protectedGlobs: [...ws.globs, ...summarizeJudgingCode(ws.code, ws.files)],
    check: ws.check,
    ...(remaining !== undefined ? { budgetUsd: remaining } : {}),
  });
  rec.hypothesis = asked.hypothesis;
  rec.usage = addUsage(rec.usage, asked.usage);
  await deps.saveHypothesis(asked.hypothesis, rec.usage);
  return asked.hypothesis;
}

/** The phases of {@link runGeneration} in order, recording into `rec`; the first that ends the generation ends it. */
async function generationSteps(
  state: ImproveState,
  reports: readonly GenerationReport[],
  deps: GenerationDeps,
  rec: GenerationRecord,
  startedAt: string,
): Promise<GenerationOutcome> {
  const s = state.request.settings;
  const n = state.generation;
  const taskId = generationTaskId(state.request.runId, n);
  const g: GenerationRun = { state, deps, rec, startedAt, n, taskId, deadline: Date.now() + s.generationTimeoutMs };

  const prepared = await prepareWorkspace(g);
  if ("outcome" in prepared) return prepared.outcome;
  const { ws } = prepared;

  const hypothesis = await plan(g, ws, reports);
  beginPhase(rec, "implement");
  await deps.emit(`generation ${n}: ${hypothesis.title}`, { generation: n, phase: "plan", hypothesis });

  const implemented = await implement(g, ws, hypothesis);
  if ("outcome" in implemented) return implemented.outcome;
  const { result } = implemented;

  beginPhase(rec, "validate");
  const screened = await screenChange(g, ws, hypothesis, result);
  if ("outcome" in screened) return screened.outcome;
  const validated = await validateCandidate(g, ws, screened, result);
  if ("outcome" in validated) return validated.outcome;

  if (s.dryRun) return dryRunOutcome(g, validated);
  beginPhase(rec, "bench");
  if (s.bench === undefined) return judgeOnMetrics(g, ws, validated);
  return judgeOnBenchmark(g, ws, validated, s.bench);
}
