/**
 * The `loopsmith` command line (commander). Flags, files and a configured NATS URL are
 * checked first (`preflight.ts`), before the shared code, the LLM SDKs, Docker or NATS are
 * loaded or touched; each command's module is imported only when it runs. Errors print one
 * sentence on stderr and, with `--json`, one error object as the last line of stdout; exit
 * codes are {@link ExitCode}. Details go to the log (LOG_LEVEL=debug for more).
 */
import { Argument, Command, CommanderError, Option } from "commander";
import type { Logger } from "pino";
// The values the contracts are built from (no zod: the flags are declared before any schema is built).
import * as contract from "@loopsmith/shared/contracts/values";
// The version `--version` prints: the installed package's own (bundled into dist/app by the build).
import manifest from "../../package.json" with { type: "json" };
import { registerSandboxCommand } from "./commands/sandbox.js";
import { registerScript } from "./commands/script.js";
import { registerRunCommands } from "./commands/runs.js";
import { registerImprove } from "./commands/improve.js";
import { registerBench } from "./commands/bench.js";
import { registerBus } from "./commands/bus.js";
import { registerImages } from "./commands/images.js";
import { registerMcp } from "./mcp/command.js";
import { registerConfig } from "./commands/config.js";
import { addModelFlags } from "./model-flags.js";
import { loadEnvFile } from "./env-file.js";
import { errorCodeOf, report, reportError, reportUnsettledExit, runCommand } from "./errors.js";
import { EXIT_CODE_MEANINGS, ExitCode } from "./exit-codes.js";
import type { SolveOptions } from "./solve.js";
import { checkIssueFlags } from "./solve-issue-flags.js";
import {
  boundedNumber,
  checkNatsListening,
  checkSolveInput,
  configuredNats,
  parseDuration,
  parseSince,
  positiveNumber,
  wholeNumber,
} from "./preflight.js";

async function logger(): Promise<Logger> {
  const { createLogger } = await import("@loopsmith/shared/runtime");
  return createLogger({ service: "cli", level: process.env.LOG_LEVEL || "warn" });
}

/** Runs an action (see `runCommand`); the stack of an unexpected error goes to the log, the others at debug level. */
function run(json: boolean | undefined, action: () => Promise<number>): Promise<void> {
  return runCommand(json, action, async (err) => {
    const unexpected = errorCodeOf(err) === "internal";
    if (!unexpected && process.env.LOG_LEVEL !== "debug") return;
    const log = await logger();
    if (unexpected) log.error({ err }, "command failed");
    else log.debug({ err }, "command failed");
  });
}

/** Fails fast (exit 3) when a configured NATS URL has nothing listening. */
/** Options of `up`, `down` and `status` (see `StackCommandOptions` in up.ts). */
type StackOpts = {
  provider?: string;
  model?: string;
  script?: string;
  baseUrl?: string;
  transcript?: string;
  config?: string;
  json?: boolean;
};

async function natsFirst(opts: { config?: string }): Promise<void> {
  const nats = await configuredNats(opts);
  if (nats) await checkNatsListening(nats);
}

const program = new Command()
  .name("loopsmith")
  .description("A self-improving coding agent: plan, build, review, run in a sandbox, reflect, remember.")
  .version(manifest.version)
  .exitOverride()
  .option(
    "--env-from <file>",
    "read variables (NATS_URL, NATS_USER, NATS_PASSWORD, …) from this file first; the environment wins where it sets one",
  )
  .hook("preAction", (root) => {
    const file = (root.opts() as { envFrom?: string }).envFrom;
    if (file) loadEnvFile(file);
  })
  .addHelpText(
    "after",
    `\nExit codes:\n${Object.entries(EXIT_CODE_MEANINGS)
      .map(([code, meaning]) => `  ${code.padStart(3)}  ${meaning}`)
      .join("\n")}\n`,
  );

const solveCommand = program
  .command("solve")
  .description("solve a coding task end to end; exit 0 only when its tests pass")
  .argument("[goal]", "what to build, in words")
  .option("-f, --file <task.json>", "a task file (goal, language, files, acceptanceTests, limits)")
  .option("--humaneval <task_id>", "a HumanEval task, e.g. HumanEval/12")
  .option("--dataset <path>", "the HumanEval JSONL file for --humaneval")
  .addOption(new Option("-l, --language <language>", "language of a goal string").choices(contract.LANGUAGES));
addModelFlags(solveCommand)
  .option("--script <file>", "replies file for the scripted provider")
  .option("--transcript <file>", "append every prompt and reply to this JSONL file")
  .option("--config <file>", "configuration file (JSON)")
  .option(
    "--max-iterations <n>",
    `iterations at most (${contract.MAX_ITERATIONS.min} to ${contract.MAX_ITERATIONS.max}; default ${contract.MAX_ITERATIONS.default})`,
    wholeNumber(contract.MAX_ITERATIONS.min, contract.MAX_ITERATIONS.max),
  )
  .option("--budget-usd <usd>", "LLM budget of the task in USD", positiveNumber)
  .option("--budget-tokens <n>", "LLM budget of the task in tokens", wholeNumber(1))
  .option(
    "--timeout <duration>",
    "wall-clock limit of the whole task (90s, 30m, 2h, 1h30m; 1s to 7d); past it the task stops with time_limit",
    parseDuration,
  )
  .option("--review", "run the LLM review step before executing")
  .option(
    "--audit",
    "run the security audit before executing: bandit or ESLint's security plugin in the sandbox, then the audit model; a high finding blocks the iteration",
  )
  .addOption(
    new Option(
      "--memory <mode>",
      "off: recall nothing, so no prompt carries a memory hint (the task's own failures are still stored)",
    ).choices(contract.MEMORY_MODES),
  )
  .option("--task-id <id>", "task id (default: generated)")
  .option(
    "--repo <path>",
    "repo mode: change this git repository (a new branch loopsmith/<taskId>; your checkout is not touched)",
  )
  .option("--base <ref>", "repo mode: the commit to start from (default HEAD)")
  .option(
    "--test-cmd <cmd>",
    "repo mode: the repository's test command (default detected: python3 -m pytest -q / npm test)",
  )
  .option("--setup-cmd <cmd>", 'repo mode: installs dependencies once per base commit (default detected; "" for none)')
  .addOption(
    new Option(
      "--dependencies <policy>",
      "repo mode: a candidate that changes dependencies is rejected, asked about, or allowed (default reject)",
    ).choices(contract.DEPENDENCY_POLICIES),
  )
  .option("--map-tokens <n>", "repo mode: token budget of the repo map (default 2048)", wholeNumber(256, 32_000))
  .option(
    "--test-timeout <s>",
    "repo mode: limit of one run of the tests, in seconds, 0.1 to 600 (default: 3x the baseline run's time, at least 30 s)",
    boundedNumber(0.1, 600),
  )
  .addOption(
    new Option(
      "--mode <mode>",
      "repo mode: agent explores with tools before it edits; oneshot edits in one call (default agent, oneshot for a script of one-shot builds)",
    ).choices(contract.REPO_MODES),
  )
  .option("--apply", "repo mode: also apply a passing change to your work tree (which must be clean)")
  .option(
    "--decompose",
    "repo mode: plan the goal as a DAG of subtasks, each built as a child task, then run the tests on the merged tree",
  )
  .option(
    "--parallel <n>",
    `with --decompose: subtasks running at once (${contract.PARALLEL.min} to ${contract.PARALLEL.max}; default: the builder replicas)`,
    wholeNumber(contract.PARALLEL.min, contract.PARALLEL.max),
  )
  .option(
    "--subtask-attempts <k>",
    `with --decompose: attempts per subtask (${contract.SUBTASK_ATTEMPTS.min} to ${contract.SUBTASK_ATTEMPTS.max}; default ${contract.SUBTASK_ATTEMPTS.default})`,
    wholeNumber(contract.SUBTASK_ATTEMPTS.min, contract.SUBTASK_ATTEMPTS.max),
  )
  .option(
    "--subtask-timeout <duration>",
    "with --decompose: wall-clock limit of each subtask attempt (as --timeout), never more than the task has left",
    parseDuration,
  )
  .option(
    "--issue <url|owner/repo#N>",
    "solve a GitHub issue in the local clone of its repository: its title, body and comments are the goal",
  )
  .option(
    "--remote <name>",
    "with --issue: the clone's GitHub remote, checked against the issue; pushed to (default origin)",
  )
  .option("--pr", "with --issue: push the branch and open a draft pull request when the tests pass")
  .option("--pr-always", "with --issue --pr: open the draft pull request even when the tests did not pass")
  .addOption(
    new Option(
      "--merge-when <when>",
      "with --issue --pr: follow the pull request and merge it once approved and its checks pass (approved), or when its checks pass without any review (now); changes requested make another attempt",
    ).choices(["approved", "now"]),
  )
  .option(
    "--review-timeout <duration>",
    "with --merge-when: close the pull request with a comment when it is not merged within this time (as --timeout; default 24h)",
    parseDuration,
  )
  .option("--out <dir>", "write result.json, report.md (and change.patch in repo mode) here at the end")
  .option(
    "--dry-run",
    "check the task and print the models, limits and the build prompt's budget; start nothing, call no model",
  )
  .option("--json", "print one JSON event per line, then the result object");
solveCommand.action(async (goal: string | undefined, opts: SolveOptions) =>
  run(opts.json, async () => {
    checkIssueFlags(goal, opts);
    // An issue is a goal on a repository (the clone's, found later): the other checks as for --repo "<goal>".
    checkSolveInput(opts.issue ?? goal, opts.issue ? { ...opts, repo: opts.repo ?? "." } : opts);
    if (!opts.dryRun) await natsFirst(opts);
    const { solve } = await import("./solve.js");
    return solve(goal, opts, await logger());
  }),
);

program
  .command("history")
  .description("recent tasks from memory, newest first (read in pages of 500)")
  .option("-n, --limit <n>", "how many (1 to 100000)", wholeNumber(1, 100_000), 20)
  .option("--config <file>", "configuration file (JSON)")
  .option("--json", "print JSON")
  .action(async (opts: { limit: number; json?: boolean; config?: string }) =>
    run(opts.json, async () => {
      await natsFirst(opts);
      const { historyCommand } = await import("./history.js");
      return historyCommand(opts, await logger());
    }),
  );

program
  .command("failures")
  .description("failures and lessons stored in memory: one task's, or the latest of all")
  .option("--task <id>", "only this task's failures and lessons (oldest first), and what its recalls showed it")
  .option("-n, --limit <n>", "how many (1 to 500)", wholeNumber(1, 500), 20)
  .option("--utility", "also every recalled memory's measured use: tasks, passes, utility, demoted")
  .option("--promote <memory>", "recall a demoted memory again (lesson:<id> or failure:<id>)")
  .option("--demote <memory>", "leave a memory out of recall (lesson:<id> or failure:<id>)")
  .option("--config <file>", "configuration file (JSON)")
  .option("--json", "print JSON")
  .action(
    async (opts: {
      task?: string;
      limit: number;
      utility?: boolean;
      promote?: string;
      demote?: string;
      json?: boolean;
      config?: string;
    }) =>
      run(opts.json, async () => {
        await natsFirst(opts);
        const { failuresCommand } = await import("./history.js");
        return failuresCommand(opts, await logger());
      }),
  );

program
  .command("stats")
  .description("statistics over a window of tasks: pass rate, iterations, tokens, cost, recall hit rate")
  .option("--since <when>", "tasks finished since an ISO-8601 date or an age (30m, 24h, 7d, 2w)", (v: string) =>
    parseSince(v),
  )
  .option("--last <n>", "only the n most recent tasks (of those since --since)", wholeNumber(1, 1_000_000))
  .option("--config <file>", "configuration file (JSON)")
  .option("--json", "print JSON")
  .action(async (opts: { json?: boolean; config?: string; since?: string; last?: number }) =>
    run(opts.json, async () => {
      await natsFirst(opts);
      const { statsCommand } = await import("./history.js");
      return statsCommand(opts, await logger());
    }),
  );

program
  .command("reset")
  .description(
    "delete the memory (failures, fixes, successes) and/or the task history (tasks and their recorded runs); neither flag: both",
  )
  .option("--memory", "delete what the agent learned: stored failures with their fixes, successes, the recall log")
  .option("--history", "delete the task history: what history, stats, show, export and replay read")
  .option("-y, --yes", "delete without asking (needed when there is no terminal to ask on)")
  .option("--config <file>", "configuration file (JSON)")
  .option("--json", "print JSON")
  .action(async (opts: { memory?: boolean; history?: boolean; yes?: boolean; json?: boolean; config?: string }) =>
    run(opts.json, async () => {
      const { resetCommand } = await import("./reset.js");
      return resetCommand(opts, await logger());
    }),
  );

program
  .command("up")
  .description(
    "start the local stack (NATS, memory, the five services) in the background; solve, history, stats, show and improve then use it",
  )
  .addOption(new Option("--provider <name>", "LLM provider of the stack's services").choices(contract.PROVIDERS))
  .option("--model <id>", "model id")
  .option("--script <file>", "replies file for the scripted provider")
  .option("--base-url <url>", "provider base URL")
  .option("--transcript <file>", "append every prompt and reply to this JSONL file")
  .option("--config <file>", "configuration file (JSON)")
  .option("--json", "print JSON")
  .action(async (opts: StackOpts) =>
    run(opts.json, async () => {
      await natsFirst(opts);
      const { upCommand } = await import("./up.js");
      return upCommand(opts, await logger());
    }),
  );

program
  .command("down")
  .description("stop the stack loopsmith up started")
  .option("--config <file>", "configuration file (JSON)")
  .option("--json", "print JSON")
  .action(async (opts: StackOpts) =>
    run(opts.json, async () => {
      const { downCommand } = await import("./up.js");
      return downCommand(opts, await logger());
    }),
  );

program
  .command("status")
  .description("each service's $SRV health on the stack's NATS; exit 0 when all five answer")
  .option("--config <file>", "configuration file (JSON)")
  .option("--json", "print JSON")
  .action(async (opts: StackOpts) =>
    run(opts.json, async () => {
      const { statusCommand } = await import("./up.js");
      return statusCommand(opts);
    }),
  );

program
  .command("health")
  .argument("[service...]", "services to ping (architect, builder, reviewer, executor, memory); none: all five")
  .description(
    "$SRV ping of services on NATS_URL, for container health checks; exit 0 when each answers, 3 when one does not",
  )
  .option("--id-file <file>", "ping only the instance whose $SRV identity is in this file (LOOPSMITH_SERVICE_ID_FILE)")
  .option("--timeout <ms>", "how long to wait for answers, in ms", positiveNumber, 2_000)
  .option("--config <file>", "configuration file (JSON)")
  .option("--json", "print JSON")
  .action(async (services: string[], opts: { idFile?: string; timeout: number; config?: string; json?: boolean }) =>
    run(opts.json, async () => {
      const { healthCommand } = await import("./health.js");
      return healthCommand(services, {
        ...(opts.idFile ? { idFile: opts.idFile } : {}),
        timeoutMs: opts.timeout,
        ...(opts.config ? { config: opts.config } : {}),
        ...(opts.json ? { json: true } : {}),
      });
    }),
  );

program
  .command("completion")
  .description("print a shell completion script made from these commands and options")
  .addArgument(new Argument("<shell>", "bash, zsh or fish").choices(["bash", "zsh", "fish"]))
  .addHelpText(
    "after",
    '\nInstall:\n  bash  eval "$(loopsmith completion bash)"   (in ~/.bashrc)\n' +
      '  zsh   eval "$(loopsmith completion zsh)"    (in ~/.zshrc, after compinit)\n' +
      "  fish  loopsmith completion fish > ~/.config/fish/completions/loopsmith.fish",
  )
  .action(async (shell: "bash" | "zsh" | "fish") => {
    const { completionScript } = await import("./completion.js");
    process.stdout.write(completionScript(program, shell));
  });

registerSandboxCommand(program, run);
registerScript(program, run);
registerImprove(program, run, logger);
registerBench(program, run, logger);
registerBus(program, run, logger);
registerImages(program, run);
registerConfig(program, run);
registerMcp(program, run, logger);
registerRunCommands(program, {
  run,
  logger,
  replayRunner: (opts, log) => async (taskFile, scriptFile) => {
    const [{ solveForResult }, { replaySolveOptions }] = await Promise.all([
      import("./solve.js"),
      import("./replay.js"),
    ]);
    return solveForResult(
      undefined,
      { ...replaySolveOptions(taskFile, scriptFile, opts), ...(opts.repo ? { snapshotFrom: opts.repo } : {}) },
      log,
    );
  },
});

/**
 * Once the command is done, exits as soon as stdout and stderr are flushed, even when a
 * library left a handle open (nats.js keeps its socket after a connect timeout against a
 * port that accepts but never speaks NATS). The timer is unref'd: when nothing lingers the
 * process ends on its own first.
 */
function exitWhenFlushed(): void {
  setInterval(() => {
    if (process.stdout.writableLength === 0 && process.stderr.writableLength === 0) process.exit();
  }, 500).unref();
}

let settled = false;
reportUnsettledExit(() => settled, {
  json: process.argv.includes("--json"),
  command: `loopsmith ${process.argv.slice(2).find((a) => !a.startsWith("-")) ?? ""}`.trim(),
});
try {
  await program.parseAsync(process.argv);
  settled = true;
} catch (err) {
  settled = true;
  if (!(err instanceof CommanderError)) {
    if (errorCodeOf(err) === "internal") throw err;
    // What the preAction hook threw (an unreadable --env-from): reported like an action's error.
    process.exitCode = reportError(err, { json: process.argv.includes("--json") });
  } else {
    // Help and version exit 0; every other commander error is a usage error, already printed.
    const shown = err.code === "commander.helpDisplayed" || err.code === "commander.version";
    const message =
      err.code === "commander.help" ? "no command given; see loopsmith --help" : err.message.replace(/^error: /, "");
    process.exitCode = shown
      ? ExitCode.ok
      : report(
          { kind: "error", code: "bad_request", message, exitCode: ExitCode.usage },
          { json: process.argv.includes("--json"), quiet: true },
        );
  }
}
exitWhenFlushed();
