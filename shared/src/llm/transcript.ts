/**
 * The transcript: when `config.llm.transcriptPath` is set, every LLM call (any provider,
 * success or failure) appends one JSON line to that file. Several processes may append to
 * the same file, so each line is written with one `appendFile` (one `write` in O_APPEND
 * mode, which the kernel does not interleave for regular files).
 */
import { appendFile } from "node:fs/promises";
import type { Logger } from "pino";
import type { Usage } from "../contracts/common.js";
import type { ErrorData } from "../runtime/errors.js";
import type { Role } from "./types.js";

/** One line of the transcript. */
export interface TranscriptLine {
  /** ISO 8601 time the call ended. */
  at: string;
  provider: string;
  model: string;
  role: Role;
  taskId: string;
  iteration: number;
  /** 1 for the first call of a `complete()`, 2 for the re-ask. */
  attempt: number;
  system: string;
  /** The conversation as sent, provider-neutral (`{role, content}`). */
  messages: Array<{ role: string; content: string }>;
  /** The reply text, or the tool input as JSON text; `null` when the call failed. */
  reply: string | null;
  /** That call's usage (zero when it failed). */
  usage: Usage;
  /** The typed error when the call failed at HTTP level. */
  error?: ErrorData;
}

/** Appends transcript lines; a no-op without a path. */
export type TranscriptWriter = (line: TranscriptLine) => Promise<void>;

/**
 * Builds the writer. A failed write is logged at `warn` and does not fail the call.
 * @param path - the JSONL file (`config.llm.transcriptPath`); `undefined` disables it
 */
export function createTranscriptWriter(path: string | undefined, log: Logger): TranscriptWriter {
  if (!path) return async () => {};
  return async (line) => {
    try {
      await appendFile(path, JSON.stringify(line) + "\n", "utf8");
    } catch (err) {
      log.warn({ err, path }, "cannot append to the LLM transcript");
    }
  };
}
