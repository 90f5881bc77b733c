/**
 * `loopsmith history`, `loopsmith failures` and `loopsmith stats`: read memory through its service, starting NATS
 * and memory when they are missing (and stopping what was started).
 * Exit codes: 0 done; 2 configuration error; 3 NATS, Docker or memory unavailable.
 */
import type { Logger } from "pino";
import { Endpoints, call } from "@loopsmith/shared";
import { ExitCode } from "./exit-codes.js";
import { failuresText, historyText, statsText } from "./output.js";
import { withMemory } from "./runs.js";
import { jsonLine } from "./terminal.js";

/** Options of `history` and `stats`. */
export interface MemoryCommandOptions {
  json?: boolean;
  config?: string;
}

/**
 * Prints recent tasks, newest first.
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `config_invalid`, `unavailable` or `timeout` (NATS, Docker or memory)
 */
export async function historyCommand(opts: MemoryCommandOptions & { limit: number }, log: Logger): Promise<number> {
  const history = await withMemory(log, opts.config, (nc) => call(nc, Endpoints.memory.history, { v: 1, limit: opts.limit }));
  process.stdout.write(opts.json ? `${jsonLine(history)}\n` : historyText(history));
  return ExitCode.ok;
}

/**
 * Prints memory statistics.
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `config_invalid`, `unavailable` or `timeout` (NATS, Docker or memory)
 */
export async function statsCommand(opts: MemoryCommandOptions, log: Logger): Promise<number> {
  const stats = await withMemory(log, opts.config, (nc) => call(nc, Endpoints.memory.stats, { v: 1 }));
  process.stdout.write(opts.json ? `${jsonLine(stats)}\n` : statsText(stats));
  return ExitCode.ok;
}

/**
 * Prints stored failures: one task's (oldest first) with `task`, else the latest of all.
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `config_invalid`, `unavailable` or `timeout` (NATS, Docker or memory)
 */
export async function failuresCommand(opts: MemoryCommandOptions & { task?: string; limit: number }, log: Logger): Promise<number> {
  const failures = await withMemory(log, opts.config, (nc) =>
    call(nc, Endpoints.memory.failures, { v: 1, limit: opts.limit, ...(opts.task ? { taskId: opts.task } : {}) }),
  );
  process.stdout.write(opts.json ? `${jsonLine(failures)}\n` : failuresText(failures));
  return ExitCode.ok;
}
