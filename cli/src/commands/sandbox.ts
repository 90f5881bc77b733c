/**
 * `loopsmith sandbox run`: runs a command over a copy of a directory in the sandbox and
 * prints the execution result (the work is in `sandbox-run.ts`, loaded only when it runs).
 *
 * Exit codes (`ExitCode`): 0 the command passed; 1 it did not (failed, error, timeout, oom,
 * output_limit, killed, blocked); 2 bad usage or configuration (a bad flag, no such
 * directory, an invalid workspace); 3 infrastructure (`sandbox_error`, Docker down); 130
 * interrupted.
 */
import { Option, type Command } from "commander";
import { runCommand, type CommandRunner } from "../errors.js";
import { LANGUAGES } from "@loopsmith/shared/contracts/values";
import { wholeNumber } from "../preflight.js";
import type { SandboxRunOptions } from "./sandbox-run.js";

/**
 * Registers `sandbox run` on the program.
 * @param run - runs the action: sets the exit code, reports errors. @defaultValue `runCommand`
 */
export function registerSandboxCommand(program: Command, run: CommandRunner = runCommand): void {
  const sandbox = program.command("sandbox").description("the hardened sandbox the executor runs code in");
  sandbox
    .command("run")
    .description("run a command over a copy of a directory in a fresh sandbox container; exit 0 when it passed")
    .addOption(
      new Option("-l, --language <language>", "the sandbox image to use").choices(LANGUAGES).makeOptionMandatory(),
    )
    .requiredOption("-d, --dir <dir>", "the directory copied into the sandbox's /workspace")
    .option("--timeout-ms <ms>", "wall-clock limit in ms (default 30000)", wholeNumber(100, 600_000))
    .option("--memory-mb <mib>", "memory limit in MiB, swap equal (default 512)", wholeNumber(32, 16_384))
    .option("--json", "print the execution result as JSON")
    .option("--config <file>", "configuration file (JSON)")
    .argument("[command...]", "argv inside the sandbox (after --); default: the language's test command")
    .action(async (command: string[], opts: SandboxRunOptions) =>
      run(opts.json, async () => {
        const { sandboxRun } = await import("./sandbox-run.js");
        return sandboxRun(command, opts);
      }),
    );
}
