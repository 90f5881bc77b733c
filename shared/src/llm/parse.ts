/**
 * The tolerant reader: turns a model's reply text into a value validated by a zod schema,
 * for servers that do not enforce a schema.
 *
 * Rules, in order (the first candidate that parses AND validates wins):
 * 1. the whole reply, trimmed;
 * 2. the body of every ``` or ```json fence, in order (an unclosed last fence, as in a reply
 *    cut off at the output limit, counts up to the end of the text);
 * 3. every top-level balanced `{…}` / `[…]` block in the text, in order, so leading and
 *    trailing prose is ignored (an unbalanced last block counts up to the end of the text).
 * Each candidate is tried with `JSON.parse`, then, when it starts with `{` or `[`, after
 * `jsonrepair` (trailing commas, unescaped quotes, single quotes, missing closing brackets).
 */
import { jsonrepair } from "jsonrepair";
import type { z } from "zod";
import { LoopsmithError } from "../runtime/errors.js";

/** One validation problem, as carried in error details and in the re-ask. */
export interface ReplyIssue {
  /** Dotted path into the value (`files.0.path`), or `""` for the root. */
  path: string;
  message: string;
}

/** Details of an `llm_bad_reply` error from the reader. */
export interface BadReplyDetails {
  /** The reply text (or the JSON of a tool input) exactly as received. */
  raw: string;
  /** Validation problems of the first candidate that was JSON; empty when there was no JSON. */
  issues: ReplyIssue[];
}

/** Result of {@link readStructured}: a value, or the typed error it would throw. */
export type ReadResult<T> = { ok: true; value: T } | { ok: false; error: LoopsmithError };

/** At most this many candidates are tried, so a pathological reply stays cheap. */
const MAX_CANDIDATES = 32;

const FENCE = /```[A-Za-z0-9_+-]*[^\S\n]*\n?([\s\S]*?)(?:```|$)/g;

/** Bodies of ``` fences, in order. */
function fencedBlocks(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(FENCE)) {
    const body = (m[1] ?? "").trim();
    if (body) out.push(body);
  }
  return out;
}

/** Index just past the bracket that closes the one at `start`, or -1 when the text ends first. */
function matchBracket(text: string, start: number): number {
  const stack: string[] = [];
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "{") stack.push("}");
    else if (c === "[") stack.push("]");
    else if (c === "}" || c === "]") {
      if (stack.pop() !== c) return -1;
      if (stack.length === 0) return i + 1;
    }
  }
  return -1;
}

/** Top-level balanced `{…}`/`[…]` blocks, in order; an unbalanced one runs to the end. */
function bracketBlocks(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length && out.length < MAX_CANDIDATES) {
    const c = text[i];
    if (c !== "{" && c !== "[") {
      i++;
      continue;
    }
    const end = matchBracket(text, i);
    if (end === -1) {
      // Unbalanced: either a stray bracket in prose or a truncated value. Offer the rest
      // of the text (jsonrepair may close it) and keep scanning after this bracket.
      out.push(text.slice(i));
      i++;
    } else {
      out.push(text.slice(i, end));
      i = end;
    }
  }
  return out;
}

/** The candidates of the module rules, deduplicated, at most {@link MAX_CANDIDATES}. */
export function jsonCandidates(text: string): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const c of [text.trim(), ...fencedBlocks(text), ...bracketBlocks(text)]) {
    if (c && !seen.has(c)) {
      seen.add(c);
      out.push(c);
    }
    if (out.length >= MAX_CANDIDATES) break;
  }
  return out;
}

/** Parses one candidate strictly, then repaired; `undefined` when it is not JSON. */
function parseCandidate(candidate: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(candidate) as unknown };
  } catch {
    // fall through to the repair
  }
  if (!/^[[{]/.test(candidate)) return undefined;
  try {
    return { value: JSON.parse(jsonrepair(candidate)) as unknown };
  } catch {
    return undefined;
  }
}

/** zod issues as {@link ReplyIssue}s. */
export function toReplyIssues(error: z.ZodError): ReplyIssue[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join("."), message: i.message }));
}

/** One line per issue, `- at path: message`, at most 20 lines. */
export function formatIssues(issues: ReplyIssue[]): string {
  const lines = issues.slice(0, 20).map((i) => `- at ${i.path ? `\`${i.path}\`` : "the root"}: ${i.message}`);
  if (issues.length > 20) lines.push(`- … and ${issues.length - 20} more`);
  return lines.join("\n");
}

/**
 * Validates an already-parsed value (a tool call's input, a scripted JSON reply).
 * @param raw - the text to carry in the error details (defaults to the value's JSON)
 */
export function validateValue<T>(value: unknown, schema: z.ZodType<T>, raw?: string): ReadResult<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issues = toReplyIssues(parsed.error);
  const details: BadReplyDetails = { raw: raw ?? JSON.stringify(value) ?? "", issues };
  return {
    ok: false,
    error: new LoopsmithError("llm_bad_reply", "the model's reply does not have the expected shape", { details }),
  };
}

/**
 * Non-throwing form of {@link parseStructured}: the value, or the `llm_bad_reply` error
 * (with {@link BadReplyDetails}) it would throw.
 */
export function readStructured<T>(text: string, schema: z.ZodType<T>): ReadResult<T> {
  let firstIssues: ReplyIssue[] | undefined;
  for (const candidate of jsonCandidates(text)) {
    const parsed = parseCandidate(candidate);
    if (!parsed) continue;
    const checked = schema.safeParse(parsed.value);
    if (checked.success) return { ok: true, value: checked.data };
    firstIssues ??= toReplyIssues(checked.error);
  }
  if (firstIssues) {
    const details: BadReplyDetails = { raw: text, issues: firstIssues };
    return {
      ok: false,
      error: new LoopsmithError("llm_bad_reply", "the model's reply does not have the expected shape", { details }),
    };
  }
  const details: BadReplyDetails = { raw: text, issues: [] };
  const message = text.trim() ? "the model's reply contains no JSON" : "the model's reply is empty";
  return { ok: false, error: new LoopsmithError("llm_bad_reply", message, { details }) };
}

/**
 * Reads a structured value out of a model's reply text by the module rules (fences, prose,
 * several blocks, repairs).
 * @returns the first candidate that is JSON and validates against `schema`
 * @throws LoopsmithError `llm_bad_reply` with {@link BadReplyDetails} (`raw` = the whole
 *   text; `issues` = the validation problems of the first JSON candidate, `[]` when the
 *   text holds no JSON at all)
 */
export function parseStructured<T>(text: string, schema: z.ZodType<T>): T {
  const result = readStructured(text, schema);
  if (!result.ok) throw result.error;
  return result.value;
}
