/**
 * `loopsmith improve`, `loopsmith report`, `loopsmith dashboard` and `loopsmith metrics`: a
 * self-improvement run (generations of one change each, kept only on statistical evidence),
 * its reports as a table, its one-file HTML dashboard, and the repository's quality metrics
 * measured as a run measures them, with nothing changed. Registration only: the work is in
 * `../improve/`, loaded when a command runs.
 *
 * Exit codes (`ExitCode`): 0 the run completed (accepted or not) or stopped at its budget, or
 * the metrics were measured (an unavailable metric is a figure, not a failure); 1 the run
 * ended in error; 2 bad flags, repository or configuration, a missing GitHub token; 3
 * infrastructure (NATS, Docker, a measuring run that ended in error); 130 interrupted.
 */
import { Option, type Command } from "commander";
import type { Logger } from "pino";
import { ALPHA_SPENDINGS, BENCH_FORMATS, DEPENDENCY_POLICIES } from "@loopsmith/shared/contracts/values";
import { usageError, type CommandRunner } from "../errors.js";
import { ExitCode } from "../exit-codes.js";
import type { ImproveFlags } from "../improve/settings.js";
import type { ImproveMergeFlags } from "../improve/pull-requests.js";
import { checkMergeFlags } from "../solve-issue-flags.js";
import type { MetricsFlags } from "../improve/metrics.js";
import { addModelFlags } from "../model-flags.js";
import { parseDuration, positiveNumber, wholeNumber } from "../preflight.js";

/** Run ids (`RunId` in shared): 1-48 letters, digits, `-` or `_`. */
const RUN_ID = /^[A-Za-z0-9_-]{1,48}$/;

function checkRunId(runId: string | undefined): void {
  if (runId !== undefined && !RUN_ID.test(runId))
    throw usageError(
      `run id ${JSON.stringify(runId.slice(0, 80))} is not valid: run ids are 1-48 letters, digits, '-' or '_'`,
    );
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function alphaValue(v: string): number {
  const n = Number(v);
  if (!(n > 0 && n <= 0.5)) throw usageError(`--alpha must be a number in (0, 0.5], got ${v}`);
  return n;
}

function fractionValue(v: string): number {
  const n = Number(v);
  if (!(n >= 0 && n <= 0.9)) throw usageError(`--confirmation-fraction must be a number in [0, 0.9], got ${v}`);
  return n;
}

const METRICS_HELP =
  "with no --bench, the quality metrics measured, comma-separated: tests, coverage, lint, type_errors, complexity, doc_coverage, imports, security (default improve.benchmarks.enabled, else all)";

/** Registers `improve`, `report`, `dashboard` and `metrics`. */
export function registerImprove(program: Command, run: CommandRunner, logger: () => Promise<Logger>): void {
  const improve = program
    .command("improve")
    .description(
      "self-improvement generations: one change each, kept only when the benchmark (or, with no --bench, the repository's quality metrics) improves significantly",
    );
  // The options in the order `--help` lists them: the judging, the generations, where it ends up.
  addJudgingOptions(improve);
  addGenerationOptions(improve);
  addOutcomeOptions(improve);
  // Who answers, as on solve (the same flags, the same configuration layer).
  addModelFlags(improve)
    .option("--script <file>", "replies file for the scripted provider")
    .option("--config <file>", "configuration file (JSON; its improve section holds these settings)")
    .option("--json", "print one JSON event per line, then the summary");
  improve.action(async (opts: ImproveFlags & ImproveMergeFlags) => run(opts.json, () => improveAction(opts, logger)));

  registerMetrics(program, run, logger);
  registerReport(program, run);
  registerDashboard(program, run);
}

/** `improve`'s options on the repository and how a candidate is judged: `--repo` to `--tolerance`. */
function addJudgingOptions(improve: Command): void {
  improve
    .option("--repo <path>", "the git repository to improve (default: the current directory)")
    .option("--generations <n>", "generations to run (default 3)", wholeNumber(1, 100))
    .option("--goal <text>", "what to improve (default: make the benchmark better without breaking the checks)")
    .option("--check <cmd>", "must pass on every candidate (default: the detected test command)")
    .option(
      "--bench <cmd>",
      'the benchmark: prints one JSON object per case and line ({"case","pass","score"?}); without it, the repository\'s quality metrics (improve.benchmarks) judge each generation',
    )
    .addOption(
      new Option("--bench-format <format>", "json lines on stdout, or the JUnit cases pytest writes").choices(
        BENCH_FORMATS,
      ),
    )
    .option(
      "--bench-junit <path>",
      "with --bench-format junit: the JUnit XML file the benchmark writes (workspace-relative)",
    )
    .option(
      "--repeats <k>",
      "benchmark runs per side at most, interleaved; stops early when the runs so far already reject (default 1)",
      wholeNumber(1, 20),
    )
    .option(
      "--alpha <p>",
      "the run's error budget: P(any generation accepted that is not better) ≤ p over the whole run (default 0.05)",
      alphaValue,
    )
    .addOption(
      new Option(
        "--alpha-spending <rule>",
        "how the run spends --alpha over its tests: harmonic over --generations, basel (6/π²j², any number), none (each test at --alpha)",
      ).choices(ALPHA_SPENDINGS),
    )
    .option(
      "--holdout <pattern or file>",
      "confirmation cases the model never sees: a case-id glob, or a file of case ids, one per line (repeatable)",
      collect,
    )
    .option(
      "--confirmation-fraction <f>",
      "share of the cases held out for confirmation, stratified by the parent's pass/fail (default 0.3; 0: none)",
      fractionValue,
    )
    .option(
      "--calibration-runs <k>",
      "benchmark runs of the parent before generation 1, to find flaky cases (default 3)",
      wholeNumber(1, 20),
    )
    .option(
      "--split-seed <n>",
      "seed of the selection/confirmation split (default: from the run id)",
      wholeNumber(0, 2 ** 32 - 1),
    )
    .option(
      "--tolerance <n>",
      "cases passing on the parent that may fail on the candidate (default 0)",
      wholeNumber(0, 1000),
    );
}

/** `improve`'s options on each generation: `--budget-usd` to `--metrics`. */
function addGenerationOptions(improve: Command): void {
  improve
    .option(
      "--budget-usd <usd>",
      "LLM budget of the whole run; a generation that cannot fit is not started",
      positiveNumber,
    )
    .option(
      "--dry-run",
      "plan and implement one generation, show the change and the evidence it would need; benchmark and change nothing",
    )
    .option("--review", "run the LLM review of each generation's candidate before its check")
    .option("--protect <glob>", "another protected path (repeatable)", collect)
    .addOption(
      new Option(
        "--dependencies <policy>",
        "a candidate changing dependencies is rejected unless allow (default reject)",
      ).choices(DEPENDENCY_POLICIES),
    )
    .option("--max-iterations <n>", "iterations of each generation's task (default 5)", wholeNumber(1, 20))
    .option(
      "--generation-timeout <s>",
      "time limit of one generation, in seconds (default 1800)",
      wholeNumber(10, 86_400),
    )
    .option("--base <ref>", "the commit to start from (default HEAD)")
    .option("--setup-cmd <cmd>", 'installs dependencies in the sandbox once per tree (default detected; "" for none)')
    .option("--metrics <list>", METRICS_HELP);
}

/** `improve`'s options on the run's id, its directory and what becomes of accepted generations. */
function addOutcomeOptions(improve: Command): void {
  improve
    .option(
      "--run-id <id>",
      "run id (default: generated); a resubmitted id follows the run instead of starting it again",
    )
    .option(
      "--out <dir>",
      "the run's directory: reports/gen-N.json, summary.json, dashboard.html (default <dataDir>/improve/<runId>)",
    )
    .option(
      "--promote <branch>",
      "at the end, fast-forward this branch to the last accepted generation (only if it is still at the base)",
    )
    .addOption(
      new Option("--pr <host>", "open a pull request per accepted generation (token: GITHUB_TOKEN)").choices([
        "github",
      ]),
    )
    .option("--github-repo <owner/name>", "--pr github: the repository (default: parsed from the remote's URL)")
    .option("--remote <name>", "--pr github: the remote to push the branches to (default origin)")
    .addOption(
      new Option(
        "--merge-when <when>",
        "--pr github: after the run, follow its pull requests and merge each once approved and its checks pass (approved), or when its checks pass without any review (now); changes requested close it",
      ).choices(["approved", "now"]),
    )
    .option(
      "--review-timeout <duration>",
      "with --merge-when: close the pull requests not merged within this time (90s, 30m, 2h; default 24h)",
      parseDuration,
    );
}

/** `improve`'s work once its flags are parsed: the run, then (with `--merge-when`) its pull requests. */
async function improveAction(opts: ImproveFlags & ImproveMergeFlags, logger: () => Promise<Logger>): Promise<ExitCode> {
  checkMergeFlags(opts, "--pr github");
  checkRunId(opts.runId);
  if (opts.metrics !== undefined && opts.bench !== undefined)
    throw usageError("--metrics and --bench exclude each other: with --bench the benchmark judges, not the metrics");
  const { improve: runImprove } = await import("../improve/run.js");
  const outcome = await runImprove(opts, await logger());
  if (outcome.summary.stopReason === "error") return ExitCode.failed;
  if (!opts.mergeWhen) return ExitCode.ok;
  // The pull requests are followed once the run's stack has stopped (improve/pull-requests.ts).
  const { mergeImprovePulls } = await import("../improve/pull-requests.js");
  return (await mergeImprovePulls(outcome, opts)) ? ExitCode.ok : ExitCode.failed;
}

/** Registers `report`: one run's generations as a table, or (`--all`) the figures across runs. */
function registerReport(program: Command, run: CommandRunner): void {
  program
    .command("report")
    .description(
      "an improvement run's generations as a table; with --all, every run in a directory: acceptance rate over time, rejection reasons, cost",
    )
    .argument("[runId]", "the run's id (not with --all)")
    .option("--all", "every run in --dir (default <dataDir>/improve): the figures across them")
    .option(
      "--dir <dir>",
      "the run's directory (default <dataDir>/improve/<runId>); with --all, the directory of the runs (default <dataDir>/improve)",
    )
    .option("--config <file>", "configuration file (JSON)")
    .option("--json", "print the reports as JSON (with --all, the figures as one JSON object)")
    .action(async (runId: string | undefined, opts: { all?: boolean; dir?: string; config?: string; json?: boolean }) =>
      run(opts.json, async () => {
        const { loadConfig } = await import("@loopsmith/shared/runtime");
        const config = loadConfig(opts.config ? { file: opts.config } : {});
        if (runIdOrAll("report", runId, opts.all) === "all") {
          const { allRunsDir } = await import("../improve/run.js");
          const { aggregateRuns, readRuns, runsTable } = await import("../improve/all-runs.js");
          const dir = allRunsDir(config, opts.dir);
          const agg = aggregateRuns(dir, await readRuns(dir));
          process.stdout.write(opts.json ? `${JSON.stringify({ kind: "runs", ...agg })}\n` : `${runsTable(agg)}\n`);
          return ExitCode.ok;
        }
        const { runDir } = await import("../improve/run.js");
        const { readReports, readSummary, reportTable } = await import("../improve/reports.js");
        const dir = runDir(config, runId as string, opts.dir);
        const reports = await readReports(dir);
        const summary = await readSummary(dir);
        process.stdout.write(opts.json ? `${JSON.stringify(reports)}\n` : `${reportTable(reports, summary)}\n`);
        return ExitCode.ok;
      }),
    );
}

/** Registers `dashboard`: one run's HTML dashboard, or (`--all`) the one across runs. */
function registerDashboard(program: Command, run: CommandRunner): void {
  program
    .command("dashboard")
    .description(
      "write an improvement run's dashboard (with --all, the one across every run in a directory): one HTML file that opens from disk",
    )
    .argument("[runId]", "the run's id (not with --all)")
    .option("--all", "the dashboard across every run in --dir (default <dataDir>/improve)")
    .option(
      "--dir <dir>",
      "the run's directory (default <dataDir>/improve/<runId>); with --all, the directory of the runs (default <dataDir>/improve)",
    )
    .option("--out <file>", "where to write it (default <run dir>/dashboard.html; with --all, <dir>/runs.html)")
    .option("--config <file>", "configuration file (JSON)")
    .action(async (runId: string | undefined, opts: { all?: boolean; dir?: string; out?: string; config?: string }) =>
      run(false, async () => {
        const { join, resolve } = await import("node:path");
        const { loadConfig } = await import("@loopsmith/shared/runtime");
        const config = loadConfig(opts.config ? { file: opts.config } : {});
        const { dashboardHtml, writeDashboard } = await import("../improve/dashboard.js");
        if (runIdOrAll("dashboard", runId, opts.all) === "all") {
          const { allRunsDir } = await import("../improve/run.js");
          const { aggregateRuns, readRuns, runDashboards } = await import("../improve/all-runs.js");
          const { runsDashboardHtml } = await import("../improve/dashboard.js");
          const dir = allRunsDir(config, opts.dir);
          const runs = await readRuns(dir);
          const file = opts.out ? resolve(opts.out) : join(dir, "runs.html");
          const dashboards = await runDashboards(runs, file);
          await writeDashboard(file, runsDashboardHtml(aggregateRuns(dir, runs), { dashboards }));
          process.stdout.write(`wrote ${file}\n`);
          return ExitCode.ok;
        }
        const { runDir } = await import("../improve/run.js");
        const { readReports, readSummary } = await import("../improve/reports.js");
        const id = runId as string;
        const dir = runDir(config, id, opts.dir);
        const file = opts.out ? resolve(opts.out) : join(dir, "dashboard.html");
        const alpha = (await readSummary(dir))?.alpha?.budget;
        await writeDashboard(file, dashboardHtml(id, await readReports(dir), alpha === undefined ? {} : { alpha }));
        process.stdout.write(`wrote ${file}\n`);
        return ExitCode.ok;
      }),
    );
}

/**
 * Whether `report`/`dashboard` shows one run or all of them: a valid run id alone, or `--all` alone.
 * @throws CliError `bad_request` (a usage error) for both, for neither, or for an invalid run id
 */
export function runIdOrAll(command: string, runId: string | undefined, all: boolean | undefined): "one" | "all" {
  if (all && runId !== undefined)
    throw usageError(`${command}: give a run id or --all, not both (--all reads every run in --dir)`);
  if (all) return "all";
  if (runId === undefined)
    throw usageError(`${command}: give a run id, or --all for every run in --dir (default <dataDir>/improve)`);
  checkRunId(runId);
  return "one";
}

/**
 * The flag combinations `loopsmith metrics` refuses, before anything is loaded.
 * @throws CliError `bad_request` for `--bench-format` or `--bench-junit` without `--bench`, and for `--metrics` with `--bench`
 */
export function checkMetricsFlags(opts: Pick<MetricsFlags, "bench" | "benchFormat" | "benchJunit" | "metrics">): void {
  if (opts.benchFormat !== undefined && opts.bench === undefined)
    throw usageError("--bench-format needs --bench (the benchmark to measure)");
  if (opts.benchJunit !== undefined && opts.bench === undefined)
    throw usageError("--bench-junit needs --bench (the benchmark that writes it)");
  if (opts.bench !== undefined && opts.metrics !== undefined)
    throw usageError(
      "--metrics and --bench exclude each other: with --bench the benchmark is measured, not the metrics",
    );
}

/** Registers `metrics`: the quality metrics of one commit, measured as improve measures a parent. */
function registerMetrics(program: Command, run: CommandRunner, logger: () => Promise<Logger>): void {
  program
    .command("metrics")
    .description(
      "measure the repository's quality metrics in the sandbox, as improve measures a parent, and change nothing",
    )
    .option("--repo <path>", "the git repository to measure (default: the current directory)")
    .option("--base <ref>", "the commit to measure (default HEAD)")
    .option("--metrics <list>", METRICS_HELP.replace("with no --bench, the", "the"))
    .option("--check <cmd>", "also run this check on the commit and show its test counts")
    .option("--bench <cmd>", "measure this benchmark once instead (its cases passing, the mean score)")
    .addOption(
      new Option("--bench-format <format>", "json lines on stdout, or the JUnit cases pytest writes").choices(
        BENCH_FORMATS,
      ),
    )
    .option(
      "--bench-junit <path>",
      "with --bench-format junit: the JUnit XML file the benchmark writes (workspace-relative)",
    )
    .option("--setup-cmd <cmd>", 'installs dependencies in the sandbox first (default detected; "" for none)')
    .option("--config <file>", "configuration file (JSON; its improve section holds these settings)")
    .option("--json", "print the figures as one JSON object")
    .action(async (opts: MetricsFlags) =>
      run(opts.json, async () => {
        checkMetricsFlags(opts);
        const { metricsCommand } = await import("../improve/metrics.js");
        await metricsCommand(opts, await logger());
        return ExitCode.ok;
      }),
    );
}
