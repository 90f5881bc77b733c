/**
 * `loopsmith bench`: the agent's benchmark over a dataset (HumanEval, MBPP or jsbench JSON
 * lines). Registration only: the work is in `../bench/`, loaded when the command runs.
 *
 * Exit codes (`ExitCode`): 0 the run completed, whatever its pass rate; 2 bad flags, an
 * unreadable dataset, a bad `--resume`; 3 infrastructure (NATS, Docker); 130 interrupted.
 */
import { Option, type Command } from "commander";
import type { Logger } from "pino";
import { usageError, type CommandRunner } from "../errors.js";
import { PROVIDERS, positiveNumber, wholeNumber } from "../preflight.js";
import type { BenchOptions } from "../bench/run.js";

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

/** Registers `bench`. */
export function registerBench(program: Command, run: CommandRunner, logger: () => Promise<Logger>): void {
  program
    .command("bench")
    .description(
      "run a dataset's tasks and score them on hidden tests: pass@1, iterations, tokens, cost, tasks/min; --memory ab compares memory off and on",
    )
    .requiredOption("--dataset <file.jsonl>", "HumanEval, MBPP or jsbench JSON lines (see examples/bench/README.md)")
    .addOption(
      new Option("--format <format>", "the dataset's format (default: detected)").choices([
        "humaneval",
        "mbpp",
        "jsbench",
      ]),
    )
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
    .option("--json", "print one JSON object per finished task, then the summary")
    .action(async (opts: BenchOptions & { taskTimeout?: number }) =>
      run(opts.json, async () => {
        const { benchCommand } = await import("../bench/run.js");
        const { taskTimeout, ...rest } = opts;
        return benchCommand(
          { ...rest, ...(taskTimeout !== undefined ? { taskTimeoutMs: Math.round(taskTimeout * 1000) } : {}) },
          await logger(),
        );
      }),
    );
}
