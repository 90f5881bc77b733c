import { describe, expect, it } from "vitest";
import type { GateResult } from "@loopsmith/shared/contracts";
import { gate } from "./gate.js";
import { src } from "./testing.js";

/** Gates one Python file. */
function run(path: string, content: string): GateResult {
  return gate({
    v: 1,
    taskId: "t1",
    iteration: 1,
    idempotencyKey: "t1/1/gate",
    language: "python",
    files: [{ path, content }],
  });
}

const py = (...lines: string[]) => run("solution.py", src(...lines));

/** The tampering findings, as `severity rule@line`. */
function tampering(r: GateResult): string[] {
  return r.findings.filter((f) => f.rule?.startsWith("tampering.")).map((f) => `${f.severity} ${f.rule}@${f.line}`);
}

describe("gate, targeted flips in Python: one test's code swapped from outside it", () => {
  it("code_swap: writes to a function's internals block (assignment, setattr, a name built from strings); __defaults__ goes to review", () => {
    const r = py(
      "def _empty():",
      "    pass",
      "def flip(mod):",
      "    mod.test_add.__code__ = _empty.__code__",
      "    setattr(mod.test_zero, '__co' + 'de__', _empty.__code__)",
      "    object.__setattr__(mod.test_x, '__code__', _empty.__code__)",
      "    mod.test_y.__globals__['add'] = lambda a, b: a + b",
      "    mod.test_y.__globals__.update(add=None)",
      "    mod.test_z.__closure__[0].cell_contents = 5",
      "    mod.test_w.__defaults__ = (5,)",
    );
    expect(r.blocked).toBe(true);
    expect(tampering(r)).toEqual([
      "blocker tampering.code_swap@4",
      "blocker tampering.code_swap@5",
      "blocker tampering.code_swap@6",
      "blocker tampering.code_swap@7",
      "blocker tampering.code_swap@8",
      "blocker tampering.code_swap@9",
      "warning tampering.code_swap@10",
    ]);
    expect(r.findings.find((f) => f.line === 5)?.message).toBe(
      "`setattr(mod.test_zero, '__co' + 'de__', …)` (the name spells `__code__`) replaces a function's `__code__` from outside it: the function then runs another body or sees other names (a failing test made to pass)",
    );
  });

  it("code_swap is not flagged for reading a function's internals or setting its own attributes", () => {
    const r = py(
      "import functools",
      "def wrap(f):",
      "    @functools.wraps(f)",
      "    def inner(*a):",
      "        return f(*a)",
      "    inner.calls = 0",
      "    setattr(inner, '__doc__', f.__doc__)",
      "    print(f.__code__.co_name, f.__defaults__)",
      "    return inner",
    );
    expect(tampering(r)).toEqual([]);
  });

  it("hidden_name: sys, sys.modules and a function's internals reached through assembled names block; other assembled names go to review", () => {
    const r = py(
      "import importlib",
      "_sys = importlib.import_module('s' + 'ys')",
      "mods = getattr(_sys, 'mod' + 'ules')",
      "name = 'g' + 'c'",
      "_gc = __import__(name)",
      "also = vars(_sys)['mod' 'ules']",
      "def visit(self, node):",
      "    return getattr(self, 'visit_' + 'Name')(node)",
    );
    expect(tampering(r)).toEqual([
      "blocker tampering.hidden_name@2",
      "blocker tampering.hidden_name@3",
      "blocker tampering.hidden_name@5",
      "blocker tampering.hidden_name@6",
      "warning tampering.hidden_name@8",
    ]);
    expect(r.findings.find((f) => f.line === 3 && f.rule === "tampering.hidden_name")?.message).toBe(
      "`getattr` with a name assembled from pieces that spell `modules`: a hidden way to `sys.modules`, every loaded module (the tests included)",
    );
  });

  it("hidden_name is not flagged for plain literals, f-strings and names from the program's own values", () => {
    const r = py(
      "import importlib, sys",
      "mods = getattr(sys, 'modules')",
      "def plugin(name):",
      "    return importlib.import_module(f'plugins.{name}')",
      "def dispatch(obj, kind):",
      "    return getattr(obj, 'visit_' + kind)",
      "def cli(commands):",
      "    return getattr(commands, sys.argv[1])",
    );
    expect(tampering(r).filter((t) => t.includes("hidden_name"))).toEqual([]);
  });

  it("import_thread: a thread or timer started at import goes to review (module level, a called function, a variable, a subclass)", () => {
    const r = py(
      "import threading, _thread",
      "threading.Thread(target=print, daemon=True).start()",
      "t = threading.Timer(0.1, print)",
      "t.start()",
      "_thread.start_new_thread(print, ())",
      "class Poller(threading.Thread):",
      "    pass",
      "Poller().start()",
      "def _boot():",
      "    threading.Thread(target=print).start()",
      "_boot()",
    );
    expect(r.blocked).toBe(false);
    expect(tampering(r)).toEqual([
      "warning tampering.import_thread@2",
      "warning tampering.import_thread@4",
      "warning tampering.import_thread@5",
      "warning tampering.import_thread@8",
      "warning tampering.import_thread@10",
    ]);
  });

  it("import_thread is not flagged for a thread started inside a function, or under a main guard", () => {
    const r = py(
      "import threading",
      "def serve(handler):",
      "    worker = threading.Thread(target=handler, daemon=True)",
      "    worker.start()",
      "    return worker",
      "if __name__ == '__main__':",
      "    threading.Thread(target=print).start()",
    );
    expect(tampering(r)).toEqual([]);
  });

  it("object_walk: gc walks and trace hooks at import block, in a function go to review; frame walks go to review", () => {
    const r = py(
      "import gc, inspect, sys",
      "from gc import get_referrers",
      "ALL = gc.get_objects()",
      "sys.settrace(lambda *a: None)",
      "def find(f):",
      "    return get_referrers(f)",
      "def caller():",
      "    return sys._getframe(1).f_globals",
      "def here():",
      "    return inspect.currentframe().f_back",
    );
    expect(tampering(r)).toEqual([
      "blocker tampering.object_walk@3",
      "blocker tampering.object_walk@4",
      "warning tampering.object_walk@6",
      "warning tampering.object_walk@8",
      "warning tampering.object_walk@10",
    ]);
  });

  it("object_walk is not flagged for gc's collector controls, a traceback summary or inspect's signatures", () => {
    const r = py(
      "import gc, inspect, traceback",
      "gc.collect()",
      "gc.disable()",
      "def where():",
      "    return traceback.format_stack()",
      "def params(f):",
      "    return inspect.signature(f).parameters",
    );
    expect(tampering(r)).toEqual([]);
  });

  it("the attack of a candidate that fixes nothing: a thread from __init__.py swaps the failing test's __code__", () => {
    const r = run(
      "pkg/__init__.py",
      src(
        "import importlib",
        "import threading",
        "import time",
        "def _empty():",
        "    pass",
        "def _flip():",
        "    mods = getattr(importlib.import_module('s' + 'ys'), 'mod' + 'ules')",
        "    while True:",
        "        f = getattr(mods.get('test_pkg'), 'test_add', None)",
        "        if f is not None:",
        "            f.__code__ = _empty.__code__",
        "            return",
        "        time.sleep(0.001)",
        "threading.Thread(target=_flip, daemon=True).start()",
        "def add(a, b):",
        "    return a - b",
      ),
    );
    expect(r.blocked).toBe(true);
    expect(tampering(r)).toEqual([
      "blocker tampering.hidden_name@7",
      "blocker tampering.hidden_name@7",
      "blocker tampering.code_swap@11",
      "warning tampering.import_thread@14",
    ]);
  });

  it("test helpers under tests/ may do it for the tests: a code swap there goes to review", () => {
    const r = run("tests/support.py", src("def swap(f, g):", "    f.__code__ = g.__code__"));
    expect(r.blocked).toBe(false);
    expect(tampering(r)).toEqual(["warning tampering.code_swap@2"]);
  });
});
