/**
 * The transcript of an agent-mode run as people read it: the steps of
 * the model's tool loop, read back from the run's messages (`transcript-record.ts`), for `loopsmith show` (one compact
 * line per step, and with `--transcript` the thought and the observation under it), the
 * `report.md` of `loopsmith export`, and the HTML report (one `<details>` per iteration);
 * and the one line saying which project instructions the run's prompts carried. Pure. Terminal text goes through `printable`; HTML through `escapeHtml`.
 */
import { z } from "zod";
import { agentTool, type TaskEvent, type TranscriptStep } from "@loopsmith/shared/contracts";
import { findCutNote } from "@loopsmith/shared/text";
import { duration, usd } from "./format.js";
import { escapeHtml } from "./html.js";
import { printable } from "./terminal.js";
import { palette } from "./ui/index.js";

// The steps are read by transcript-record.ts; `show`, `export` and the MCP server take them from here.
export { transcriptSteps } from "./transcript-record.js";

/** A step to draw: a recorded one, or a bare {@link TranscriptStep} (its turn's first call). */
export type ViewStep = TranscriptStep & { call?: number };

/** `data.instructions` of the PREPARE event that names the project instructions (`InstructionsUse`). */
const InstructionsData = z.object({
  path: z.string(),
  bytes: z.number().int().nonnegative(),
  truncated: z.boolean(),
  shownBytes: z.number().int().nonnegative().optional(),
});

/**
 * The project instructions a repo-mode run used, in one line: `project instructions: AGENTS.md,
 * 1 234 bytes, in every prompt` or `…: AGENTS.md, cut to 32 768 of 40 000 bytes, in every
 * prompt`; read from the `prepare` step event whose `data.instructions` names the file (the
 * conductor records it before the first prompt). Undefined when the run recorded none (no
 * `AGENTS.md` or `CONVENTIONS.md`, or not repo mode). The path goes through `printable`.
 */
export function instructionsLine(events: readonly TaskEvent[]): string | undefined {
  for (const e of events) {
    if (e.kind !== "step" || e.phase !== "prepare") continue;
    const parsed = InstructionsData.safeParse(e.data?.instructions);
    if (!parsed.success) continue;
    const i = parsed.data;
    const size = i.truncated
      ? `cut to ${groupDigits(i.shownBytes ?? 0)} of ${groupDigits(i.bytes)} bytes`
      : `${groupDigits(i.bytes)} bytes`;
    return `project instructions: ${printable(i.path)}, ${size}, in every prompt`;
  }
  return undefined;
}

/** Steps grouped by iteration, iterations in order. */
export function stepsByIteration<T extends TranscriptStep>(steps: readonly T[]): [number, T[]][] {
  const out = new Map<number, T[]>();
  for (const s of steps) out.set(s.iteration, [...(out.get(s.iteration) ?? []), s]);
  return [...out.entries()].sort((a, b) => a[0] - b[0]);
}

/** An integer with its thousands apart: `1 234`. */
export function groupDigits(n: number): string {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, " ");
}

const cut = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** One argument's value on a step line: strings quoted (JSON escapes, cut at 60), `edits` by path. */
function argValue(key: string, value: unknown): string {
  if (typeof value === "string") return cut(JSON.stringify(value), 60);
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  if (Array.isArray(value)) {
    const paths = value.map((v) => (v as { path?: unknown } | null)?.path).filter((p) => typeof p === "string");
    if (key === "edits" && paths.length === value.length) return `[${cut(paths.join(", "), 80)}]`;
    return `[${value.length} item${value.length === 1 ? "" : "s"}]`;
  }
  return "{…}";
}

/** A step's arguments on one line: `pattern="def foo" glob="*.py"`. */
export function formatArgs(args: Readonly<Record<string, unknown>>): string {
  return Object.entries(args)
    .map(([k, v]) => `${k}=${argValue(k, v)}`)
    .join(" ");
}

const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;

/**
 * Whether the loop's cut rule (`cutObservation` in services/architect/src/agent/observe.ts)
 * left its note in an observation: the shared cut note in lines or characters (the sandbox's
 * own cut counts bytes), or the note transcripts written before it was shared carry.
 */
const loopCut = (text: string): boolean => {
  const note = findCutNote(text);
  return (note !== null && note.unit !== "bytes") || LEGACY_CUT_NOTE.test(text);
};
const LEGACY_CUT_NOTE = /\[\.\.\. [\d,]+ lines \([\d,]+ bytes\) cut; total [\d,]+ lines \.\.\.\]/;

/**
 * What a step observed, in a few words: `error: <first line>` for an error observation, else
 * the tool table's `outcome` of the tool (`AGENT_TOOLS` in `@loopsmith/shared`: `4 matches`
 * for a search, `120 lines` for a read, `9 entries` for a list, `exit 1` or `killed…` for a
 * run, `submitted`), else the first line (cut at 60); `, cut` after it when the loop's cut
 * rule left its note in the observation.
 */
export function stepOutcome(step: Pick<TranscriptStep, "tool" | "observation" | "isError">): string {
  const text = step.observation;
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  const first = cut((lines[0] ?? "").trim(), 60);
  const what = step.isError
    ? `error${first ? `: ${first}` : ""}`
    : (agentTool(step.tool)?.outcome({ text, lines, first }) ?? (first || "(no output)"));
  return `${what}${loopCut(text) ? ", cut" : ""}`;
}

/** The mark of a step the stuck rule fired on: `STUCK repeat_call → redirect`. */
const stuckMark = (s: TranscriptStep): string => (s.stuck ? `STUCK ${s.stuck.rule} → ${s.stuck.action}` : "");

/**
 * One step's line, uncoloured: `#3 search pattern="def foo" → 4 matches (12 ms, 1 234 tok)`;
 * the second call of turn 3 is `#3.2`.
 */
export function stepText(s: ViewStep): string {
  const cost = [duration(s.durationMs), ...(s.tokens ? [`${groupDigits(s.tokens)} tok`] : [])].join(", ");
  const args = formatArgs(s.args);
  return `#${s.step}${s.call && s.call > 1 ? `.${s.call}` : ""} ${s.tool}${args ? ` ${args}` : ""} → ${stepOutcome(s)} (${cost})${s.stuck ? `  ${stuckMark(s)}` : ""}`;
}

/**
 * An iteration's totals: `12 steps (15 calls) · 5 432 tok · $0.0123 · 14.2 s` (a step is a
 * model turn, as the step budget counts them; the calls are shown when a turn made several),
 * `· stuck` when the rule fired.
 */
function iterationTotals(steps: readonly TranscriptStep[]): string {
  const tokens = steps.reduce((n, s) => n + s.tokens, 0);
  const cost = steps.reduce((n, s) => n + s.costUsd, 0);
  const ms = steps.reduce((n, s) => n + s.durationMs, 0);
  const stuck = steps.some((s) => s.stuck) ? " · stuck" : "";
  const turns = new Set(steps.map((s) => s.step)).size;
  const calls = turns === steps.length ? "" : ` (${plural(steps.length, "call")})`;
  return `${plural(turns, "step")}${calls} · ${groupDigits(tokens)} tok · ${usd(cost)} · ${duration(ms)}${stuck}`;
}

/** `text` as indented lines, at most `maxLines` of them (each cut at 160 characters), saying what was left out. */
function indented(label: string, text: string, indent: string, maxLines: number): string[] {
  const all = printable(text.replace(/\s+$/, "")).split("\n");
  if (all.length === 1 && all[0] === "") return [];
  const shown = all.slice(0, maxLines).map((l) => `${indent}  ${cut(l, 160)}`);
  const more = all.length - maxLines;
  return [`${indent}${label}:`, ...shown, ...(more > 0 ? [`${indent}  … ${plural(more, "more line")}`] : [])];
}

/** How {@link transcriptLines} draws. */
export interface TranscriptViewOptions {
  /** Each step's thought and observation under its line (indented, cut). @defaultValue false */
  verbose?: boolean;
  /** Colour the tool, errors and stuck marks. @defaultValue false */
  color?: boolean;
  /** Text before each line. @defaultValue "  " */
  indent?: string;
  /** Lines of an observation shown with `verbose`. @defaultValue 12 */
  observationLines?: number;
}

/**
 * The transcript for the terminal: a heading, then per iteration its totals and one line per
 * step ({@link stepText}); errors red, stuck steps yellow when coloured. Model and sandbox
 * text goes through `printable`. No lines when there are no steps.
 */
export function transcriptLines(steps: readonly ViewStep[], opts: TranscriptViewOptions = {}): string[] {
  if (!steps.length) return [];
  const c = palette(opts.color ?? false);
  const indent = opts.indent ?? "  ";
  const out = [`${indent}transcript (agent mode):`];
  for (const [iteration, list] of stepsByIteration(steps)) {
    out.push(`${indent}  iteration ${iteration}: ${iterationTotals(list)}`);
    for (const s of list) {
      const tool = printable(s.tool);
      const line = printable(stepText(s)).replace(` ${tool}`, ` ${c.bold(c.cyan(tool))}`);
      const painted = s.stuck ? c.yellow(line) : s.isError ? c.red(line) : line;
      out.push(`${indent}    ${painted}`);
      if (!opts.verbose) continue;
      const deeper = `${indent}       `;
      out.push(...indented("thought", cut(s.thought, 600), deeper, 6));
      out.push(...indented("observation", s.observation, deeper, opts.observationLines ?? 12));
    }
  }
  return out;
}

/** The CSS of {@link transcriptHtml}'s classes, for a page's `<style>`. */
export const TRANSCRIPT_CSS = [
  "details.transcript{margin:4px 0}details.transcript ol{font-size:13px;margin:4px 0}details.transcript li{margin:2px 0}",
  "details.transcript pre{background:#f6f8fa;padding:6px 8px;max-height:24em;overflow:auto;white-space:pre-wrap;font-size:12px}",
  "li.stuck>code{background:#fff4ce}li.fail>code{color:#d04a3a}",
].join("\n");

/**
 * The transcript as HTML: one `<details>` per iteration (its summary the totals), an ordered
 * list of steps, each with its line and a nested `<details>` holding the thought and the
 * observation in `<pre>`. Every text from the run is escaped. Empty when there are no steps.
 */
export function transcriptHtml(steps: readonly ViewStep[]): string {
  if (!steps.length) return "";
  const e = escapeHtml;
  return stepsByIteration(steps)
    .map(([iteration, list]) => {
      const items = list.map((s) => {
        const cls = s.stuck ? ' class="stuck"' : s.isError ? ' class="fail"' : "";
        const thought = s.thought ? `<p><b>thought</b></p><pre>${e(s.thought)}</pre>` : "";
        return (
          `<li value="${s.step}"${cls}><code>${e(stepText(s))}</code>` +
          `<details><summary>thought and observation</summary>${thought}` +
          `<p><b>observation</b></p><pre>${e(s.observation)}</pre></details></li>`
        );
      });
      return `<details class="transcript"><summary>iteration ${iteration}: ${e(iterationTotals(list))}</summary><ol>${items.join("")}</ol></details>`;
    })
    .join("\n");
}

/**
 * The transcript for `report.md`: per iteration a `<details>` block (GitHub renders it
 * folded) holding the step lines in a fence no step can close. Empty when there are no steps.
 */
export function transcriptMarkdown(steps: readonly ViewStep[]): string[] {
  if (!steps.length) return [];
  const out = ["## Transcript (agent mode)", ""];
  for (const [iteration, list] of stepsByIteration(steps)) {
    const body = list.map((s) => stepText(s).replace(/\n/g, " ")).join("\n");
    const longest = Math.max(2, ...(body.match(/~+/g) ?? []).map((m) => m.length));
    const fence = "~".repeat(longest + 1);
    out.push(
      "<details>",
      `<summary>iteration ${iteration}: ${escapeHtml(iterationTotals(list))}</summary>`,
      "",
      `${fence}text`,
      body,
      fence,
      "",
      "</details>",
      "",
    );
  }
  return out;
}
