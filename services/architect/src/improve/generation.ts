/**
 * One generation of an improvement run as phases of the run's durable machine
 * (`improve-run.ts`, `durable/machine.ts`): PLAN (one hypothesis) → IMPLEMENT (a repo-mode
 * task on the parent tree, until the check passes or a limit stops it) → VALIDATE (guards on
 * the change, then the check's test counts against the parent's) → MEASURE (the benchmark, or
 * the quality metrics, on parent and candidate, interleaved, in the sandbox) → DECIDE (paired
 * statistics). Each phase is a function of what the phases before it checkpointed and returns
 * its outcome; the first that says no ends the generation with its reason code (on to REPORT,
 * `run.ts`); nothing of a rejected candidate becomes a parent. An infrastructure error that
 * may pass (`retryable`) is checkpointed among the generation's errors and thrown, so the
 * run's message is redelivered and the generation resumes at the phase it was in. Each
 * phase's work is a function of its own file beside this one.
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { addUsage, type GenerationPhase, type GenerationReport, type Hypothesis } from "@loopsmith/shared/contracts";
import { improveTexts } from "../event-texts.js";
import { buildRepoMap } from "../repo/map.js";
import { candidateFiles } from "../tree.js";
import { summarizeJudgingCode } from "./judging-code.js";
import { failingOnParent, hypothesize, shownToModel } from "./hypothesis.js";
import type { GenerationProgress, ImprovePhase, ImproveState } from "./state.js";
import { generationError, recordedReport, type GenerationOutcome, type GenerationRun } from "./generation-record.js";
import { implement } from "./generation-implement.js";
import { screenChange, validateCandidate, type Validated, type Workspace } from "./generation-validate.js";
import {
  decideBenchmark,
  decideMetrics,
  dryRunOutcome,
  measureBenchmark,
  measureMetrics,
} from "./generation-measure.js";
import type { ImproveRun, ImproveStep } from "./improve-run.js";

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

/** What a generation phase's work ends with: the next phase and what it checkpoints, or the generation's end. */
type PhaseWork = { next: ImprovePhase; progress?: Partial<GenerationProgress> } | { outcome: GenerationOutcome };

/**
 * A generation phase of the machine: `work` in the generation's workspace, its time counted
 * under `phase` in the report. An error that retrying cannot fix ends the generation with
 * reason `error` (the run goes on); a retryable one is checkpointed with the generation's
 * errors (when that fails too, it is only logged) and thrown.
 * @throws LoopsmithError when retryable (the run resumes at this phase from its checkpoint)
 */
function generationPhase(
  phase: GenerationPhase,
  work: (g: GenerationRun, ws: Workspace, run: ImproveRun) => Promise<PhaseWork>,
): (s: ImproveState, run: ImproveRun) => Promise<ImproveStep> {
  return async (_s, run) => {
    const g = run.generation();
    const { rec } = g;
    if (rec.phase !== phase) {
      // The clock of the phase before: closed by its checkpoint, so only this one's time counts now.
      rec.phase = phase;
      rec.mark = Date.now();
    }
    try {
      const prepared = await run.workspace(g);
      const done = "outcome" in prepared ? prepared : await work(g, prepared.ws, run);
      if ("outcome" in done) return run.toReport(done.outcome);
      return { next: done.next, patch: run.progressPatch(done.progress) };
    } catch (err) {
      if (err instanceof LoopsmithError && err.retryable) {
        await g.deps
          .saveError(generationError(rec.phase, err, true))
          .catch((saveErr: unknown) =>
            run.io.log.warn({ err: saveErr, generation: g.n }, "could not checkpoint the generation's error"),
          );
        throw err;
      }
      run.io.log.error({ err, generation: g.n }, "generation failed; the run goes on from the same parent");
      const e =
        err instanceof LoopsmithError
          ? err
          : new LoopsmithError("internal", (err as Error)?.message ?? String(err), { cause: err });
      rec.errors.push(generationError(rec.phase, e));
      return run.toReport({
        report: recordedReport(g.state, rec, g.startedAt, {
          ...(rec.hypothesis ? { hypothesis: rec.hypothesis } : {}),
          decision: { verdict: "rejected", reason: "error", message: `${e.code}: ${e.message}` },
        }),
      });
    }
  };
}

/** What an earlier phase of the running generation checkpointed; an internal error when it is missing. */
function earlier<K extends keyof GenerationProgress>(g: GenerationRun, key: K): NonNullable<GenerationProgress[K]> {
  const value = g.state.progress?.[key];
  if (value === undefined) throw new LoopsmithError("internal", `generation ${g.n}: no ${key} checkpointed`);
  return value as NonNullable<GenerationProgress[K]>;
}

/** The running generation's hypothesis (PLAN's); an internal error when there is none. */
function hypothesisOf(g: GenerationRun): Hypothesis {
  if (!g.rec.hypothesis) throw new LoopsmithError("internal", `generation ${g.n}: no hypothesis checkpointed`);
  return g.rec.hypothesis;
}

/** The validated candidate VALIDATE checkpointed, its overlay on the parent read again. */
function validatedOf(g: GenerationRun, ws: Workspace): Validated {
  const v = earlier(g, "validated");
  return { ...v, overlay: candidateFiles(v.change, ws.read) };
}

/** PLAN: the generation's hypothesis (asked, or the one checkpointed), shown. */
export const planPhase = generationPhase("plan", async (g, ws, run) => {
  const hypothesis = await plan(g, ws, shownToModel(run.reports, run.held()));
  await g.deps.emit(improveTexts.hypothesis(g.n, hypothesis.title), { generation: g.n, phase: "plan", hypothesis });
  return { next: "implement" };
});

/** IMPLEMENT: the generation's task, followed to its result. */
export const implementPhase = generationPhase("implement", async (g, ws) => {
  const implemented = await implement(g, ws, hypothesisOf(g));
  return "outcome" in implemented ? implemented : { next: "validate", progress: { result: implemented.result } };
});

/** VALIDATE: the task's change screened and held to the guards and the parent's counts; a dry run ends here. */
export const validatePhase = generationPhase("validate", async (g, ws) => {
  const result = earlier(g, "result");
  const screened = await screenChange(g, ws, hypothesisOf(g), result);
  if ("outcome" in screened) return screened;
  const validated = await validateCandidate(g, ws, screened, result);
  if ("outcome" in validated) return validated;
  if (g.state.request.settings.dryRun) return { outcome: dryRunOutcome(g, validated) };
  const { change, checkPart, parentCheck } = validated;
  return { next: "measure", progress: { validated: { change, checkPart, parentCheck } } };
});

/** MEASURE: the benchmark, or the quality metrics, on parent and candidate. */
export const measurePhase = generationPhase("bench", async (g, ws) => {
  const v = validatedOf(g, ws);
  const bench = g.state.request.settings.bench;
  const measured = bench === undefined ? await measureMetrics(g, ws, v) : await measureBenchmark(g, ws, v);
  return "outcome" in measured ? measured : { next: "decide", progress: { measured: measured.measured } };
});

/** DECIDE: the paired decision on what MEASURE checkpointed; an accepted candidate stored as the next parent. */
export const decidePhase = generationPhase("decide", async (g, ws) => {
  const v = validatedOf(g, ws);
  const measured = earlier(g, "measured");
  const bench = g.state.request.settings.bench;
  return {
    outcome:
      bench === undefined ? await decideMetrics(g, ws, v, measured) : await decideBenchmark(g, v, measured, bench),
  };
});

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
