/**
 * `loopsmith images`: builds the images a local stack needs (NATS and the two sandbox images)
 * from Debian packages, or loads them from a `docker save` archive, once; the first command
 * that needs them does the same on its own (`../images.ts`). `--check` only says what is
 * missing and needs no root.
 *
 * Exit codes (`ExitCode`): 0 every image is present (or was brought); 1 `--check` found one
 * missing; 2 bad usage or configuration; 3 the engine did not answer, or building or loading
 * failed (needs root: debootstrap).
 */
import type { Command } from "commander";
import { ExitCode } from "../exit-codes.js";
import { runCommand, type CommandRunner } from "../errors.js";
import type { ImageEngine } from "../images.js";

interface ImagesOptions {
  check?: boolean;
  config?: string;
  json?: boolean;
}

/**
 * Registers `images` on the program.
 * @param run - runs the action: sets the exit code, reports errors. @defaultValue `runCommand`
 */
export function registerImages(program: Command, run: CommandRunner = runCommand): void {
  program
    .command("images")
    .description(
      "build (as root, from Debian packages) or load the images a local stack needs; --check lists what is missing",
    )
    .option("--check", "say which images are missing; build nothing (exit 1 when one is)")
    .option("--config <file>", "configuration file (JSON)")
    .option("--json", "print the result as JSON")
    .action(async (opts: ImagesOptions) =>
      run(opts.json, async () => {
        // Loaded when the command runs: dockerode (with grpc and ssh2) would slow every command's start.
        const [{ loadConfig }, { ensureStackImages, missingImages, stackImages }] = await Promise.all([
          import("@loopsmith/shared/runtime"),
          import("../images.js"),
        ]);
        const config = loadConfig(opts.config ? { file: opts.config } : {});
        const images = stackImages(config);
        const say = (line: string): void => void process.stderr.write(`${line}\n`);
        if (opts.check) {
          const { default: Docker } = await import("dockerode");
          const missing = await missingImages(new Docker() as unknown as ImageEngine, images);
          if (opts.json) process.stdout.write(`${JSON.stringify({ missing: missing.map((m) => m.image) })}\n`);
          else
            process.stdout.write(
              missing.length
                ? `missing: ${missing.map((m) => m.image).join(", ")} (build them: sudo loopsmith images)\n`
                : `all present: ${images.map((i) => i.image).join(", ")}\n`,
            );
          return missing.length ? ExitCode.failed : ExitCode.ok;
        }
        const result = await ensureStackImages(config, images, { say });
        if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
        else if (result.action === "present")
          process.stdout.write(`all present: ${images.map((i) => i.image).join(", ")}\n`);
        return ExitCode.ok;
      }),
    );
}
