/**
 * What the model sees of a tool's output: ONE rule cuts every observation
 * ({@link cutObservation}), and the session's replies are rendered into text here.
 */
import type { SessionObservation } from "@loopsmith/shared";

/** The cut rule: lines kept at the head and at the tail, and the characters at most (the note included). */
export interface CutRule {
  headLines: number;
  tailLines: number;
  maxChars: number;
}

/** The rule every observation the model sees is cut by: the first 60 lines, the last 40, at most 8 000 characters. */
export const OBSERVATION_CUT: CutRule = { headLines: 60, tailLines: 40, maxChars: 8_000 };

/** The rule of an observation as the transcript keeps it (`TranscriptStep.observation`, 4 000 characters). */
export const TRANSCRIPT_CUT: CutRule = { headLines: 60, tailLines: 40, maxChars: 4_000 };

/** Characters kept free for the note that says what was cut. */
const NOTE_CHARS = 120;

const lineCount = (text: string): number => (text === "" ? 0 : text.split("\n").length - (text.endsWith("\n") ? 1 : 0));

/** The note that replaces a cut part: how many lines and bytes went, and the whole's size. */
export function cutNote(cut: string, totalLines: number): string {
  const lines = (cut.match(/\n/g) ?? []).length;
  const bytes = Buffer.byteLength(cut, "utf8");
  return `[... ${lines.toLocaleString("en-US")} lines (${bytes.toLocaleString("en-US")} bytes) cut; total ${totalLines.toLocaleString("en-US")} lines ...]`;
}

/**
 * Cuts a tool's output for the model by one rule: when it has more than `headLines +
 * tailLines` lines or more than `maxChars` characters, the first `headLines` lines and the
 * last `tailLines` lines are kept (then, if those are still too long, the head's first 60 %
 * and the tail's last 40 % of the characters left), and the middle becomes one line saying
 * what was cut: `[... 1,234 lines (56,789 bytes) cut; total 2,000 lines ...]`. Line numbers
 * a `read` put in front of its lines stay as they were. The result never passes `maxChars`.
 * @param text - the whole output
 * @param rule - {@link OBSERVATION_CUT} unless said otherwise
 */
export function cutObservation(text: string, rule: CutRule = OBSERVATION_CUT): string {
  const total = lineCount(text);
  if (total <= rule.headLines + rule.tailLines && text.length <= rule.maxChars) return text;
  const lines = text.split("\n");
  // By lines first (when there are too many), then by characters.
  let [head, tail] = [text, ""];
  if (total > rule.headLines + rule.tailLines) {
    head = `${lines.slice(0, rule.headLines).join("\n")}\n`;
    tail = lines.slice(lines.length - rule.tailLines - (text.endsWith("\n") ? 1 : 0)).join("\n");
  }
  const room = Math.max(0, rule.maxChars - NOTE_CHARS);
  if (head.length + tail.length > room) {
    const whole = tail === "";
    const headRoom = Math.min(head.length, Math.floor(room * 0.6));
    head = head.slice(0, headRoom);
    const [src, tailRoom] = [whole ? text : tail, room - headRoom];
    tail = tailRoom > 0 ? src.slice(Math.max(0, src.length - tailRoom)) : "";
  }
  const cut = text.slice(head.length, text.length - tail.length);
  const note = cutNote(cut, total);
  const before = head === "" || head.endsWith("\n") ? "" : "\n";
  const after = tail === "" || tail.startsWith("\n") ? "" : "\n";
  return `${head}${before}${note}${after}${tail}`.slice(0, rule.maxChars);
}

/**
 * A session call's observation as text, before the cut: a `run` says its exit code (or that
 * it was killed) above its output; any output the executor capped (a run's at 1 MiB, any
 * call's to fit the bus's largest message) says its whole size.
 */
export function renderObservation(tool: string, o: SessionObservation): string {
  let text = o.output;
  const shown = Buffer.byteLength(o.output, "utf8");
  if (o.totalBytes > shown)
    text += `\n[the sandbox kept ${shown.toLocaleString("en-US")} of ${o.totalBytes.toLocaleString("en-US")} bytes of output]`;
  if (tool === "run") {
    const status = o.timedOut
      ? "killed: it passed its timeout"
      : o.exitCode === null || o.exitCode === undefined
        ? "killed"
        : `exit code ${o.exitCode}`;
    return `${status}\n${text}`;
  }
  if (tool === "search" && o.total !== undefined) return `${o.total} matches\n${text}`;
  return text;
}
