/**
 * `loopsmith sandbox run`, the work: runs a command over a copy of a directory in the
 * sandbox, through the same executor code the executor service uses, and prints the
 * execution result. Loaded only when the command runs (see `sandbox.ts`).
 */
import Docker from "dockerode";
import { LoopsmithError, createLogger, loadConfig } from "@loopsmith/shared/runtime";
import { type ExecutionRequest, type Language } from "@loopsmith/shared/contracts";
import { createExecutor, engineEndpoint, readWorkspaceDir } from "@loopsmith/executor";
import { report } from "../errors.js";
import { ExitCode, exitCodeForExecution } from "../exit-codes.js";
import { resultSummary } from "../output.js";
import { jsonLine } from "../terminal.js";

/** Options of `sandbox run` as commander parses them. */
export interface SandboxRunOptions {
  language: Language;
  dir: string;
  timeoutMs?: number;
  memoryMb?: number;
  json?: boolean;
  config?: string;
}

/**
 * Runs `command` (or the language's default test command) over a copy of `opts.dir`.
 * @returns the process exit code: 0 passed, 1 did not pass, 3 `sandbox_error`, 130 interrupted (see `ExitCode`)
 * @throws LoopsmithError `config_invalid`, `not_found` (no such directory),
 *   `workspace_invalid` (a link out of the directory, a binary file, an empty directory),
 *   `unavailable` (no Docker engine) or `sandbox_error` when the sandbox refuses to start
 *   (confinement missing).
 */
export async function sandboxRun(command: string[], opts: SandboxRunOptions): Promise<number> {
  const config = loadConfig(opts.config ? { file: opts.config } : {});
  const log = createLogger({ service: "cli", level: process.env.LOG_LEVEL || "warn" });
  const files = await readWorkspaceDir(opts.dir);
  if (files.length === 0)
    throw new LoopsmithError("workspace_invalid", `the directory ${opts.dir} has no files to run`);
  const req: ExecutionRequest = {
    v: 1,
    taskId: "cli-sandbox",
    iteration: 0,
    idempotencyKey: "cli-sandbox/0/sandbox",
    language: opts.language,
    files,
    timeoutMs: opts.timeoutMs ?? 30_000,
    memoryMb: opts.memoryMb ?? 512,
    ...(command.length ? { command } : {}),
  };
  const docker = new Docker();
  try {
    await docker.ping();
  } catch (err) {
    throw new LoopsmithError(
      "unavailable",
      `no Docker engine answers at ${engineEndpoint().endpoint} (DOCKER_HOST): start dockerd, or check the address and its TLS files`,
      { cause: err },
    );
  }
  // One run: no warm pool, and only the image this language needs.
  const executor = createExecutor({
    docker,
    config: { ...config, executor: { ...config.executor, warmPoolSize: 0 } },
    log,
    kinds: [opts.language === "python" ? "python" : "node"],
  });
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    await executor.start();
    const result = await executor.run(req, { signal: controller.signal });
    process.stdout.write(opts.json ? `${jsonLine(result, 2)}\n` : resultSummary(result));
    if (!controller.signal.aborted) return exitCodeForExecution(result);
    // Interrupted: the summary above says the run was killed; --json ends with the error object.
    return report(
      {
        kind: "error",
        code: "cancelled",
        message: "interrupted; the sandbox run was stopped",
        exitCode: ExitCode.interrupted,
      },
      { json: opts.json, quiet: !opts.json },
    );
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await executor.stop();
  }
}
