/**
 * Project instructions: the repository's own file for coding agents,
 * `AGENTS.md` at its root (the convention coding agents share, https://agents.md), else
 * `CONVENTIONS.md` (aider's name for the same thing). The conductor reads it from the base
 * tree (`services/architect/src/repo/instructions.ts`), bounds it here, carries it in
 * {@link RepoBrief}, and every repo-mode prompt (plan, build, review, reflect, the agent's
 * opening message) shows it in a fenced section ({@link renderInstructions}).
 */
import { z } from "zod";

/** The files read as project instructions, in order: the first one present and not blank is used. */
export const INSTRUCTIONS_FILES = ["AGENTS.md", "CONVENTIONS.md"] as const;

/**
 * Most bytes (UTF-8) of a project instructions file a prompt shows: 32 KiB, about 8 000
 * tokens at 4 characters a token. It is Codex's default `project_doc_max_bytes` (the limit
 * Codex CLI puts on the AGENTS.md files it reads), so a file written for that agent is never
 * cut here; beyond it the file would outweigh the repo map (2 048 tokens by default) and the
 * task itself, in every call of the task (each agent turn re-sends it, cached).
 */
export const MAX_INSTRUCTIONS_BYTES = 32 * 1024;

/** A project instructions file as the prompts see it. */
export const ProjectInstructions = z.object({
  /** The file's path at the repository root: `AGENTS.md` or `CONVENTIONS.md`. */
  path: z.string().min(1).max(255),
  /** Its text, cut to at most {@link MAX_INSTRUCTIONS_BYTES} bytes at a line end when `truncated`. */
  text: z.string().max(MAX_INSTRUCTIONS_BYTES),
  /** The whole file's size in bytes (UTF-8), before any cut. */
  bytes: z.number().int().nonnegative(),
  /** True when `text` is only the head of the file. */
  truncated: z.boolean(),
});
export type ProjectInstructions = z.infer<typeof ProjectInstructions>;

/** What records that instructions were used (an event's `data.instructions`): the file without its text. */
export type InstructionsUse = Omit<ProjectInstructions, "text"> & {
  /** Bytes of the file the prompts show (`bytes` unless `truncated`). */
  shownBytes: number;
};

/**
 * Bounds a file's text to `maxBytes` bytes of UTF-8: a text that fits is kept whole; a longer
 * one is cut at the last line end within the bound (or, when the first line alone is longer,
 * at the last whole character), so no line and no character is split.
 * @param path - the file's repository-relative path, kept as is
 * @param content - the file's text
 * @param maxBytes - the bound in bytes @defaultValue {@link MAX_INSTRUCTIONS_BYTES}
 */
export function boundInstructions(
  path: string,
  content: string,
  maxBytes: number = MAX_INSTRUCTIONS_BYTES,
): ProjectInstructions {
  const raw = Buffer.from(content, "utf8");
  if (raw.length <= maxBytes) return { path, text: content, bytes: raw.length, truncated: false };
  // Back off to the start of a character: UTF-8 continuation bytes are 0b10xxxxxx.
  let end = maxBytes;
  while (end > 0 && ((raw[end] ?? 0) & 0xc0) === 0x80) end--;
  const lineEnd = raw.lastIndexOf(0x0a, end - 1);
  if (lineEnd >= 0) end = lineEnd + 1;
  return { path, text: raw.subarray(0, end).toString("utf8"), bytes: raw.length, truncated: true };
}

/** The record of a use: path, sizes and whether the text was cut (no text). */
export function instructionsUse(instructions: ProjectInstructions): InstructionsUse {
  return {
    path: instructions.path,
    bytes: instructions.bytes,
    truncated: instructions.truncated,
    shownBytes: Buffer.byteLength(instructions.text, "utf8"),
  };
}

/**
 * The prompt section of project instructions: a `##` title naming the file and how to take
 * it, the text in a tilde fence longer than any tilde run in it (so the file's own code
 * fences cannot close it), and a line saying how much was cut when it was. Empty without
 * instructions.
 */
export function renderInstructions(instructions: ProjectInstructions | undefined): string {
  if (!instructions || !instructions.text.trim()) return "";
  const { path, text, bytes, truncated } = instructions;
  const longest = Math.max(2, ...(text.match(/~+/g) ?? []).map((m) => m.length));
  const fence = "~".repeat(longest + 1);
  const shown = Buffer.byteLength(text, "utf8");
  const cut = truncated
    ? `\n[${path} is cut here: only its first ${shown} of ${bytes} bytes are shown (loopsmith's bound on project instructions); the rest is left out.]`
    : "";
  return (
    `## Project instructions from ${path} (the repository's own conventions; follow them unless they conflict with the task or with your rules)\n` +
    `${fence}markdown\n${text.replace(/\s+$/, "")}\n${fence}${cut}\n`
  );
}
