/**
 * What the model sees of a tool's output: ONE rule cuts every observation
 * ({@link cutObservation}), and the session's replies are rendered into text here.
 */
import { agentTool, type SessionObservation } from "@loopsmith/shared/contracts";
import { cutText } from "@loopsmith/shared/text";

/** The cut rule: lines kept at the head and at the tail, and the characters at most (the note included), in characters. */
export interface CutRule {
  headLines: number;
  tailLines: number;
  maxChars: number;
}

/** The rule every observation the model sees is cut by: the first 60 lines, the last 40, at most 8 000 characters. */
export const OBSERVATION_CUT: CutRule = { headLines: 60, tailLines: 40, maxChars: 8_000 };

/**
 * Cuts a tool's output for the model by one rule, the shared head-and-tail cut
 * (`cutText` in `@loopsmith/shared/text`): when it has more than `headLines + tailLines` lines
 * or more than `maxChars` characters, the first `headLines` lines and the last `tailLines`
 * lines are kept (then, if those are still too long, the head's first 60 % and the tail's last
 * 40 % of the characters the note leaves), and the middle becomes the one cut note on its own
 * line, saying how many lines (or characters) went: `[… 1,900 lines cut …]`. Line numbers a
 * `read` put in front of its lines stay as they were. The result never passes `maxChars`.
 * @param text - the whole output
 * @param rule - {@link OBSERVATION_CUT} unless said otherwise
 */
export function cutObservation(text: string, rule: CutRule = OBSERVATION_CUT): string {
  return cutText(text, {
    max: rule.maxChars,
    headShare: 0.6,
    lines: { head: rule.headLines, tail: rule.tailLines },
  });
}

/**
 * A session call's observation as text, before the cut: the tool's heading from the tool
 * table (`AGENT_TOOLS[tool].heading`: a `run`'s exit code, or that it was killed; a
 * `search`'s match count) above its output; any output the executor capped (a run's at
 * 1 MiB, any call's to fit the bus's largest message) says its whole size.
 */
export function renderObservation(tool: string, o: SessionObservation): string {
  let text = o.output;
  const shown = Buffer.byteLength(o.output, "utf8");
  if (o.totalBytes > shown)
    text += `\n[the sandbox kept ${shown.toLocaleString("en-US")} of ${o.totalBytes.toLocaleString("en-US")} bytes of output]`;
  const heading = agentTool(tool)?.heading?.(o);
  return heading === undefined ? text : `${heading}\n${text}`;
}
