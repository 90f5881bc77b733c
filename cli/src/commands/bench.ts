/**
 * `loopsmith bench`: the agent's benchmark over a dataset (HumanEval, MBPP or jsbench JSON
 * lines), or SWE-bench instances graded by the official rule (`--format swe-bench`, see
 * docs/SWE-BENCH.md). Registration only: the work is in `../bench/`, loaded when the command runs.
 *
 * Exit codes (`ExitCode`): 0 the run completed, whatever its pass rate; 2 bad flags, an
 * unreadable dataset, a bad `--resume`; 3 infrastructure (NATS, Docker); 130 interrupted.
 */
import { Option, type Command } from "commander";
import type { Logger } from "pino";
import { usageError, type CommandRunner } from "../errors.js";
import { PROVIDERS } from "@loopsmith/shared/contracts/values";
import { positiveNumber, wholeNumber } from "../preflight.js";
import type { BenchOptions } from "../bench/run.js";
import type { SweBenchOptions } from "../bench/swe-bench/record.js";

function ids(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  ];
}

function rate(v: string): number {
  const n = Number(v);
  if (!(n >= 0 && n <= 1)) throw usageError(`--find-rate must be a number in [0, 1], got ${v}`);
  return n;
}

/** The flags as commander gives them: either command's options, `--format` naming which. */
type BenchFlags = Omit<BenchOptions, "format"> &
  Omit<SweBenchOptions, "memory"> & {
    format?: BenchOptions["format"] | "swe-bench";
    taskTimeout?: number;
    testTimeout?: number;
  };

/** Registers `bench`. */
export function registerBench(program: Command, run: CommandRunner, logger: () => Promise<Logger>): void {
  const bench = program
    .command("bench")
    .description(
      "run a dataset's tasks and score them on hidden tests: pass@1, iterations, tokens, cost, tasks/min; --memory ab compares memory off and on",
    )
    .requiredOption(
      "--dataset <file.jsonl>",
      "HumanEval, MBPP or jsbench JSON lines (see examples/bench/README.md), or SWE-bench instances",
    )
    .addOption(
      new Option("--format <format>", "the dataset's format (default: detected; swe-bench must be named)").choices([
        "humaneval",
        "mbpp",
        "jsbench",
        "swe-bench",
      ]),
    );
  addSweBenchOptions(bench);
  addRunOptions(bench);
  bench.action(async (opts: BenchFlags) => run(opts.json, () => benchAction(opts, logger)));
}

/** `bench`'s options of `--format swe-bench` only: `--repos` to `--images`. */
function addSweBenchOptions(bench: Command): void {
  bench
    .option(
      "--repos <dir>",
      "swe-bench: the repositories, <owner>__<name>.bundle or a bare clone <owner>__<name>[.git]",
    )
    .option("--env <file.json>", "swe-bench: environment spec over the built-in one (docs/SWE-BENCH.md)")
    .option("--gold", "swe-bench: grade the reference patches (every instance must resolve)")
    .option("--empty", "swe-bench: grade empty patches (no instance may resolve)")
    .option("--predictions <file.jsonl>", "swe-bench: grade these predictions (instance_id, model_patch), offline")
    .option(
      "--script <dir>",
      "swe-bench agent run: scripted transcripts <instance_id>.json (default: scripts/ beside the dataset)",
    )
    .option("--hints", "swe-bench agent run: add hints_text to the goal")
    .option(
      "--test-timeout <s>",
      "swe-bench: wall-clock limit of one instance's test run in seconds (default 300)",
      positiveNumber,
    )
    .option(
      "--images <official|template>",
      "swe-bench: run each instance in its image: official (swebench/sweb.eval.x86_64.<id>:latest) or a template of {instance_id}, {repo}, {version}; an instance's image_name wins",
    );
}

/** `bench`'s options of either format: the cases, concurrency, memory, who answers, the run's folder and limits. */
function addRunOptions(bench: Command): void {
  bench
    .option("--ids <ids>", "only these cases, comma-separated (HumanEval/3 or 3; repeatable)", ids)
    .option("--limit <n>", "the first n cases", wholeNumber(1, 100_000))
    .option("--concurrency <k>", "tasks in flight at once (default 4)", wholeNumber(1, 64))
    .addOption(
      new Option(
        "--memory <mode>",
        "on, off, or ab: each case with memory off, then on (warmed by the earlier cases of the run)",
      ).choices(["on", "off", "ab"]),
    )
    .addOption(
      new Option(
        "--provider <name>",
        "simulated or scripted (no model), or a model provider (default: the configured model when it has a key, else simulated)",
      ).choices([...PROVIDERS, "simulated"]),
    )
    .option("--model <id>", "model id")
    .option("--base-url <url>", "provider base URL")
    .option("--transcript <file>", "append every prompt and reply to this JSONL file (services this run starts)")
    .option("--config <file>", "configuration file (JSON)")
    .option(
      "--out <dir>",
      "the run's folder: results.jsonl, summary.json, report.md, report.html (default bench-runs/<runId>)",
    )
    .option("--resume", "continue the run in --out from its results.jsonl")
    .option("--max-iterations <n>", "iterations of each task (default 5)", wholeNumber(1, 50))
    .option("--find-rate <p>", "simulated: probability a reflection finds the cause unaided (default 0.3)", rate)
    .option("--seed <n>", "simulated: seed of the draws (default 1)", wholeNumber(0, 2 ** 31 - 1))
    .option("--task-timeout <s>", "wall-clock limit of one task in seconds (default 600)", positiveNumber)
    .option(
      "--retries <n>",
      "resubmissions of a task that ended in an infrastructure error (default 1)",
      wholeNumber(0, 5),
    )
    .option("--json", "print one JSON object per finished task, then the summary");
}

/** `bench`'s work: a SWE-bench run with `--format swe-bench`, else a dataset's run (refusing the SWE-bench flags). */
async function benchAction(opts: BenchFlags, logger: () => Promise<Logger>): Promise<number> {
  const { taskTimeout, testTimeout, format, ...rest } = opts;
  if (format === "swe-bench") {
    const { sweBenchCommand } = await import("../bench/swe-bench/run.js");
    return sweBenchCommand(
      {
        ...rest,
        ...(taskTimeout !== undefined ? { taskTimeoutMs: Math.round(taskTimeout * 1000) } : {}),
        ...(testTimeout !== undefined ? { testTimeoutMs: Math.round(testTimeout * 1000) } : {}),
      },
      await logger(),
    );
  }
  for (const flag of ["repos", "env", "gold", "empty", "predictions", "script", "hints", "images"] as const)
    if (opts[flag] !== undefined) throw usageError(`--${flag} applies to --format swe-bench only`);
  const { benchCommand } = await import("../bench/run.js");
  return benchCommand(
    {
      ...rest,
      ...(format ? { format } : {}),
      ...(taskTimeout !== undefined ? { taskTimeoutMs: Math.round(taskTimeout * 1000) } : {}),
    },
    await logger(),
  );
}
