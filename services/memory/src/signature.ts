/**
 * Error signatures: the normalised form of a failure, so that the same mistake made on two
 * different tasks (other names, other numbers, other files) looks the same, and two different
 * mistakes that fail the same way can still be told apart.
 *
 * Error text is first decoded from JUnit/XML entities (`&#10;`, `&lt;`, `&amp;`, `&quot;`,
 * `&#x41;`, …): a test runner's JUnit report leaves them in failure messages.
 *
 * The headline, {@link Signature.signature}, is `<ErrorType>: <message>` (or just `<ErrorType>`
 * when the error has no message) where, in the message, string literals become `<id>` (when
 * they hold an identifier) or `<str>`, file paths (with their `:line:col`) become `<path>`,
 * code-like identifiers (`snake_case`, `camelCase`, `a.b`, `name()`) become `<id>`, and numbers
 * (decimal, hex, floats) become `<num>`. Plain English words are kept. It names the kind of
 * mistake and is what a person, the stuck detector and the statistics compare.
 *
 * The rest locates the failure and is kept in {@link Signature.key}: the message with its
 * values (what the candidate returned), the failing test, the statement of the test that
 * failed (an assertion's expression, with its test data), and the innermost frame in the
 * candidate's code (function and source line). Only the parts that
 * vary from run to run are normalised there: memory addresses, directories, line numbers.
 */
/** The result of {@link signature}. */
export interface Signature {
  /** The normalised failure, e.g. `NameError: name <id> is not defined`. At most 500 chars. */
  signature: string;
  /** The exception class without its module path (`NameError`), or `Unknown`. */
  errorType: string;
  /**
   * The exception's message as it was, only addresses, directories and whitespace normalised
   * (`assert 3.0 == 0.5`, `name 'numbrs' is not defined`), when it says more than the headline.
   */
  message?: string;
  /** The failing test's name (`test_longest`), when the text names one. */
  test?: string;
  /** The test's statement that failed (an `assert …` with its data), whitespace collapsed. */
  assertion?: string;
  /** The innermost frame in candidate code: `<function>: <source line>` (or the file's name). */
  frame?: string;
  /**
   * The headline and the parts above, joined by ` | ` (`… | message <message> | test <name> |
   * <assertion> | at <frame>`): the failure's identity as recall matches it. At most 1,200
   * characters.
   */
  key: string;
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
    .replace(/(?<![<\w$])[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?![\w$>])/g, (word) =>
      codeLike(word) ? "<id>" : word,
    );
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

const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  lt: "<",
  gt: ">",
  amp: "&",
  quot: '"',
  apos: "'",
  nbsp: " ",
};

/**
 * Decodes XML/HTML character references in one pass (so `&amp;lt;` becomes `&lt;`, not `<`):
 * decimal `&#10;`, hexadecimal `&#x0A;`, and `&lt;` `&gt;` `&amp;` `&quot;` `&apos;` `&nbsp;`.
 * References to invalid code points and unknown names are left as they are. Pure; never throws.
 * @example decodeEntities("assert 1 == 2&#10; +  where &lt;x&gt;") // "assert 1 == 2\n +  where <x>"
 */
export function decodeEntities(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(
    /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([a-zA-Z]{2,4}));/g,
    (all, dec?: string, hex?: string, name?: string) => {
      if (name !== undefined) return NAMED_ENTITIES[name] ?? all;
      const code = dec !== undefined ? Number.parseInt(dec, 10) : Number.parseInt(hex ?? "", 16);
      const valid =
        code === 0x9 ||
        code === 0xa ||
        code === 0xd ||
        (code >= 0x20 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff));
      return valid ? String.fromCodePoint(code) : all;
    },
  );
}

/** One stack frame, outermost first in the lists below. */
interface Frame {
  file: string;
  func?: string;
  source?: string;
}

/** Test files (and test helpers such as HumanEval's `*_check.py`), by path. */
const TEST_FILE =
  /(?:^|[\\/])(?:tests?|__tests__|spec)[\\/]|(?:^|[\\/._-])(?:test|tests|spec|check|conftest)(?:[._-][^\\/]*)?\.[A-Za-z]+$|(?:^|[\\/])test_[^\\/]*$/i;
/** Library and runtime frames: never the candidate's code. */
const LIBRARY_FILE =
  /site-packages|dist-packages|[\\/]lib[\\/]python\d|^<frozen|^<string>|node_modules|^node:|^internal[\\/]/;

const basename = (file: string): string =>
  file
    .replace(/^file:\/\//, "")
    .split(/[\\/]/)
    .pop() ?? file;

/** Frames of Python tracebacks, pytest's long and short reports, and Node stacks, outermost first. */
function framesOf(lines: string[]): Frame[] {
  const frames: Frame[] = [];
  let blockStart = 0;
  lines.forEach((line, i) => {
    if (/^_( _)+\s*$|^_{3,} .* _{3,}$/.test(line)) {
      blockStart = i + 1;
      return;
    }
    const py = /^\s*File "([^"]+)", line \d+, in (\S+)/.exec(line);
    if (py?.[1]) {
      const next = lines[i + 1];
      const source = next !== undefined && /^\s{2,}\S/.test(next) && !/^\s*File "/.test(next) ? next.trim() : undefined;
      frames.push({ file: py[1], func: py[2], ...(source ? { source } : {}) });
      return;
    }
    const loc = /^([^\s:]+\.[A-Za-z]{1,4}):\d+:(?: (.*))?$/.exec(line);
    if (loc?.[1]) {
      const rest = (loc[2] ?? "").trim();
      if (rest.startsWith("in ")) {
        const next = lines[i + 1];
        frames.push({ file: loc[1], func: rest.slice(3).trim(), ...(next?.trim() ? { source: next.trim() } : {}) });
      } else {
        const block = lines.slice(blockStart, i);
        const marked = block.map((l, j) => [l, j] as const).filter(([l]) => l.startsWith(">"));
        const [src, at] = marked[marked.length - 1] ?? [undefined, block.length];
        const defs = block.slice(0, at).flatMap((l) => /^\s*(?:async\s+)?def (\w+)\(/.exec(l)?.[1] ?? []);
        const func = defs[defs.length - 1];
        frames.push({ file: loc[1], ...(func ? { func } : {}), ...(src ? { source: src.slice(1).trim() } : {}) });
      }
      blockStart = i + 1;
    }
  });
  // Node: `at fn (path:line:col)`, innermost first.
  const node = lines.flatMap((line): Frame[] => {
    const m = /^\s+at (?:(.+?) \()?((?:file:\/\/)?[^\s()]+?):\d+(?::\d+)?\)?\s*$/.exec(line);
    return m?.[2] ? [{ file: m[2], ...(m[1] ? { func: m[1] } : {}) }] : [];
  });
  return [...frames, ...node.reverse()];
}

/** Only what varies between two runs of the same code: addresses, directories, whitespace. */
function normaliseLocal(text: string): string {
  const out = text
    .replace(/\b0x[0-9a-fA-F]{4,}\b/g, "<addr>")
    .replace(/(?:file:\/\/)?(?:\/[\w.@~+-]+)+\/([\w.@~+-]+)/g, "$1")
    .replace(/\s+/g, " ")
    .trim();
  return out.length > 240 ? `${out.slice(0, 240)}…` : out;
}

/** The failing test's name: pytest's `def test_x(`, `path::test_x`, a frame `in test_x`, or a report header. */
function testName(text: string, frames: Frame[]): string | undefined {
  const named =
    /^\s*(?:async\s+)?def (test\w*)\(/m.exec(text)?.[1] ??
    /::(test\w*)/.exec(text)?.[1] ??
    frames.find((f) => f.func?.startsWith("test"))?.func ??
    /^_{3,} (?:\w+\.)?(test\w*) _{3,}$/m.exec(text)?.[1];
  return named;
}

function sourceOf(f: Frame | undefined): string | undefined {
  return f?.source ? normaliseLocal(f.source) : undefined;
}

/**
 * The normalised signature of an error text (a traceback, a pytest report, a JUnit failure
 * message, a Node stack or a bare message). Pure and deterministic; never throws.
 *
 * @param errorText - the raw error output; entities are decoded first; only the first 20,000
 *   characters are read
 * @returns the headline signature and exception type (`Unknown` when no exception line is
 *   found, in which case the headline is built from the first non-empty line), the failing
 *   test, assertion and candidate frame when the text has them, and the `key` joining them
 * @example signature("NameError: name 'foo' is not defined")
 *   // { signature: "NameError: name <id> is not defined", errorType: "NameError", key: "NameError: name <id> is not defined" }
 */
export function signature(errorText: string): Signature {
  const text = decodeEntities(errorText.slice(0, MAX_INPUT));
  const lines = text.split(/\r?\n/);
  const picked = pickException(text);
  let headline: string;
  let errorType: string;
  let raw: string | undefined;
  if (picked) {
    errorType = picked.type.split(".").pop() ?? picked.type;
    const message = normaliseMessage(errorType, picked.message);
    headline = message ? `${errorType}: ${message}` : errorType;
    const local = normaliseLocal(picked.message);
    if (local !== "" && local !== message) raw = local;
  } else {
    errorType = "Unknown";
    const first = lines.find((l) => l.trim() !== "");
    headline = first ? `Unknown: ${normaliseMessage("Unknown", first)}` : "Unknown";
  }
  const frames = framesOf(lines).filter((f) => !LIBRARY_FILE.test(f.file.replace(/^file:\/\//, "")));
  const inTests = frames.filter((f) => TEST_FILE.test(f.file));
  const inCandidate = frames.filter((f) => !TEST_FILE.test(f.file));
  const test = testName(text, frames);
  const assertion = sourceOf(inTests[inTests.length - 1]);
  const innermost = inCandidate[inCandidate.length - 1];
  const frame = innermost
    ? [innermost.func ?? basename(innermost.file), sourceOf(innermost)].filter(Boolean).join(": ")
    : undefined;
  const parts = [headline, raw && `message ${raw}`, test && `test ${test}`, assertion, frame && `at ${frame}`].filter(
    (p): p is string => Boolean(p),
  );
  const key = parts.join(" | ");
  return {
    signature: headline,
    errorType,
    ...(raw ? { message: raw } : {}),
    ...(test ? { test } : {}),
    ...(assertion ? { assertion } : {}),
    ...(frame ? { frame } : {}),
    key: key.length > 1_200 ? `${key.slice(0, 1_200)}…` : key,
  };
}
