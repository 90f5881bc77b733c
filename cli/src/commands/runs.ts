/**
 * `loopsmith show`, `loopsmith export` and `loopsmith replay`: a recorded run read back,
 * written to a folder, or run again with its recorded model replies. Registration only: the
 * work is in `../runs.ts` and `../replay.ts`, loaded when a command runs. The task id is
 * checked first (exit 2 at once), then a configured NATS URL (exit 3 at once).
 *
 * Exit codes (`ExitCode`): 0 done (`replay`: it ended the same way); 1 `replay`: it did not;
 * 2 no run of that task is recorded, a bad task id or folder, a configuration error; 3
 * infrastructure (NATS, Docker, memory); 130 interrupted.
 */
import type { Command } from "commander";
import type { Logger } from "pino";
import { usageError, type CommandRunner } from "../errors.js";
import { checkNatsListening, configuredNats } from "../preflight.js";
import type { ReplayOptions, RunTask } from "../replay.js";
import type { RunCommandOptions } from "../runs.js";

/** Task ids (`TaskId` in shared): 1-64 letters, digits, `-` or `_`. */
const TASK_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** What {@link registerRunCommands} needs from the program. */
export interface RunCommandDeps {
  /** Runs an action: sets the exit code, reports errors (`run` in main.ts, or `runCommand`). */
  run: CommandRunner;
  /** The CLI's logger, created when a command runs. */
  logger: () => Promise<Logger>;
  /**
   * The replay's task runner for these options: runs a task file with the scripted provider
   * over a replies file through the path `solve` uses (see `replaySolveOptions`), printing
   * its progress and result, and returns the result.
   */
  replayRunner: (opts: ReplayOptions, log: Logger) => RunTask;
}

/**
 * Checks the task id, then that a configured NATS URL has something listening.
 * @throws CliError `bad_request` for a bad id; `unavailable` when NATS does not listen
 */
async function preflight(taskId: string, opts: { config?: string }): Promise<void> {
  if (!TASK_ID.test(taskId))
    throw usageError(
      `task id ${JSON.stringify(taskId.slice(0, 80))} is not valid: task ids are 1-64 letters, digits, '-' or '_'`,
    );
  const nats = await configuredNats(opts);
  if (nats) await checkNatsListening(nats);
}

/** Registers `show`, `export` and `replay` on the program. */
export function registerRunCommands(program: Command, deps: RunCommandDeps): void {
  const { run, logger } = deps;
  program
    .command("show")
    .description("a recorded run: goal, result, iterations and failures, cost, time, providers")
    .argument("<taskId>", "the task's id")
    .option("--config <file>", "configuration file (JSON)")
    .option("--json", "print the run record (task, events, result) as JSON")
    .option(
      "-v, --transcript",
      "agent mode: each step's thought and observation under its line (with --json: the steps alone)",
    )
    .action(async (taskId: string, opts: RunCommandOptions) =>
      run(opts.json, async () => {
        await preflight(taskId, opts);
        const { showCommand } = await import("../runs.js");
        return showCommand(taskId, opts, await logger());
      }),
    );

  program
    .command("export")
    .description("write a recorded run to a folder: result.json, report.md and, in repo mode, change.patch")
    .argument("<taskId>", "the task's id")
    .requiredOption("-o, --out <dir>", "the folder to write (created when missing)")
    .option("--config <file>", "configuration file (JSON)")
    .option("--json", "print the files written as JSON")
    .action(async (taskId: string, opts: RunCommandOptions & { out: string }) =>
      run(opts.json, async () => {
        await preflight(taskId, opts);
        const { exportCommand } = await import("../runs.js");
        return exportCommand(taskId, opts, await logger());
      }),
    );

  program
    .command("replay")
    .description(
      "run a recorded task again with its recorded model replies (no model is called); exit 0 when it ends the same way",
    )
    .argument("<taskId>", "the recorded task's id")
    .option("--repo <path>", "repo mode: a checkout of the repository, to take the recorded base commit from")
    .option("--config <file>", "configuration file (JSON)")
    .option("--json", "print one JSON event per line, the result object, then the comparison")
    .action(async (taskId: string, opts: ReplayOptions) =>
      run(opts.json, async () => {
        await preflight(taskId, opts);
        const { replayCommand } = await import("../replay.js");
        const log = await logger();
        return replayCommand(taskId, opts, log, deps.replayRunner(opts, log));
      }),
    );
}
