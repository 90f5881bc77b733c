/**
 * Dataset files of `loopsmith bench` (issue #11 item 1): JSONL in HumanEval's format, MBPP's,
 * or jsbench (loopsmith's JavaScript format, below), read into {@link BenchCase}s.
 *
 * Every case has *visible* tests (the task's acceptance tests: the model sees them and the
 * loop iterates on them) and *hidden* tests (the score, never in a prompt). Their file names
 * never collide, so both sets can sit in one workspace:
 *
 * | format    | solution      | visible tests                        | hidden tests                                  |
 * |-----------|---------------|--------------------------------------|-----------------------------------------------|
 * | humaneval | `solution.py` | `test_examples.py` (docstring `>>>`) | `humaneval_check.py` + `test_solution.py`     |
 * | mbpp      | `solution.py` | `test_visible.py` (first assert)     | `test_hidden.py` (test_list + challenge list) |
 * | jsbench   | `solution.js` | `visible.test.js`                    | `hidden.test.js`                              |
 *
 * **jsbench** (one JSON object a line; see examples/bench/README.md):
 * - `task_id` (string, e.g. `js/3`): the case id;
 * - `prompt` (string): a JSDoc comment and the opening of the function, e.g.
 *   `"/** Adds two numbers. *\/\nfunction add(a, b) {\n"`;
 * - `entry_point` (string): the function's name, a JavaScript identifier;
 * - `canonical_solution` (string): the rest of the function (body and closing brace), so
 *   `prompt + canonical_solution` is the whole function;
 * - `visible_test`, `test` (string, or a non-empty array of strings): test code. Each string
 *   is the body of one `node:test` test case (an async function), in which `assert` is
 *   `node:assert/strict` and the entry point is bound by name. `visible_test` is what the model
 *   sees; `test` is the hidden score (it should include the visible checks too).
 *
 * JavaScript runs as CommonJS: the sandbox's node (20) runs `node --test <files>` in a
 * workspace with no `package.json` (a candidate may not supply one:
 * shared/src/runner-config.ts), so `.js` files are CommonJS. `solution.js` is
 * `prompt + canonical_solution + "\n\nmodule.exports = { <entry_point> };\n"`, and the
 * tests `require("./solution.js")`.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { LoopsmithError, type FileChange } from "@loopsmith/shared";
import { HumanEvalRecord, humanevalTestFiles, solutionFile } from "../humaneval.js";
import { BenchCase, type DatasetFormat, type SkippedLine } from "./types.js";

/** Visible tests of a HumanEval case: its docstring examples. */
export const HUMANEVAL_VISIBLE_PATH = "test_examples.py";
/** Visible tests of an MBPP case: the first assert of `test_list`. */
export const MBPP_VISIBLE_PATH = "test_visible.py";
/** Hidden tests of an MBPP case: all of `test_list` and `challenge_test_list`. */
export const MBPP_HIDDEN_PATH = "test_hidden.py";
/** Visible tests of a jsbench case. */
export const JSBENCH_VISIBLE_PATH = "visible.test.js";
/** Hidden tests of a jsbench case. */
export const JSBENCH_HIDDEN_PATH = "hidden.test.js";

/** One MBPP record (`task_id`, `text`, `code`, `test_list`, optional setup and challenge tests). */
export const MbppRecord = z.object({
  task_id: z.number().int().nonnegative(),
  text: z.string().min(1),
  code: z.string().min(1),
  test_list: z.array(z.string().min(1)).min(1),
  test_setup_code: z.string().optional(),
  challenge_test_list: z.array(z.string().min(1)).optional(),
});
export type MbppRecord = z.infer<typeof MbppRecord>;

const JsTests = z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]);

/** One jsbench record (see the module comment). */
export const JsbenchRecord = z.object({
  task_id: z.string().min(1),
  prompt: z.string().min(1),
  entry_point: z.string().regex(/^[A-Za-z_$][\w$]*$/, "entry_point must be a JavaScript identifier"),
  canonical_solution: z.string(),
  visible_test: JsTests,
  test: JsTests,
});
export type JsbenchRecord = z.infer<typeof JsbenchRecord>;

/** What {@link loadDataset} returns. */
export interface LoadedDataset {
  /** The format given, or the one detected from the first line that is a record of a format. */
  format: DatasetFormat;
  /** Valid cases in file order (every one validated against {@link BenchCase}). */
  cases: BenchCase[];
  /** Lines that were not used (not JSON, not a record of the format, a duplicate id), 1-based. */
  skipped: SkippedLine[];
}

/** One docstring example: the source after `>>>` (with `...` continuations) and the expected output text. */
export interface DocExample {
  call: string;
  expected: string;
}

/**
 * Reads a JSONL dataset into bench cases. Blank lines are ignored. A line that is not JSON,
 * not a record of the format, or repeats an earlier id is skipped and reported (never thrown).
 * @param path - the JSONL file
 * @param opts.format - the format; when absent, the first line that is a valid record of some
 *   format decides (jsbench is tried before HumanEval, whose fields it extends, then MBPP)
 * @throws LoopsmithError `bad_request` when the file cannot be read, or when no format is
 *   given and no line is a record of any format
 */
export function loadDataset(path: string, opts: { format?: DatasetFormat } = {}): LoadedDataset {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new LoopsmithError("bad_request", `cannot read the dataset ${path}: ${(err as Error).message}`, { cause: err });
  }
  return parseDataset(text, { ...opts, name: path });
}

/**
 * {@link loadDataset} on text already read.
 * @param opts.name - how messages name the dataset
 */
export function parseDataset(text: string, opts: { format?: DatasetFormat; name?: string } = {}): LoadedDataset {
  const name = opts.name ?? "the dataset";
  const lines: { line: number; raw: unknown }[] = [];
  const skipped: SkippedLine[] = [];
  text.split("\n").forEach((src, i) => {
    if (!src.trim()) return;
    try {
      lines.push({ line: i + 1, raw: JSON.parse(src) as unknown });
    } catch (err) {
      skipped.push({ line: i + 1, message: `not JSON: ${(err as Error).message}` });
    }
  });
  let format = opts.format;
  if (!format) {
    format = lines.map((l) => detectFormat(l.raw)).find((f) => f !== undefined);
    if (!format) {
      const first = skipped[0] ? ` (line ${skipped[0].line}: ${skipped[0].message})` : "";
      throw new LoopsmithError(
        "bad_request",
        lines.length + skipped.length === 0
          ? `${name} has no records`
          : `no line of ${name} is a HumanEval, MBPP or jsbench record${first}`,
      );
    }
  }
  const cases: BenchCase[] = [];
  const seen = new Set<string>();
  for (const { line, raw } of lines) {
    const made = toCase(format, raw, line);
    if (typeof made === "string") {
      skipped.push({ line, message: made });
      continue;
    }
    if (seen.has(made.id)) {
      skipped.push({ line, message: `duplicate id ${made.id}` });
      continue;
    }
    seen.add(made.id);
    cases.push(made);
  }
  skipped.sort((a, b) => a.line - b.line);
  return { format, cases, skipped };
}

/** The format a parsed line is a valid record of, if any. */
export function detectFormat(raw: unknown): DatasetFormat | undefined {
  if (JsbenchRecord.safeParse(raw).success) return "jsbench";
  if (HumanEvalRecord.safeParse(raw).success) return "humaneval";
  if (MbppRecord.safeParse(raw).success) return "mbpp";
  return undefined;
}

/** A case from a parsed line, or why not (a message). */
function toCase(format: DatasetFormat, raw: unknown, line: number): BenchCase | string {
  let made: BenchCase | string;
  if (format === "humaneval") {
    const r = HumanEvalRecord.safeParse(raw);
    made = r.success ? humanevalCase(r.data, line) : `not a HumanEval record: ${issue(r.error)}`;
  } else if (format === "mbpp") {
    const r = MbppRecord.safeParse(raw);
    made = r.success ? mbppCase(r.data, line) : `not an MBPP record: ${issue(r.error)}`;
  } else {
    const r = JsbenchRecord.safeParse(raw);
    made = r.success ? jsbenchCase(r.data, line) : `not a jsbench record: ${issue(r.error)}`;
  }
  if (typeof made === "string") return made;
  const valid = BenchCase.safeParse(made);
  return valid.success ? valid.data : `not a valid case: ${issue(valid.error)}`;
}

function issue(err: z.ZodError): string {
  const first = err.issues[0];
  if (!first) return "invalid";
  return first.path.length ? `${first.path.join(".")}: ${first.message}` : first.message;
}

/** A Python or JavaScript string literal of `s` (JSON's escapes are valid in both). */
function lit(s: string): string {
  return JSON.stringify(s);
}

// ---------------------------------------------------------------------------------------
// HumanEval

/**
 * The `>>>` examples of a HumanEval prompt, as written in its source: the text after `>>>`
 * (continuation lines starting with `...` joined with newlines), and the lines after it up to
 * a blank line, the next `>>>` or the end of the docstring (each stripped of its indentation).
 * An empty `expected` means the call shows no output (doctest: it returns None).
 */
export function docstringExamples(prompt: string): DocExample[] {
  const lines = prompt.replace(/\r\n?/g, "\n").split("\n");
  const out: DocExample[] = [];
  const closer = /"""|'''/;
  let i = 0;
  while (i < lines.length) {
    const t = (lines[i] ?? "").trim();
    if (!t.startsWith(">>>")) {
      i++;
      continue;
    }
    let call = t.slice(3).replace(/^ /, "");
    let ends = false;
    const cut = call.search(closer);
    if (cut >= 0) {
      call = call.slice(0, cut).trimEnd();
      ends = true;
    }
    i++;
    while (!ends && i < lines.length && /^\.\.\.( |$)/.test((lines[i] ?? "").trim())) {
      call += `\n${(lines[i] ?? "").trim().slice(3).replace(/^ /, "")}`;
      i++;
    }
    const expected: string[] = [];
    while (!ends && i < lines.length) {
      let e = (lines[i] ?? "").trim();
      if (!e || e.startsWith(">>>")) break;
      const c = e.search(closer);
      if (c >= 0) {
        e = e.slice(0, c).trimEnd();
        ends = true;
      }
      if (e) expected.push(e);
      i++;
    }
    if (call.trim()) out.push({ call: call.trimEnd(), expected: expected.join("\n") });
  }
  return out;
}

/**
 * `text` as a Python literal when it is one loopsmith can read without Python: numbers, simple
 * quoted strings (no backslash), `True`/`False`/`None` (`true`/`false` too), `-`, brackets,
 * commas and colons, balanced. undefined for anything else (names, operators, prose).
 */
export function pyLiteral(text: string): string | undefined {
  let out = "";
  let depth = 0;
  let i = 0;
  while (i < text.length) {
    const ch = text[i] ?? "";
    if (ch === '"' || ch === "'") {
      const j = text.indexOf(ch, i + 1);
      if (j < 0) return undefined;
      const str = text.slice(i, j + 1);
      if (str.includes("\\")) return undefined;
      out += str;
      i = j + 1;
      continue;
    }
    const m = /^(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|True|False|None|true|false|[[\](){},:\s-])/.exec(text.slice(i));
    if (!m) return undefined;
    const tok = m[0];
    if (/^[A-Za-z\d]/.test(tok) && /\w/.test(text[i + tok.length] ?? "")) return undefined;
    if ("[({".includes(tok)) depth++;
    if ("])}".includes(tok) && --depth < 0) return undefined;
    out += tok === "true" ? "True" : tok === "false" ? "False" : tok;
    i += tok.length;
  }
  return depth === 0 && out.trim() ? out.trim() : undefined;
}

/** Separators of informal examples, longest first. */
const INFORMAL_SEPARATORS = ["==>", "=>", "==", "->", "\u279e", "=", "should return", "returns", "return"];

/**
 * Examples written without `>>>` (`f(1, 2) ==> 3`, `f("a") ➞ True`, `f([1]) should return 4.`,
 * `f(5) # returns "x"`): lines of the prompt that start with a call of the entry point whose
 * arguments and result are plain literals ({@link pyLiteral}); anything else is not an example.
 */
export function informalExamples(prompt: string, entryPoint: string): DocExample[] {
  const out: DocExample[] = [];
  for (const raw of prompt.replace(/\r\n?/g, "\n").split("\n")) {
    const line = raw.trim();
    if (!line.startsWith(entryPoint)) continue;
    let i = entryPoint.length;
    while (line[i] === " ") i++;
    if (line[i] !== "(") continue;
    // The call's closing parenthesis, outside strings.
    let depth = 0;
    let end = -1;
    let quote = "";
    for (let j = i; j < line.length; j++) {
      const ch = line[j] ?? "";
      if (quote) {
        if (ch === quote) quote = "";
      } else if (ch === '"' || ch === "'") quote = ch;
      else if (ch === "(") depth++;
      else if (ch === ")" && --depth === 0) {
        end = j;
        break;
      }
    }
    if (end < 0) continue;
    const argText = line.slice(i + 1, end).trim();
    const args = argText ? pyLiteral(argText) : "";
    if (args === undefined) continue;
    let rest = line.slice(end + 1).trim().replace(/^#\s*/, "");
    const sep = INFORMAL_SEPARATORS.find((x) => rest.startsWith(x));
    if (!sep) continue;
    rest = rest.slice(sep.length).trim().replace(/\.$/, "");
    const expected = pyLiteral(rest);
    if (expected === undefined) continue;
    out.push({ call: `${entryPoint}(${args})`, expected });
  }
  return out;
}

/**
 * Docstring examples of OpenAI's HumanEval that its own canonical solutions contradict (the
 * dataset's errors, and two lines of a recurrence's definition read as examples, `tri(1) = 3`),
 * found by running every record's examples against its canonical solution in the sandbox
 * image: left out of the visible tests, so a correct candidate can pass them.
 * Keyed by `task_id`; an example is left out only when its call text matches exactly.
 */
export const HUMANEVAL_CONTRADICTED_EXAMPLES: Readonly<Record<string, readonly string[]>> = {
  "HumanEval/47": ["median([-10, 4, 6, 1000, 10, 20])"],
  "HumanEval/130": ["tri(1)", "tri(4)"],
  "HumanEval/148": ['bf("Earth", "Mercury")'],
  "HumanEval/116": [
    "sort_array([1, 5, 2, 3, 4]) == [1, 2, 3, 4, 5]",
    "sort_array([-2, -3, -4, -5, -6]) == [-6, -5, -4, -3, -2]",
    "sort_array([1, 0, 2, 3, 4]) [0, 1, 2, 3, 4]",
  ],
};

/**
 * The visible test of a HumanEval record: one pytest file ({@link HUMANEVAL_VISIBLE_PATH}) that
 * checks each docstring example doctest-style in a copy of `solution.py`'s namespace. The
 * call is evaluated (a statement is executed, and the statements before an example are run
 * first); what it printed is compared when it returned None and printed something; else, when
 * the expected text evaluates as a Python expression, the values are compared (numbers with
 * a relative tolerance of 1e-6), otherwise `repr()` and `str()` of the result are compared
 * with it; no expected output means the call returns None (doctest) or True (an example
 * written as a check, `f(x) == y`). A failure names the call, what it returned and what the
 * docstring says. With no `>>>` example, the prompt's informal ones are used
 * ({@link informalExamples}). Examples in {@link HUMANEVAL_CONTRADICTED_EXAMPLES} are left
 * out. With no example at all, a smoke test that the entry point exists and is callable. Never holds the
 * record's `test` code.
 */
export function humanevalVisibleTests(rec: HumanEvalRecord): FileChange[] {
  const wrong = new Set(HUMANEVAL_CONTRADICTED_EXAMPLES[rec.task_id] ?? []);
  const doctests = docstringExamples(rec.prompt);
  const examples = (doctests.length ? doctests : informalExamples(rec.prompt, rec.entry_point)).filter((x) => !wrong.has(x.call));
  const ep = rec.entry_point;
  const head = [
    `"""Visible tests of ${rec.task_id}: ${examples.length ? "the examples of its docstring, checked doctest-style" : `${ep} exists`} against solution.py."""`,
  ];
  if (!examples.length) {
    return [
      {
        path: HUMANEVAL_VISIBLE_PATH,
        content: [
          ...head,
          "import solution",
          "",
          "",
          `def test_${ep}_is_defined():`,
          `    assert callable(getattr(solution, ${lit(ep)}, None)), ${lit(`solution.py defines no function ${ep}`)}`,
          "",
        ].join("\n"),
      },
    ];
  }
  const exampleLines = examples.map((e) => `    {"call": ${lit(e.call)}, "expected": ${lit(e.expected)}},`);
  const content = [
    ...head,
    "import contextlib",
    "import io",
    "import math",
    "",
    "import pytest",
    "",
    "import solution",
    "",
    "EXAMPLES = [",
    ...exampleLines,
    "]",
    "",
    "",
    "def _compiled(source):",
    "    try:",
    '        return compile(source, "<docstring example>", "eval"), True',
    "    except SyntaxError:",
    '        return compile(source, "<docstring example>", "exec"), False',
    "",
    "",
    "def _same(got, want):",
    "    try:",
    "        if got == want:",
    "            return True",
    "    except Exception:",
    "        return False",
    "    numbers = (int, float)",
    "    if isinstance(got, numbers) and isinstance(want, numbers) and not isinstance(got, bool) and not isinstance(want, bool):",
    "        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)",
    "    return False",
    "",
    "",
    "def _check(example, got, printed):",
    '    call, expected = example["call"], example["expected"].strip()',
    "    if got is None and printed.strip():",
    "        if printed.strip() == expected:",
    "            return",
    '        raise AssertionError(f"{call} printed {printed.strip()!r}; the docstring says {expected}")',
    '    if expected == "":',
    "        # No output shown: doctest's None, or an example written as a check (`f(x) == y`).",
    "        if got is None or got is True:",
    "            return",
    '        raise AssertionError(f"{call} returned {got!r}; the docstring shows no output (None, or True for a check)")',
    "    try:",
    '        want = eval(expected, {"__builtins__": __builtins__})',
    "        parsed = True",
    "    except Exception:",
    "        want, parsed = None, False",
    "    if parsed and _same(got, want):",
    "        return",
    "    if repr(got) == expected or str(got) == expected:",
    "        return",
    '    raise AssertionError(f"{call} returned {got!r}; the docstring says {expected}")',
    "",
    "",
    '@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=[e["call"][:60] for e in EXAMPLES])',
    "def test_docstring_example(index):",
    "    namespace = dict(vars(solution))",
    "    for earlier in EXAMPLES[:index]:",
    '        code, is_expression = _compiled(earlier["call"])',
    "        if not is_expression:",
    "            exec(code, namespace)",
    "    example = EXAMPLES[index]",
    '    code, is_expression = _compiled(example["call"])',
    "    out = io.StringIO()",
    "    with contextlib.redirect_stdout(out):",
    "        if is_expression:",
    "            got = eval(code, namespace)",
    "        else:",
    "            exec(code, namespace)",
    "            got = None",
    "    _check(example, got, out.getvalue())",
    "",
  ].join("\n");
  return [{ path: HUMANEVAL_VISIBLE_PATH, content }];
}

/** A HumanEval record as a case (id = its `task_id`). */
export function humanevalCase(rec: HumanEvalRecord, line: number): BenchCase {
  return {
    id: rec.task_id,
    format: "humaneval",
    language: "python",
    goal: `Complete the function \`${rec.entry_point}\` in solution.py so that it behaves as its docstring says.\n\n${rec.prompt}`,
    files: [{ path: "solution.py", content: rec.prompt }],
    visibleTests: humanevalVisibleTests(rec),
    hiddenTests: humanevalTestFiles(rec),
    solutionPath: "solution.py",
    solution: solutionFile(rec, rec.canonical_solution).content,
    entryPoint: rec.entry_point,
    line,
  };
}

// ---------------------------------------------------------------------------------------
// MBPP

const PY_NOT_ENTRY = new Set([
  "assert", "abs", "all", "any", "bool", "dict", "float", "frozenset", "int", "isinstance", "len", "list",
  "max", "min", "print", "range", "repr", "round", "set", "sorted", "str", "sum", "tuple", "type", "zip",
  "not", "and", "or", "in", "is", "lambda", "if", "else", "isclose",
]);

/**
 * The function an MBPP record's first assert tests: the first name called in it that the
 * record's code defines (`def name`), else the first called name that is not a builtin.
 */
export function mbppEntryPoint(rec: Pick<MbppRecord, "code" | "test_list">): string | undefined {
  const first = rec.test_list[0] ?? "";
  const called = [...first.matchAll(/(?<![\w.])([A-Za-z_]\w*)\s*\(/g)].map((m) => m[1] ?? "");
  const defined = new Set([...rec.code.matchAll(/^[ \t]*def\s+([A-Za-z_]\w*)\s*\(/gm)].map((m) => m[1] ?? ""));
  return called.find((n) => defined.has(n)) ?? called.find((n) => !PY_NOT_ENTRY.has(n));
}

/** `def name(args)` of `name` in `code` (to the closing parenthesis of its header), or `name(...)`. */
function pySignature(code: string, name: string): string {
  const m = new RegExp(`^[ \\t]*(def\\s+${name}\\s*\\([^]*?\\))\\s*(->[^:\\n]*)?:`, "m").exec(code);
  return m?.[1] ? m[1].replace(/\s*\n\s*/g, " ") : `def ${name}(...)`;
}

/** A pytest file: `from solution import *`, the setup code, one test function per assert. */
function mbppTestFile(path: string, doc: string, setup: string, asserts: string[]): FileChange {
  const body: string[] = [`"""${doc}"""`, "import math", "", "from solution import *  # noqa: F401,F403"];
  if (setup.trim()) body.push("", setup.replace(/\r\n?/g, "\n").trimEnd());
  asserts.forEach((a, i) => {
    const src = a.replace(/\r\n?/g, "\n").trim();
    body.push("", "", `def test_${i + 1}():`);
    if (src.includes("\n")) {
      // A multi-line assert may hold a multi-line string: run it as written, unindented.
      body.push(`    exec(compile(${lit(src)}, ${lit(path)}, "exec"), globals())`);
    } else {
      body.push(`    ${src}`);
    }
  });
  return { path, content: `${body.join("\n")}\n` };
}

/** An MBPP record as a case (id `mbpp/<task_id>`), or why not. */
export function mbppCase(rec: MbppRecord, line: number): BenchCase | string {
  const entry = mbppEntryPoint(rec);
  if (!entry) return `no function call found in the first assert of test_list: ${rec.test_list[0]}`;
  const code = rec.code.replace(/\r\n?/g, "\n");
  const sig = pySignature(code, entry);
  const first = (rec.test_list[0] ?? "").trim();
  const setup = rec.test_setup_code ?? "";
  const id = `mbpp/${rec.task_id}`;
  const comment = rec.text.replace(/\r\n?/g, "\n").split("\n").map((l) => `    # ${l}`.trimEnd());
  return {
    id,
    format: "mbpp",
    language: "python",
    goal: `${rec.text.trim()}\n\nWrite the Python function \`${sig.replace(/^def\s+/, "")}\` in solution.py (the tests do \`from solution import *\`). Your code should pass this test:\n\n${first}`,
    files: [{ path: "solution.py", content: `${sig}:\n${comment.join("\n")}\n    raise NotImplementedError\n` }],
    visibleTests: [mbppTestFile(MBPP_VISIBLE_PATH, `Visible test of ${id}: the first assert of its test_list.`, setup, [first])],
    hiddenTests: [
      mbppTestFile(MBPP_HIDDEN_PATH, `Hidden tests of ${id}: its test_list and challenge_test_list.`, setup, [
        ...rec.test_list,
        ...(rec.challenge_test_list ?? []),
      ]),
    ],
    solutionPath: "solution.py",
    solution: code.endsWith("\n") ? code : `${code}\n`,
    entryPoint: entry,
    line,
  };
}

// ---------------------------------------------------------------------------------------
// jsbench

/** The line that makes the entry point importable from `solution.js` (CommonJS). */
export function jsExportLine(entry: string): string {
  return `module.exports = { ${entry} };`;
}

/** A `node:test` file (CommonJS): one test case per snippet, `assert` = `node:assert/strict`. */
function jsTestFile(path: string, rec: JsbenchRecord, kind: "visible" | "hidden", tests: string | string[]): FileChange {
  const list = typeof tests === "string" ? [tests] : tests;
  const body = [
    `// ${kind === "visible" ? "Visible" : "Hidden"} tests of ${rec.task_id.replace(/[\r\n]/g, " ")} (node:test, node:assert/strict) against solution.js.`,
    '"use strict";',
    'const { test } = require("node:test");',
    'const assert = require("node:assert/strict");',
    `const { ${rec.entry_point} } = require("./solution.js");`,
  ];
  list.forEach((t, i) => {
    const src = t.replace(/\r\n?/g, "\n").trimEnd();
    // Indented for reading, unless a template literal could span lines (its text would change).
    const code = src.includes("`") ? src : src.replace(/^(?=.)/gm, "  ");
    body.push("", `test(${lit(`${rec.task_id} ${kind} ${i + 1}`)}, async () => {`, code, "});");
  });
  return { path, content: `${body.join("\n")}\n` };
}

/** A jsbench record as a case (id = its `task_id`). */
export function jsbenchCase(rec: JsbenchRecord, line: number): BenchCase {
  const exp = jsExportLine(rec.entry_point);
  const prompt = rec.prompt.endsWith("\n") ? rec.prompt : `${rec.prompt}\n`;
  const body = rec.canonical_solution.endsWith("\n") ? rec.canonical_solution : `${rec.canonical_solution}\n`;
  return {
    id: rec.task_id,
    format: "jsbench",
    language: "javascript",
    goal:
      `Complete the JavaScript function \`${rec.entry_point}\` in solution.js so that it behaves as its comment says. ` +
      `solution.js is a CommonJS module: keep the line \`${exp}\` at its end.\n\n${rec.prompt}`,
    files: [{ path: "solution.js", content: `${prompt}  throw new Error("not implemented");\n}\n\n${exp}\n` }],
    visibleTests: [jsTestFile(JSBENCH_VISIBLE_PATH, rec, "visible", rec.visible_test)],
    hiddenTests: [jsTestFile(JSBENCH_HIDDEN_PATH, rec, "hidden", rec.test)],
    solutionPath: "solution.js",
    solution: `${prompt}${body}\n${exp}\n`,
    entryPoint: rec.entry_point,
    line,
  };
}
