/**
 * The visible tests of a HumanEval case (`loopsmith bench`): the examples of the record's
 * docstring (`>>>` lines, else informal `f(x) ==> y` lines), checked doctest-style in one
 * pytest file; a smoke test when it has none. Never the record's `test` code, which is the
 * hidden score (`humanevalTestFiles`).
 */
import type { FileChange } from "@loopsmith/shared/contracts";
import type { HumanEvalRecord } from "./humaneval.js";

/** A Python or JavaScript string literal of `s` (JSON's escapes are valid in both). */
export function lit(s: string): string {
  return JSON.stringify(s);
}

/** Visible tests of a HumanEval case: its docstring examples. */
export const HUMANEVAL_VISIBLE_PATH = "test_examples.py";

/** One docstring example: the source after `>>>` (with `...` continuations) and the expected output text. */
export interface DocExample {
  call: string;
  expected: string;
}

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
    let rest = line
      .slice(end + 1)
      .trim()
      .replace(/^#\s*/, "");
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
 * The Python of the visible tests after their `EXAMPLES` list: each example run in the
 * namespace of solution.py after the statements before it, its value (or what it printed)
 * compared with the docstring's as doctest would, numbers within a relative 1e-6.
 */
const EXAMPLE_CHECKS: readonly string[] = [
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
];

/** The visible test of a record with no example: the entry point exists and is callable. */
function smokeTest(head: readonly string[], ep: string): string {
  return [
    ...head,
    "import solution",
    "",
    "",
    `def test_${ep}_is_defined():`,
    `    assert callable(getattr(solution, ${lit(ep)}, None)), ${lit(`solution.py defines no function ${ep}`)}`,
    "",
  ].join("\n");
}

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
  const examples = (doctests.length ? doctests : informalExamples(rec.prompt, rec.entry_point)).filter(
    (x) => !wrong.has(x.call),
  );
  const ep = rec.entry_point;
  const head = [
    `"""Visible tests of ${rec.task_id}: ${examples.length ? "the examples of its docstring, checked doctest-style" : `${ep} exists`} against solution.py."""`,
  ];
  if (!examples.length) return [{ path: HUMANEVAL_VISIBLE_PATH, content: smokeTest(head, ep) }];
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
    ...EXAMPLE_CHECKS,
  ].join("\n");
  return [{ path: HUMANEVAL_VISIBLE_PATH, content }];
}
