/**
 * How a command that fails reports it: one sentence on stderr (control characters
 * neutralised) and, with `--json`, one {@link ErrorObject} as the last line of stdout.
 * Loaded before anything heavy: it tells loopsmith errors apart by their `code`, without
 * importing `@loopsmith/shared`.
 */
import type { ErrorCode } from "@loopsmith/shared/runtime";
import { exitCodeForError, isErrorCode, type ErrorObject, ExitCode } from "./exit-codes.js";
import { jsonLine, printable } from "./terminal.js";

/**
 * An error the CLI raises itself before the shared code is loaded (a bad flag, a missing
 * file, an unreachable NATS). Same `code` set as `LoopsmithError`.
 */
export class CliError extends Error {
  override readonly name = "CliError";
  readonly code: ErrorCode;
  /** The task it concerns, once one was submitted. */
  readonly taskId: string | undefined;

  /**
   * @param code - `bad_request` for a usage error (exit 2), `unavailable` for infrastructure (exit 3), …
   * @param message - one sentence for the user
   * @param opts.cause - the underlying error, kept for the log
   * @param opts.taskId - the task it concerns, when one was submitted
   */
  constructor(code: ErrorCode, message: string, opts: { cause?: unknown; taskId?: string } = {}) {
    super(message, { cause: opts.cause });
    this.code = code;
    this.taskId = opts.taskId;
  }
}

/** A usage error (exit 2): a flag, a value or a file the user gave. */
export function usageError(message: string): CliError {
  return new CliError("bad_request", message);
}

/** The code of anything thrown: its own `code` when it is a loopsmith code, else `internal`. */
export function errorCodeOf(err: unknown): ErrorCode {
  const code = (err as { code?: unknown } | null)?.code;
  return isErrorCode(code) ? code : "internal";
}

/**
 * The {@link ErrorObject} for anything thrown: its code when it carries a loopsmith code
 * (`LoopsmithError`, {@link CliError}), else `internal` with "unexpected error: …".
 */
export function errorObject(err: unknown): ErrorObject {
  const code = errorCodeOf(err);
  const raw = err instanceof Error ? err.message : String(err);
  const message = isErrorCode((err as { code?: unknown } | null)?.code) ? raw : `unexpected error: ${raw}`;
  const taskId = err instanceof CliError ? err.taskId : undefined;
  return { kind: "error", code, message, exitCode: exitCodeForError(code), ...(taskId ? { taskId } : {}) };
}

/**
 * Reports a failure: `loopsmith: <sentence>` on stderr unless `quiet` (commander already
 * printed its own), and the error object on stdout with `json`.
 * @returns the exit code
 */
export function report(obj: ErrorObject, opts: { json?: boolean; quiet?: boolean } = {}): ExitCode {
  if (!opts.quiet) process.stderr.write(`loopsmith: ${printable(obj.message)}\n`);
  if (opts.json) process.stdout.write(`${jsonLine(obj)}\n`);
  return obj.exitCode;
}

/** Shorthand: report anything thrown; returns its exit code. */
export function reportError(err: unknown, opts: { json?: boolean } = {}): ExitCode {
  return report(errorObject(err), opts);
}

/** How a command's action is run: see {@link runCommand}. */
export type CommandRunner = (json: boolean | undefined, action: () => Promise<number>) => Promise<void>;

/**
 * Runs a command's action: sets `process.exitCode` to what it returns, or reports what it
 * throws ({@link reportError}) and sets that exit code. Never throws.
 * @param onError - called after the report (e.g. to log the stack)
 */
export async function runCommand(
  json: boolean | undefined,
  action: () => Promise<number>,
  onError?: (err: unknown) => Promise<void>,
): Promise<void> {
  try {
    process.exitCode = await action();
  } catch (err) {
    process.exitCode = reportError(err, { json });
    await onError?.(err).catch(() => undefined);
  }
}

/**
 * Node's exit code for a module whose top-level await never settled: the event loop emptied
 * while the command still waited on a promise nothing can resolve any more. Node prints
 * nothing of its own (https://nodejs.org/api/process.html#exit-codes, code 13).
 */
export const UNSETTLED_AWAIT_EXIT = 13;

/**
 * Turns Node's silent exit 13 into a reported internal error (exit 3, and with `json` one
 * error line on stdout) naming the command: a command that stops waiting on nothing is a bug
 * of loopsmith's, never a result. The process exiting before `settled()` is that case; an
 * exit after it, or a deliberate `process.exit` with a code other than 0, is left as it is.
 * @param settled - true once the command's promise has settled (then nothing is reported)
 */
export function reportUnsettledExit(settled: () => boolean, opts: { json?: boolean; command?: string } = {}): void {
  process.once("exit", (code) => {
    // Node 20 emits "exit" with 0 here and sets 13 after; later versions may pass 13. Another
    // code is a deliberate process.exit, left alone.
    if (settled() || (code !== 0 && code !== UNSETTLED_AWAIT_EXIT)) return;
    const exitCode = report(
      {
        kind: "error",
        code: "internal",
        message: `internal error: ${opts.command ? `\`${opts.command}\` ` : ""}stopped while waiting for something that can no longer happen (Node exit 13, an unsettled await); nothing is left running by it. Please report it with the command and its LOG_LEVEL=debug output`,
        exitCode: ExitCode.infrastructure,
      },
      opts.json ? { json: true } : {},
    );
    // Node keeps 13 whatever process.exitCode is set to here; process.exit ends with ours.
    process.exit(exitCode);
  });
}
