/**
 * Exit codes of every `loopsmith` command (`solve`, `history`, `stats`, `config show`,
 * `sandbox run`), and how an error or a task result maps to one. This module is loaded
 * before anything heavy: it imports types only.
 */
import type { ErrorCode } from "@loopsmith/shared/runtime";
import type { ExecutionResult, TaskResult } from "@loopsmith/shared/contracts";

/**
 * The exit codes, the same for every command.
 *
 * | code | name | meaning |
 * |---|---|---|
 * | 0 | `ok` | `solve`: the tests pass. `sandbox run`: the command passed. Other commands: done. |
 * | 1 | `failed` | `solve`: the tests fail, or a limit (`max_iterations`, `budget`, `stuck`) stopped the task. `sandbox run`: the command ran and did not pass (failed, timeout, oom, output limit, blocked). |
 * | 2 | `usage` | Usage or configuration error: a bad flag or value, a missing or invalid file (task, dataset, configuration, script), an unknown HumanEval id, a rejected API key or GitHub token, a GitHub issue not found or of another repository than the local one (`solve --issue`). Reported before anything is started. |
 * | 3 | `infrastructure` | Infrastructure error: NATS unreachable, Docker down or an image missing, a service that crashed, did not answer or timed out, the sandbox failed, the LLM provider overloaded, GitHub's rate limit (the message names its reset time); also an internal error. |
 * | 130 | `interrupted` | Interrupted (Ctrl-C or SIGTERM); a running task is cancelled first. |
 *
 * With `--json`, every exit other than 0 and 1 ends stdout with exactly one
 * {@link ErrorObject} line.
 */
export const ExitCode = {
  ok: 0,
  failed: 1,
  usage: 2,
  infrastructure: 3,
  interrupted: 130,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** One line per exit code, for `--help` and the README. */
export const EXIT_CODE_MEANINGS: Readonly<Record<ExitCode, string>> = {
  0: "the tests pass (solve), the command passed (sandbox run), or the command did what was asked",
  1: "the tests fail or a limit stopped the task (solve); the command did not pass (sandbox run)",
  2: "usage or configuration error (bad flag or value, missing or invalid file, unknown id, rejected API key or GitHub token, GitHub issue not found or on another repository)",
  3: "infrastructure error (NATS unreachable, Docker down, a service crashed or timed out, the sandbox failed, GitHub rate limit)",
  130: "interrupted (Ctrl-C); a running task is cancelled",
};

/** The exit code of each {@link ErrorCode} when it ends a command. */
const BY_ERROR_CODE: Readonly<Record<ErrorCode, ExitCode>> = {
  bad_request: ExitCode.usage,
  not_found: ExitCode.usage,
  config_invalid: ExitCode.usage,
  provider_unconfigured: ExitCode.usage,
  permission_denied: ExitCode.usage,
  workspace_invalid: ExitCode.usage,
  command_not_found: ExitCode.usage,
  repo_invalid: ExitCode.usage,
  llm_auth: ExitCode.usage,
  budget_exceeded: ExitCode.failed,
  cancelled: ExitCode.interrupted,
  timeout: ExitCode.infrastructure,
  unavailable: ExitCode.infrastructure,
  sandbox_error: ExitCode.infrastructure,
  db_error: ExitCode.infrastructure,
  llm_rate_limited: ExitCode.infrastructure,
  llm_overloaded: ExitCode.infrastructure,
  llm_bad_reply: ExitCode.infrastructure,
  llm_refused: ExitCode.infrastructure,
  internal: ExitCode.infrastructure,
};

/** True when `code` is one of loopsmith's error codes. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === "string" && Object.hasOwn(BY_ERROR_CODE, code);
}

/** The exit code for an error code; an unknown code counts as `internal` (3). */
export function exitCodeForError(code: string): ExitCode {
  return isErrorCode(code) ? BY_ERROR_CODE[code] : ExitCode.infrastructure;
}

/**
 * The exit code of `solve` for a task result: 0 passed, 1 failed (tests fail or a limit
 * stopped it), 130 cancelled, and for `error` the code of its error (2 configuration or a
 * rejected key, 3 infrastructure; 3 when the result names none).
 */
export function exitCodeForResult(r: Pick<TaskResult, "status" | "error">): ExitCode {
  switch (r.status) {
    case "passed":
      return ExitCode.ok;
    case "failed":
      return ExitCode.failed;
    case "cancelled":
      return ExitCode.interrupted;
    case "error":
      return r.error ? exitCodeForError(r.error.code) : ExitCode.infrastructure;
  }
}

/**
 * The exit code of `sandbox run` for an execution result: 0 passed; 3 when the sandbox
 * itself failed (`sandbox_error`); 1 for every other status (the command did not pass).
 */
export function exitCodeForExecution(r: Pick<ExecutionResult, "status">): ExitCode {
  if (r.status === "passed") return ExitCode.ok;
  if (r.status === "sandbox_error") return ExitCode.infrastructure;
  return ExitCode.failed;
}

/**
 * The last line of `--json` output when a command fails (any exit but 0 and 1):
 * `{"kind":"error","code":"unavailable","message":"…","exitCode":3}`. `code` is one of
 * loopsmith's error codes (`bad_request` for usage errors, `cancelled` when interrupted,
 * `internal` for anything unexpected); `message` is the sentence also printed on stderr;
 * `taskId` is there when a task had been submitted.
 */
export interface ErrorObject {
  kind: "error";
  code: ErrorCode;
  message: string;
  exitCode: ExitCode;
  taskId?: string;
}
