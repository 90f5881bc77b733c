import { describe, expect, it } from "vitest";
import type { GateResult } from "@loopsmith/shared/contracts";
import { gate } from "./gate.js";
import { src } from "./testing.js";

/** Gates one file (with the evaluation's names, when given). */
function run(path: string, content: string, evaluation?: string[]): GateResult {
  return gate({
    v: 1,
    taskId: "t1",
    iteration: 1,
    idempotencyKey: "t1/1/gate",
    language: "python",
    files: [{ path, content }],
    ...(evaluation ? { evaluation } : {}),
  });
}

const py = (...lines: string[]) => run("solution.py", src(...lines));

/** The tampering findings, as `severity rule@line`. */
function tampering(r: GateResult): string[] {
  return r.findings.filter((f) => f.rule?.startsWith("tampering.")).map((f) => `${f.severity} ${f.rule}@${f.line}`);
}

describe("gate, evaluation tampering in Python: what blocks", () => {
  it("1. result files: the JUnit variable, the result directory, pytest's options (blocks); a result XML name goes to review", () => {
    const r = py(
      "import os",
      "os.environ['LOOPSMITH_JUNIT'] = '/dev/null'",
      "path = os.environ.get('LOOPSMITH_' + 'VERDICT_FILE')",
      "open('/tmp/.loopsmith/result.xml', 'w').write('<testsuite/>')",
      "os.environ['PYTEST_ADDOPTS'] = '-p no:junitxml'",
      "ARGS = ['--junitxml=out.xml']",
      "REPORT = 'build/junit-report.xml'",
    );
    expect(r.blocked).toBe(true);
    expect(tampering(r)).toEqual([
      "blocker tampering.result_file@2",
      "blocker tampering.result_file@3",
      "blocker tampering.result_file@4",
      "warning tampering.result_file@4",
      "blocker tampering.result_file@5",
      "blocker tampering.result_file@6",
      "warning tampering.result_file@7",
    ]);
    expect(r.findings.find((f) => f.line === 2)).toMatchObject({
      path: "solution.py",
      message: expect.stringContaining("`LOOPSMITH_JUNIT` names loopsmith's verdict variable"),
    });
  });

  it("1. printing benchmark case lines goes to review", () => {
    const r = py(
      "import json",
      "print(json.dumps({'case': 'c1', 'pass': True}))",
      'print(\'{"case": "c2", "pass": true}\')',
    );
    expect(r.blocked).toBe(false);
    expect(tampering(r)).toEqual(["warning tampering.result_file@2", "warning tampering.result_file@3"]);
  });

  it("2. exits at import block: os._exit, sys.exit, exit(), raise SystemExit, os.kill of itself, aliased", () => {
    const r = py(
      "import os, sys",
      "from os import _exit as bye",
      "os._exit(0)",
      "sys.exit(0)",
      "exit()",
      "raise SystemExit(0)",
      "os.kill(os.getpid(), 9)",
      "bye(0)",
      "class C:",
      "    quit()",
    );
    expect(tampering(r)).toEqual([3, 4, 5, 6, 7, 8, 10].map((l) => `blocker tampering.exit@${l}`));
    expect(r.findings.find((f) => f.line === 3)?.message).toBe(
      "`os._exit` at module level: importing the module ends the process before the tests report",
    );
  });

  it("2. an exit the module runs at import through a function, a lambda or an exit handler blocks", () => {
    const r = py(
      "import atexit, os, sys",
      "def _boot():",
      "    sys.exit(0)",
      "_boot()",
      "(lambda: os._exit(0))()",
      "atexit.register(os._exit, 0)",
      "@atexit.register",
      "def _bye():",
      "    os._exit(0)",
    );
    // The handler's own `os._exit` is also a hard exit in a function (review); the registration blocks.
    expect(tampering(r)).toEqual([
      "blocker tampering.exit@3",
      "blocker tampering.exit@5",
      "blocker tampering.exit@6",
      "blocker tampering.exit@7",
      "warning tampering.exit@9",
    ]);
    expect(r.findings.find((f) => f.line === 3)?.message).toMatch(
      /in `_boot`, which the module calls when it is imported/,
    );
  });

  it("2. a hard exit inside a function goes to review; sys.exit inside a function is not flagged", () => {
    const r = py("import os, sys", "def main():", "    sys.exit(1)", "def crash():", "    os._exit(3)");
    expect(r.blocked).toBe(false);
    expect(tampering(r)).toEqual(["warning tampering.exit@5"]);
  });

  it("3. the framework's internals: _pytest, xdist, reporting hooks, TestReport, loopsmith_verdict (block); pluggy goes to review", () => {
    const r = py(
      "import _pytest.runner",
      "from xdist import dsession",
      "import pytest",
      "from pytest import TestReport",
      "import loopsmith_verdict",
      "import pluggy",
      "def pytest_runtest_makereport(item, call):",
      "    pass",
      "def pytest_addoption(parser):",
      "    pass",
      "mod = __import__('execnet')",
    );
    expect(tampering(r)).toEqual([
      "blocker tampering.framework@1",
      "blocker tampering.framework@2",
      "blocker tampering.framework@4",
      "blocker tampering.framework@5",
      "warning tampering.framework@6",
      "blocker tampering.framework@7",
      "warning tampering.framework@9",
      "blocker tampering.framework@11",
    ]);
  });

  it("3. patching unittest, doctest, builtins, sys.modules and the exits blocks; excepthook and atexit at import go to review", () => {
    const r = py(
      "import atexit, builtins, doctest, sys, unittest",
      "from unittest import TestCase",
      "unittest.TestCase.assertEqual = lambda *a, **k: None",
      "TestCase.run = None",
      "setattr(unittest.case.TestCase, 'fail', lambda *a: None)",
      "doctest.OutputChecker.check_output = lambda *a: True",
      "builtins.print = lambda *a: None",
      "sys.modules['pytest'] = object()",
      "sys.exit = lambda *a: None",
      "sys.modules[__name__] = object()",
      "sys.excepthook = lambda *a: None",
      "atexit.register(lambda: print('bye'))",
      "unittest.TestResult.wasSuccessful = lambda self: True",
    );
    expect(tampering(r)).toEqual([
      "blocker tampering.framework@3",
      "blocker tampering.framework@4",
      "blocker tampering.framework@5",
      "blocker tampering.framework@6",
      "blocker tampering.framework@7",
      "blocker tampering.framework@8",
      "blocker tampering.framework@9",
      "warning tampering.framework@10",
      "warning tampering.framework@11",
      "warning tampering.framework@12",
      "blocker tampering.framework@13",
    ]);
    expect(r.findings.find((f) => f.line === 3)?.message).toBe(
      "assigns `unittest.TestCase.assertEqual`: patches the test framework or what the tests run on",
    );
  });

  it("4. branching on the runner: sys.modules, PYTEST_CURRENT_TEST, argv at import, the runner's name (block); __main__.__file__ goes to review", () => {
    const r = py(
      "import os, sys, __main__",
      "if 'pytest' in sys.modules:",
      "    pass",
      "UNDER_TEST = sys.modules.get('_pytest') is not None",
      "if os.environ.get('PYTEST_CURRENT_TEST'):",
      "    pass",
      "FAST = 1 if len(sys.argv) > 1 else 2",
      "def solve(x):",
      "    if sys.argv[0].endswith('pytest'):",
      "        return 42",
      "    return x",
      "HERE = __main__.__file__",
    );
    expect(tampering(r)).toEqual([
      "blocker tampering.branch_on_runner@2",
      "blocker tampering.branch_on_runner@4",
      "blocker tampering.branch_on_runner@5",
      "blocker tampering.branch_on_runner@7",
      "warning tampering.branch_on_runner@9",
      "blocker tampering.branch_on_runner@9",
      "warning tampering.branch_on_runner@12",
    ]);
  });

  it("4. a condition on the evaluation's file names blocks; naming one elsewhere goes to review", () => {
    const r = run(
      "pkg/core.py",
      src(
        "import inspect",
        "def f(x):",
        "    if 'bench/run.py' in str(inspect.stack()):",
        "        return 1",
        "    LOG = 'see run.py'",
        "    return x",
      ),
      ["python3", "bench/run.py"],
    );
    expect(tampering(r)).toEqual([
      "blocker tampering.branch_on_runner@3",
      "warning tampering.object_walk@3",
      "warning tampering.branch_on_runner@5",
    ]);
    expect(r.findings[0]?.message).toBe(
      "a condition on `bench/run.py`, a file of the evaluation: the code special-cases the benchmark or the check",
    );
  });

  it("5. files that shadow the framework or run at start-up block where they shadow; deeper in a package they go to review", () => {
    const files = [
      "pytest.py",
      "_pytest/runner.py",
      "src/unittest.py",
      "tests/xdist/__init__.py",
      "sitecustomize.py",
      "pkg/usercustomize.py",
      "evil.pth",
      "loopsmith_verdict.py",
      "mylib/contrib/pytest/plugin.py",
    ];
    const r = gate({
      v: 1,
      taskId: "t1",
      iteration: 1,
      idempotencyKey: "t1/1/gate",
      language: "python",
      files: files.map((path) => ({ path, content: "x = 1\n" })),
    });
    expect(r.findings.map((f) => `${f.path} ${f.severity} ${f.rule}`)).toEqual([
      "pytest.py blocker tampering.shadow",
      "_pytest/runner.py blocker tampering.shadow",
      "src/unittest.py blocker tampering.shadow",
      "tests/xdist/__init__.py blocker tampering.shadow",
      "sitecustomize.py blocker tampering.shadow",
      "pkg/usercustomize.py blocker tampering.shadow",
      "evil.pth blocker tampering.shadow",
      "loopsmith_verdict.py blocker tampering.shadow",
      "mylib/contrib/pytest/plugin.py warning tampering.shadow",
    ]);
  });
});

describe("gate, evaluation tampering in Python: what is not flagged", () => {
  it("a script's exits under `if __name__ == '__main__'`, also in an `and` and in the else of `!=`", () => {
    const r = py(
      "import sys",
      "def main():",
      "    return 0",
      "if __name__ == '__main__':",
      "    sys.exit(main())",
      'if "__main__" == __name__ and len(sys.argv) > 1:',
      "    raise SystemExit(main())",
      "if __name__ != '__main__':",
      "    pass",
      "else:",
      "    exit(main())",
    );
    expect(tampering(r)).toEqual([]);
  });

  it("a command-line tool with argparse in main(), and a library with sys.exit in a function", () => {
    const cli = py(
      "import argparse, sys",
      "def main(argv=None):",
      "    parser = argparse.ArgumentParser()",
      "    parser.add_argument('--n', type=int)",
      "    args = parser.parse_args(argv)",
      "    if args.n is None:",
      "        sys.exit('need --n')",
      "    print(args.n)",
      "if __name__ == '__main__':",
      "    main()",
    );
    const lib = py(
      "import sys",
      "def fail(msg):",
      "    print(msg, file=sys.stderr)",
      "    sys.exit(2)",
      "class Tool:",
      "    def stop(self):",
      "        raise SystemExit(1)",
    );
    expect(tampering(cli)).toEqual([]);
    expect(tampering(lib)).toEqual([]);
  });

  it("test files, conftest.py and test helpers: the framework is theirs", () => {
    const test = run(
      "tests/test_add.py",
      src(
        "import pytest, sys, os",
        "import _pytest",
        "if 'pytest' in sys.modules:",
        "    pass",
        "def pytest_runtest_makereport(item, call):",
        "    pass",
        "os._exit(0)",
      ),
    );
    const conftest = run(
      "conftest.py",
      src(
        "import pytest",
        "@pytest.hookimpl(hookwrapper=True)",
        "def pytest_runtest_makereport(item, call):",
        "    yield",
      ),
    );
    expect(tampering(test)).toEqual([]);
    expect(tampering(conftest)).toEqual([]);
    // A helper under tests/ may use the framework (review only), but an exit at import still blocks.
    const helper = run(
      "tests/helpers.py",
      src("import os", "from _pytest.monkeypatch import MonkeyPatch", "os._exit(0)"),
    );
    expect(tampering(helper)).toEqual(["warning tampering.framework@2", "blocker tampering.exit@3"]);
  });

  it("ordinary code: unittest, pytest.approx, sys.modules of the program's own, os.environ, docstrings that mention results", () => {
    const r = py(
      '"""Writes results.xml and reads LOOPSMITH_JUNIT? No: this docstring only talks."""',
      "import os, sys, unittest, pytest",
      "HOME = os.environ.get('HOME', '/')",
      "if sys.version_info < (3, 9):",
      "    raise ImportError('Python 3.9+')",
      "mod = sys.modules.get(__name__)",
      "close = pytest.approx(0.1)",
      "class T(unittest.TestCase):",
      "    def test_x(self):",
      "        self.assertEqual(1, 1)",
      "cases = [{'case': 1, 'expected': 2}]",
    );
    expect(tampering(r)).toEqual([]);
  });

  it("a package's __main__.py is its main program; setattr on the program's own objects; builtins set up in a function go to review", () => {
    const main = run(
      "pkg/__main__.py",
      src(
        "import sys",
        "from pkg.cli import main",
        "if len(sys.argv) < 2:",
        "    sys.exit('usage')",
        "sys.exit(main())",
      ),
    );
    expect(tampering(main)).toEqual([]);
    const r = py(
      "import builtins, sys",
      "def redirect(name, stream):",
      "    setattr(sys, name, stream)",
      "def install_repl():",
      "    builtins.exit = None",
    );
    expect(r.blocked).toBe(false);
    expect(tampering(r)).toEqual(["warning tampering.framework@5"]);
  });

  it("a shebang script's module level is its main: an exit there goes to review, not a block", () => {
    const r = run(
      "tools/gen.py",
      "#!/usr/bin/env python3\nimport sys\nif len(sys.argv) != 2:\n    sys.exit('usage: gen.py FILE')\n",
    );
    expect(r.blocked).toBe(false);
    expect(tampering(r)).toEqual(["warning tampering.branch_on_runner@3", "warning tampering.exit@4"]);
  });
});
