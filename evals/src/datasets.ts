/**
 * Dataset files of `loopsmith bench`: JSONL in HumanEval's format, MBPP's,
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
 * shared/src/workspace/runner-config.ts), so `.js` files are CommonJS. `solution.js` is
 * `prompt + canonical_solution + "\n\nmodule.exports = { <entry_point> };\n"`, and the
 * tests `require("./solution.js")`.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type FileChange } from "@loopsmith/shared/contracts";
import { HumanEvalRecord, humanevalTestFiles, solutionFile } from "./humaneval.js";
import { humanevalVisibleTests, lit } from "./humaneval-examples.js";
import { BenchCase, type DatasetFormat, type SkippedLine } from "./case.js";

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
    throw new LoopsmithError("bad_request", `cannot read the dataset ${path}: ${(err as Error).message}`, {
      cause: err,
    });
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

// ---------------------------------------------------------------------------------------
// HumanEval (its visible tests: humaneval-examples.ts)

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
  "assert",
  "abs",
  "all",
  "any",
  "bool",
  "dict",
  "float",
  "frozenset",
  "int",
  "isinstance",
  "len",
  "list",
  "max",
  "min",
  "print",
  "range",
  "repr",
  "round",
  "set",
  "sorted",
  "str",
  "sum",
  "tuple",
  "type",
  "zip",
  "not",
  "and",
  "or",
  "in",
  "is",
  "lambda",
  "if",
  "else",
  "isclose",
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
  const comment = rec.text
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map((l) => `    # ${l}`.trimEnd());
  return {
    id,
    format: "mbpp",
    language: "python",
    goal: `${rec.text.trim()}\n\nWrite the Python function \`${sig.replace(/^def\s+/, "")}\` in solution.py (the tests do \`from solution import *\`). Your code should pass this test:\n\n${first}`,
    files: [{ path: "solution.py", content: `${sig}:\n${comment.join("\n")}\n    raise NotImplementedError\n` }],
    visibleTests: [
      mbppTestFile(MBPP_VISIBLE_PATH, `Visible test of ${id}: the first assert of its test_list.`, setup, [first]),
    ],
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
function jsTestFile(
  path: string,
  rec: JsbenchRecord,
  kind: "visible" | "hidden",
  tests: string | string[],
): FileChange {
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
