/**
 * `loopsmith sandbox run`: runs a command over a copy of a directory in the sandbox, through
 * the same executor code the executor service uses, and prints the execution result.
 *
 * Exit codes: 0 the command passed; 1 it did not (failed, error, timeout, oom, output_limit,
 * killed, blocked); 2 bad usage or configuration; 3 the sandbox itself failed (sandbox_error).
 */
import Docker from "dockerode";
import { InvalidArgumentError, Option, type Command } from "commander";
import { Language, LoopsmithError, createLogger, loadConfig, type ExecutionRequest, type ExecutionResult } from "@loopsmith/shared";
import { createExecutor, readWorkspaceDir } from "@loopsmith/executor";

/** Options of `sandbox run` as commander parses them. */
export interface SandboxRunOptions {
  language: Language;
  dir: string;
  timeoutMs?: number;
  memoryMb?: number;
  json?: boolean;
  config?: string;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError("expected a positive whole number");
  return n;
}

/** The human form of a result: the command's output, then a summary. */
export function resultSummary(r: ExecutionResult): string {
  const lines: string[] = [];
  if (r.stdout) lines.push(r.stdout.trimEnd());
  if (r.stderr) lines.push(r.stderr.trimEnd());
  lines.push("");
  lines.push(`${r.status.toUpperCase()} · exit code ${r.exitCode ?? "none"} · ${(r.durationMs / 1000).toFixed(2)} s${r.truncated ? " · output truncated" : ""}`);
  if (r.reason) lines.push(`  ${r.reason}`);
  for (const t of r.tests) {
    const mark = t.status === "passed" ? "✔" : t.status === "skipped" ? "-" : "✖";
    lines.push(`  ${mark} ${t.classname ? `${t.classname}::` : ""}${t.name}${t.status === "failed" || t.status === "error" ? ` (${t.status})` : ""}`);
  }
  return `${lines.join("\n")}\n`;
}

/** The process exit code for a result. */
export function exitCodeOf(r: ExecutionResult): number {
  if (r.status === "passed") return 0;
  if (r.status === "sandbox_error") return 3;
  return 1;
}

/**
 * Runs `command` (or the language's default test command) over a copy of `opts.dir`.
 * @returns the process exit code (see the module comment)
 * @throws LoopsmithError `config_invalid`, `not_found` (no such directory),
 *   `workspace_invalid` (a link out of the directory, a binary file, an empty directory),
 *   or `sandbox_error` when the sandbox refuses to start (confinement missing).
 */
export async function sandboxRun(command: string[], opts: SandboxRunOptions): Promise<number> {
  const config = loadConfig(opts.config ? { file: opts.config } : {});
  const log = createLogger({ service: "cli", level: process.env.LOG_LEVEL ?? "warn" });
  const files = await readWorkspaceDir(opts.dir);
  if (files.length === 0) throw new LoopsmithError("workspace_invalid", `the directory ${opts.dir} has no files to run`);
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
  // One run: no warm pool, and only the image this language needs.
  const executor = createExecutor({
    docker: new Docker(),
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
    process.stdout.write(opts.json ? `${JSON.stringify(result, null, 2)}\n` : resultSummary(result));
    return exitCodeOf(result);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await executor.stop();
  }
}

/** Registers `sandbox run` on the program. */
export function registerSandboxCommand(program: Command): void {
  const sandbox = program.command("sandbox").description("the hardened sandbox the executor runs code in");
  sandbox
    .command("run")
    .description("run a command over a copy of a directory in a fresh sandbox container; exit 0 when it passed")
    .addOption(new Option("-l, --language <language>", "the sandbox image to use").choices(Language.options).makeOptionMandatory())
    .requiredOption("-d, --dir <dir>", "the directory copied into the sandbox's /workspace")
    .option("--timeout-ms <ms>", "wall-clock limit in ms (default 30000)", positiveInt)
    .option("--memory-mb <mib>", "memory limit in MiB, swap equal (default 512)", positiveInt)
    .option("--json", "print the execution result as JSON")
    .option("--config <file>", "configuration file (JSON)")
    .argument("[command...]", "argv inside the sandbox (after --); default: the language's test command")
    .action(async (command: string[], opts: SandboxRunOptions) => {
      try {
        process.exitCode = await sandboxRun(command, opts);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        process.stderr.write(`loopsmith: ${message}\n`);
        const code = err instanceof LoopsmithError ? err.code : "internal";
        process.exitCode = code === "sandbox_error" ? 3 : code === "internal" || code === "unavailable" ? 1 : 2;
      }
    });
}
