import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { humanevalTestFiles, type HumanEvalRecord } from "./humaneval.js";
import {
  JSBENCH_HIDDEN_PATH,
  JSBENCH_VISIBLE_PATH,
  MBPP_HIDDEN_PATH,
  MBPP_VISIBLE_PATH,
  loadDataset,
  mbppEntryPoint,
  parseDataset,
} from "./datasets.js";
import {
  HUMANEVAL_VISIBLE_PATH,
  docstringExamples,
  humanevalVisibleTests,
  informalExamples,
  pyLiteral,
} from "./humaneval-examples.js";
import { BenchCase } from "./case.js";

const dir = mkdtempSync(join(tmpdir(), "loopsmith-bench-datasets-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const examples = (name: string) => fileURLToPath(new URL(`../../examples/bench/${name}`, import.meta.url));

function file(name: string, lines: string[]): string {
  const p = join(dir, name);
  writeFileSync(p, lines.join("\n"));
  return p;
}

const he = (n: number, over: Partial<HumanEvalRecord> = {}): HumanEvalRecord => ({
  task_id: `HumanEval/${n}`,
  prompt: `def twice_${n}(x):\n    """Doubles x.\n    >>> twice_${n}(2)\n    4\n    >>> twice_${n}(-1)\n    -2\n    """\n`,
  entry_point: `twice_${n}`,
  canonical_solution: "    return 2 * x\n",
  test: `\n\ndef check(candidate):\n    assert candidate(3) == 6  # HIDDEN-ONLY\n`,
  ...over,
});

describe("loadDataset: HumanEval", () => {
  const path = file("he.jsonl", [
    JSON.stringify(he(0)),
    "",
    "{not json",
    JSON.stringify({ task_id: "HumanEval/x", prompt: "p" }),
    JSON.stringify(he(3, { prompt: 'def noex_3(x):\n    """No examples here."""\n', entry_point: "noex_3" })),
    JSON.stringify(he(0)),
  ]);
  const d = loadDataset(path);

  it("detects the format, keeps the valid records and reports every invalid line by its 1-based number", () => {
    expect(d.format).toBe("humaneval");
    expect(d.cases.map((c) => c.id)).toEqual(["HumanEval/0", "HumanEval/3"]);
    expect(d.cases.map((c) => c.line)).toEqual([1, 5]);
    expect(d.skipped.map((s) => s.line)).toEqual([3, 4, 6]);
    expect(d.skipped[0]?.message).toMatch(/not JSON/);
    expect(d.skipped[1]?.message).toMatch(/not a HumanEval record/);
    expect(d.skipped[2]?.message).toMatch(/duplicate id HumanEval\/0/);
    for (const c of d.cases) expect(BenchCase.safeParse(c).success).toBe(true);
  });

  it("builds goal, start file, reference, hidden tests (the full check) and doctest-style visible tests", () => {
    const c = d.cases[0] as BenchCase;
    const rec = he(0);
    expect(c.goal).toContain("twice_0");
    expect(c.goal).toContain("solution.py");
    expect(c.goal).toContain(rec.prompt);
    expect(c.files).toEqual([{ path: "solution.py", content: rec.prompt }]);
    expect(c.solution).toBe(rec.prompt + rec.canonical_solution);
    expect(c.hiddenTests).toEqual(humanevalTestFiles(rec));
    expect(c.visibleTests).toHaveLength(1);
    const v = c.visibleTests[0];
    expect(v?.path).toBe(HUMANEVAL_VISIBLE_PATH);
    expect(v?.content).toContain('{"call": "twice_0(2)", "expected": "4"}');
    expect(v?.content).toContain('{"call": "twice_0(-1)", "expected": "-2"}');
    expect(v?.content).toMatch(/returned \{got!r\}; the docstring says \{expected\}/);
  });

  it("never puts the record's test code in the visible tests, and their names never collide with the hidden ones", () => {
    for (const c of d.cases) {
      for (const v of c.visibleTests) expect(v.content).not.toContain("HIDDEN-ONLY");
      expect(c.goal).not.toContain("HIDDEN-ONLY");
      for (const f of c.files) expect(f.content).not.toContain("HIDDEN-ONLY");
      const hidden = new Set(c.hiddenTests.map((f) => f.path));
      for (const v of c.visibleTests) expect(hidden.has(v.path)).toBe(false);
      expect(hidden.has(c.solutionPath)).toBe(false);
    }
  });

  it("gives a record with no example a smoke test that the entry point is callable", () => {
    const c = d.cases[1] as BenchCase;
    expect(c.visibleTests[0]?.content).toContain('callable(getattr(solution, "noex_3", None))');
    expect(c.visibleTests[0]?.content).not.toContain("EXAMPLES");
  });

  it("leaves out the docstring examples HumanEval's own canonical solution contradicts", () => {
    const rec = he(47, {
      prompt:
        'def median(l: list):\n    """Median.\n    >>> median([3, 1, 2, 4, 5])\n    3\n    >>> median([-10, 4, 6, 1000, 10, 20])\n    15.0\n    """\n',
      entry_point: "median",
    });
    const [v] = humanevalVisibleTests(rec);
    expect(v?.content).toContain("median([3, 1, 2, 4, 5])");
    expect(v?.content).not.toContain("1000");
  });
});

describe("docstringExamples", () => {
  it("joins `...` continuations, reads multi-line output, and stops at a blank line, the next >>> or the docstring's end", () => {
    const prompt = [
      "def f(a, b):",
      '    """Example.',
      "    >>> f([1,",
      "    ...    2], 3)",
      "    [1,",
      "     2]",
      "",
      "    >>> f(None, 0)",
      "    >>> f('a\\nb', 1)",
      '    \'x\' """',
      "",
    ].join("\n");
    expect(docstringExamples(prompt)).toEqual([
      { call: "f([1,\n   2], 3)", expected: "[1,\n2]" },
      { call: "f(None, 0)", expected: "" },
      { call: "f('a\\nb', 1)", expected: "'x'" },
    ]);
  });

  it("finds none in a prompt without >>>", () => {
    expect(docstringExamples('def g():\n    """Example: g() ==> 1"""\n')).toEqual([]);
  });
});

describe("informalExamples", () => {
  it("reads `f(x) ==> y`, `➞`, `=`, `should return y.`, `# returns y` lines whose arguments and result are literals", () => {
    const prompt = [
      "def f(a, b=None):",
      '    """Example:',
      "    f(1, 2) ==> 3",
      '    f("a", true) \u279e [1, "x"]',
      "    f([1, 2]) should return 16.",
      '    f(5)   # returns "db101db"',
      '    f(3) = {"k": (1, -2.5)}',
      "    f(x) => 2",
      "    f(1) -> 3 - 1 = 2",
      '    f(["a", "bb" ,"cc"]) == ""aaaaaaa"',
      "    f([",
      "    g(1) == 2",
      '    """',
    ].join("\n");
    expect(informalExamples(prompt, "f")).toEqual([
      { call: "f(1, 2)", expected: "3" },
      { call: 'f("a", True)', expected: '[1, "x"]' },
      { call: "f([1, 2])", expected: "16" },
      { call: "f(5)", expected: '"db101db"' },
      { call: "f(3)", expected: '{"k": (1, -2.5)}' },
    ]);
  });

  it("are used only when the prompt has no >>> example", () => {
    const rec = he(5, { prompt: 'def h(x):\n    """For example:\n    h(2) ==> 4\n    """\n', entry_point: "h" });
    expect(humanevalVisibleTests(rec)[0]?.content).toContain('{"call": "h(2)", "expected": "4"}');
  });

  it("pyLiteral refuses names, operators and unbalanced brackets", () => {
    expect(pyLiteral("[1, 'a', None]")).toBe("[1, 'a', None]");
    expect(pyLiteral("false")).toBe("False");
    expect(pyLiteral("n + 1")).toBeUndefined();
    expect(pyLiteral("[1, 2")).toBeUndefined();
    expect(pyLiteral("'a\\n'")).toBeUndefined();
    expect(pyLiteral("16abc")).toBeUndefined();
  });
});

describe("loadDataset: MBPP", () => {
  const d = loadDataset(examples("mbpp-sample.jsonl"));

  it("reads the sample: id mbpp/<task_id>, entry point from the first assert, solution.py from code", () => {
    expect(d.format).toBe("mbpp");
    expect(d.skipped).toEqual([]);
    expect(d.cases.map((c) => c.id)).toEqual(["mbpp/9001", "mbpp/9002", "mbpp/9003", "mbpp/9004", "mbpp/9005"]);
    const c = d.cases[1] as BenchCase;
    expect(c.entryPoint).toBe("second_largest");
    expect(c.solutionPath).toBe("solution.py");
    expect(c.solution).not.toContain("\r");
    expect(c.solution).toContain("def second_largest(nums):");
  });

  it("shows the signature and the first assert only in the goal and the visible test; hides the rest", () => {
    const c = d.cases[1] as BenchCase;
    expect(c.goal).toContain("second_largest(nums)");
    expect(c.goal).toContain("assert second_largest([4, 1, 7, 7, 3]) == 4");
    expect(c.goal).not.toContain("[5, 5, 5]");
    expect(c.visibleTests.map((f) => f.path)).toEqual([MBPP_VISIBLE_PATH]);
    expect(c.visibleTests[0]?.content).toContain("from solution import *");
    expect(c.visibleTests[0]?.content).not.toContain("[5, 5, 5]");
    expect(c.hiddenTests.map((f) => f.path)).toEqual([MBPP_HIDDEN_PATH]);
    const hidden = c.hiddenTests[0]?.content ?? "";
    for (const a of ["[4, 1, 7, 7, 3]", "[5, 5, 5]", "[-2, -9]", "second_largest([]) == None", "[1.5, 2.5, 2.5, 0.5]"])
      expect(hidden).toContain(a);
    expect(hidden.match(/^def test_\d+\(\):/gm)).toHaveLength(5);
  });

  it("puts test_setup_code in both test files", () => {
    const c = d.cases[3] as BenchCase;
    expect(c.visibleTests[0]?.content).toMatch(/^import math$/m);
    expect(c.hiddenTests[0]?.content).toContain("math.isclose(circle_area(2.5)");
  });

  it("takes the entry point the code defines, not a wrapper call", () => {
    expect(
      mbppEntryPoint({
        code: "def sim(a, b):\n  return a",
        test_list: ["assert set(sim((3, 4), (5, 4))) == set((4,))"],
      }),
    ).toBe("sim");
    expect(mbppEntryPoint({ code: "f = lambda x: x", test_list: ["assert math.isclose(vol(3), 27)"] })).toBe("vol");
  });

  it("skips a record whose first assert calls nothing", () => {
    const p = file("mbpp-bad.jsonl", [
      JSON.stringify({ task_id: 1, text: "t", code: "x = 1", test_list: ["assert x == 1"] }),
    ]);
    const r = loadDataset(p, { format: "mbpp" });
    expect(r.cases).toEqual([]);
    expect(r.skipped).toEqual([{ line: 1, message: expect.stringMatching(/no function call/) }]);
  });
});

describe("loadDataset: jsbench", () => {
  const d = loadDataset(examples("jsbench-sample.jsonl"));

  it("reads the sample as CommonJS node:test tasks", () => {
    expect(d.format).toBe("jsbench");
    expect(d.skipped).toEqual([]);
    expect(d.cases).toHaveLength(5);
    for (const c of d.cases) {
      expect(c.language).toBe("javascript");
      expect(c.solutionPath).toBe("solution.js");
      expect(c.solution).toContain(`module.exports = { ${c.entryPoint} };`);
      expect(c.files[0]?.content).toContain(`module.exports = { ${c.entryPoint} };`);
      expect(c.visibleTests.map((f) => f.path)).toEqual([JSBENCH_VISIBLE_PATH]);
      expect(c.hiddenTests.map((f) => f.path)).toEqual([JSBENCH_HIDDEN_PATH]);
      for (const f of [...c.visibleTests, ...c.hiddenTests]) {
        expect(f.content).toContain('require("node:test")');
        expect(f.content).toContain(`const { ${c.entryPoint} } = require("./solution.js");`);
      }
    }
  });

  it("makes one test case per test string and keeps hidden-only checks out of the visible file", () => {
    const c = d.cases.find((x) => x.id === "js/3") as BenchCase;
    expect(c.hiddenTests[0]?.content.match(/^test\(/gm)).toHaveLength(4);
    expect(c.visibleTests[0]?.content.match(/^test\(/gm)).toHaveLength(1);
    expect(c.visibleTests[0]?.content).not.toContain("chunk([], 3)");
    expect(c.goal).not.toContain("chunk([], 3)");
    expect(c.goal).toContain("module.exports = { chunk };");
  });
});

describe("loadDataset: errors", () => {
  it("throws bad_request for a file it cannot read", () => {
    expect(() => loadDataset(join(dir, "missing.jsonl"))).toThrow(LoopsmithError);
    try {
      loadDataset(join(dir, "missing.jsonl"));
    } catch (err) {
      expect((err as LoopsmithError).code).toBe("bad_request");
    }
  });

  it("throws bad_request when no line is a record of any format and none was given", () => {
    expect(() => parseDataset('{"a": 1}\nnope\n')).toThrow(
      /no line of the dataset is a HumanEval, MBPP or jsbench record/,
    );
    expect(() => parseDataset("\n\n")).toThrow(/has no records/);
  });

  it("with a format given, skips the lines of another format instead", () => {
    const r = parseDataset(JSON.stringify(he(1)), { format: "mbpp" });
    expect(r.format).toBe("mbpp");
    expect(r.cases).toEqual([]);
    expect(r.skipped[0]?.message).toMatch(/not an MBPP record/);
  });

  it("detects from the first valid line, not the first line", () => {
    const r = parseDataset(
      [
        "garbage",
        JSON.stringify({ task_id: 2, text: "t", code: "def g(x):\n  return x", test_list: ["assert g(1) == 1"] }),
      ].join("\n"),
    );
    expect(r.format).toBe("mbpp");
    expect(r.cases.map((c) => c.id)).toEqual(["mbpp/2"]);
    expect(r.skipped).toEqual([{ line: 1, message: expect.stringMatching(/not JSON/) }]);
  });
});
