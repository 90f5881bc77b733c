/**
 * Fitting a reply into one bus message: NATS refuses payloads above the server's
 * `max_payload` (1 MiB by default), and stdout and stderr may each hold the whole output cap,
 * as may a session call's output. Every output cut here is the shared head-and-tail cut in
 * UTF-8 bytes (`cutUtf8` in `@loopsmith/shared/text`), as is a run's capture (capture.ts,
 * session-exec.ts), so a reply carries one kind of note however often its output was cut.
 */
import { summarizeTests, trimTests, type ExecutionResult, type SessionObservation } from "@loopsmith/shared/contracts";
import { cutUtf8 } from "@loopsmith/shared/text";

/** Room kept for the reply envelope and headers, in bytes. */
const ENVELOPE_BYTES = 16 * 1024;

/**
 * Output a session `run` keeps (stdout and stderr together, in order), in bytes, the cut's note
 * included: its head and tail when it is longer (session-exec.ts). A reply's cut keeps no more
 * than this.
 */
export const RUN_OUTPUT_LIMIT_BYTES = 1024 * 1024;

/**
 * Cuts with `cut(maxBytes)` at `room` bytes, then at 60 % of that, and so on (eight tries),
 * until `fits` holds: JSON escaping can make text up to six times longer (a control byte
 * becomes `\u00XX`), so the first cut may not fit.
 * @returns the first cut that fits, or undefined
 */
function shrinkUntil<T>(room: number, cut: (maxBytes: number) => T, fits: (t: T) => boolean): T | undefined {
  for (let i = 0; i < 8; i++) {
    const candidate = cut(room);
    if (fits(candidate)) return candidate;
    room = Math.floor(room * 0.6);
  }
  return undefined;
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
      tests: fitted.tests.map((t) => (t.message ? { ...t, message: cutUtf8(t.message, { max: 512 }) } : t)),
    };
  }
  while (size(bare(fitted)) > limit / 2 && fitted.tests.length > 0) {
    fitted = { ...fitted, tests: trimTests(fitted.tests, Math.floor(fitted.tests.length / 2)) };
  }
  const room = Math.max(0, limit - size(bare(fitted)));
  const cut = (maxBytes: number): ExecutionResult => {
    const half = Math.floor(maxBytes / 2);
    return { ...fitted, stdout: cutUtf8(result.stdout, { max: half }), stderr: cutUtf8(result.stderr, { max: half }) };
  };
  return shrinkUntil(room, cut, (r) => size(r) <= limit) ?? bare(fitted);
}

/**
 * Returns `obs` (a session call's reply) unchanged when its JSON fits in `maxPayloadBytes`,
 * else a copy whose `output` keeps its head and tail (the shared cut, at most
 * {@link RUN_OUTPUT_LIMIT_BYTES}) so that it fits, whatever the bytes: the serialised reply is
 * measured, escaping included. The note in the output counts every byte cut, a run's cut at
 * capture included (keeping no more than the capture did, this cut takes the capture's note
 * with the middle); `totalBytes` stays the whole output's size, raised to the size of
 * `output` before this cut when that is larger (invalid UTF-8 decoded), so the caller can
 * always tell that bytes were cut.
 * @param maxPayloadBytes - the server's `max_payload`, in bytes
 */
export function fitObservation(obs: SessionObservation, maxPayloadBytes: number): SessionObservation {
  const limit = maxPayloadBytes - ENVELOPE_BYTES;
  const size = (o: SessionObservation): number => Buffer.byteLength(JSON.stringify(o));
  if (size(obs) <= limit) return obs;
  const totalBytes = Math.max(obs.totalBytes, Buffer.byteLength(obs.output, "utf8"));
  const bare: SessionObservation = { ...obs, output: "", totalBytes };
  const cut = (maxBytes: number): SessionObservation => ({
    ...bare,
    output: cutUtf8(obs.output, { max: maxBytes, whole: totalBytes }),
  });
  const room = Math.min(RUN_OUTPUT_LIMIT_BYTES, Math.max(0, limit - size(bare)));
  // Nothing fits but the note (a `max_payload` smaller than the envelope): the note alone.
  return shrinkUntil(room, cut, (o) => size(o) <= limit) ?? cut(0);
}
