/**
 * `loopsmith history`, `loopsmith failures` and `loopsmith stats`: read memory through its service, starting NATS
 * and memory when they are missing (and stopping what was started).
 * Exit codes: 0 done; 2 configuration error; 3 NATS, Docker or memory unavailable.
 */
import type { Logger } from "pino";
import { Endpoints, call } from "@loopsmith/shared/bus";
import { HISTORY_PAGE_MAX, type History, type TaskRecord } from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { ExitCode } from "./exit-codes.js";
import { failuresText, historyText, statsText } from "./output.js";
import { withMemory } from "./runs.js";
import { jsonLine } from "./terminal.js";

/** Options of `history` and `stats`. */
export interface MemoryCommandOptions {
  json?: boolean;
  config?: string;
}

/** Most tasks `history -n` reads (in pages of {@link HISTORY_PAGE_MAX}). */
export const HISTORY_LIMIT_MAX = 100_000;

/**
 * Reads the newest `limit` tasks page by page ({@link HISTORY_PAGE_MAX} a request), stopping
 * early when memory has fewer.
 * @param page one history request (`limit`, `offset`) answered by memory
 * @throws whatever `page` throws
 */
export async function readHistoryPages(
  limit: number,
  page: (limit: number, offset: number) => Promise<History>,
): Promise<History> {
  const tasks: TaskRecord[] = [];
  while (tasks.length < limit) {
    const want = Math.min(HISTORY_PAGE_MAX, limit - tasks.length);
    const got = await page(want, tasks.length);
    tasks.push(...got.tasks);
    if (got.tasks.length < want) break;
  }
  return { tasks };
}

/**
 * Prints recent tasks, newest first.
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `config_invalid`, `unavailable` or `timeout` (NATS, Docker or memory)
 */
export async function historyCommand(opts: MemoryCommandOptions & { limit: number }, log: Logger): Promise<number> {
  if (opts.limit < 1 || opts.limit > HISTORY_LIMIT_MAX)
    throw new LoopsmithError("bad_request", `history reads 1 to ${HISTORY_LIMIT_MAX} tasks, not ${opts.limit}`);
  const history = await withMemory(log, opts.config, (nc, owner) =>
    readHistoryPages(opts.limit, (limit, offset) =>
      call(nc, Endpoints.memory.history, { v: 1, limit, offset }, { owner }),
    ),
  );
  process.stdout.write(opts.json ? `${jsonLine(history)}\n` : historyText(history));
  return ExitCode.ok;
}

/**
 * Prints memory statistics over a window: tasks finished since `since` (ISO-8601, see
 * `parseSince` in preflight.ts) and, of those, the `last` most recent; neither: every task.
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `config_invalid`, `unavailable` or `timeout` (NATS, Docker or memory)
 */
export async function statsCommand(
  opts: MemoryCommandOptions & { since?: string; last?: number },
  log: Logger,
): Promise<number> {
  const req = {
    v: 1 as const,
    ...(opts.since ? { since: opts.since } : {}),
    ...(opts.last ? { last: opts.last } : {}),
  };
  const stats = await withMemory(log, opts.config, (nc, owner) => call(nc, Endpoints.memory.stats, req, { owner }));
  process.stdout.write(opts.json ? `${jsonLine(stats)}\n` : statsText(stats));
  return ExitCode.ok;
}

/**
 * A memory as `--promote` and `--demote` name it, `lesson:<id>` or `failure:<id>` (as a hint's
 * `[memory:lesson:<id>]`).
 * @throws LoopsmithError `bad_request` naming `flag` and what it accepts
 */
export function memoryRef(text: string, flag: string): { kind: "lesson" | "failure"; id: string } {
  const m = /^(lesson|failure):(\d{1,18})$/.exec(text.trim());
  if (!m)
    throw new LoopsmithError("bad_request", `${flag} takes lesson:<id> or failure:<id>, not ${JSON.stringify(text)}`);
  return { kind: m[1] as "lesson" | "failure", id: m[2] as string };
}

/**
 * Prints stored failures: one task's (oldest first) with `task`, else the latest of all.
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `config_invalid`, `unavailable` or `timeout` (NATS, Docker or memory)
 */
export async function failuresCommand(
  opts: MemoryCommandOptions & { task?: string; limit: number; utility?: boolean; promote?: string; demote?: string },
  log: Logger,
): Promise<number> {
  if (opts.promote !== undefined && opts.demote !== undefined)
    throw new LoopsmithError("bad_request", "--promote and --demote cannot be given together");
  const verdict =
    opts.promote !== undefined
      ? { ...memoryRef(opts.promote, "--promote"), demoted: false }
      : opts.demote !== undefined
        ? { ...memoryRef(opts.demote, "--demote"), demoted: true }
        : undefined;
  const failures = await withMemory(log, opts.config, (nc, owner) =>
    call(
      nc,
      Endpoints.memory.failures,
      {
        v: 1,
        limit: opts.limit,
        ...(opts.task ? { taskId: opts.task } : {}),
        ...(opts.utility ? { utility: true } : {}),
        ...(verdict ? { verdict } : {}),
      },
      { owner },
    ),
  );
  if (verdict && !opts.json)
    process.stdout.write(`${verdict.kind} ${verdict.id} ${verdict.demoted ? "demoted" : "promoted"} (by hand)\n`);
  process.stdout.write(opts.json ? `${jsonLine(failures)}\n` : failuresText(failures));
  return ExitCode.ok;
}
