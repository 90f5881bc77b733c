/**
 * `loopsmith improve`'s options: flags over the `improve` section of the configuration file
 * (`--config`, or `loopsmith.json` at the repository's root), checked against ImproveSettings.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import {
  ImproveSettings,
  QUALITY_METRICS,
  type AlphaSpending,
  type BenchFormat,
  type DependencyPolicy,
  type QualityMetric,
} from "@loopsmith/shared/contracts";
import { LoopsmithError, checkImproveSection, type Config } from "@loopsmith/shared/runtime";
import type { ModelOptions } from "../steering.js";

/** The flags of `loopsmith improve` (who answers: the same {@link ModelOptions} as `solve`). */
export interface ImproveFlags extends ModelOptions {
  repo?: string;
  base?: string;
  generations?: number;
  goal?: string;
  check?: string;
  bench?: string;
  benchFormat?: BenchFormat;
  benchJunit?: string;
  repeats?: number;
  alpha?: number;
  alphaSpending?: AlphaSpending;
  /** `--holdout`, repeatable: a case-id glob, or a file of case ids (one per line). */
  holdout?: string[];
  confirmationFraction?: number;
  calibrationRuns?: number;
  splitSeed?: number;
  tolerance?: number;
  budgetUsd?: number;
  dryRun?: boolean;
  review?: boolean;
  protect?: string[];
  dependencies?: DependencyPolicy;
  maxIterations?: number;
  generationTimeout?: number;
  setupCmd?: string;
  /** `--metrics`: the quality metrics to measure, comma-separated (over `improve.benchmarks.enabled`). */
  metrics?: string;
  runId?: string;
  out?: string;
  promote?: string;
  pr?: "github";
  githubRepo?: string;
  remote?: string;
  json?: boolean;
}

/**
 * The confirmation cases `--holdout` names. Each value is a file when one exists
 * at that path (relative to `cwd`): its lines are case ids (blank lines and lines starting
 * with `#` skipped, blanks around an id trimmed); otherwise it is a case-id glob (picomatch:
 * `*`, `?`, `[…]`, `{a,b}`), passed on as it is.
 * @throws LoopsmithError `bad_request` when a file cannot be read or names no case
 */
export function holdoutPatterns(values: readonly string[], cwd: string = process.cwd()): string[] {
  return values.flatMap((v) => {
    const file = resolve(cwd, v);
    if (!existsSync(file) || !statSync(file).isFile()) return [v];
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new LoopsmithError("bad_request", `--holdout: cannot read ${file}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const ids = text
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
    if (!ids.length) throw new LoopsmithError("bad_request", `--holdout: ${file} names no case (one case id per line)`);
    return ids;
  });
}

/**
 * The `improve` section of `<root>/loopsmith.json`, when the repository has one, checked as
 * every configuration file is (an unknown key or a bad value is an error).
 * @throws LoopsmithError `config_invalid` when the file cannot be read or its section is invalid
 */
export function repoImproveSection(root: string): Record<string, unknown> | undefined {
  const file = join(root, "loopsmith.json");
  if (!existsSync(file)) return undefined;
  let json: { improve?: unknown };
  try {
    json = JSON.parse(readFileSync(file, "utf8")) as { improve?: unknown };
  } catch (err) {
    throw new LoopsmithError("config_invalid", `cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  return json.improve === undefined ? undefined : checkImproveSection(json.improve, file);
}

/**
 * The metrics `--metrics` names: comma- or space-separated quality metric names, each once,
 * kept in report order (`tests,coverage`).
 * @throws LoopsmithError `bad_request` for an empty list or a name that is not a metric (naming the valid ones)
 */
export function metricList(value: string): QualityMetric[] {
  const names = value
    .split(/[\s,]+/)
    .map((n) => n.trim())
    .filter(Boolean);
  if (!names.length)
    throw new LoopsmithError("bad_request", `--metrics names no metric; the metrics are ${QUALITY_METRICS.join(", ")}`);
  const unknown = names.filter((n) => !(QUALITY_METRICS as readonly string[]).includes(n));
  if (unknown.length)
    throw new LoopsmithError(
      "bad_request",
      `--metrics: ${unknown.map((n) => JSON.stringify(n.slice(0, 40))).join(", ")} ${unknown.length === 1 ? "is not a metric" : "are not metrics"}; the metrics are ${QUALITY_METRICS.join(", ")}`,
    );
  return QUALITY_METRICS.filter((m) => names.includes(m));
}

/** The goal of a run with no benchmark, when none is given. */
export const QUALITY_GOAL =
  "improve the repository's quality metrics (tests, coverage, lint, type errors, complexity, documentation, imports, security) without breaking the checks";

/**
 * The run's settings: the flags, over the configuration file's `improve` section, over the
 * repository's `loopsmith.json` section, over the defaults.
 * With no `--bench` (nor `bench` in a configuration), the run measures the repository's quality
 * metrics, as `improve.benchmarks` (`{"enabled", "timeouts", "weights", "tolerances"}`) configures
 * them, and its default goal is {@link QUALITY_GOAL}.
 * @throws LoopsmithError `bad_request` naming the invalid setting
 */
export function improveSettings(
  flags: ImproveFlags,
  config: Config,
  fromRepo: Record<string, unknown> | undefined,
): ImproveSettings {
  const fromFlags: Record<string, unknown> = {
    goal: flags.goal,
    check: flags.check,
    bench: flags.bench,
    benchFormat: flags.benchFormat,
    benchJunit: flags.benchJunit,
    repeats: flags.repeats,
    alpha: flags.alpha,
    alphaSpending: flags.alphaSpending,
    holdout: flags.holdout?.length ? holdoutPatterns(flags.holdout) : undefined,
    confirmationFraction: flags.confirmationFraction,
    calibrationRuns: flags.calibrationRuns,
    splitSeed: flags.splitSeed,
    tolerance: flags.tolerance,
    generations: flags.generations,
    budgetUsd: flags.budgetUsd,
    dryRun: flags.dryRun,
    review: flags.review,
    protected: flags.protect,
    dependencies: flags.dependencies,
    maxIterations: flags.maxIterations,
    generationTimeoutMs: flags.generationTimeout !== undefined ? flags.generationTimeout * 1000 : undefined,
  };
  const merged = {
    ...(fromRepo ?? {}),
    ...(config.improve ?? {}),
    ...Object.fromEntries(Object.entries(fromFlags).filter(([, v]) => v !== undefined)),
  };
  // --metrics replaces the enabled list and keeps the configured timeouts, weights and tolerances.
  if (flags.metrics !== undefined)
    merged.benchmarks = { ...((merged.benchmarks as object | undefined) ?? {}), enabled: metricList(flags.metrics) };
  if (merged.dryRun) merged.generations = 1;
  // No benchmark: the run is judged on the repository's quality metrics (`benchmarks`), and its
  // default goal says so.
  if (merged.bench === undefined && merged.goal === undefined) merged.goal = QUALITY_GOAL;
  const parsed = ImproveSettings.safeParse(merged);
  if (!parsed.success)
    throw new LoopsmithError("bad_request", `invalid improve settings: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/**
 * The setup command of the run: `--setup-cmd`, else `setupCommand` in the improve section
 * (config file over the repository's `loopsmith.json`); undefined leaves it to detection.
 */
export function improveSetup(
  flags: ImproveFlags,
  config: Config,
  fromRepo: Record<string, unknown> | undefined,
): string | undefined {
  if (flags.setupCmd !== undefined) return flags.setupCmd;
  const v = config.improve?.setupCommand ?? fromRepo?.setupCommand;
  return typeof v === "string" ? v : undefined;
}

/**
 * The commit the run starts from: `--base`, else `base` in the improve section of the
 * configuration file (a ref or a commit id; `examples/self-improve` pins one), else undefined
 * (HEAD). The repository's own `loopsmith.json` cannot set it: it is read at the base.
 */
export function improveBase(flags: ImproveFlags, config: Config): string | undefined {
  if (flags.base !== undefined) return flags.base;
  const v = config.improve?.base;
  return typeof v === "string" && v !== "" ? v : undefined;
}
