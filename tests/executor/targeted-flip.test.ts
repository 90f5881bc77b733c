/**
 * Targeted flips in the real sandbox (docs/SANDBOX.md, "Verdicts"): a candidate that fixes
 * nothing and, from code the tests import, swaps the failing test function's `__code__`, so
 * that one test passes and every other report (tripwires included) stays honest. The pytest
 * plugin's worker records each collected test's code and checks it again when the test is
 * called; a swapped test fails and the controller's signed `end` record names it, which the
 * executor judges `tampering`. The gate is not involved here: these runs go straight to the
 * executor, as a flip the gate did not see would. Beside them the real fix, and a suite of
 * legitimate test shapes (decorators, generated tests, classes, hypothesis), must pass.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Executor } from "@loopsmith/executor";
import type { ExecutionRequest, FileChange } from "@loopsmith/shared/contracts";
import { request, startExecutor } from "./helpers.js";

let ex: Executor;

beforeAll(async () => {
  ex = await startExecutor({ warmPoolSize: 1, concurrency: 2 });
});

afterAll(async () => {
  await ex?.stop();
});

const file = (path: string, content: string): FileChange => ({ path, content });
const lines = (...l: string[]) => `${l.join("\n")}\n`;
const shellRequest = (files: FileChange[], shell: string): ExecutionRequest => ({ ...request("python", files), shell });

/**
 * A thread started when the module is imported waits for `<module>.<test>` to exist and swaps
 * its code for an empty function's; `sys` and `sys.modules` are reached through names built
 * from strings. A tiny switch interval lets the thread act as soon as the test is defined.
 */
const flipThread = (modules: string[], test: string) =>
  lines(
    "import importlib",
    "import threading",
    "import time",
    "",
    "def _empty():",
    "    pass",
    "",
    "def _flip():",
    "    _sys = importlib.import_module('s' + 'ys')",
    "    mods = getattr(_sys, 'mod' + 'ules')",
    "    deadline = time.monotonic() + 10",
    "    while time.monotonic() < deadline:",
    `        for name in ${JSON.stringify(modules)}:`,
    `            f = getattr(mods.get(name), ${JSON.stringify(test)}, None)`,
    "            if f is not None:",
    "                f.__code__ = _empty.__code__",
    "                return",
    "        time.sleep(0)",
    "",
    "importlib.import_module('s' + 'ys').setswitchinterval(1e-6)",
    "threading.Thread(target=_flip, daemon=True).start()",
    "",
  );

const pkgTest = file(
  "tests/test_pkg.py",
  lines(
    "from pkg import add",
    "",
    "def test_add():",
    "    assert add(2, 3) == 5",
    "",
    "def test_zero():",
    "    assert add(0, 0) == 0",
  ),
);
const wrongAdd = "def add(a, b):\n    return a - b\n";
const rightAdd = "def add(a, b):\n    return a + b\n";

describe("repo mode's shell line (`python3 -m pytest -q tests`)", () => {
  it("a package whose __init__.py starts a thread that swaps the failing test's __code__ is tampering, naming the test", async () => {
    const pkg = file("pkg/__init__.py", flipThread(["test_pkg", "tests.test_pkg"], "test_add") + wrongAdd);
    const r = await ex.run(shellRequest([pkg, pkgTest], "python3 -m pytest -q tests"));
    expect(r.status, r.reason).toBe("tampering");
    expect(r.verdict).toBe("controller");
    expect(r.reason).toMatch(/the code of a test was swapped while the tests ran/);
    expect(r.reason).toContain("tests/test_pkg.py::test_add");
    expect(r.tests.find((t) => t.name === "test_add")?.status).toBe("failed");
  });

  it("a direct swap at import, from a package module another test file imports, is caught at the test's call", async () => {
    // tests/test_b.py imports pkg.extra after tests/test_a.py was collected; pkg.extra gives the
    // failing test the passing test's body (same file, so only the code identity shows it).
    const files = [
      file("pkg/__init__.py", wrongAdd),
      file(
        "pkg/extra.py",
        lines(
          "import sys",
          "",
          "_victim = sys.modules.get('test_a') or sys.modules.get('tests.test_a')",
          "if _victim is not None:",
          "    _victim.test_add.__code__ = _victim.test_zero.__code__",
          "",
          "def double(x):",
          "    return 2 * x",
        ),
      ),
      file(
        "tests/test_a.py",
        lines(
          "from pkg import add",
          "",
          "def test_add():",
          "    assert add(2, 3) == 5",
          "",
          "def test_zero():",
          "    assert add(0, 0) == 0",
        ),
      ),
      file(
        "tests/test_b.py",
        lines("from pkg.extra import double", "", "def test_double():", "    assert double(2) == 4"),
      ),
    ];
    const r = await ex.run(shellRequest(files, "python3 -m pytest -q tests"));
    expect(r.status, r.reason).toBe("tampering");
    expect(r.reason).toContain("tests/test_a.py::test_add: the code of test_add was replaced after it was collected");
    expect(r.stdout).toMatch(/loopsmith: tests\/test_a\.py::test_add/);
  });

  it("the real fix passes, judged by the controller", async () => {
    const r = await ex.run(shellRequest([file("pkg/__init__.py", rightAdd), pkgTest], "python3 -m pytest -q tests"));
    expect(r.status, r.reason).toBe("passed");
    expect(r.verdict).toBe("controller");
    expect(r.summary?.total).toBe(2);
  });

  it("legitimate test shapes pass: fixtures, parametrize, classes, unittest, wrapping decorators, generated and exec'd tests, hypothesis", async () => {
    const helpers = file(
      "tests/helpers.py",
      lines(
        "import functools",
        "",
        "def twice(f):",
        "    @functools.wraps(f)",
        "    def inner(*a, **k):",
        "        f(*a, **k)",
        "        return f(*a, **k)",
        "    return inner",
        "",
        "def make(n):",
        "    def check():",
        "        from pkg import add",
        "        assert add(n, 0) == n",
        "    return check",
      ),
    );
    const suite = file(
      "tests/test_shapes.py",
      lines(
        "import unittest",
        "import pytest",
        "from hypothesis import given, strategies as st",
        "from pkg import add",
        "from helpers import twice, make",
        "",
        "@pytest.fixture",
        "def two():",
        "    return 2",
        "",
        "def test_fixture(two):",
        "    assert add(two, 3) == 5",
        "",
        "@pytest.mark.parametrize('a,b,c', [(1, 2, 3), (0, 0, 0)])",
        "def test_param(a, b, c):",
        "    assert add(a, b) == c",
        "",
        "class TestK:",
        "    def test_method(self):",
        "        assert add(1, 1) == 2",
        "",
        "class TestU(unittest.TestCase):",
        "    def test_unittest(self):",
        "        self.assertEqual(add(1, 2), 3)",
        "",
        "@twice",
        "def test_wrapped():",
        "    assert add(1, 2) == 3",
        "",
        "test_made = make(4)",
        "",
        "exec('def test_execd():\\n    assert add(1, 1) == 2\\n')",
        "",
        "@given(st.integers(), st.integers())",
        "def test_hypothesis(a, b):",
        "    assert add(a, b) == a + b",
      ),
    );
    const r = await ex.run(
      shellRequest([file("pkg/__init__.py", rightAdd), helpers, suite], "python3 -m pytest -q tests"),
    );
    expect(r.status, `${r.reason}\n${r.stdout}`).toBe("passed");
    expect(r.verdict).toBe("controller");
    expect(r.summary?.total).toBe(9);
    expect(r.stdout).not.toMatch(/loopsmith:/);
  });
});

describe("loopsmith's own command (inline tasks)", () => {
  const acceptance = file(
    "test_solution.py",
    lines(
      "from solution import add",
      "",
      "def test_add():",
      "    assert add(2, 3) == 5",
      "",
      "def test_zero():",
      "    assert add(0, 0) == 0",
    ),
  );

  it("a solution that starts the flipping thread at import is tampering; the real fix passes", async () => {
    const bad = file("solution.py", flipThread(["test_solution"], "test_add") + wrongAdd);
    const r = await ex.run(request("python", [bad, acceptance]));
    expect(r.status, r.reason).toBe("tampering");
    expect(r.reason).toContain("test_solution.py::test_add");
    const good = await ex.run(request("python", [file("solution.py", rightAdd), acceptance]));
    expect(good.status, good.reason).toBe("passed");
  });
});
