/**
 * Fitting a result into one bus message: NATS refuses payloads above the server's
 * `max_payload` (1 MiB by default), and stdout and stderr may each hold the whole output cap.
 */
import { summarizeTests, trimTests, type ExecutionResult } from "@loopsmith/shared";

/** Room kept for the reply envelope and headers, in bytes. */
const ENVELOPE_BYTES = 16 * 1024;

/** Keeps the head and the tail of `text` within `maxBytes` UTF-8 bytes, marking the cut. */
export function headTail(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  const note = `\n…[${bytes.length - maxBytes} bytes cut]…\n`;
  const room = Math.max(0, maxBytes - Buffer.byteLength(note));
  const head = bytes
    .subarray(0, Math.floor(room / 2))
    .toString("utf8")
    .replace(/\uFFFD+$/, "");
  const tail = bytes
    .subarray(bytes.length - Math.ceil(room / 2))
    .toString("utf8")
    .replace(/^\uFFFD+/, "");
  return head + note + tail;
}

/**
 * Returns `result` unchanged when its JSON fits in `maxPayloadBytes`, else a copy that fits
 * whatever the candidate printed: when the test cases alone take more than half the room,
 * their messages are shortened and then the list is trimmed (failing cases first; `summary`
 * keeps the whole run's counts); stdout and stderr keep their head and tail (and
 * `truncated: true`).
 * @param maxPayloadBytes - the server's `max_payload`, in bytes
 */
export function fitResult(result: ExecutionResult, maxPayloadBytes: number): ExecutionResult {
  const limit = maxPayloadBytes - ENVELOPE_BYTES;
  const size = (r: ExecutionResult): number => Buffer.byteLength(JSON.stringify(r));
  if (size(result) <= limit) return result;
  let fitted: ExecutionResult = { ...result, truncated: true, summary: result.summary ?? summarizeTests(result.tests) };
  const bare = (r: ExecutionResult): ExecutionResult => ({ ...r, stdout: "", stderr: "" });
  if (size(bare(fitted)) > limit / 2) {
    fitted = {
      ...fitted,
      tests: fitted.tests.map((t) => (t.message ? { ...t, message: headTail(t.message, 512) } : t)),
    };
  }
  while (size(bare(fitted)) > limit / 2 && fitted.tests.length > 0) {
    fitted = { ...fitted, tests: trimTests(fitted.tests, Math.floor(fitted.tests.length / 2)) };
  }
  // JSON escaping can grow text (control bytes become \u00XX): shrink until it fits.
  let room = Math.max(0, limit - size({ ...fitted, stdout: "", stderr: "" }));
  for (let i = 0; i < 8; i++) {
    const half = Math.floor(room / 2);
    const candidate = { ...fitted, stdout: headTail(result.stdout, half), stderr: headTail(result.stderr, half) };
    if (size(candidate) <= limit) return candidate;
    room = Math.floor(room * 0.6);
  }
  return { ...fitted, stdout: "", stderr: "" };
}
