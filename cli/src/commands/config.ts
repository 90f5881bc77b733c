/**
 * `loopsmith config show` and `loopsmith config validate`: the effective configuration with
 * where each value came from, and a check of the configuration files listing every problem
 * (an unknown key with the nearest known one, a bad value, a file that is not JSON).
 * Registration and printing only: loading and checking are `loadConfigWithSources` and
 * `checkConfig` in the shared runtime, loaded when a command runs.
 *
 * Exit codes (`ExitCode`): 0 shown, or valid; 2 an invalid configuration (every problem listed
 * by `validate`, the first file or every bad key named by `show`).
 */
import type { Command } from "commander";
import { CliError, type CommandRunner } from "../errors.js";
import { ExitCode } from "../exit-codes.js";

/** Registers `config show` and `config validate`. */
export function registerConfig(program: Command, run: CommandRunner): void {
  const config = program.command("config").description("configuration");

  config
    .command("show")
    .description(
      "print the effective configuration with secrets masked, the files read, and where each value came from " +
        "(flag, env VAR, user/repo/config file PATH, default); exit 2 when it is invalid",
    )
    .option("--config <file>", "configuration file (JSON)")
    .option("--json", "on failure, end with a JSON error object (the configuration is always JSON)")
    .action(async (opts: { config?: string; json?: boolean }) =>
      run(opts.json, async () => {
        const [{ describeSource, loadConfigWithSources, maskConfig }, { effectiveRoles }] = await Promise.all([
          import("@loopsmith/shared/runtime"),
          import("@loopsmith/shared/llm"),
        ]);
        const { jsonLine } = await import("../terminal.js");
        const { config, sources, files } = loadConfigWithSources(opts.config ? { file: opts.config } : {});
        // The configuration as loaded, then what each role will really call, all of it masked;
        // then the files read and the source of each value (names and paths, never values).
        const shown = {
          ...maskConfig({ ...config, effectiveRoles: effectiveRoles(config) }),
          files,
          sources: Object.fromEntries(Object.entries(sources).map(([path, source]) => [path, describeSource(source)])),
        };
        process.stdout.write(`${jsonLine(shown, 2)}\n`);
        return ExitCode.ok;
      }),
    );

  config
    .command("validate")
    .description(
      "check the configuration files (default: the ones found: the user's, the repository's, LOOPSMITH_CONFIG; " +
        "with the environment) and list every problem, one per line: file, key path, problem; exit 2 when there is one",
    )
    .option("--file <file>", "check this file alone (with the environment), not the files found")
    .option("--json", "print the problems as one JSON object, then the error object")
    .action(async (opts: { file?: string; json?: boolean }) =>
      run(opts.json, async () => {
        const { checkConfig } = await import("@loopsmith/shared/runtime");
        const { jsonLine, printable } = await import("../terminal.js");
        const checked = checkConfig(opts.file ? { file: opts.file, discover: false } : {});
        if (checked.ok) {
          const files = checked.loaded.files.map((f) => f.path);
          process.stdout.write(
            opts.json
              ? `${jsonLine({ kind: "config_valid", valid: true, files })}\n`
              : `valid: ${files.length ? files.join(", ") : "no configuration file found (defaults and environment)"}\n`,
          );
          return ExitCode.ok;
        }
        const { problems } = checked;
        process.stdout.write(
          opts.json
            ? `${jsonLine({ kind: "config_problems", valid: false, problems })}\n`
            : problems.map((p) => `${printable(p.line)}\n`).join(""),
        );
        throw new CliError(
          "config_invalid",
          `the configuration is invalid: ${problems.length} problem${problems.length === 1 ? "" : "s"}${opts.json ? "" : " (listed above)"}`,
        );
      }),
    );
}
