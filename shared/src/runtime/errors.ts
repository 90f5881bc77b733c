/**
 * Typed errors. Inside a process each failure is a {@link LoopsmithError} with a `code`;
 * across the bus it travels as {@link ErrorData} (`{code, message, retryable}`).
 * Tell errors apart by `code`, never by message text.
 */
import { z } from "zod";

/**
 * The closed set of error codes. `retryable` defaults per code come from
 * {@link RETRYABLE_BY_DEFAULT}: an infrastructure failure can be retried and does not use
 * up an iteration; a bad candidate or a bad request cannot.
 */
export const ErrorCode = z.enum([
  "bad_request", // a message failed its schema, or was not JSON
  "not_found",
  "timeout", // a bus call or an LLM call ran out of time
  "unavailable", // no responder, a service is down, a connection failed
  "llm_auth", // the provider rejected the API key or its permissions
  "llm_rate_limited",
  "llm_overloaded",
  "llm_bad_reply", // the model's reply did not validate, even after the re-ask
  "llm_refused",
  "budget_exceeded", // a call would pass the task's USD or token budget
  "sandbox_error", // the sandbox infrastructure failed; never counted against the candidate
  "workspace_invalid", // a file path escapes the workspace, or similar
  "db_error",
  "cancelled",
  "config_invalid",
  "permission_denied", // NATS refused a publish or subscription to this connection's user (its permissions)
  "provider_unconfigured", // a step needs a model and the service has none configured (no API key, no base URL)
  "command_not_found", // repo mode: the test or setup command does not exist in the sandbox
  "repo_invalid", // repo mode: not a git work tree, a bare repository, an unknown base, a dirty tree with --apply
  "internal",
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

/** Whether a retry can help, per code, unless the thrower says otherwise. */
export const RETRYABLE_BY_DEFAULT: Readonly<Record<ErrorCode, boolean>> = {
  bad_request: false,
  not_found: false,
  timeout: true,
  unavailable: true,
  llm_auth: false,
  llm_rate_limited: true,
  llm_overloaded: true,
  llm_bad_reply: false,
  llm_refused: false,
  budget_exceeded: false,
  sandbox_error: true,
  workspace_invalid: false,
  db_error: true,
  cancelled: false,
  config_invalid: false,
  permission_denied: false,
  provider_unconfigured: false,
  command_not_found: false,
  repo_invalid: false,
  internal: false,
};

/** An error as it crosses the bus: data, not a thrown object. */
export const ErrorData = z.object({
  code: ErrorCode,
  /** One sentence a user can act on. */
  message: z.string(),
  retryable: z.boolean(),
  /** Optional machine-readable detail (validation issues, raw model text, …). */
  details: z.unknown().optional(),
});
export type ErrorData = z.infer<typeof ErrorData>;

/** The one error class used inside loopsmith processes. */
export class LoopsmithError extends Error {
  override readonly name = "LoopsmithError";
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: unknown;

  /**
   * @param code - one of {@link ErrorCode}
   * @param message - one sentence for the user
   * @param opts.retryable - overrides {@link RETRYABLE_BY_DEFAULT}
   * @param opts.cause - the underlying error, kept for the log
   * @param opts.details - machine-readable detail carried across the bus
   */
  constructor(
    code: ErrorCode,
    message: string,
    opts: { retryable?: boolean; cause?: unknown; details?: unknown } = {},
  ) {
    super(message, { cause: opts.cause });
    this.code = code;
    this.retryable = opts.retryable ?? RETRYABLE_BY_DEFAULT[code];
    this.details = opts.details;
  }

  /** The bus form of this error. */
  toData(): ErrorData {
    const data: ErrorData = { code: this.code, message: this.message, retryable: this.retryable };
    if (this.details !== undefined) data.details = this.details;
    return data;
  }

  /** Rebuilds an error that arrived over the bus. */
  static fromData(data: ErrorData): LoopsmithError {
    return new LoopsmithError(data.code, data.message, {
      retryable: data.retryable,
      details: data.details,
    });
  }
}

/**
 * Turns anything thrown into {@link ErrorData}. A {@link LoopsmithError} keeps its code;
 * anything else becomes `internal` with its message (the stack goes to the log, not here).
 */
export function toErrorData(err: unknown): ErrorData {
  if (err instanceof LoopsmithError) return err.toData();
  const message = err instanceof Error ? err.message : String(err);
  return { code: "internal", message, retryable: false };
}

/** True when `err` is a {@link LoopsmithError} with one of `codes`. */
export function hasCode(err: unknown, ...codes: ErrorCode[]): err is LoopsmithError {
  return err instanceof LoopsmithError && codes.includes(err.code);
}

/**
 * Why a replica refused work that another replica of the same service may take: `full`
 * (no free slot, and it queues none: `executor.queueLimit` 0) or `engine_down` (its Docker
 * engine does not answer). It travels as `unavailable` with `details.busy`.
 */
export type BusyReason = "full" | "engine_down";

/**
 * The error a replica answers with when it will not take work now but another replica may
 * ({@link BusyReason}). The bus's `call` with `busyWaitMs` sends the request again, at once to
 * whichever replica the queue group picks, instead of failing.
 */
export function busyError(message: string, reason: BusyReason): LoopsmithError {
  return new LoopsmithError("unavailable", message, { retryable: true, details: { busy: reason } });
}

/** The {@link BusyReason} of an error made by {@link busyError}, else undefined. */
export function busyReason(err: unknown): BusyReason | undefined {
  if (!hasCode(err, "unavailable")) return undefined;
  const busy = (err.details as { busy?: unknown } | undefined)?.busy;
  return busy === "full" || busy === "engine_down" ? busy : undefined;
}
