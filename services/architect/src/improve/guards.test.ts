import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { DEFAULT_PROTECTED, SELF_PROTECTED, type CheckCounts } from "@loopsmith/shared/contracts";
import { unifiedPatch } from "@loopsmith/shared/workspace";
import {
  addedSkips,
  deletedTests,
  dependencyChange,
  loweredThresholds,
  protectedGlobs,
  testCountViolation,
  touchesProtected,
  validateChange,
  type ChangeUnderReview,
  type PathKind,
} from "./guards.js";

/** A change as loopsmith makes it: `after` maps a path to its new text, or null to delete it; the patch is git-style (`a/`, `b/`). */
function change(base: Record<string, string>, after: Record<string, string | null>): ChangeUnderReview {
  const changed = Object.entries(after).flatMap(([path, content]) => (content === null ? [] : [{ path, content }]));
  const deleted = Object.entries(after).flatMap(([path, content]) => (content === null ? [path] : []));
  return { patch: unifiedPatch((p) => base[p], changed, deleted), changed: changed.map((c) => c.path), deleted };
}

/** One file edited from `before` to `after`. */
const edit = (path: string, before: string, after: string) => change({ [path]: before }, { [path]: after });

/** A tree for `exists`: files, and every directory above them. */
function tree(files: string[]): (p: string) => PathKind {
  const dirs = new Set(
    files.flatMap((f) =>
      f
        .split("/")
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join("/")),
    ),
  );
  return (p) => (files.includes(p) ? "file" : dirs.has(p) ? "dir" : undefined);
}

const defaults = (extra: { self?: boolean; commands?: string[]; files?: string[] } = {}) =>
  protectedGlobs({
    self: extra.self ?? false,
    extra: [],
    commands: extra.commands ?? [],
    exists: tree(extra.files ?? []),
  });

const PY_TESTS = `import pytest
from app import add


def test_add():
    assert add(1, 2) == 3


def test_negative():
    assert add(-1, -2) == -3
`;

const JS_TESTS = `import { describe, it, expect } from "vitest";
import { add } from "./add.js";

describe("add", () => {
  it("adds two numbers", () => {
    expect(add(1, 2)).toBe(3);
  });

  it("adds negatives", () => {
    expect(add(-1, -2)).toBe(-3);
  });
});
`;

describe("protectedGlobs", () => {
  it("starts with the defaults and adds SELF_PROTECTED only for loopsmith itself", () => {
    expect(defaults().slice(0, DEFAULT_PROTECTED.length)).toEqual([...DEFAULT_PROTECTED]);
    expect(defaults()).not.toContain("services/architect/src/improve/**");
    const self = defaults({ self: true });
    for (const g of SELF_PROTECTED) expect(self).toContain(g);
  });

  it("protects the files and directories the bench and check commands name, when they exist", () => {
    const globs = protectedGlobs({
      self: false,
      extra: ["secret/**"],
      commands: [
        "python3 scripts/score.py data/cases --out /tmp/x.json",
        "pytest -q ./tests/ missing.py ../outside.py",
      ],
      exists: tree(["scripts/score.py", "data/cases/a.json", "tests/test_a.py"]),
    });
    expect(globs).toContain("secret/**");
    expect(globs).toContain("scripts/score.py");
    expect(globs).toContain("data/cases/**");
    expect(globs).toContain("tests/**");
    expect(globs.slice(DEFAULT_PROTECTED.length)).toEqual([
      "secret/**",
      "scripts/score.py",
      "data/cases/**",
      "tests/**",
    ]);
  });

  it("reads quoted words, --opt=value, VAR=value and python -m modules, and never protects '.'", () => {
    const globs = defaults({
      commands: [
        `DATA=fixtures/cases sh -c 'node "eval/run me.mjs" --config=eval/conf.json' && python -m tools.grade . ./`,
      ],
      files: ["fixtures/cases/1.txt", "eval/run me.mjs", "eval/conf.json", "tools/grade.py"],
    });
    expect(globs).toEqual(
      expect.arrayContaining(["fixtures/cases/**", "eval/run me.mjs", "eval/conf.json", "tools/grade.py"]),
    );
    expect(globs).not.toContain("**");
    expect(globs).not.toContain("/**");
    expect(globs.length).toBe(DEFAULT_PROTECTED.length + 4);
  });

  it("escapes glob characters of a named file so it matches only itself", () => {
    const globs = defaults({ commands: ["python 'cases/[a]b.py'"], files: ["cases/[a]b.py"] });
    expect(touchesProtected(edit("cases/[a]b.py", "x = 1\n", "x = 2\n"), globs)?.reason).toBe("protected");
    expect(touchesProtected(edit("cases/ab.py", "x = 1\n", "x = 2\n"), globs)).toBeUndefined();
  });
});

describe("touchesProtected", () => {
  it("rejects an edit of the benchmark and names the glob it matched", () => {
    const v = touchesProtected(edit("bench/run.py", "N = 10\n", "N = 1\n"), defaults());
    expect(v?.reason).toBe("protected");
    expect(v?.message).toContain("bench/run.py (matches bench/**)");
    expect(v?.paths).toEqual(["bench/run.py"]);
  });

  it("rejects the scorer and data named by the bench command, deleted ones included", () => {
    const globs = defaults({
      commands: ["python3 scripts/score.py data/cases"],
      files: ["scripts/score.py", "data/cases/1.json"],
    });
    expect(touchesProtected(edit("scripts/score.py", "a\n", "b\n"), globs)?.paths).toEqual(["scripts/score.py"]);
    const del = change({ "data/cases/1.json": "{}\n" }, { "data/cases/1.json": null });
    expect(touchesProtected(del, globs)?.message).toContain("data/cases/1.json (matches data/cases/**)");
    expect(touchesProtected(edit("scripts/other.py", "a\n", "b\n"), globs)).toBeUndefined();
  });

  it("protects loopsmith.json, dot files and nested conftest.py", () => {
    const globs = defaults();
    expect(touchesProtected(edit("loopsmith.json", "{}\n", '{"improve":{}}\n'), globs)?.reason).toBe("protected");
    expect(touchesProtected(edit(".github/workflows/ci.yml", "a\n", "b\n"), globs)?.reason).toBe("protected");
    expect(touchesProtected(edit("pkg/tests/conftest.py", "a\n", "b\n"), globs)?.reason).toBe("protected");
  });

  it("protects the judging code it is given, naming why", () => {
    const c = edit("services/architect/src/improve/guards.ts", "a\n", "b\n");
    expect(touchesProtected(c, defaults({ self: true }))).toBeUndefined();
    const code = new Map([
      ["services/architect/src/improve/guards.ts", "is judging code (services/architect/src/improve/**)"],
    ]);
    const v = touchesProtected(c, defaults({ self: true }), code);
    expect(v?.reason).toBe("protected");
    expect(v?.message).toBe(
      "the change touches protected paths: services/architect/src/improve/guards.ts is judging code (services/architect/src/improve/**)",
    );
  });

  it("lists at most five paths and counts the rest", () => {
    const after = Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`bench/c${i}.txt`, "new\n"]));
    const v = touchesProtected(change({}, after), defaults());
    expect(v?.paths).toHaveLength(7);
    expect(v?.message).toContain("and 2 more");
    expect(v?.message).not.toContain("bench/c5.txt");
  });
});

describe("deletedTests", () => {
  it("rejects a deleted test file, python or javascript", () => {
    expect(deletedTests(change({ "tests/test_add.py": PY_TESTS }, { "tests/test_add.py": null }))?.reason).toBe(
      "tests_deleted",
    );
    expect(deletedTests(change({ "src/add.test.ts": JS_TESTS }, { "src/add.test.ts": null }))?.paths).toEqual([
      "src/add.test.ts",
    ]);
    expect(deletedTests(change({ "src/Button.spec.tsx": "x\n" }, { "src/Button.spec.tsx": null }))?.paths).toEqual([
      "src/Button.spec.tsx",
    ]);
  });

  it("lets a deleted source file through", () => {
    expect(deletedTests(change({ "src/old.py": "x = 1\n" }, { "src/old.py": null }))).toBeUndefined();
  });
});

describe("addedSkips", () => {
  const skipped = (path: string, before: string, after: string) => addedSkips(edit(path, before, after));

  it("flags an added @pytest.mark.skip and the other python skips", () => {
    const v = skipped(
      "tests/test_add.py",
      PY_TESTS,
      PY_TESTS.replace("def test_negative", '@pytest.mark.skip(reason="flaky")\ndef test_negative'),
    );
    expect(v?.reason).toBe("tests_skipped");
    expect(v?.paths).toEqual(["tests/test_add.py"]);
    expect(v?.message).toContain("@pytest.mark.skip");
    for (const line of [
      "@pytest.mark.skipif(True, reason='x')",
      "@pytest.mark.xfail",
      "    pytest.skip('later')",
      "np = pytest.importorskip('numpy')",
      "@unittest.skip('x')",
      "    self.skipTest('x')",
      "    raise unittest.SkipTest('x')",
      "__test__ = False",
    ]) {
      expect(skipped("tests/test_add.py", PY_TESTS, PY_TESTS + line + "\n")?.reason, line).toBe("tests_skipped");
    }
  });

  it("flags it.skip, .only and the other javascript skips", () => {
    expect(
      skipped("src/add.test.ts", JS_TESTS, JS_TESTS.replace('it("adds negatives"', 'it.skip("adds negatives"'))?.reason,
    ).toBe("tests_skipped");
    expect(
      skipped("src/add.test.ts", JS_TESTS, JS_TESTS.replace('it("adds two numbers"', 'it.only("adds two numbers"'))
        ?.message,
    ).toContain("it.only");
    for (const line of [
      'test.skip("x", () => {});',
      'describe.skip("x", () => {});',
      'xit("x", () => {});',
      'xdescribe("x", () => {});',
      'xtest("x", () => {});',
      'it.todo("x");',
      'test.todo("x");',
      'describe.only("x", () => {});',
      'test("x", { skip: true }, () => {});',
      'test("x", { todo: "later" }, () => {});',
      'it.skipIf(process.env.CI)("x", () => {});',
    ]) {
      expect(skipped("test/add.js", "", line + "\n")?.reason, line).toBe("tests_skipped");
    }
  });

  it("flags skips in conftest.py and deselections in test configuration", () => {
    expect(skipped("conftest.py", "", "collect_ignore = ['tests/test_slow.py']\n")?.reason).toBe("tests_skipped");
    expect(
      skipped(
        "pyproject.toml",
        '[tool.pytest.ini_options]\naddopts = "-q"\n',
        '[tool.pytest.ini_options]\naddopts = "-q --deselect tests/test_a.py::test_x"\n',
      )?.reason,
    ).toBe("tests_skipped");
    expect(skipped("pytest.ini", "[pytest]\naddopts = -q\n", "[pytest]\naddopts = -q -k 'not slow'\n")?.reason).toBe(
      "tests_skipped",
    );
  });

  it("ignores skips outside tests, commented-out markers, moved markers and skip: false", () => {
    expect(skipped("src/app.py", "x = 1\n", "x = 1\n# pytest.skip is not called here\nfit(model)\n")).toBeUndefined();
    expect(skipped("tests/test_add.py", PY_TESTS, PY_TESTS + "# @pytest.mark.skip\n")).toBeUndefined();
    expect(skipped("test/a.js", "", 'test("x", { skip: false }, () => {});\n')).toBeUndefined();
    // the skipped test moved above the other one, marker and all
    const add = "def test_add():\n    a, b = 1, 2\n    c = 3\n    assert add(a, b) == c\n    assert add(b, a) == c\n";
    const neg = "@pytest.mark.skip\ndef test_negative():\n    assert add(-1, -2) == -3\n";
    expect(
      skipped("tests/test_add.py", `import pytest\n\n\n${add}\n\n${neg}`, `import pytest\n\n\n${neg}\n\n${add}`),
    ).toBeUndefined();
    // the same marker moved to another test file, with its test
    const moved = change(
      { "tests/test_a.py": "@pytest.mark.skip\ndef test_slow():\n    pass\n", "tests/test_b.py": "" },
      { "tests/test_a.py": "", "tests/test_b.py": "@pytest.mark.skip\ndef test_slow():\n    pass\n" },
    );
    expect(addedSkips(moved)).toBeUndefined();
  });

  it("flags a removed test case that is not added back", () => {
    const v = skipped(
      "tests/test_add.py",
      PY_TESTS,
      PY_TESTS.replace("\n\ndef test_negative():\n    assert add(-1, -2) == -3\n", ""),
    );
    expect(v?.reason).toBe("tests_deleted");
    expect(v?.message).toContain("test_negative");
    expect(v?.paths).toEqual(["tests/test_add.py"]);
    const js = skipped(
      "src/add.test.ts",
      JS_TESTS,
      JS_TESTS.replace('\n  it("adds negatives", () => {\n    expect(add(-1, -2)).toBe(-3);\n  });\n', ""),
    );
    expect(js?.reason).toBe("tests_deleted");
    expect(js?.message).toContain("adds negatives");
  });

  it("lets a test be renamed in place (its file keeps its count), but not commented out or dropped", () => {
    expect(
      skipped("tests/test_add.py", PY_TESTS, PY_TESTS.replace("def test_negative", "def test_negatives")),
    ).toBeUndefined();
    expect(
      skipped("tests/test_add.py", PY_TESTS, PY_TESTS.replace("def test_negative():", "# def test_negative():"))
        ?.reason,
    ).toBe("tests_deleted");
    expect(
      skipped(
        "tests/test_add.py",
        PY_TESTS,
        PY_TESTS.replace("\n\ndef test_negative():\n    assert add(-1, -2) == -3\n", ""),
      )?.reason,
    ).toBe("tests_deleted");
  });

  it("keeps a test whose definition line changed but whose name stayed, or that moved to another test file", () => {
    expect(
      skipped("tests/test_add.py", PY_TESTS, PY_TESTS.replace("def test_negative():", "def test_negative(tmp_path):")),
    ).toBeUndefined();
    expect(
      skipped(
        "src/add.test.ts",
        JS_TESTS,
        JS_TESTS.replace('it("adds negatives", () => {', 'it("adds negatives", async () => {'),
      ),
    ).toBeUndefined();
    const moved = change(
      { "tests/test_add.py": PY_TESTS, "tests/test_neg.py": "" },
      {
        "tests/test_add.py": PY_TESTS.replace("\n\ndef test_negative():\n    assert add(-1, -2) == -3\n", ""),
        "tests/test_neg.py": "from app import add\n\n\ndef test_negative():\n    assert add(-1, -2) == -3\n",
      },
    );
    expect(addedSkips(moved)).toBeUndefined();
  });

  it("does not count a test moved into a file the runner does not collect", () => {
    const moved = change(
      { "tests/test_add.py": PY_TESTS, "tests/helpers.py": "" },
      {
        "tests/test_add.py": PY_TESTS.replace("\n\ndef test_negative():\n    assert add(-1, -2) == -3\n", ""),
        "tests/helpers.py": "def test_negative():\n    pass\n",
      },
    );
    expect(addedSkips(moved)?.reason).toBe("tests_deleted");
  });
});

describe("loweredThresholds", () => {
  const lowered = (path: string, before: string, after: string) => loweredThresholds(edit(path, before, after));

  it("flags coverage fail_under 90 → 80 and names file, key and values", () => {
    const v = lowered(
      ".coveragerc",
      "[report]\nfail_under = 90\nshow_missing = true\n",
      "[report]\nfail_under = 80\nshow_missing = true\n",
    );
    expect(v?.reason).toBe("thresholds_lowered");
    expect(v?.message).toContain(".coveragerc: fail_under 90 → 80");
    expect(v?.paths).toEqual([".coveragerc"]);
  });

  it("lets a raised threshold through (80 → 90)", () => {
    expect(lowered(".coveragerc", "[report]\nfail_under = 80\n", "[report]\nfail_under = 90\n")).toBeUndefined();
    expect(
      lowered(
        "pyproject.toml",
        "[tool.coverage.report]\nfail_under = 80\n",
        "[tool.coverage.report]\nfail_under = 90\n",
      ),
    ).toBeUndefined();
  });

  it("flags lowered coverage thresholds in JSON and JS configs, and --cov-fail-under", () => {
    expect(
      lowered(
        "package.json",
        '{\n  "nyc": {\n    "branches": 80,\n    "lines": 90\n  }\n}\n',
        '{\n  "nyc": {\n    "branches": 50,\n    "lines": 90\n  }\n}\n',
      )?.message,
    ).toContain("branches 80 → 50");
    expect(
      lowered(
        "jest.config.js",
        "module.exports = { coverageThreshold: { global: { statements: 90, functions: 85 } } };\n",
        "module.exports = { coverageThreshold: { global: { statements: 90, functions: 60 } } };\n",
      )?.message,
    ).toContain("functions 85 → 60");
    expect(
      lowered(
        "pytest.ini",
        "[pytest]\naddopts = -q --cov=app --cov-fail-under=90\n",
        "[pytest]\naddopts = -q --cov=app --cov-fail-under=70\n",
      )?.message,
    ).toContain("cov-fail-under 90 → 70");
    expect(
      lowered(
        "tox.ini",
        "[testenv]\ncommands = pytest --cov-fail-under 90\n",
        "[testenv]\ncommands = pytest --cov-fail-under 85\n",
      )?.reason,
    ).toBe("thresholds_lowered");
  });

  it("flags raised timeouts, and a timeout set to 0 (disabled)", () => {
    expect(lowered(".mocharc.yml", "timeout: 5000\n", "timeout: 60000\n")?.message).toContain("timeout 5000 → 60000");
    expect(
      lowered(
        "vitest.config.ts",
        "export default { test: { testTimeout: 2000 } };\n",
        "export default { test: { testTimeout: 20_000 } };\n",
      )?.message,
    ).toContain("testTimeout 2000 → 20_000");
    expect(
      lowered(
        "tests/test_api.py",
        "@pytest.mark.timeout(5)\ndef test_api():\n    pass\n",
        "@pytest.mark.timeout(50)\ndef test_api():\n    pass\n",
      )?.message,
    ).toContain("pytest.mark.timeout 5 → 50");
    expect(
      lowered(
        "test/api.js",
        'it("x", function () {\n  this.timeout(2000);\n});\n',
        'it("x", function () {\n  this.timeout(0);\n});\n',
      )?.reason,
    ).toBe("thresholds_lowered");
    expect(lowered(".mocharc.json", '{ "timeout": "2s" }\n', '{ "timeout": 2000 }\n')).toBeUndefined();
    expect(lowered(".mocharc.yml", "timeout: 60000\n", "timeout: 5000\n")).toBeUndefined();
  });

  it("flags fewer hypothesis examples and a wider tolerance in test files", () => {
    expect(
      lowered(
        "tests/test_prop.py",
        "@settings(max_examples=500)\ndef test_p():\n    pass\n",
        "@settings(max_examples=10)\ndef test_p():\n    pass\n",
      )?.reason,
    ).toBe("thresholds_lowered");
    expect(
      lowered(
        "tests/test_num.py",
        "def test_n():\n    assert f() == pytest.approx(1.0, rel=1e-6)\n",
        "def test_n():\n    assert f() == pytest.approx(1.0, rel=1e-2)\n",
      )?.message,
    ).toContain("rel 1e-6 → 1e-2");
  });

  it("counts a removed threshold or timeout with no replacement as lowered", () => {
    expect(
      lowered(".coveragerc", "[report]\nfail_under = 90\nshow_missing = true\n", "[report]\nshow_missing = true\n")
        ?.message,
    ).toContain("fail_under 90 removed");
    expect(
      lowered(
        "tests/test_prop.py",
        "@settings(deadline=200)\ndef test_p():\n    pass\n",
        "@settings(deadline=None)\ndef test_p():\n    pass\n",
      )?.message,
    ).toContain("deadline 200 removed");
  });

  it("ignores numbers in source code, unrelated keys, moved lines and test data", () => {
    expect(lowered("src/client.py", "TIMEOUT = 30\nMIN_SIZE = 10\n", "TIMEOUT = 300\nMIN_SIZE = 1\n")).toBeUndefined();
    expect(
      lowered(
        "pyproject.toml",
        '[tool.black]\nline-length = 100\n[project]\nversion = "2.0"\n',
        '[tool.black]\nline-length = 88\n[project]\nversion = "1.0"\n',
      ),
    ).toBeUndefined();
    expect(lowered("tox.ini", "[tox]\nmin_version = 4.0\n", "[tox]\nmin_version = 3.0\n")).toBeUndefined();
    expect(lowered(".coveragerc", "[report]\nfail_under = 90\n", "[report]\n\nfail_under = 90\n")).toBeUndefined();
    expect(
      lowered(
        "tests/test_text.py",
        "def test_wrap():\n    assert wrap(s, lines=10)\n",
        "def test_wrap():\n    assert wrap(s, lines=3)\n",
      ),
    ).toBeUndefined();
    expect(lowered(".coveragerc", "[report]\nfail_under = 90\n", "[report]\n# fail_under = 90\n")?.reason).toBe(
      "thresholds_lowered",
    );
  });
});

describe("dependencyChange", () => {
  const reqs = edit("requirements.txt", "requests==2.32.0\n", "requests==2.32.0\nnumpy==2.1.0\n");

  it("rejects a changed requirements.txt under reject and ask, allows it under allow", () => {
    expect(dependencyChange(reqs, "reject")).toMatchObject({ reason: "new_dependency", paths: ["requirements.txt"] });
    expect(dependencyChange(reqs, "ask")?.message).toContain('"ask"');
    expect(dependencyChange(reqs, "allow")).toBeUndefined();
  });

  it("counts a deleted lock file and a nested package.json", () => {
    expect(dependencyChange(change({ "yarn.lock": "x\n" }, { "yarn.lock": null }), "reject")?.paths).toEqual([
      "yarn.lock",
    ]);
    expect(
      dependencyChange(edit("packages/ui/package.json", "{}\n", '{"dependencies":{"left-pad":"1"}}\n'), "reject")
        ?.reason,
    ).toBe("new_dependency");
    expect(dependencyChange(edit("src/requirements.py", "a\n", "b\n"), "reject")).toBeUndefined();
  });
});

describe("testCountViolation", () => {
  const counts = (total: number, skipped: number, failed = 0): CheckCounts => ({
    status: "passed",
    total,
    passed: total - skipped - failed,
    failed,
    skipped,
  });

  it("flags more skipped tests", () => {
    const v = testCountViolation(counts(10, 1), counts(10, 3));
    expect(v?.reason).toBe("tests_skipped");
    expect(v?.message).toContain("3");
    expect(v?.message).toContain("1");
  });

  it("flags fewer tests run, with both counts", () => {
    const v = testCountViolation(counts(12, 0), counts(9, 0));
    expect(v).toMatchObject({ reason: "fewer_tests", paths: [] });
    expect(v?.message).toMatch(/9 test\(s\).*12/);
  });

  it("lets equal or more tests through", () => {
    expect(testCountViolation(counts(10, 2), counts(10, 2))).toBeUndefined();
    expect(testCountViolation(counts(10, 2), counts(14, 1))).toBeUndefined();
  });
});

describe("validateChange", () => {
  const opts = { globs: defaults(), dependencies: "reject" as const };

  it("passes a clean source-only change", () => {
    const c = change(
      { "src/app.py": "def add(a, b):\n    return a - b\n" },
      { "src/app.py": "def add(a, b):\n    return a + b\n", "src/util.py": "LIMIT = 3\n" },
    );
    expect(validateChange(c, opts)).toBeUndefined();
  });

  it("reports the first violation: protected, deleted files, markers, thresholds, dependencies", () => {
    const base: Record<string, string> = {
      "bench/run.py": "a\n",
      "tests/test_old.py": "def test_x():\n    pass\n",
      "tests/test_a.py": PY_TESTS,
      "pyproject.toml": "[tool.coverage.report]\nfail_under = 90\n",
      "requirements.txt": "a\n",
    };
    const after: Record<string, string | null> = {
      "bench/run.py": "b\n",
      "tests/test_old.py": null,
      "tests/test_a.py": "@pytest.mark.skip\n" + PY_TESTS,
      "pyproject.toml": "[tool.coverage.report]\nfail_under = 10\n",
      "requirements.txt": "b\n",
    };
    const files = Object.keys(after);
    const pick = <T>(o: Record<string, T>, keep: string[]) =>
      Object.fromEntries(Object.entries(o).filter(([k]) => keep.includes(k)));
    // drop the file behind each violation in turn: the next one surfaces
    const reasons = files.map(
      (_, i) => validateChange(change(pick(base, files.slice(i)), pick(after, files.slice(i))), opts)?.reason,
    );
    expect(reasons).toEqual(["protected", "tests_deleted", "tests_skipped", "thresholds_lowered", "new_dependency"]);
  });

  it("property: a change confined to non-test files under src/ always passes", () => {
    // non-test names: nothing with "test" or "spec" in it, and not setup.py (a dependency manifest) or conftest.py (protected)
    const segment = fc
      .stringMatching(/^[a-z][a-z0-9_]{0,8}$/)
      .filter((s) => !/test|spec/.test(s) && s !== "setup" && s !== "conftest");
    const file = fc
      .tuple(fc.array(segment, { minLength: 0, maxLength: 2 }), segment, fc.constantFrom(".py", ".ts", ".js", ".md"))
      .map(([dirs, name, ext]) => ["src", ...dirs, name + ext].join("/"));
    const text = fc
      .array(fc.stringMatching(/^[ -~]{0,40}$/), { maxLength: 6 })
      .map((lines) => lines.map((l) => l + "\n").join(""));
    const globs = defaults();
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(file, text, fc.oneof(text, fc.constant(null))), {
          minLength: 1,
          maxLength: 5,
          selector: ([f]) => f,
        }),
        (files) => {
          const base = Object.fromEntries(files.map(([f, b]) => [f, b]));
          const after = Object.fromEntries(files.map(([f, , a]) => [f, a]));
          expect(validateChange(change(base, after), { globs, dependencies: "reject" })).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });
});
