/**
 * One generation of an improvement run, phase by phase: PLAN (one hypothesis) → IMPLEMENT (a
 * repo-mode task on the parent tree, until the check passes or a limit stops it) → VALIDATE
 * (guards on the change, then the check's test counts against the parent's) → BENCH (parent
 * and candidate, interleaved, in the sandbox) → DECIDE (paired statistics). The first phase
 * that says no ends the generation with its reason code; nothing of a rejected candidate
 * becomes a parent. Infrastructure errors that may pass (`retryable`) are thrown, so the
 * run's message is redelivered and the generation starts again from the checkpoint.
 */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  ERRORS_KEPT,
  GenerationReport,
  LoopsmithError,
  REVIEWS_KEPT,
  Review,
  addUsage,
  emptyUsage,
  getSnapshot,
  isTestFile,
  putSnapshot,
  snapshotName,
  DEFAULT_OWNER,
  ownerOfTask,
  submitTask,
  followEvents,
  type CheckCounts,
  type DecisionReason,
  type ExecutionRequest,
  type ExecutionResult,
  type GateRequest,
  type GenerationError,
  type GenerationPhase,
  type GenerationReview,
  type GateResult,
  type Hypothesis,
  type LlmProvider,
  type TaskEvent,
  type TaskResult,
  type Usage,
} from "@loopsmith/shared";
import { NO_NEED, budgetOver, budgetStopText } from "@loopsmith/shared/llm";
import { detectCommands, listTree, readBaseFile } from "../repo/context.js";
import { buildRepoMap } from "../repo/map.js";
import { benchBoth, checkCounts, runCommand, type CommandContext } from "./commands.js";
import { decideGeneration, futile, neededFixes, pairCases, runDecideOptions } from "./decision.js";
import { protectedGlobs, testCountViolation, validateChange } from "./guards.js";
import { judgingCode, summarizeJudgingCode } from "./judging-code.js";
import { failingOnParent, hypothesize, taskGoal } from "./hypothesis.js";
import type { ImproveState, Tree } from "./state.js";
import { candidateFiles, candidateSnapshot } from "../tree.js";
import { diffStat } from "./tree.js";
import { evaluationNames } from "../tampering.js";
import { changeTampering } from "./tampering.js";
import { changedToolConfig, judgeMetrics, measureBoth, metricSettings } from "./metrics.js";

/** What a generation needs from the outside. */
export interface GenerationDeps {
  nc: NatsConnection;
  provider: LlmProvider;
  execute(req: ExecutionRequest): Promise<ExecutionResult>;
  /** The reviewer's static gate (its evaluation-tampering rules judge the change in VALIDATE). */
  gate(req: GateRequest): Promise<GateResult>;
  /** The directory holding a snapshot's tree, from `owner`'s store. */
  tree(snapshot: string, owner: string): Promise<string>;
  cacheDir?: string;
  /** Asks the conductor to stop a task (a generation past its time limit). */
  /** Cancels one of `owner`'s tasks. */
  cancelTask(taskId: string, owner: string): Promise<void>;
  /** Publishes a progress event of the run. */
  emit(message: string, data: Record<string, unknown>): Promise<void>;
  /** Checkpoints the hypothesis (and its usage) so a resumed generation does not ask again. */
  saveHypothesis(h: Hypothesis, usage: Usage): Promise<void>;
  /**
   * Checkpoints an error that ends this attempt of the generation before the run resumes it
   * (a retryable one), so the resumed generation's report lists it.
   */
  saveError(error: GenerationError): Promise<void>;
  /** Rejected generations of other runs from the same parent tree (the run's memory of failed attempts). */
  rejectedFrom(parent: string): Promise<GenerationReport[]>;
  log: Logger;
}

/** How a generation ended. */
export interface GenerationOutcome {
  report: GenerationReport;
  /** The new parent, when accepted. */
  accepted?: Tree;
  /** The check's counts on the parent, when measured (kept while the parent stays). */
  parentCheck?: CheckCounts;
  /** The run cannot go on (no check command, a benchmark that does not run on the parent). */
  fatal?: boolean;
  /** The run's USD budget is used up (the hypothesis spent the rest): the run stops with `budget`. */
  budget?: boolean;
}

class GenerationTimeout extends Error {}

/** The task id of generation `n` of a run. */
export function generationTaskId(runId: string, n: number): string {
  return `${runId}-gen-${n}`;
}

/**
 * Existing test files the check runs that the candidate changed. The check runs the test
 * files under the paths its command line names (`pytest -q tests` → `tests/`), or every
 * test file when it names none (`npm test`, `python3 -m pytest -q`).
 */
export function checkedTestsEdited(
  changed: readonly string[],
  check: string,
  files: ReadonlySet<string>,
  dirs: ReadonlySet<string>,
): string[] {
  const named = check
    .split(/\s+/)
    .map((w) => w.replace(/^['"]|['"]$/g, "").replace(/^\.\//, ""))
    .filter((w) => files.has(w) || dirs.has(w));
  const isTest = (p: string): boolean =>
    isTestFile(p, "python") || isTestFile(p, "javascript") || isTestFile(p, "typescript");
  return changed.filter(
    (p) => files.has(p) && isTest(p) && (named.length === 0 || named.some((n) => p === n || p.startsWith(`${n}/`))),
  );
}

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

/** Longest error message a report keeps, in characters (the contract's limit). */
const ERROR_MESSAGE_MAX = 2_000;

/**
 * `err` as a report's {@link GenerationError} met in `phase`: a LoopsmithError's code and
 * message, another Error's message (code `internal`), anything else as text; the message
 * cut to 2,000 characters with `…`. Pure.
 */
export function generationError(phase: GenerationPhase, err: unknown, retried = false): GenerationError {
  const code = err instanceof LoopsmithError ? err.code : "internal";
  const message = clipMessage(err instanceof Error ? err.message : String(err));
  return { phase, code, message, ...(retried ? { retried } : {}) };
}

/** `text` cut to {@link ERROR_MESSAGE_MAX} characters, the last one `…` when cut. */
function clipMessage(text: string): string {
  return text.length > ERROR_MESSAGE_MAX ? `${text.slice(0, ERROR_MESSAGE_MAX - 1)}…` : text;
}

/**
 * The errors a report keeps: all of them when there are at most {@link ERRORS_KEPT}, else the
 * first ERRORS_KEPT − 1 and the last (the one that ended the generation). Pure.
 */
export function keptErrors(errors: readonly GenerationError[]): GenerationError[] {
  if (errors.length <= ERRORS_KEPT) return [...errors];
  return [...errors.slice(0, ERRORS_KEPT - 1), ...errors.slice(-1)];
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

/**
 * What a generation records as it goes, for its report: the phase it is in and each phase's
 * wall time, its LLM usage, its hypothesis, the reviews of its task and the errors met.
 */
interface GenerationRecord {
  phase: GenerationPhase;
  /** When the running phase's clock last started, epoch ms. */
  mark: number;
  /** Wall time per phase so far, ms (the running phase's up to `mark`). */
  phasesMs: Record<string, number>;
  usage: Usage;
  hypothesis?: Hypothesis;
  reviews: GenerationReview[];
  errors: GenerationError[];
}

/** Adds the running phase's time since its clock's mark to `phasesMs` and restarts the clock. */
function closePhase(rec: GenerationRecord): void {
  const now = Date.now();
  rec.phasesMs[rec.phase] = (rec.phasesMs[rec.phase] ?? 0) + (now - rec.mark);
  rec.mark = now;
}

/** Ends the running phase (its time recorded) and starts `next`. */
function beginPhase(rec: GenerationRecord, next: GenerationPhase): void {
  closePhase(rec);
  rec.phase = next;
}

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

/** The report of a generation from what `rec` recorded (the running phase's clock closed) and `part`. */
function recordedReport(
  state: ImproveState,
  rec: GenerationRecord,
  startedAt: string,
  part: Partial<GenerationReport> & Pick<GenerationReport, "decision">,
): GenerationReport {
  closePhase(rec);
  return GenerationReport.parse({
    v: 1,
    runId: state.request.runId,
    generation: state.generation,
    parent: state.parent.commit,
    taskId: generationTaskId(state.request.runId, state.generation),
    usage: rec.usage,
    phasesMs: { ...rec.phasesMs },
    ...(rec.reviews.length ? { reviews: rec.reviews } : {}),
    ...(rec.errors.length ? { errors: keptErrors(rec.errors) } : {}),
    startedAt,
    finishedAt: new Date().toISOString(),
    ...part,
  });
}

/** The phases of {@link runGeneration}, recording into `rec`. */
async function generationSteps(
  state: ImproveState,
  reports: readonly GenerationReport[],
  deps: GenerationDeps,
  rec: GenerationRecord,
  startedAt: string,
): Promise<GenerationOutcome> {
  const { request } = state;
  const s = request.settings;
  const n = state.generation;
  const taskId = generationTaskId(request.runId, n);
  const deadline = Date.now() + s.generationTimeoutMs;
  const report = (part: Partial<GenerationReport> & Pick<GenerationReport, "decision">): GenerationReport =>
    recordedReport(state, rec, startedAt, part);
  const reject = (reason: DecisionReason, message: string, part: Partial<GenerationReport> = {}): GenerationOutcome => {
    // An infrastructure error ended it (no check command, judging code that cannot be read): listed too.
    if (reason === "error") rec.errors.push({ phase: rec.phase, message: clipMessage(message) });
    return { report: report({ ...part, decision: { verdict: "rejected", reason, message } }) };
  };

  const root = await deps.tree(state.parent.snapshot, ownerOfTask(request));
  const files = listTree(root);
  const read = (path: string): string | undefined => readBaseFile(root, path);
  const detected = detectCommands(files, read);
  const check = s.check ?? detected.testCommand;
  if (!check)
    return {
      ...reject("error", "no check command: give --check (no pytest or npm test setup was found in the repository)"),
      fatal: true,
    };
  const fileSet = new Set(files);
  const dirs = new Set(
    files.flatMap((f) =>
      f
        .split("/")
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join("/")),
    ),
  );
  const globs = protectedGlobs({
    self: request.self,
    extra: s.protected,
    commands: s.bench !== undefined ? [s.bench, check] : [check],
    exists: (p) => (fileSet.has(p) ? "file" : dirs.has(p) ? "dir" : undefined),
  });
  // On loopsmith itself, the judging code and what it imports, in the parent tree: moved code stays protected.
  let code = new Map<string, string>();
  if (request.self) {
    try {
      code = judgingCode({ files, read });
    } catch (err) {
      if (!(err instanceof LoopsmithError)) throw err;
      return { ...reject("error", err.message), fatal: true };
    }
  }
  const ctx: CommandContext = {
    execute: deps.execute,
    request,
    taskId,
    generation: n,
    setupCommand: request.repo.setupCommand ?? detected.setupCommand ?? "",
  };

  // PLAN
  let hypothesis = rec.hypothesis;
  if (!hypothesis) {
    const map = await buildRepoMap({
      root,
      commit: state.parent.commit,
      files,
      goal: s.goal,
      maxTokens: request.repo.mapTokens,
      ...(deps.cacheDir ? { cacheDir: deps.cacheDir } : {}),
    });
    const remaining = s.budgetUsd !== undefined ? Math.max(0, s.budgetUsd - state.usage.costUsd) : undefined;
    const asked = await hypothesize(deps.provider, {
      request,
      generation: n,
      taskId,
      map: map.text,
      reports,
      earlier: await deps.rejectedFrom(state.parent.commit),
      failing: failingOnParent(reports, state.parent.commit),
      protectedGlobs: [...globs, ...summarizeJudgingCode(code, files)],
      check,
      ...(remaining !== undefined ? { budgetUsd: remaining } : {}),
    });
    hypothesis = asked.hypothesis;
    rec.hypothesis = hypothesis;
    rec.usage = addUsage(rec.usage, asked.usage);
    await deps.saveHypothesis(hypothesis, rec.usage);
  }
  beginPhase(rec, "implement");
  await deps.emit(`generation ${n}: ${hypothesis.title}`, { generation: n, phase: "plan", hypothesis });

  // IMPLEMENT
  const remainingUsd = s.budgetUsd !== undefined ? s.budgetUsd - state.usage.costUsd - rec.usage.costUsd : undefined;
  // The hypothesis spent the rest of the run's budget: the task would run with no limit at all.
  const over =
    remainingUsd !== undefined
      ? budgetOver({ kind: "generation", generation: n }, NO_NEED, {
          budget: { remainingUsd },
          totalUsd: s.budgetUsd,
        })
      : undefined;
  if (over) return { ...reject("budget", budgetStopText(over), { hypothesis }), budget: true };
  const owner = request.owner ?? DEFAULT_OWNER;
  await submitTask(
    deps.nc,
    {
      v: 1,
      taskId,
      goal: taskGoal(request, n, hypothesis, check),
      language: request.language,
      review: s.review,
      limits: {
        maxIterations: s.maxIterations,
        runTimeoutMs: s.commandTimeoutMs,
        memoryMb: 1_024,
        ...(remainingUsd !== undefined ? { maxCostUsd: remainingUsd } : {}),
      },
      repo: {
        baseCommit: state.parent.commit,
        snapshot: state.parent.snapshot,
        ...(request.repo.name ? { name: request.repo.name } : {}),
        testCommand: check,
        setupCommand: ctx.setupCommand,
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
  await deps.emit(`generation ${n}: implementing (task ${taskId})`, { generation: n, phase: "implement", taskId });
  const result = await waitForResult(deps.nc, owner, taskId, deadline - Date.now(), (event) => {
    const review = reviewOfEvent(event);
    if (review) rec.reviews = addReview(rec.reviews, review);
  });
  if (!result) {
    await deps.cancelTask(taskId, owner).catch((err: unknown) => {
      deps.log.warn({ err, taskId }, "could not cancel the generation's task");
      rec.errors.push(generationError("implement", err));
    });
    return reject(
      "timeout",
      `the generation passed its time limit of ${Math.round(s.generationTimeoutMs / 1000)} s while its task was running`,
      { hypothesis },
    );
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
  beginPhase(rec, "validate");
  const change = result.repo;
  if (!change || (!change.changed.length && !change.deleted.length)) {
    return reject(
      result.status === "passed" ? "no_change" : "implement_failed",
      `the task ${result.status === "passed" ? "changed nothing" : `ended ${result.status} (${result.stopReason}) without a change`}: ${result.message}`,
      { hypothesis },
    );
  }
  const changePart = {
    change: {
      summary: change.summary,
      patch: change.patch,
      changed: change.changed,
      deleted: change.deleted,
      stat: diffStat(change.patch),
    },
    hypothesis,
  };
  // VALIDATE, first: a change that tampers with the evaluation is rejected as such, whatever its check said.
  const tampered = await changeTampering(deps.gate, {
    taskId,
    generation: n,
    language: request.language,
    patch: change.patch,
    deleted: change.deleted,
    read,
    evaluation: evaluationNames([s.bench, check], [s.benchJunit]),
  });
  if (tampered) return reject(tampered.reason, tampered.message, changePart);
  // The sandbox saw the check's run forged (tripwires, an early exit, unsigned results: docs/SANDBOX.md).
  if (result.lastExecution?.status === "tampering")
    return reject(
      "tampering",
      `the check's verdict on the candidate cannot be trusted (the sandbox saw its results forged): ${result.message}`,
      changePart,
    );
  if (result.status !== "passed")
    return reject(
      "check_failed",
      `the check \`${check}\` did not pass on the candidate: ${result.message}`,
      changePart,
    );

  // VALIDATE
  const violation = validateChange(
    { patch: change.patch, changed: change.changed, deleted: change.deleted },
    { globs, code, dependencies: s.dependencies },
  );
  if (violation)
    return {
      ...reject(violation.reason, violation.message, changePart),
      ...(state.parentCheck ? { parentCheck: state.parentCheck } : {}),
    };
  // The tests the check runs are its ground truth: a candidate may add tests, not rewrite them.
  const rewritten = checkedTestsEdited(change.changed, check, fileSet, dirs);
  if (rewritten.length)
    return reject(
      "protected",
      `the candidate edits existing test files the check runs (${rewritten.slice(0, 5).join(", ")}); a generation may add tests but not change the ones it is checked by`,
      changePart,
    );
  const parentCheck =
    state.parentCheck ?? checkCounts(await runCommand(ctx, "check_parent", check, state.parent, undefined, 0));
  const candidateCheck = result.lastExecution ? checkCounts(result.lastExecution) : undefined;
  const checkPart = {
    ...changePart,
    check: { command: check, parent: parentCheck, ...(candidateCheck ? { candidate: candidateCheck } : {}) },
  };
  const counted = candidateCheck ? testCountViolation(parentCheck, candidateCheck) : undefined;
  if (counted) return { ...reject(counted.reason, counted.message, checkPart), parentCheck };
  const overlay = candidateFiles(change, read);
  /** The accepted candidate's snapshot, stored as the next parent, and its report. */
  const acceptCandidate = async (part: Partial<GenerationReport>, message: string): Promise<GenerationOutcome> => {
    const snap = await candidateSnapshot(
      await getSnapshot(deps.nc, state.parent.snapshot, ownerOfTask(request)),
      overlay.files,
      overlay.deleted,
    );
    const accepted: Tree = { commit: snap.id, snapshot: snapshotName(snap.id) };
    await putSnapshot(deps.nc, accepted.snapshot, snap.tar, ownerOfTask(request));
    return {
      report: report({ ...part, candidate: snap.id, decision: { verdict: "accepted", reason: "accepted", message } }),
      accepted,
    };
  };
  /** Throws {@link GenerationTimeout} once the generation is past its time limit (between runs). */
  const checkDeadline = (): void => {
    if (Date.now() > deadline) throw new GenerationTimeout();
  };
  /** The generation rejected `timeout` when `err` is the deadline's; any other error is thrown again. */
  const timedOut = (err: unknown, while_: string): GenerationOutcome => {
    if (!(err instanceof GenerationTimeout)) throw err;
    const limit = `${Math.round(s.generationTimeoutMs / 1000)} s`;
    return {
      ...reject("timeout", `the generation passed its time limit of ${limit} while ${while_}`, checkPart),
      parentCheck,
    };
  };

  if (s.dryRun && s.bench === undefined) {
    return {
      report: report({
        ...checkPart,
        decision: {
          verdict: "dry_run",
          reason: "dry_run",
          message: `dry run: the candidate is not measured (the parent was, before this generation). With no benchmark it would be judged on the repository's metrics (${metricSettings(
            s.benchmarks,
          )
            .map((m) => m.metric)
            .join(
              ", ",
            )}): accepted when none regresses beyond its tolerance and some weighted metric improves significantly`,
        },
      }),
      parentCheck,
    };
  }
  if (s.dryRun) {
    const need = neededFixes(s.alpha);
    return {
      report: report({
        ...checkPart,
        decision: {
          verdict: "dry_run",
          reason: "dry_run",
          message: `dry run: the candidate is not measured (the parent was, before this generation). To be accepted it would need, over ${s.repeats} run(s) per side, at least ${need} case(s) fixed with none broken beyond the tolerance of ${s.tolerance} (exact McNemar, two-sided, p < ${s.alpha}), or a significant signed-rank gain on a scored benchmark`,
        },
      }),
      parentCheck,
    };
  }

  // METRICS: no benchmark, so the repository's own quality measures judge the candidate.
  beginPhase(rec, "bench");
  if (s.bench === undefined) {
    await deps.emit(
      `generation ${n}: measuring the quality metrics of parent and candidate (${s.repeats} run(s) each)`,
      {
        generation: n,
        phase: "bench",
      },
    );
    let measured: Awaited<ReturnType<typeof measureBoth>>;
    try {
      measured = await measureBoth(ctx, state.parent, overlay, checkDeadline);
    } catch (err) {
      return timedOut(err, "measuring");
    }
    beginPhase(rec, "decide");
    const opts = runDecideOptions(state);
    const after = new Map(overlay.files.map((f) => [f.path, f.content]));
    const configChanged = changedToolConfig(
      [...change.changed, ...change.deleted].map((path) => ({ path, before: read(path), after: after.get(path) })),
      metricSettings(s.benchmarks).map((m) => m.metric),
    );
    const q = judgeMetrics(measured.parent, measured.candidate, {
      alpha: opts.alpha,
      benchmarks: s.benchmarks,
      language: request.language,
      configChanged,
    });
    const metricsPart = { ...checkPart, metrics: q.report };
    if (q.verdict !== "accepted") {
      return { ...reject(q.reason, q.message, metricsPart), parentCheck };
    }
    return acceptCandidate(metricsPart, q.message);
  }
  const benchCommand = s.bench;

  // BENCH
  await deps.emit(`generation ${n}: benchmarking parent and candidate (${s.repeats} run(s) each)`, {
    generation: n,
    phase: "bench",
  });
  let bench: Awaited<ReturnType<typeof benchBoth>>;
  try {
    bench = await benchBoth(ctx, state.parent, overlay, checkDeadline, (p, c) => futile(p, c, runDecideOptions(state)));
  } catch (err) {
    return timedOut(err, "benchmarking");
  }
  if (!bench.ok) {
    const onParent = bench.side === "parent";
    if (bench.status === "tampering" && !onParent)
      return {
        ...reject("tampering", `the candidate's benchmark run cannot be trusted: ${bench.error}`, checkPart),
        parentCheck,
      };
    return {
      ...reject(
        "bench_unparsed",
        `${onParent ? "the PARENT's" : "the candidate's"} benchmark output cannot be read: ${bench.error}`,
        checkPart,
      ),
      parentCheck,
      fatal: onParent,
    };
  }
  const paired = pairCases(bench.parent, bench.candidate);
  if (!paired.ok) return { ...reject("bench_unparsed", paired.error, checkPart), parentCheck };

  // DECIDE
  beginPhase(rec, "decide");
  const d = decideGeneration(paired.cases, runDecideOptions(state));
  const benchPart = {
    ...checkPart,
    bench: { command: benchCommand, format: s.benchFormat, repeats: s.repeats, cases: d.cases },
    statistic: { ...d.statistic, repeatsRun: bench.parent.length },
  };
  if (d.verdict !== "accepted") {
    return { ...reject(d.reason, d.message, benchPart), parentCheck };
  }
  return acceptCandidate(benchPart, d.message);
}

/**
 * A generation ended by an error that retrying cannot fix, thrown outside its phases: its
 * report (with the errors of earlier attempts the run checkpointed; the phase of this one is
 * not known, so it is in the decision's message only), and the run goes on.
 */
export function errorReport(state: ImproveState, err: unknown, startedAt: string): GenerationReport {
  const e =
    err instanceof LoopsmithError
      ? err
      : new LoopsmithError("internal", (err as Error)?.message ?? String(err), { cause: err });
  const errors = state.generationErrors ?? [];
  return GenerationReport.parse({
    v: 1,
    runId: state.request.runId,
    generation: state.generation,
    parent: state.parent.commit,
    taskId: generationTaskId(state.request.runId, state.generation),
    ...(state.hypothesis ? { hypothesis: state.hypothesis } : {}),
    decision: { verdict: "rejected", reason: "error", message: `${e.code}: ${e.message}` },
    ...(errors.length ? { errors: keptErrors(errors) } : {}),
    usage: state.hypothesisUsage ?? emptyUsage(),
    phasesMs: {},
    startedAt,
    finishedAt: new Date().toISOString(),
  });
}
