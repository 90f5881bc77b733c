/**
 * The `loopsmith` command as a user runs it (`cli/bin/loopsmith.js`: the build when it is
 * current, cli/bin/build-stamp.js), for bench scripts that drive a stack through the CLI.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const REPO = fileURLToPath(new URL("../", import.meta.url));

/**
 * Runs `loopsmith <args>` from the repository root with `env` as its whole environment.
 * @returns its stdout
 * @throws Error naming the command and the exit code, with the end of its stderr, when it exits non-zero
 */
export function loopsmithCli(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(REPO, "cli", "bin", "loopsmith.js"), ...args], {
      cwd: REPO,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.once("exit", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`loopsmith ${args[0]} exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}
