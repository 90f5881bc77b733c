/** How database failures become one typed, retryable `db_error` with one clear sentence. */
import { LoopsmithError } from "@loopsmith/shared/runtime";

/** Socket-level error codes that mean the database cannot be reached. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "EAI_AGAIN",
]);

/** The reason part of the sentence, from the error's code (never from its message text). */
function reason(err: unknown): string {
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
  const sqlState = typeof code === "string" ? code : undefined;
  if (sqlState === "53100") return "the database's disk is full; free some space and retry";
  if (sqlState === "53200") return "the database is out of memory; retry later";
  if (sqlState === "53300") return "the database has too many connections; retry later";
  if (sqlState && (UNREACHABLE.has(sqlState) || sqlState.startsWith("08") || sqlState.startsWith("57P"))) {
    return "the database is unreachable; check that it runs and that DATABASE_URL points at it";
  }
  const message = err instanceof Error ? err.message : String(err);
  const short = message.replace(/\s+/g, " ").slice(0, 200);
  return sqlState ? `the database answered ${sqlState} (${short})` : `the database failed (${short})`;
}

/**
 * Wraps a database failure as `LoopsmithError("db_error")` (retryable): "memory could not
 * <what>: <reason>". A {@link LoopsmithError} passes through unchanged.
 * @param what - what memory was doing, as a verb phrase ("store the failure")
 */
export function toDbError(what: string, err: unknown): LoopsmithError {
  if (err instanceof LoopsmithError) return err;
  return new LoopsmithError("db_error", `memory could not ${what}: ${reason(err)}`, { cause: err });
}

/** Runs `fn`, turning any failure into {@link toDbError}. */
export async function withDb<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toDbError(what, err);
  }
}
