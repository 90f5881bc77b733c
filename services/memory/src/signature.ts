/**
 * Error signatures: the normalised form of a failure, so that the same mistake made on two
 * different tasks (other names, other numbers, other files) looks the same.
 *
 * A signature is `<ErrorType>: <message>` (or just `<ErrorType>` when the error has no
 * message) where, in the message, string literals become `<id>` (when they hold an
 * identifier) or `<str>`, file paths (with their `:line:col`) become `<path>`, code-like
 * identifiers (`snake_case`, `camelCase`, `a.b`, `name()`) become `<id>`, and numbers
 * (decimal, hex, floats) become `<num>`. Plain English words are kept.
 */

/** The result of {@link signature}. */
export interface Signature {
  /** The normalised failure, e.g. `NameError: name <id> is not defined`. At most 500 chars. */
  signature: string;
  /** The exception class without its module path (`NameError`), or `Unknown`. */
  errorType: string;
}

/** Longest message kept in a signature, in characters. */
const MAX_MESSAGE = 440;
/** Only this much of the error text is read, in characters. */
const MAX_INPUT = 20_000;

/**
 * An exception line: optional pytest `E` prefix or `FAILED path::test - ` prefix, an optional
 * `Uncaught `, a (dotted) class name ending in a known suffix, an optional Node error code
 * (`[ERR_ASSERTION]`), then an optional `: message`.
 */
const EXCEPTION_LINE =
  /^\s*(?:E\s+)?(?:FAILED\s+\S+\s+-\s+)?(?:Uncaught\s+)?((?:[A-Za-z_][\w]*\.)*[A-Za-z_]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|StopIteration))(?:\s*\[[A-Z0-9_]+\])?(?:\s*:\s*(.*))?$/;

function exceptionLines(lines: string[]): Array<{ index: number; type: string; message: string }> {
  const found: Array<{ index: number; type: string; message: string }> = [];
  lines.forEach((line, index) => {
    const m = EXCEPTION_LINE.exec(line);
    if (m?.[1]) found.push({ index, type: m[1], message: (m[2] ?? "").trim() });
  });
  return found;
}

/**
 * Picks the line that names the error: in a Python traceback the last exception line (the
 * one finally raised); otherwise the first (pytest `E` lines, Node's `TypeError: …` before
 * its stack).
 */
function pickException(text: string): { type: string; message: string } | null {
  const lines = text.split(/\r?\n/);
  const found = exceptionLines(lines);
  const pytestE = found.find((f) => /^\s*E\s+/.test(lines[f.index] ?? ""));
  if (pytestE) return pytestE;
  // pytest's rewritten asserts: `E   assert 3 == 4` (or the summary `FAILED t.py::x - assert …`).
  for (const line of lines) {
    const m = /^\s*(?:E|FAILED\s+\S+\s+-)\s+(assert\b.*)$/.exec(line);
    if (m?.[1]) return { type: "AssertionError", message: m[1].trim() };
  }
  const tb = lines.findIndex((l) => l.startsWith("Traceback (most recent call last)"));
  if (found.length === 0) return null;
  if (tb >= 0) {
    const after = found.filter((f) => f.index > tb);
    const last = after[after.length - 1];
    if (last) return last;
  }
  return found[0] ?? null;
}

const IDENT = /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*$/;

/** Replaces quoted literals: identifiers in quotes become `<id>`, anything else `<str>`. */
function replaceStrings(message: string): string {
  return message.replace(/'([^'\n]*)'|"([^"\n]*)"|`([^`\n]*)`/g, (_all, a?: string, b?: string, c?: string) => {
    const inner = a ?? b ?? c ?? "";
    return IDENT.test(inner) ? "<id>" : "<str>";
  });
}

/** Replaces file paths and URLs (with a trailing `:line` or `:line:col`). */
function replacePaths(message: string): string {
  return message
    .replace(/\b(?:file|https?):\/\/[^\s'",)]+/g, "<path>")
    .replace(/(?:[A-Za-z]:\\|\\\\)[^\s'",)]+/g, "<path>")
    .replace(/(?<![\w<>])(?:\.{1,2}\/|~\/|\/)[\w.@~+-]+(?:\/[\w.@~+-]*)*(?::\d+)*/g, "<path>")
    .replace(/\b[\w-]+(?:\/[\w.-]+)*\.(?:py|js|mjs|cjs|ts|mts|cts|tsx|jsx|json)(?::\d+)*\b/g, "<path>");
}

/**
 * Replaces code-like identifiers: names with `_`, `$`, a dot between names, inner capitals
 * (`camelCase`, `PascalCase` with two humps), letters mixed with digits, and any `name()`.
 */
function replaceIdentifiers(message: string): string {
  const codeLike = (word: string): boolean =>
    /[_$]/.test(word) ||
    /[A-Za-z]\.[A-Za-z]/.test(word) ||
    /[a-z][A-Z]/.test(word) ||
    /[A-Za-z]\d|\d[A-Za-z]/.test(word);
  return message
    .replace(/\b[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*\(\)/g, "<id>()")
    .replace(/(?<![<\w$])[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?![\w$>])/g, (word) => (codeLike(word) ? "<id>" : word));
}

/** Replaces numbers: hex (`0x7f…`), decimals, floats, exponents, with an optional sign. */
function replaceNumbers(message: string): string {
  return message
    .replace(/\b0x[0-9a-fA-F]+\b/g, "<num>")
    .replace(/(?<![\w<])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w>])/g, "<num>");
}

/** Node's `x is not defined` / `x is not a function` name a plain word that is still an identifier. */
function replaceSubjectIdentifier(type: string, message: string): string {
  if (type === "ReferenceError" || type === "TypeError") {
    return message.replace(/^([A-Za-z_$][\w$.]*)(?=\s+is not (?:defined|a function|iterable|a constructor)\b)/, "<id>");
  }
  return message;
}

/**
 * Normalises a message body (without the exception type).
 * Order matters: strings, then paths, then identifiers, then numbers.
 */
export function normaliseMessage(type: string, message: string): string {
  let out = message.replace(/\s+/g, " ").trim();
  out = replaceStrings(out);
  out = replacePaths(out);
  out = replaceSubjectIdentifier(type, out);
  out = replaceIdentifiers(out);
  out = replaceNumbers(out);
  out = out.replace(/(?:<(id|str|num|path)>(?:\s*,\s*)?){4,}/g, (run, kind: string) => `<${kind}>…`);
  return out.length > MAX_MESSAGE ? `${out.slice(0, MAX_MESSAGE)}…` : out;
}

/**
 * The normalised signature of an error text (a traceback, a pytest report, a Node stack or a
 * bare message). Pure and deterministic; never throws.
 *
 * @param errorText - the raw error output; only its first 20,000 characters are read
 * @returns the signature and the exception type (`Unknown` when no exception line is found,
 *   in which case the signature is built from the first non-empty line)
 * @example signature("NameError: name 'foo' is not defined")
 *   // { signature: "NameError: name <id> is not defined", errorType: "NameError" }
 */
export function signature(errorText: string): Signature {
  const text = errorText.slice(0, MAX_INPUT);
  const picked = pickException(text);
  if (!picked) {
    const first = text.split(/\r?\n/).find((l) => l.trim() !== "");
    if (!first) return { signature: "Unknown", errorType: "Unknown" };
    return { signature: `Unknown: ${normaliseMessage("Unknown", first)}`, errorType: "Unknown" };
  }
  const errorType = picked.type.split(".").pop() ?? picked.type;
  const message = normaliseMessage(errorType, picked.message);
  return { signature: message ? `${errorType}: ${message}` : errorType, errorType };
}
