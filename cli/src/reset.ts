/**
 * `loopsmith reset [--memory] [--history] [--yes]`: empties the store the memory service
 * uses, read the way it reads it: PostgreSQL at `DATABASE_URL`, else the embedded PGlite
 * under `<dataDir>/memory` (`LOOPSMITH_DATA_DIR`). `--memory` removes what the agent learned
 * (failures with their reflections, successes, the recall log); `--history` the task history
 * `history`, `stats`, `show`, `export` and `replay` read (task records and recorded runs);
 * neither flag: both. On a terminal it asks first; elsewhere it needs `--yes`.
 *
 * Exit codes: 0 removed (or nothing there to remove); 1 the confirmation was declined
 * (nothing removed); 2 no terminal to ask on and no `--yes`, a configuration error, or the
 * embedded memory is open by a running stack; 3 the database cannot be reached.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline/promises";
import type { Logger } from "pino";
import type { ResetCounts as Removed, ResetScope } from "@loopsmith/memory";
import { CliError, usageError } from "./errors.js";
import { ExitCode } from "./exit-codes.js";
import { jsonLine } from "./terminal.js";

/** Options of `reset`, as commander gives them. */
export interface ResetOptions {
  memory?: boolean;
  history?: boolean;
  yes?: boolean;
  json?: boolean;
  config?: string;
}

/** What is emptied: `memory` (failures, successes, recalls) and `history` (tasks, runs). */
type ResetTargets = ResetScope;

/** What `--memory` and `--history` ask for: the flags given, or both when neither is. Pure. */
export function resetTargets(o: Pick<ResetOptions, "memory" | "history">): ResetTargets {
  const memory = !!o.memory;
  const history = !!o.history;
  return memory || history ? { memory, history } : { memory: true, history: true };
}

/** The targets in words, for the question and the summary: "the memory (…) and the task history (…)". */
export function targetsText(t: ResetTargets): string {
  return [
    t.memory ? "the memory (stored failures with their fixes, successes, the recall log)" : "",
    t.history ? "the task history (task records and their recorded runs)" : "",
  ]
    .filter(Boolean)
    .join(" and ");
}

/** How {@link confirmReset} asks: whether stdin and stderr are a terminal, and the question itself. */
export interface Confirmation {
  /** Both stdin and stderr are terminals (a person can answer). */
  terminal: boolean;
  /** Asks `question` and resolves with the answer typed. */
  ask: (question: string) => Promise<string>;
}

/**
 * Whether to go on: `--yes` goes on without asking; on a terminal the answer decides (`y` or
 * `yes`, any case); without one it is a usage error.
 * @param where - the store, as people read it (`postgres db:5432/loopsmith`, a directory)
 * @returns true to remove, false when the answer was anything but yes
 * @throws CliError `bad_request` (exit 2) without `--yes` and without a terminal, saying to pass `--yes`
 */
export async function confirmReset(
  targets: ResetTargets,
  where: string,
  yes: boolean | undefined,
  how: Confirmation,
): Promise<boolean> {
  if (yes) return true;
  if (!how.terminal)
    throw usageError(
      `reset deletes ${targetsText(targets)} in ${where} and asks first, but there is no terminal to ask on; pass --yes to delete without asking`,
    );
  const answer = await how.ask(`Delete ${targetsText(targets)} in ${where}? This cannot be undone. [y/N] `);
  return /^\s*y(es)?\s*$/i.test(answer);
}

/** The summary of what was removed, one line. Pure. */
export function removedText(targets: ResetTargets, where: string, r: Removed): string {
  const n = (count: number, one: string, many: string): string => `${count} ${count === 1 ? one : many}`;
  const parts = [
    targets.memory
      ? `memory: ${n(r.failures, "failure", "failures")}, ${n(r.successes, "success", "successes")}, ${n(r.recalls, "recall record", "recall records")}`
      : "",
    targets.history ? `history: ${n(r.tasks, "task", "tasks")}, ${n(r.runs, "recorded run", "recorded runs")}` : "",
  ].filter(Boolean);
  return `removed from ${where}: ${parts.join("; ")}`;
}

/** Asks on the terminal (the question on stderr, so stdout stays the command's output). */
function terminalConfirmation(): Confirmation {
  return {
    terminal: process.stdin.isTTY === true && process.stderr.isTTY === true,
    ask: async (question) => {
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      try {
        return await rl.question(question);
      } finally {
        rl.close();
      }
    },
  };
}

/**
 * Runs `reset`: names the store, asks (or takes `--yes`), empties what was asked, says what
 * was removed (`--json`: `{"kind":"reset","store","memory","history","removed":{…}}`).
 * @param how - how to ask. @defaultValue the process's terminal
 * @returns {@link ExitCode.ok} when removed or nothing is there; {@link ExitCode.failed} when declined
 * @throws CliError `bad_request` (no terminal, no `--yes`; the embedded memory open by a
 *   running stack); LoopsmithError `config_invalid` (a bad configuration or DATABASE_URL),
 *   `db_error` (the database refused or cannot be reached)
 */
export async function resetCommand(o: ResetOptions, log: Logger, how = terminalConfirmation()): Promise<number> {
  const { loadConfig } = await import("@loopsmith/shared/runtime");
  const config = loadConfig(o.config ? { file: o.config } : {});
  const targets = resetTargets(o);
  const embedded = !config.databaseUrl;
  const where = config.databaseUrl ? postgresLocation(config.databaseUrl) : join(config.dataDir, "memory");
  const print = (line: string, removed: Removed): void => {
    process.stdout.write(o.json ? `${jsonLine({ kind: "reset", store: where, ...targets, removed })}\n` : `${line}\n`);
  };
  const none: Removed = { failures: 0, successes: 0, recalls: 0, tasks: 0, runs: 0 };
  if (embedded && !existsSync(where)) {
    print(`nothing to remove: there is no memory at ${where}`, none);
    return ExitCode.ok;
  }
  if (!(await confirmReset(targets, where, o.yes, how))) {
    process.stderr.write("loopsmith: nothing removed\n");
    return ExitCode.failed;
  }
  const [{ openDatabase, resetMemory }, { liveStack }] = await Promise.all([
    import("@loopsmith/memory"),
    import("./stack-record.js"),
  ]);
  if (embedded && (await liveStack(config.dataDir)))
    throw usageError(
      `the stack loopsmith up started is running on ${config.dataDir} and its memory service holds ${where}; stop it first (loopsmith down), then reset`,
    );
  let db;
  try {
    db = await openDatabase({ config, log, embedders: [] });
  } catch (err) {
    // Embedded memory opens in one process only: another command's stack holds it now.
    if (embedded && (err as { code?: unknown }).code === "db_error" && /in use by/.test((err as Error).message))
      throw new CliError(
        "bad_request",
        `${(err as Error).message}; a loopsmith command running its own stack (solve, improve, up) holds it: let it finish or stop it, then reset`,
        { cause: err },
      );
    throw err;
  }
  try {
    const removed = await resetMemory(db.pool, targets);
    print(removedText(targets, where, removed), removed);
    return ExitCode.ok;
  } finally {
    await db.close();
  }
}

/** Where a PostgreSQL URL points, without its credentials: `postgres <host><path>`. */
function postgresLocation(url: string): string {
  try {
    const u = new URL(url);
    return `postgres ${u.host}${u.pathname}`;
  } catch {
    throw new CliError(
      "config_invalid",
      "DATABASE_URL is not a valid URL (expected postgres://user:password@host:port/db)",
    );
  }
}
