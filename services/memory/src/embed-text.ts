/**
 * The text memory embeds and indexes for recall, built by ONE function,
 * {@link buildEmbedText}, both when a failure is stored and when recall queries: what is
 * compared on one side is made exactly as on the other.
 *
 * Three parts, each embedded and full-text indexed on its own:
 * - `goal`: the task's goal text;
 * - `error`: the error's signature key (headline, message with its values, failing test,
 *   assertion, innermost frame in the candidate's code, see `signature.ts`) and the failing
 *   tests' names;
 * - `code`: the failing candidate's code without comments and docstrings.
 * Operators in code and assertions are spelled as words (`<=` becomes `ople`), so that word
 * tokenisers (PostgreSQL's full text search, the hashing embedder) still tell `<` from `<=`;
 * each line of code also gets a word of its own (a hash of the whole line), so that the same
 * change made on another line is another word.
 * Every part is lower-cased and cut to letters and digits separated by single spaces: the
 * words PostgreSQL's `simple` text search configuration makes of it are exactly its words.
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type Language } from "@loopsmith/shared/contracts";
import { combine, type Embedder } from "./embedder.js";
import { decodeEntities, signature as signatureOf, type Signature } from "./signature.js";

/** What a recalled or stored failure is made of; only `goal` is required. */
export interface EmbedInput {
  /** The task's goal, or any free text about the task. */
  goal: string;
  /** The raw error text (JUnit entities are decoded); reduced to its signature key. */
  errorText?: string;
  /** A headline signature given by the caller; replaces the computed headline in the key. */
  signature?: string;
  /** Failing test names (`test_solution.py::test_x`). */
  failingTests?: readonly string[];
  /** The failing candidate's code (its files, or the part that changed). */
  code?: string;
  /** The code's language, for stripping its comments. @defaultValue "python" */
  language?: Language;
}

/** The parts {@link buildEmbedText} makes; an absent part is the empty string. */
export interface EmbedText {
  goal: string;
  error: string;
  code: string;
  /** The signature of `errorText`, when one was given. */
  signature?: Signature;
}

/** Characters kept of each part after preparation. */
export const PART_CHARS = { goal: 2_000, error: 1_500, code: 4_000 } as const;

/** Weights of the parts' vectors in a failure's embedding (parts that are empty are left out). */
export const PART_WEIGHTS = { goal: 0.3, error: 0.4, code: 0.3 } as const;

/** Longest operators first, so `<=` is never read as `<` then `=`. */
const OPERATORS: ReadonlyArray<readonly [string, string]> = [
  ["===", "opeq"],
  ["!==", "opne"],
  ["**=", "oppowset"],
  ["//=", "opfloordivset"],
  ["...", "opspread"],
  ["==", "opeq"],
  ["!=", "opne"],
  ["<=", "ople"],
  [">=", "opge"],
  ["//", "opfloordiv"],
  ["**", "oppow"],
  ["+=", "opaddset"],
  ["-=", "opsubset"],
  ["*=", "opmulset"],
  ["/=", "opdivset"],
  ["%=", "opmodset"],
  ["->", "oparrow"],
  ["=>", "oparrow"],
  ["&&", "opand"],
  ["||", "opor"],
  ["<<", "opshl"],
  [">>", "opshr"],
  ["<", "oplt"],
  [">", "opgt"],
  ["+", "opadd"],
  ["-", "opsub"],
  ["*", "opmul"],
  ["/", "opdiv"],
  ["%", "opmod"],
  ["=", "opset"],
  ["!", "opnot"],
  ["&", "opbitand"],
  ["|", "opbitor"],
  ["^", "opxor"],
  ["~", "opinv"],
];
const OPERATOR_RE = new RegExp(OPERATORS.map(([op]) => op.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")).join("|"), "g");
const OPERATOR_WORD = new Map(OPERATORS);

/** Spells operators as words: `a <= b` becomes `a  ople  b`. Placeholders (`<num>`) stay words. */
export function spellOperators(text: string): string {
  return text
    .replace(/<(id|str|num|path|addr)>/g, " $1 ")
    .replace(OPERATOR_RE, (op) => ` ${OPERATOR_WORD.get(op) ?? ""} `);
}

/** Lower-case letters and digits, single spaces, at most `max` characters (cut at a word). */
export function words(text: string, max = Infinity): string {
  const out = text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, " ")
    .trim();
  if (out.length <= max) return out;
  const cut = out.slice(0, max);
  const space = cut.lastIndexOf(" ");
  return space > 0 ? cut.slice(0, space) : cut;
}

/** Code without comments and docstrings (Python `#` and triple quotes; `//` and block comments elsewhere). */
export function stripComments(code: string, language: Language = "python"): string {
  if (language === "python") {
    const noDocs = code.replace(/("""|''')[\s\S]*?\1/g, " ");
    return noDocs
      .split("\n")
      .map((line) => {
        let quote: string | null = null;
        for (let i = 0; i < line.length; i++) {
          const c = line[i];
          if (quote) {
            if (c === "\\") i++;
            else if (c === quote) quote = null;
          } else if (c === '"' || c === "'") quote = c;
          else if (c === "#") return line.slice(0, i);
        }
        return line;
      })
      .join("\n");
  }
  return code.replace(/\/\*[\s\S]*?\*\//g, " ").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

/** FNV-1a, 32 bits, in base 36. */
function lineHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(36);
}

/**
 * Code as words, each line followed by a word naming the whole line (`ln` and a hash of the
 * line with its whitespace collapsed, string literals included): two codes that differ in one
 * line differ in that line's word even when they are made of the same words (`c == '('` in one
 * place and `c == ')'` in another, the same operator changed on two different lines).
 */
function codeWords(code: string): string {
  const out: string[] = [];
  for (const line of code.split("\n")) {
    const flat = line.trim().replace(/\s+/g, " ");
    if (flat === "") continue;
    const w = words(spellOperators(flat));
    out.push(w === "" ? `ln${lineHash(flat)}` : `${w} ln${lineHash(flat)}`);
  }
  return words(out.join(" "), PART_CHARS.code);
}

/**
 * Builds the parts of the text memory embeds and indexes, from a failure (when storing) or
 * from a recall request (when querying). Pure and deterministic; never throws.
 *
 * @param input - the goal and, for a failure, its raw error text, failing tests and code
 * @returns `goal`, `error` and `code` as lower-case words (at most {@link PART_CHARS}
 *   characters each; empty when the input has none), and the error's signature
 * @example buildEmbedText({ goal: "Write f.", errorText: "E   assert 1 <= 0", code: "return x <= y" })
 *   // { goal: "write f", error: "assertionerror assert num ople num", code: "return x ople y", signature: {…} }
 */
export function buildEmbedText(input: EmbedInput): EmbedText {
  const goal = words(decodeEntities(input.goal), PART_CHARS.goal);
  const hasError = input.errorText !== undefined && input.errorText.trim() !== "";
  const sig = hasError ? signatureOf(input.errorText ?? "") : undefined;
  const headline = input.signature?.trim() ? input.signature.trim() : sig?.signature;
  const located = sig ? [headline, sig.message, sig.test, sig.assertion, sig.frame] : [];
  const error = words(
    spellOperators([...located, ...(input.failingTests ?? [])].filter(Boolean).join(" ")),
    PART_CHARS.error,
  );
  const code = input.code ? codeWords(stripComments(decodeEntities(input.code), input.language)) : "";
  return { goal, error, code, ...(sig ? { signature: sig } : {}) };
}

/**
 * One vector for the parts: each non-empty part embedded, then their weighted sum
 * ({@link PART_WEIGHTS}) L2-normalised. With every part empty, the empty goal is embedded.
 * @returns a vector of `embedder.dimensions` numbers
 * @throws LoopsmithError `internal` when the embedder returns a vector of the wrong size
 */
export async function embedParts(
  embedder: Embedder,
  parts: Pick<EmbedText, "goal" | "error" | "code">,
): Promise<number[]> {
  const [v] = await embedPartsMany(embedder, [parts]);
  if (!v) throw new LoopsmithError("internal", `embedder ${embedder.id} returned no vector`);
  return v;
}

/**
 * A text search query matching any word of `part` (`a | b | c`), for PostgreSQL's
 * `to_tsquery('simple', …)`; the empty string when the part has no word. Words are unique, at
 * most `maxTerms` of them, in their first order.
 */
export function anyWordQuery(part: string, maxTerms = 256): string {
  const seen = new Set<string>();
  for (const w of part.split(" ")) {
    if (w !== "" && seen.size < maxTerms) seen.add(w);
  }
  return [...seen].join(" | ");
}

/** A failure record's derived columns, as the store (and any bulk insert) must write them. */
export interface PreparedFailure {
  /** Headline signature: the record's own when given, else computed from its error text. */
  signature: string;
  errorType: string;
  /** The full signature (headline, test, assertion, frame), with the record's headline. */
  key: string;
  /** The error text and output tail with entities decoded. */
  errorText: string;
  outputTail: string;
  /** The parts to embed and index (see {@link buildEmbedText}). */
  parts: EmbedText;
}

/**
 * Derives what is stored with a failure: its signature, decoded texts and embed parts.
 * Pure; never throws.
 */
export function prepareFailure(rec: {
  goal: string;
  errorText: string;
  signature?: string | undefined;
  failingTests: readonly string[];
  code?: string | undefined;
  outputTail: string;
  language: Language;
}): PreparedFailure {
  const given = rec.signature?.trim() ? rec.signature.trim() : undefined;
  const parts = buildEmbedText({
    goal: rec.goal,
    errorText: rec.errorText,
    failingTests: rec.failingTests,
    language: rec.language,
    ...(given ? { signature: given } : {}),
    ...(rec.code !== undefined ? { code: rec.code } : {}),
  });
  const sig = parts.signature ?? signatureOf(rec.errorText);
  const signature = given ?? sig.signature;
  const key = given ? `${given}${sig.key.slice(sig.signature.length)}` : sig.key;
  return {
    signature,
    errorType: sig.errorType,
    key,
    errorText: decodeEntities(rec.errorText),
    outputTail: decodeEntities(rec.outputTail),
    parts,
  };
}

/**
 * {@link embedParts} for many part sets with one embedder call (for batches).
 * @returns one vector per part set, in order
 * @throws LoopsmithError `internal` when the embedder returns vectors of the wrong size or number
 */
export async function embedPartsMany(
  embedder: Embedder,
  many: ReadonlyArray<Pick<EmbedText, "goal" | "error" | "code">>,
): Promise<number[][]> {
  const plan = many.map((parts) => {
    const chosen = (["goal", "error", "code"] as const).filter((p) => parts[p] !== "");
    return chosen.length > 0 ? chosen : (["goal"] as const);
  });
  const texts = many.flatMap((parts, i) => (plan[i] ?? []).map((p) => parts[p]));
  const vectors = await embedder.embed(texts);
  if (vectors.length !== texts.length || vectors.some((v) => v.length !== embedder.dimensions)) {
    throw new LoopsmithError("internal", `embedder ${embedder.id} returned a missing vector or one of the wrong size`);
  }
  let at = 0;
  return plan.map((names) => {
    const mine = vectors.slice(at, at + names.length);
    at += names.length;
    return combine(
      mine,
      names.map((p) => PART_WEIGHTS[p]),
    );
  });
}
