/**
 * Self-improvement runs. A run chains **generations**: each proposes one change to
 * a repository (a repo-mode task), checks it, benchmarks the parent and the candidate on the
 * same cases, and keeps the change only when the paired statistics say it is better and no
 * guard fired. The benchmark command, the check command and the decision always come from
 * the parent commit and from loopsmith, never from the candidate.
 */
import { z } from "zod";
import { Owner, RelativePath, Usage, V1 } from "./common.js";
import { Finding } from "./plan.js";
import { CommitId, DependencyPolicy } from "./repo.js";
import { unknownKeysError } from "../runtime/unknown-keys.js";
import { ALPHA_SPENDINGS, BENCH_FORMATS } from "./values.js";

/** An improvement run id: 1-48 letters, digits, `-` or `_` (a generation's task id is `<runId>-gen-<N>`). */
export const RunId = z.string().regex(/^[A-Za-z0-9_-]{1,48}$/, "run ids are 1-48 letters, digits, '-' or '_'");
export type RunId = z.infer<typeof RunId>;

/** The goal when none is given. */
export const DEFAULT_IMPROVE_GOAL = "make the benchmark better without breaking the checks";

/**
 * How the benchmark reports its cases. `json`: stdout holds one JSON object per case and line,
 * `{"case": "<id>", "pass": true|false, "score": <number, optional>}` (other lines are
 * ignored). `junit`: the cases are the test cases the sandbox read from the run's JUnit XML
 * (pytest writes it by itself in the sandbox; see docs/SANDBOX.md).
 */
export const BenchFormat = z.enum(BENCH_FORMATS);
export type BenchFormat = z.infer<typeof BenchFormat>;

/**
 * The repository's own quality measures, judged when a run has no `bench`:
 * - `tests`: the test pass rate, % (pytest's JUnit; `node --test`'s JUnit reporter), higher is better;
 * - `coverage`: line coverage of non-test sources, % (coverage.py; node's test coverage), higher;
 * - `lint`: lint findings (pyflakes; the repository's eslint), lower;
 * - `type_errors`: type-check errors plus `# type: ignore` / `@ts-ignore` suppressions (mypy; tsc --noEmit), lower;
 * - `complexity`: mean cyclomatic complexity per function (radon; unavailable for JS/TS), lower;
 * - `doc_coverage`: share of public functions and classes with a docstring / TSDoc comment, %, higher;
 * - `imports`: share of modules that import without error, %, higher;
 * - `security`: security findings plus `# nosec` suppressions (bandit; unavailable for JS/TS), lower.
 * docs/USAGE.md has the table with each default tolerance and when a metric is unavailable.
 */
export const QualityMetric = z.enum([
  "tests",
  "coverage",
  "lint",
  "type_errors",
  "complexity",
  "doc_coverage",
  "imports",
  "security",
]);
export type QualityMetric = z.infer<typeof QualityMetric>;

/** Every quality metric, in report order. */
export const QUALITY_METRICS: readonly QualityMetric[] = QualityMetric.options;

/**
 * `improve.benchmarks`: which quality metrics a run without `bench` measures, each one's time
 * limit in the sandbox (seconds), its weight in the weighted improvement, and its tolerance
 * (cases for a metric with cases, the metric's unit for `complexity`). Absent entries take the
 * defaults of `services/architect/src/improve/metrics.ts` (`METRIC_DEFAULTS`).
 */
export const QualityBenchmarks = z.object({
  /** @defaultValue every metric */
  enabled: z
    .array(QualityMetric)
    .min(1)
    .default([...QualityMetric.options]),
  /** Seconds per metric's tool run, fractions allowed (0.1 at least). @defaultValue 120 (tests 300) */
  timeouts: z.partialRecord(QualityMetric, z.number().min(0.1).max(600), { error: unknownKeysError }).default({}),
  /** Non-negative weights; 0 keeps a metric as a guard (it may not regress) that never counts as improvement. @defaultValue 1 (tests 2) */
  weights: z.partialRecord(QualityMetric, z.number().min(0).max(100), { error: unknownKeysError }).default({}),
  /** How far a metric may regress before the candidate is rejected `metric_regressed`. @defaultValue 0 (complexity 0.5) */
  tolerances: z.partialRecord(QualityMetric, z.number().min(0).max(10_000), { error: unknownKeysError }).default({}),
});
export type QualityBenchmarks = z.infer<typeof QualityBenchmarks>;

/** The settings of a run (`loopsmith improve` flags, or the `improve` section of the config file). */
export const ImproveSettings = z.object({
  goal: z.string().min(1).max(4_000).default(DEFAULT_IMPROVE_GOAL),
  /** Must pass on every candidate (the repository's tests). Absent: the detected test command. */
  check: z.string().min(1).max(4_000).optional(),
  /**
   * The benchmark command, run with `sh -c` at the workspace root in the sandbox, network off (3,500 characters at most: a JUnit copy may follow it).
   * Absent: the run judges the repository's own quality metrics (`benchmarks`).
   */
  bench: z.string().min(1).max(3_500).optional(),
  /** The quality metrics judged when there is no `bench`. */
  benchmarks: QualityBenchmarks.default({
    enabled: [...QualityMetric.options],
    timeouts: {},
    weights: {},
    tolerances: {},
  }),
  benchFormat: BenchFormat.default("json"),
  /**
   * `junit`: the workspace path where the benchmark writes its JUnit XML, when it is not
   * pytest (which writes JUnit in the sandbox by itself) and does not write `$LOOPSMITH_JUNIT`.
   */
  benchJunit: RelativePath.optional(),
  /** Benchmark runs per side (parent, candidate), interleaved. @defaultValue 1 */
  repeats: z.number().int().min(1).max(20).default(1),
  /**
   * The run's error budget: the probability that the run accepts ANY generation that is not
   * better is at most `alpha`, whatever the number of generations. The paired tests of the run
   * spend it (see `alphaSpending`). @defaultValue 0.05
   */
  alpha: z.number().gt(0).max(0.5).default(0.05),
  /**
   * How the run spends `alpha` over its paired tests (the j-th benchmarked generation is tested
   * at α_j, and Σ α_j ≤ alpha, so by the union bound P(any false accept) ≤ alpha):
   * - `harmonic`: α_j = alpha / (j · H_G), H_G = Σ_{i ≤ G} 1/i, G = `generations` (a run has at
   *   most G tests);
   * - `basel`: α_j = alpha · 6 / (π² j²), valid for any number of tests;
   * - `none`: α_j = alpha for every test (each generation judged on its own;
   *   no run-level guarantee).
   * @defaultValue "harmonic"
   */
  alphaSpending: z.enum(ALPHA_SPENDINGS).default("harmonic"),
  /**
   * Share of the benchmark's cases held out as the **confirmation** set: never shown
   * to the model, and a candidate is accepted only when they confirm the selection set's
   * improvement. Stratified by the parent's pass/fail, seeded (`splitSeed`). 0: no confirmation
   * set. Ignored when `holdout` names the confirmation cases. @defaultValue 0.3
   */
  confirmationFraction: z.number().min(0).max(0.9).default(0.3),
  /**
   * The confirmation cases, named by the user: case-id globs (picomatch, `*` and `?`), or exact
   * ids (the CLI's `--holdout <pattern or file>` reads a file as one id per line).
   */
  holdout: z.array(z.string().min(1).max(500)).max(10_000).default([]),
  /** Seed of the selection/confirmation split (absent: derived from the run id). Recorded in the run's state. */
  splitSeed: z
    .number()
    .int()
    .min(0)
    .max(2 ** 32 - 1)
    .optional(),
  /**
   * Benchmark runs of the base parent before generation 1, to measure each case's flakiness: a
   * case that both passed and failed in them is **flaky** and leaves the pass/fail test (both
   * sets, and the regression count). They also give the parent pass/fail the split is
   * stratified by. @defaultValue 3
   */
  calibrationRuns: z.number().int().min(1).max(20).default(3),
  /** Cases that passed on the parent and may fail on the candidate. @defaultValue 0 */
  tolerance: z.number().int().min(0).max(1_000).default(0),
  /** Generations to run. @defaultValue 3 */
  generations: z.number().int().min(1).max(100).default(3),
  /** LLM budget of the whole run, in USD; a generation that cannot fit is not started. */
  budgetUsd: z.number().positive().optional(),
  /** Wall-clock limit of one generation, in ms; past it the generation is recorded as `timeout`. @defaultValue 30 min */
  generationTimeoutMs: z
    .number()
    .int()
    .min(10_000)
    .max(24 * 3600_000)
    .default(30 * 60_000),
  /** Limit of one benchmark or check run in the sandbox, in ms. @defaultValue 5 min */
  commandTimeoutMs: z.number().int().min(1_000).max(600_000).default(300_000),
  /** Iterations of each generation's repo-mode task. @defaultValue 5 */
  maxIterations: z.number().int().min(1).max(20).default(5),
  /** Extra protected paths (globs, `**` allowed), added to the defaults ({@link DEFAULT_PROTECTED}). */
  protected: z.array(z.string().min(1).max(500)).max(200).default([]),
  /** Policy for candidates that change dependency manifests; anything but `allow` rejects them (`new_dependency`). */
  dependencies: DependencyPolicy.default("reject"),
  /** Run the LLM review of each generation's candidate before its check (the task's `review`). @defaultValue false */
  review: z.boolean().default(false),
  /** Plan and implement, show the change and the evidence it would need; benchmark and change nothing. */
  dryRun: z.boolean().default(false),
});
export type ImproveSettings = z.infer<typeof ImproveSettings>;
export type ImproveSettingsInput = z.input<typeof ImproveSettings>;

/**
 * Protected by default: the benchmark and its data, CI and test configuration, loopsmith's own
 * settings file. A candidate that touches one is rejected (`protected`) before any benchmark runs.
 * When the repository is loopsmith itself, {@link SELF_PROTECTED} is added.
 */
export const DEFAULT_PROTECTED: readonly string[] = [
  "bench/**",
  "benchmark/**",
  "benchmarks/**",
  ".github/**",
  ".gitlab-ci.yml",
  ".circleci/**",
  ".ci/**",
  "Jenkinsfile",
  "azure-pipelines.yml",
  ".travis.yml",
  "pytest.ini",
  "tox.ini",
  "noxfile.py",
  ".coveragerc",
  "**/conftest.py",
  "vitest.config.*",
  "vitest.workspace.*",
  "jest.config.*",
  ".mocharc*",
  "karma.conf.*",
  "loopsmith.json",
  "loopsmith.config.json",
  ".loopsmith/**",
];

/**
 * Added when improving loopsmith itself: what judges a change and is not code (the images and
 * the sandbox's seccomp profile under `deploy/`, the example's benchmark, the integration tests,
 * the LLM review's prompts). The judging code itself is not listed here: it is derived from its
 * imports in the parent tree of each generation (`judgingCode`, in the architect's
 * `improve/judging-code.ts`), so code that moves stays protected.
 */
export const SELF_PROTECTED: readonly string[] = [
  "deploy/**",
  "examples/self-improve/**",
  "tests/**",
  "shared/prompts/review.*",
];

/** A run as submitted on `loopsmith.improve.submit` (message id = run id, so a resubmit is a duplicate). */
export const ImproveRequest = z.object({
  v: V1,
  runId: RunId,
  /** The repository at the base commit, as in repo mode. */
  repo: z.object({
    baseCommit: CommitId,
    snapshot: z.string().min(1).max(255),
    name: z.string().max(500).optional(),
    setupCommand: z.string().max(4_000).optional(),
    mapTokens: z.number().int().min(256).max(32_000).default(2_048),
  }),
  language: z.enum(["python", "typescript", "javascript"]),
  settings: ImproveSettings,
  /** True when the repository is loopsmith itself ({@link SELF_PROTECTED} applies, and its judging code is protected). */
  self: z.boolean().default(false),
  submittedAt: z.string(),
  /**
   * Measure the base commit and stop, with no generation (`loopsmith metrics`): the quality
   * metrics (or, with `settings.bench`, the benchmark, and with `settings.check`, the check),
   * as a run measures its parent; the figures are the summary's `parent`. @defaultValue false
   */
  measureOnly: z.boolean().default(false),
  /**
   * The client the run belongs to, and its generations' tasks. Set by the improver from the
   * subject the run arrived on (`loopsmith.improve.submit.<owner>`); a value written here is replaced.
   */
  owner: Owner.optional(),
});
export type ImproveRequest = z.infer<typeof ImproveRequest>;
export type ImproveRequestInput = z.input<typeof ImproveRequest>;

/** The architect's one hypothesis for a generation (role `improve`). */
export const Hypothesis = z.object({
  /** One line: what to change. */
  title: z.string().min(1).max(300),
  /** Why it should make the benchmark better, from the map, the reports and the rejected attempts. */
  rationale: z.string().max(4_000).default(""),
  /** Which benchmark cases it should fix or score better on, in words. */
  expected: z.string().max(2_000).default(""),
  /** Files it expects to change. */
  files: z.array(z.string().max(500)).max(20).default([]),
});
export type Hypothesis = z.infer<typeof Hypothesis>;

/**
 * Why a generation ended as it did: `accepted`, `dry_run`, or the closed reason for a rejection.
 * - `protected`: the candidate touched a protected path.
 * - `tests_deleted` / `tests_skipped`: a test file was deleted, or a skip marker was added.
 * - `fewer_tests`: the check passed with fewer tests than on the parent.
 * - `thresholds_lowered`: a threshold or timeout in test configuration went down.
 * - `new_dependency`: a dependency manifest changed.
 * - `tampering`: the static gate saw the change tamper with the evaluation (a clear
 *   `tampering.*` finding: writing the verdict's files, an exit at import, patching the test
 *   framework, branching on the runner or the benchmark, a file shadowing the framework).
 * - `bench_unparsed`: a benchmark run printed no case, or an unreadable one, or other cases than the parent's.
 * - `regression`: cases that passed on the parent fail on the candidate (beyond the tolerance).
 * - `metric_regressed`: with no benchmark, a quality metric regressed beyond its tolerance, or the
 *   candidate changed the configuration of the metric's tool (the report's `metrics.regressed` names it).
 * - `overfit`: the selection set (the cases the model was shown) says better and the held-out
 *   confirmation set does not confirm it.
 * - `no_improvement`: no significant improvement (a tie, or p ≥ alpha).
 * - `check_failed` / `implement_failed` / `no_change`: the task did not produce a passing change.
 * - `timeout`: the generation passed its time limit. `budget`: it could not fit the budget.
 * - `error`: an infrastructure error ended it.
 */
export const DecisionReason = z.enum([
  "accepted",
  "dry_run",
  "protected",
  "tests_deleted",
  "tests_skipped",
  "fewer_tests",
  "thresholds_lowered",
  "new_dependency",
  "tampering",
  "bench_unparsed",
  "regression",
  "metric_regressed",
  "overfit",
  "no_improvement",
  "check_failed",
  "implement_failed",
  "no_change",
  "timeout",
  "budget",
  "error",
]);
export type DecisionReason = z.infer<typeof DecisionReason>;

/** The paired test on one set of cases (selection or confirmation) of a generation. */
export const SetStatistic = z.object({
  /**
   * `sign_exact`: one-sided exact sign test (exact McNemar) on the discordant pairs;
   * `fix_rate`: too few discordant pairs for it, so the confirmation's fix rate is compared with
   * the selection's (one-sided Fisher exact test); `wilcoxon`: signed-rank test (scored cases);
   * `none`: nothing to test.
   */
  test: z.enum(["sign_exact", "fix_rate", "wilcoxon", "none"]),
  /** Cases in the set (flaky ones included). */
  cases: z.number().int().nonnegative(),
  /** Cases that failed on the parent, flaky ones left out. */
  parentFailing: z.number().int().nonnegative(),
  fixed: z.number().int().nonnegative(),
  broken: z.number().int().nonnegative(),
  /** One-sided p-value of the set's test (1 when there is nothing to test). */
  pValue: z.number().min(0).max(1),
  /** The level the set was tested at. */
  alpha: z.number(),
  /** Whether the set says "better" (selection) or confirms it (confirmation). */
  passed: z.boolean(),
});
export type SetStatistic = z.infer<typeof SetStatistic>;

/** The paired statistic behind a decision. */
export const Statistic = z.object({
  /** `mcnemar_exact` for pass/fail cases; `wilcoxon` (signed-rank) for scored cases. */
  test: z.enum(["mcnemar_exact", "wilcoxon"]),
  /** Paired cases compared. */
  cases: z.number().int().nonnegative(),
  /** Cases failing (or failing more often) on the parent that pass on the candidate. */
  fixed: z.number().int().nonnegative(),
  /** Cases passing on the parent that fail on the candidate. */
  broken: z.number().int().nonnegative(),
  /** Two-sided p-value of the test (1 when there is nothing to test). */
  pValue: z.number().min(0).max(1),
  alpha: z.number(),
  /** pass/fail: change in pass rate (candidate − parent, −1..1); scored: mean paired score difference. */
  effect: z.number(),
  /** Scored benchmarks: pairs with a non-zero difference (the signed-rank test's n). */
  nonZero: z.number().int().nonnegative().optional(),
  /** The selection set's test (the cases the model may see). */
  selection: SetStatistic.optional(),
  /** The held-out confirmation set's test. */
  confirmation: SetStatistic.optional(),
  /** This generation's place among the run's paired tests (1-based): α_j is `alpha`. */
  testIndex: z.number().int().min(1).optional(),
  /** The run's error budget spent so far, this test included (Σ α_i, i ≤ j). */
  alphaSpent: z.number().nonnegative().optional(),
  /** Flaky cases (from the calibration runs) left out of the pass/fail test. */
  flaky: z.number().int().nonnegative().optional(),
  /** Benchmark runs per side actually made (fewer than `repeats` when the evidence was decisive early). */
  repeatsRun: z.number().int().min(1).optional(),
});
export type Statistic = z.infer<typeof Statistic>;

/** One benchmark case, parent against candidate over the repeats. */
export const CaseOutcome = z.object({
  case: z.string(),
  /** The set the case belongs to (absent: no split). */
  set: z.enum(["selection", "confirmation"]).optional(),
  /** The case was flaky in the calibration runs (left out of the pass/fail test). */
  flaky: z.boolean().optional(),
  parent: z.object({
    passes: z.number().int().nonnegative(),
    runs: z.number().int().nonnegative(),
    scores: z.array(z.number()),
  }),
  candidate: z.object({
    passes: z.number().int().nonnegative(),
    runs: z.number().int().nonnegative(),
    scores: z.array(z.number()),
  }),
});
export type CaseOutcome = z.infer<typeof CaseOutcome>;

/** One quality metric of a generation, parent against candidate. */
export const MetricOutcome = z.object({
  metric: QualityMetric,
  /** `higher` or `lower` is better. */
  direction: z.enum(["higher", "lower"]),
  /** `%`, `findings`, `errors`, `mean CC`. */
  unit: z.string(),
  weight: z.number().nonnegative(),
  tolerance: z.number().nonnegative(),
  /** `measured` on both sides, or `unavailable` (its tool is missing or failed: never a 0). */
  status: z.enum(["measured", "unavailable"]),
  /** Why it is unavailable (which side, what failed). */
  reason: z.string().optional(),
  /** The tool and its version on each side (`mypy 1.15.0`). */
  tool: z.object({ parent: z.string().optional(), candidate: z.string().optional() }),
  /** The metric's value per repeat, each side. */
  parentValues: z.array(z.number()),
  candidateValues: z.array(z.number()),
  /** Mean candidate value − mean parent value (in `unit`). */
  delta: z.number().optional(),
  /**
   * `sign_exact`: one-sided exact sign test on the paired cases (a case passes on a side when it
   * passed in every repeat); `deterministic`: a static measure, identical in every repeat of
   * each side, so its difference has no sampling error; `signed_rank`: one-sided Wilcoxon on
   * the per-repeat differences; `none`: not tested.
   */
  test: z.enum(["sign_exact", "deterministic", "signed_rank", "none"]),
  /** Cases (tests, findings, lines, functions, modules) compared; fixed and broken among them. */
  cases: z.number().int().nonnegative().optional(),
  fixed: z.number().int().nonnegative().optional(),
  broken: z.number().int().nonnegative().optional(),
  /** Up to 10 broken case keys (a failing test, a new finding, a line no longer covered). */
  brokenCases: z.array(z.string()).optional(),
  pValue: z.number().min(0).max(1).optional(),
  /** The level this metric was tested at (α_j split over the weighted metrics). */
  alpha: z.number().optional(),
  improved: z.boolean(),
  regressed: z.boolean(),
  /** One sentence: the figures, or why it regressed. */
  note: z.string(),
});
export type MetricOutcome = z.infer<typeof MetricOutcome>;

/** The quality metrics of a generation with no benchmark (the report's `metrics`). */
export const QualityReport = z.object({
  language: z.enum(["python", "typescript", "javascript"]),
  /** Measurements per side, interleaved. */
  repeats: z.number().int().min(1),
  metrics: z.array(MetricOutcome),
  /** Σ weight × normalized directional change over the measured metrics (> 0: better). */
  weightedImprovement: z.number(),
  /** Metrics that regressed beyond their tolerance. */
  regressed: z.array(QualityMetric),
  /** Metrics whose improvement is significant at their level. */
  improved: z.array(QualityMetric),
});
export type QualityReport = z.infer<typeof QualityReport>;

/** Test counts of one check run. */
export const CheckCounts = z.object({
  status: z.string(),
  total: z.number().int().nonnegative(),
  passed: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  skipped: z.number().int().nonnegative(),
});
export type CheckCounts = z.infer<typeof CheckCounts>;

/**
 * One quality metric of one tree, measured alone (no candidate to compare with): the base
 * commit of a dry run or of `loopsmith metrics`.
 */
const MetricFigure = z.object({
  metric: QualityMetric,
  /** `measured`, or `unavailable` (its tool is missing, failed or timed out: never a 0). */
  status: z.enum(["measured", "unavailable"]),
  /** The value in `unit`, when measured. */
  value: z.number().optional(),
  /** `%`, `findings`, `errors`, `mean CC`. */
  unit: z.string(),
  direction: z.enum(["higher", "lower"]),
  /** The tool with its version, as the measuring script names it (`pytest 8.3.5`, `ast (python 3.11)`). */
  tool: z.string().optional(),
  /** Cases behind the value (tests run, source lines, findings, public definitions, modules), when the metric has cases. */
  cases: z.number().int().nonnegative().optional(),
  /** Of `cases`, those that pass (tests passed, lines covered, …); absent for findings, where every case is one. */
  passing: z.number().int().nonnegative().optional(),
  /** Why it is unavailable. */
  reason: z.string().optional(),
});

/** The benchmark on one tree, run once: its cases and score. */
const BenchFigure = z.object({
  command: z.string(),
  format: BenchFormat,
  /** `measured`, or `unavailable` when the run could not be read (the reason says why). */
  status: z.enum(["measured", "unavailable"]),
  cases: z.number().int().nonnegative(),
  passed: z.number().int().nonnegative(),
  /** `passed / cases`, %, when measured. */
  passRate: z.number().min(0).max(100).optional(),
  /** Mean score of the cases that carry one, when some do. */
  meanScore: z.number().optional(),
  /** Cases that carry a score. */
  scored: z.number().int().nonnegative().optional(),
  reason: z.string().optional(),
});

/**
 * What a run measured on its base commit before any generation: a dry run's parent, and the
 * whole of a `measureOnly` run (`loopsmith metrics`). Exactly one of `metrics` (no benchmark)
 * and `bench` is present; `check` when the check was run on it.
 */
export const ParentMeasure = z.object({
  /** The tree measured (the base commit). */
  tree: CommitId,
  language: z.enum(["python", "typescript", "javascript"]),
  /** The enabled quality metrics, in report order. */
  metrics: z.array(MetricFigure).optional(),
  bench: BenchFigure.optional(),
  check: z.object({ command: z.string(), counts: CheckCounts }).optional(),
  /** Wall time of the measuring, ms. */
  ms: z.number().nonnegative(),
});
export type ParentMeasure = z.infer<typeof ParentMeasure>;

/**
 * The phases of a generation, in order: `plan` (the hypothesis), `implement` (its repo-mode
 * task), `validate` (the guards and the check's counts), `bench` (the benchmark, or the quality
 * metrics, on both sides), `decide` (the paired statistics, storing an accepted tree). The keys
 * of a report's `phasesMs`, and where a {@link GenerationError} was met.
 */
export const GenerationPhase = z.enum(["plan", "implement", "validate", "bench", "decide"]);
export type GenerationPhase = z.infer<typeof GenerationPhase>;

/**
 * One LLM review of the candidate of a generation's task (the task's REVIEW phase, run when
 * the run's `review` setting is on, and when the static gate saw possible tampering): the
 * reviewer's verdict and each of its findings as it gave them (severity, rule, `path`: the
 * file, line, message).
 */
export const GenerationReview = z.object({
  /** The task's iteration whose candidate was reviewed. */
  iteration: z.number().int().nonnegative(),
  approved: z.boolean(),
  /** The reviewer's score, 0..1. */
  score: z.number().min(0).max(1),
  findings: z.array(Finding),
});
export type GenerationReview = z.infer<typeof GenerationReview>;

/** One error met during a generation: in which phase, and what it said. */
export const GenerationError = z.object({
  phase: GenerationPhase,
  /** The error's code (`unavailable`, `sandbox_error`, `internal`, …), when it has one. */
  code: z.string().optional(),
  /** What went wrong, as the error said it (2,000 characters at most). */
  message: z.string().max(2_000),
  /**
   * The error ended an attempt of the generation that was then resumed from the run's
   * checkpoint (an infrastructure error that may pass), so the generation went on after it.
   */
  retried: z.boolean().optional(),
});
export type GenerationError = z.infer<typeof GenerationError>;

/** Most reviews one {@link GenerationReport} keeps: the last ones of its task. */
export const REVIEWS_KEPT = 5;

/** Most errors one {@link GenerationReport} keeps: the first ones, then the one that ended it. */
export const ERRORS_KEPT = 50;

/** The report of one generation (`reports/gen-N.json` in the run's directory). */
export const GenerationReport = z.object({
  v: V1,
  runId: RunId,
  generation: z.number().int().min(1),
  /** The tree the generation started from: the base commit, or an accepted generation's tree id. */
  parent: CommitId,
  /** The candidate's tree id (sha-256 of its snapshot), when there was a change. */
  candidate: CommitId.optional(),
  hypothesis: Hypothesis.optional(),
  /** The repo-mode task that implemented it. */
  taskId: z.string().optional(),
  change: z
    .object({
      summary: z.string(),
      patch: z.string(),
      changed: z.array(z.string()),
      deleted: z.array(z.string()),
      stat: z.object({ files: z.number().int(), insertions: z.number().int(), deletions: z.number().int() }),
    })
    .optional(),
  check: z
    .object({ command: z.string(), parent: CheckCounts.optional(), candidate: CheckCounts.optional() })
    .optional(),
  bench: z
    .object({ command: z.string(), format: BenchFormat, repeats: z.number().int(), cases: z.array(CaseOutcome) })
    .optional(),
  statistic: Statistic.optional(),
  /** The quality metrics, when the run has no benchmark. */
  metrics: QualityReport.optional(),
  decision: z.object({
    verdict: z.enum(["accepted", "rejected", "dry_run"]),
    reason: DecisionReason,
    /** One or two sentences: what fired, with the figures. */
    message: z.string(),
  }),
  /**
   * The LLM reviews of the generation's task, in order (the last {@link REVIEWS_KEPT} when
   * more ran). Absent when no review ran, and in reports written before reviews were recorded.
   */
  reviews: z.array(GenerationReview).max(20).optional(),
  /**
   * Every error met during the generation, in order: errors that ended an attempt the run
   * then resumed (`retried`), the generation's task ending in error, a timed-out task that
   * could not be cancelled, and the error that ended the generation (reason `error`). Absent
   * when none was met, and in reports written before errors were recorded.
   */
  errors: z.array(GenerationError).max(100).optional(),
  usage: Usage,
  /**
   * Wall time per phase the generation went through, in ms ({@link GenerationPhase}: plan,
   * implement, validate, bench, decide), the phase it ended in included.
   */
  phasesMs: z.record(z.string(), z.number().nonnegative()),
  startedAt: z.string(),
  finishedAt: z.string(),
});
export type GenerationReport = z.infer<typeof GenerationReport>;

/** Why a run stopped. */
export const RunStopReason = z.enum(["completed", "budget", "cancelled", "error"]);
export type RunStopReason = z.infer<typeof RunStopReason>;

/**
 * What the run measured before generation 1 and how it split the cases. The
 * confirmation ids are the user's to see (reports, dashboard); the model never sees them.
 */
export const Calibration = z.object({
  /** Benchmark runs of the base parent. */
  runs: z.number().int().min(0),
  /** Cases that both passed and failed in them, sorted. */
  flaky: z.array(z.string()),
  /** The seed of the split. */
  seed: z.number().int(),
  /** How the confirmation set was chosen. */
  source: z.enum(["fraction", "holdout", "none"]),
  selection: z.array(z.string()),
  confirmation: z.array(z.string()),
  /** Cases failing on the parent in every calibration run. */
  parentFailing: z.array(z.string()),
});
export type Calibration = z.infer<typeof Calibration>;

/** The end of a run. */
export const ImproveSummary = z.object({
  v: V1,
  runId: RunId,
  status: z.enum(["done", "stopped", "error"]),
  stopReason: RunStopReason,
  generations: z.number().int().nonnegative(),
  accepted: z.array(z.number().int()),
  /** The tree id of the last accepted generation (the base commit when none was). */
  head: CommitId,
  usage: Usage,
  message: z.string(),
  /** The calibration runs, the flaky cases and the split. */
  calibration: Calibration.optional(),
  /** The run's error budget (`alpha`) and how much of it its tests spent. */
  alpha: z.object({ budget: z.number(), spent: z.number(), tests: z.number().int().nonnegative() }).optional(),
  /** The base commit as measured before generation 1 (a dry run, a `measureOnly` run). */
  parent: ParentMeasure.optional(),
});
export type ImproveSummary = z.infer<typeof ImproveSummary>;
