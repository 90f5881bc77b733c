/**
 * The `loopsmith` command line (commander). Errors print one sentence on stderr; details
 * go to the log (LOG_LEVEL=debug for more).
 */
import { Command, InvalidArgumentError, Option } from "commander";
import { LoopsmithError, createLogger, loadConfig, maskConfig } from "@loopsmith/shared";
import { solve } from "./solve.js";
import { historyCommand, statsCommand } from "./history.js";
import { registerSandboxCommand } from "./commands/sandbox.js";

const log = createLogger({ service: "cli", level: process.env.LOG_LEVEL ?? "warn" });

function int(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a whole number");
  return n;
}
function num(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError("expected a number");
  return n;
}

/** Runs an action, printing one sentence on failure; sets the exit code. */
function run(action: () => Promise<number>): () => Promise<void> {
  return async () => {
    try {
      process.exitCode = await action();
    } catch (err) {
      if (err instanceof LoopsmithError) {
        process.stderr.write(`loopsmith: ${err.message}\n`);
        log.debug({ err }, "command failed");
        process.exitCode = err.code === "bad_request" || err.code === "config_invalid" ? 2 : 1;
      } else {
        process.stderr.write(`loopsmith: unexpected error: ${(err as Error)?.message ?? String(err)}\n`);
        log.error({ err }, "command failed");
        process.exitCode = 1;
      }
    }
  };
}

const program = new Command()
  .name("loopsmith")
  .description("A self-improving coding agent: plan, build, review, run in a sandbox, reflect, remember.")
  .version("0.1.0");

program
  .command("solve")
  .description("solve a coding task end to end; exit 0 only when its tests pass")
  .argument("[goal]", "what to build, in words")
  .option("-f, --file <task.json>", "a task file (goal, language, files, acceptanceTests, limits)")
  .option("--humaneval <task_id>", "a HumanEval task, e.g. HumanEval/12")
  .option("--dataset <path>", "the HumanEval JSONL file for --humaneval")
  .addOption(new Option("-l, --language <language>", "language of a goal string").choices(["python", "javascript", "typescript"]))
  .addOption(new Option("--provider <name>", "LLM provider").choices(["anthropic", "openai-compatible", "bedrock", "scripted"]))
  .option("--model <id>", "model id")
  .option("--script <file>", "replies file for the scripted provider")
  .option("--base-url <url>", "provider base URL (openai-compatible servers, proxies)")
  .option("--transcript <file>", "append every prompt and reply to this JSONL file")
  .option("--config <file>", "configuration file (JSON)")
  .option("--max-iterations <n>", "iterations at most", int)
  .option("--budget-usd <usd>", "LLM budget of the task in USD", num)
  .option("--budget-tokens <n>", "LLM budget of the task in tokens", int)
  .option("--review", "run the LLM review step before executing")
  .option("--task-id <id>", "task id (default: generated)")
  .option("--json", "print one JSON event per line, then the result object")
  .action(async (goal: string | undefined, opts) => run(() => solve(goal, opts, log))());

program
  .command("history")
  .description("recent tasks from memory")
  .option("-n, --limit <n>", "how many", int, 20)
  .option("--json", "print JSON")
  .action(async (opts) => run(() => historyCommand(opts, log))());

program
  .command("stats")
  .description("memory statistics: tasks, pass rate, iterations to pass, cost")
  .option("--json", "print JSON")
  .action(async (opts) => run(() => statsCommand(opts, log))());

program
  .command("config")
  .description("configuration")
  .command("show")
  .description("print the effective configuration with secrets masked")
  .option("--config <file>", "configuration file (JSON)")
  .action(async (opts: { config?: string }) =>
    run(async () => {
      process.stdout.write(`${JSON.stringify(maskConfig(loadConfig(opts.config ? { file: opts.config } : {})), null, 2)}\n`);
      return 0;
    })(),
  );

registerSandboxCommand(program);

await program.parseAsync(process.argv);
