/**
 * The tampering pass over one Python file outside the tests (`tampering.ts`, docs/GATE.md
 * "Evaluation tampering"): exits when the module is imported, reaching into the test
 * framework, branching on the runner or the benchmark, and the verdict's names in strings.
 * Names resolve through the safety analyser's own resolution ({@link PyNames}), so
 * `from os import _exit as e` and `getattr(os, "_exit")` are `os._exit`.
 */
import type { SyntaxNode } from "@lezer/common";
import { assignedMembers, enclosingFunction, parseArgs } from "./pysyntax.js";
import type { PyNames } from "./python.js";
import { PyReach } from "./pyreach.js";
import { decodePyString, pyConstString } from "./pystrings.js";
import { children, walk, type SourceFile } from "./source.js";
import {
  benchRecordMessage,
  reportTamper,
  scanTamperString,
  type TamperContext,
  type TamperRule,
} from "./tampering.js";

/** Exits that skip everything: no `finally`, no exit handlers, no report from the runner. */
const HARD_EXITS = new Set(["os._exit", "os.abort", "signal.raise_signal"]);
/** Exits by `SystemExit`: how a script ends. */
const SOFT_EXITS = new Set(["sys.exit", "builtins.exit", "builtins.quit"]);
/** Signal calls that end the process when aimed at itself (`os.kill(os.getpid(), …)`, group 0). */
const SELF_KILL = new Set(["os.kill", "os.killpg"]);
const SELF_PID = /^os\.(getpid|getpgrp|getpgid)$/;
/** The exits, which code under test may not replace. */
const EXIT_NAMES = new Set(["sys.exit", "os._exit", "builtins.exit", "builtins.quit"]);
/** Builtins the safety analyser does not resolve, read here when the file does not bind them. */
const BARE_BUILTINS = new Set(["exit", "quit", "SystemExit", "setattr", "delattr"]);

/** Test framework internals whose import from code under test is tampering. */
const FRAMEWORK_IMPORTS = new Set(["_pytest", "xdist", "execnet", "loopsmith_verdict"]);
/** pytest's report objects: only a plugin that rewrites outcomes needs them. */
const PYTEST_REPORTING = new Set(["pytest.TestReport", "pytest.CollectReport", "pytest.CallInfo"]);
/** pytest hooks that see or rewrite outcomes, collection or the session's status. */
const REPORT_HOOKS = new Set([
  "pytest_runtest_makereport",
  "pytest_runtest_logreport",
  "pytest_report_teststatus",
  "pytest_sessionfinish",
  "pytest_collection_modifyitems",
  "pytest_runtest_protocol",
  "pytest_runtest_call",
  "pytest_pyfunc_call",
  "pytest_collectreport",
  "pytest_runtestloop",
  "pytest_terminal_summary",
]);
/** Modules (and everything in them) that code under test may not assign into. */
const PATCHED = /^(unittest|doctest|pytest|_pytest|builtins|loopsmith_verdict)(\.|$)/;
/** Module names whose presence in `sys.modules` says a test framework is running. */
const FRAMEWORK_MODULE = /^(pytest|_pytest|unittest|doctest|xdist|execnet|pluggy|nose2?|loopsmith_verdict)(\.|$)/;
/** A string naming the test runner, compared with how the process was started or what is loaded. */
const RUNNER_WORD = /(^|[^\w])(py\.?test|_pytest|unittest|doctest|xdist|nose2?)([^\w]|$)/i;
/** Where a program sees how it was started or what else is loaded. */
const INTROSPECTION =
  /^(sys\.(argv|orig_argv|modules|_getframe)|__main__|inspect\.(stack|currentframe|getouterframes)|traceback\.(extract_stack|format_stack)|os\.(environ|getenv))$/;

/** Where an expression ends: the statement (or block) around it. */
const BOUNDARY = /Statement$|^(Body|Script|FunctionDefinition|ClassDefinition|Decorator|MatchBody|MatchClause)$/;
/** Operators that make their operands a test. */
const TEST_OPS = new Set(["CompareOp", "in", "not", "is", "and", "or"]);

const same = (a: SyntaxNode | null | undefined, b: SyntaxNode): boolean => !!a && a.from === b.from && a.to === b.to;

/** True when `node` is (part of) something tested: an `if`/`while`/ternary/comprehension condition, a comparison or a boolean operand, an `assert`. */
function isCondition(node: SyntaxNode): boolean {
  for (let child = node, p = node.parent; p; child = p, p = p.parent) {
    if (p.name === "IfStatement" || p.name === "WhileStatement") return child.name !== "Body";
    if ((p.name === "ConditionalExpression" || p.name.includes("Comprehension")) && child.prevSibling?.name === "if")
      return true;
    if (
      (p.name === "BinaryExpression" || p.name === "UnaryExpression") &&
      children(p).some((c) => TEST_OPS.has(c.name))
    )
      return true;
    if (p.name === "AssertStatement" || (p.name === "MatchStatement" && child.name !== "MatchBody")) return true;
    if (BOUNDARY.test(p.name)) return false;
  }
  return false;
}

/** The whole expression `node` is part of (up to its statement). */
function exprRoot(node: SyntaxNode): SyntaxNode {
  let n = node;
  while (n.parent && !BOUNDARY.test(n.parent.name)) n = n.parent;
  return n;
}

/** True for a module-level `def` (decorated or not). */
function isTopLevel(def: SyntaxNode): boolean {
  const p = def.parent;
  return p?.name === "Script" || (p?.name === "DecoratedStatement" && p.parent?.name === "Script");
}

class PyTamper {
  /** Module-level functions that exit when called: name → the exit. */
  private readonly exiting = new Map<string, string>();
  /** Module-level functions the module calls when it is imported (outside a main guard). */
  private readonly calledAtImport = new Set<string>();
  /** The targeted-flip rules (`pyreach.ts`), which ask this pass what runs at import. */
  private readonly reach: PyReach;

  constructor(
    private readonly src: SourceFile,
    private readonly names: PyNames,
    private readonly ctx: TamperContext,
  ) {
    this.reach = new PyReach({
      src,
      names,
      ctx,
      atImport: (n) => this.atImport(n),
      guarded: (n) => this.guarded(n),
    });
  }

  run(): void {
    for (const stmt of children(this.src.tree.topNode)) {
      const def =
        stmt.name === "DecoratedStatement"
          ? stmt.getChild("FunctionDefinition")
          : stmt.name === "FunctionDefinition"
            ? stmt
            : null;
      const name = def?.getChild("VariableName");
      const exit = this.exitWithin(def?.getChild("Body") ?? null);
      if (name && exit) this.exiting.set(this.src.textOf(name), exit);
    }
    walk(this.src.tree, (n) => {
      if (
        n.name === "CallExpression" &&
        n.firstChild?.name === "VariableName" &&
        !enclosingFunction(n) &&
        !this.guarded(n)
      ) {
        this.calledAtImport.add(this.src.textOf(n.firstChild));
      }
    });
    this.reach.prepare();
    walk(this.src.tree, (n) => {
      this.visit(n);
      this.reach.visit(n);
    });
  }

  private visit(n: SyntaxNode): void {
    switch (n.name) {
      case "CallExpression":
        this.checkCall(n);
        break;
      case "RaiseStatement": {
        const exit = this.exitAt(n);
        if (exit) this.checkExit(n, exit);
        break;
      }
      case "ImportStatement":
        this.checkImport(n);
        break;
      case "FunctionDefinition":
        this.checkHook(n);
        break;
      case "Decorator":
        this.checkDecorator(n);
        break;
      case "AssignStatement":
      case "UpdateStatement":
      case "DeleteStatement":
        for (const t of assignedMembers(n)) this.checkTarget(t);
        break;
      case "DictionaryExpression":
        this.checkDict(n);
        break;
      case "VariableName":
      case "MemberExpression":
        if (n.parent?.name !== "ImportStatement") this.checkReference(n);
        break;
    }
    this.checkString(n);
  }

  private report(rule: TamperRule, node: SyntaxNode, message: string, sure: boolean): void {
    reportTamper(this.src, rule, node.from, message, sure);
  }

  /** Sure only outside test-support files: the framework and runner rules' severity. */
  private sureOutsideTests(): boolean {
    return !this.ctx.testSupport;
  }

  /** The qualified name of an expression, with the builtins the safety analyser leaves out. */
  private name(node: SyntaxNode | null | undefined): string | undefined {
    if (!node) return undefined;
    const q = this.names.resolve(node);
    if (q) return q;
    if (node.name !== "VariableName") return undefined;
    const text = this.src.textOf(node);
    return BARE_BUILTINS.has(text) && !this.names.isBound(text, node) ? `builtins.${text}` : undefined;
  }

  /** The exit a node performs (`sys.exit`, `raise SystemExit`, `os.kill(os.getpid(), …)`), if it is one. */
  private exitAt(n: SyntaxNode): string | undefined {
    if (n.name === "RaiseStatement") {
      const what = n.firstChild?.nextSibling;
      const target = what?.name === "CallExpression" ? what.firstChild : what;
      return target && this.name(target) === "builtins.SystemExit" ? "raise SystemExit" : undefined;
    }
    if (n.name !== "CallExpression") return undefined;
    const q = this.name(n.firstChild);
    if (!q) return undefined;
    if (HARD_EXITS.has(q) || SOFT_EXITS.has(q)) return q.replace(/^builtins\./, "");
    if (!SELF_KILL.has(q)) return undefined;
    const first = parseArgs(n.lastChild, this.src).positional[0];
    const pid = first?.name === "CallExpression" ? this.name(first.firstChild) : undefined;
    return (pid && SELF_PID.test(pid)) || (first && this.src.textOf(first) === "0")
      ? `${q}(${this.src.textOf(first!)}, …)`
      : undefined;
  }

  /** The first exit inside `body` (not inside a function or class defined there). */
  private exitWithin(body: SyntaxNode | null): string | undefined {
    if (!body) return undefined;
    const search = (n: SyntaxNode): string | undefined => {
      if (n !== body && /^(FunctionDefinition|LambdaExpression|ClassDefinition)$/.test(n.name)) return undefined;
      const exit = this.exitAt(n);
      if (exit) return exit;
      for (let c = n.firstChild; c; c = c.nextSibling) {
        const found = search(c);
        if (found) return found;
      }
      return undefined;
    };
    return search(body);
  }

  /** True for `__name__ == "__main__"` (or `!=`), alone or in an `and`. */
  private isMainTest(node: SyntaxNode | null | undefined, op: "==" | "!="): boolean {
    if (!node) return false;
    if (node.name === "ParenthesizedExpression") return this.isMainTest(node.firstChild?.nextSibling, op);
    const text = this.src.textOf(node).replace(/\s+/g, "").replace(/["']/g, "");
    if (text === `__name__${op}__main__` || text === `__main__${op}__name__`) return true;
    return (
      op === "==" &&
      node.name === "BinaryExpression" &&
      children(node).some((c) => c.name === "and") &&
      children(node).some((c) => c.name !== "and" && this.isMainTest(c, op))
    );
  }

  /**
   * True when `node` runs only when the file is the main program: under `if __name__ ==
   * "__main__":` (or the `else` of `!=`), or at the module level of a `__main__.py` (what
   * `python -m package` runs).
   */
  private guarded(node: SyntaxNode): boolean {
    if (this.ctx.main && !enclosingFunction(node)) return true;
    for (let child = node, p = node.parent; p; child = p, p = p.parent) {
      if (p.name === "IfStatement" && child.name === "Body") {
        const before = child.prevSibling;
        if (before?.name === "else") {
          if (!children(p).some((c) => c.name === "elif") && this.isMainTest(p.firstChild?.nextSibling, "!="))
            return true;
        } else if (this.isMainTest(before, "==")) return true;
      }
      if (
        p.name === "BinaryExpression" &&
        children(p)[1]?.name === "and" &&
        same(p.lastChild, child) &&
        this.isMainTest(p.firstChild, "==")
      )
        return true;
    }
    return false;
  }

  /**
   * How `node` runs when the module is imported: `"module"` at module level (a class body
   * counts: it runs at import), a description of the function that runs it then (a
   * module-level function the module calls, a lambda called in place), or undefined when
   * it runs only if something calls it.
   */
  private atImport(node: SyntaxNode): string | undefined {
    const fn = enclosingFunction(node);
    if (!fn) return "module";
    if (fn.name === "LambdaExpression") {
      let p = fn.parent;
      while (p?.name === "ParenthesizedExpression") p = p.parent;
      return p?.name === "CallExpression" && p.firstChild && p.firstChild.from <= fn.from && p.firstChild.to >= fn.to
        ? this.atImport(p)
        : undefined;
    }
    const name = fn.getChild("VariableName");
    const text = name ? this.src.textOf(name) : "";
    return isTopLevel(fn) && this.calledAtImport.has(text)
      ? `\`${text}\`, which the module calls when it is imported`
      : undefined;
  }

  /** Where an import-time finding is, for its message. */
  private where(via: string): string {
    return via === "module" ? "at module level" : `in ${via}`;
  }

  /** An exit: blocks at import time (outside a main guard); a hard exit in a function goes to review. */
  private checkExit(n: SyntaxNode, exit: string): void {
    if (this.guarded(n)) return;
    const via = this.atImport(n);
    if (via) {
      this.report(
        "tampering.exit",
        n,
        `\`${exit}\` ${this.where(via)}: importing the module ends the process before the tests report`,
        !this.ctx.script,
      );
    } else if (!SOFT_EXITS.has(exit) && !SOFT_EXITS.has(`builtins.${exit}`) && exit !== "raise SystemExit") {
      this.report(
        "tampering.exit",
        n,
        `\`${exit}\` in a function: a hard exit skips the test runner's report; check why code under test needs it`,
        false,
      );
    }
  }

  private checkCall(n: SyntaxNode): void {
    const exit = this.exitAt(n);
    if (exit) return this.checkExit(n, exit);
    const q = this.name(n.firstChild);
    if (!q) return;
    const args = parseArgs(n.lastChild, this.src);
    const first = args.positional[0];
    const key = first ? pyConstString(first, this.src) : undefined;
    if (q === "builtins.__import__" || q === "importlib.import_module") {
      const mod = this.names.resolve(n);
      if (mod && FRAMEWORK_IMPORTS.has(mod.split(".")[0] ?? ""))
        this.report(
          "tampering.framework",
          n,
          `imports \`${mod}\`, the test framework's internals`,
          this.sureOutsideTests(),
        );
    } else if (q === "atexit.register") this.checkAtexit(n, first);
    else if (q === "builtins.setattr" || q === "builtins.delattr") {
      const target = this.name(first);
      const attr = args.positional[1] ? pyConstString(args.positional[1], this.src) : undefined;
      const patched = attr === undefined ? `${target}.…` : `${target}.${attr}`;
      if (target && (PATCHED.test(target) || EXIT_NAMES.has(patched)))
        this.checkPatch(n, patched, `\`${q.slice(9)}\` on`);
    } else if (/^sys\.modules\.(setdefault|__setitem__|pop|__delitem__|update)$/.test(q)) {
      const sure = key !== undefined && FRAMEWORK_MODULE.test(key);
      this.report(
        "tampering.framework",
        n,
        `\`${q}(${key === undefined ? "…" : JSON.stringify(key)})\` replaces a module for every later import${sure ? ", here the test framework's" : "; check which and why"}`,
        sure && this.sureOutsideTests(),
      );
    } else if (q === "unittest.mock.patch" || q === "unittest.mock.patch.object") {
      const target = q.endsWith(".object") ? this.name(first) : key;
      if (target && PATCHED.test(target)) this.checkPatch(n, target, `\`${q}\` of`);
    }
  }

  /** `atexit.register`: of an exit, it replaces the exit status (blocks); anything else at import goes to review. */
  private checkAtexit(n: SyntaxNode, fn: SyntaxNode | undefined): void {
    if (this.guarded(n)) return;
    const named = this.name(fn);
    const exit =
      named && (HARD_EXITS.has(named) || SOFT_EXITS.has(named))
        ? named.replace(/^builtins\./, "")
        : fn?.name === "LambdaExpression"
          ? this.exitWithin(fn)
          : fn?.name === "VariableName"
            ? this.exiting.get(this.src.textOf(fn))
            : undefined;
    if (exit)
      this.report(
        "tampering.exit",
        n,
        `\`atexit.register\` of code that calls \`${exit}\`: it runs after the tests and replaces the exit status`,
        true,
      );
    else if (this.atImport(n))
      this.report(
        "tampering.framework",
        n,
        "`atexit.register` at import: an exit handler runs after the tests; check what it does",
        false,
      );
  }

  /** `@atexit.register` on a function (as {@link checkAtexit}); `@pytest.hookimpl` goes to review. */
  private checkDecorator(n: SyntaxNode): void {
    const parts = children(n).filter((c) => c.name === "VariableName" || c.name === ".");
    const head = parts[0];
    if (!head) return;
    const dotted = [
      this.names.resolve(head) ?? this.src.textOf(head),
      ...parts.slice(1).map((c) => this.src.textOf(c)),
    ].join("");
    if (dotted === "pytest.hookimpl")
      this.report(
        "tampering.framework",
        n,
        "`@pytest.hookimpl` outside conftest.py: a pytest plugin in code under test; check what the hook does",
        false,
      );
    if (dotted !== "atexit.register" || this.guarded(n)) return;
    const def = n.parent?.getChild("FunctionDefinition");
    const exit = this.exitWithin(def?.getChild("Body") ?? null);
    if (exit)
      this.report(
        "tampering.exit",
        n,
        `\`@atexit.register\` on a function that calls \`${exit}\`: it runs after the tests and replaces the exit status`,
        true,
      );
    else if (this.atImport(n))
      this.report(
        "tampering.framework",
        n,
        "`@atexit.register` at import: an exit handler runs after the tests; check what it does",
        false,
      );
  }

  private checkImport(n: SyntaxNode): void {
    const text = this.src.textOf(n).replace(/#.*$/gm, "").replace(/\\\n/g, " ").trim();
    const from = /^from\s+([\w.]+)\s+import\s+([\s\S]*)$/.exec(text);
    if (from) {
      const imported = (from[2] ?? "")
        .replace(/[()]/g, "")
        .split(",")
        .map((s) => (s.trim().split(/\s+as\s+/)[0] ?? "").trim());
      return this.checkModule(n, from[1] ?? "", imported);
    }
    const plain = /^import\s+([\s\S]*)$/.exec(text);
    for (const group of (plain?.[1] ?? "").split(","))
      this.checkModule(n, (group.trim().split(/\s+as\s+/)[0] ?? "").trim(), []);
  }

  private checkModule(n: SyntaxNode, mod: string, imported: readonly string[]): void {
    const top = mod.split(".")[0] ?? "";
    if (FRAMEWORK_IMPORTS.has(top))
      this.report(
        "tampering.framework",
        n,
        `imports \`${mod}\`, the test framework's internals`,
        this.sureOutsideTests(),
      );
    else if (top === "pluggy")
      this.report(
        "tampering.framework",
        n,
        "imports `pluggy`, pytest's plugin machinery; check it is the program's own plugin system",
        false,
      );
    else if (mod === "pytest") {
      for (const name of imported) {
        if (PYTEST_REPORTING.has(`pytest.${name}`))
          this.report(
            "tampering.framework",
            n,
            `imports \`pytest.${name}\`: a report object only a plugin that rewrites outcomes needs`,
            this.sureOutsideTests(),
          );
      }
    }
  }

  /** A pytest hook defined outside conftest.py: a reporting hook blocks, another goes to review. */
  private checkHook(def: SyntaxNode): void {
    const nameNode = def.getChild("VariableName");
    const name = nameNode ? this.src.textOf(nameNode) : "";
    if (!name.startsWith("pytest_")) return;
    const reporting = REPORT_HOOKS.has(name);
    this.report(
      "tampering.framework",
      def,
      reporting
        ? `defines pytest's \`${name}\` hook outside conftest.py: it can rewrite test outcomes`
        : `defines the pytest hook \`${name}\` outside conftest.py; check what it does`,
      reporting && this.sureOutsideTests(),
    );
  }

  /** An assignment into the framework, `builtins`, `sys.modules`, the exits or the exception hook. */
  private checkTarget(t: SyntaxNode): void {
    if (this.names.resolve(t.firstChild) === "sys.modules" && t.getChild("[")) {
      const keyNode = t.getChild("[")?.nextSibling;
      const key = keyNode ? pyConstString(keyNode, this.src) : undefined;
      const sure = key !== undefined && (FRAMEWORK_MODULE.test(key) || key === "builtins");
      this.report(
        "tampering.framework",
        t,
        `assigns \`sys.modules[${key === undefined ? "…" : JSON.stringify(key)}]\`: it replaces a module for every later import${sure ? ", here the test framework's" : "; check which and why"}`,
        sure && this.sureOutsideTests(),
      );
      return;
    }
    const q = this.names.resolve(t);
    if (!q) return;
    if (PATCHED.test(q) || EXIT_NAMES.has(q)) this.checkPatch(t, q, "assigns");
    else if (q === "sys.excepthook" || q === "threading.excepthook")
      this.report(
        "tampering.framework",
        t,
        `assigns \`${q}\`: it decides what an uncaught error does; check it does not hide failures`,
        false,
      );
  }

  /**
   * Patching `q` (into unittest, doctest, pytest, builtins, the exits): blocks outside
   * test-support files. `builtins` patched inside a function goes to review: a REPL or an
   * i18n set-up does that (`code`, `site`, `gettext` in the standard library).
   */
  private checkPatch(n: SyntaxNode, q: string, how: string): void {
    const sure = this.sureOutsideTests() && (!q.startsWith("builtins.") || this.atImport(n) !== undefined);
    this.report("tampering.framework", n, `${how} \`${q}\`: patches the test framework or what the tests run on`, sure);
  }

  private checkReference(n: SyntaxNode): void {
    const q = this.names.resolve(n);
    if (!q) return;
    if (n.name === "MemberExpression" && PYTEST_REPORTING.has(q)) {
      this.report(
        "tampering.framework",
        n,
        `\`${q}\`: a report object only a plugin that rewrites outcomes needs`,
        this.sureOutsideTests(),
      );
    }
    if (q === "sys.argv" || q === "sys.orig_argv") this.checkArgv(n, q);
    if (q === "sys.modules" && this.checkModulesRead(n)) return;
    if (q === "__main__.__file__" || q === "sys.modules.__main__.__file__") {
      const cond = isCondition(n);
      this.report(
        "tampering.branch_on_runner",
        n,
        `\`${this.src.textOf(n)}\` names the program that was started (the test runner or the benchmark)${cond ? ": a condition on it special-cases the evaluation" : "; check it is not used to special-case the evaluation"}`,
        cond && this.sureOutsideTests(),
      );
    }
    if (INTROSPECTION.test(q)) this.checkRunnerWord(n, q);
  }

  /** `sys.argv` in a condition: at import it blocks; in a function (a tool's `main`) it goes to review. */
  private checkArgv(n: SyntaxNode, q: string): void {
    if (!isCondition(n) || this.guarded(n)) return;
    const via = this.atImport(n);
    if (via) {
      this.report(
        "tampering.branch_on_runner",
        n,
        `\`${q}\` tested ${this.where(via)}: the module behaves differently depending on the program that imports it (the test runner or the benchmark)`,
        !this.ctx.script && this.sureOutsideTests(),
      );
    } else {
      this.report(
        "tampering.branch_on_runner",
        n,
        `\`${q}\` tested in a function: fine for a command-line tool's main, special-casing if it looks for the test runner or the benchmark; check which`,
        false,
      );
    }
  }

  /**
   * `"pytest" in sys.modules`, `sys.modules["pytest"]`, `sys.modules.get("pytest")`: asks
   * whether the framework is loaded. @returns true when reported
   */
  private checkModulesRead(n: SyntaxNode): boolean {
    const p = n.parent;
    let key: SyntaxNode | null | undefined;
    if (p?.name === "MemberExpression" && same(p.firstChild, n) && p.getChild("[")) {
      if (p.nextSibling?.name === "AssignOp" || p.parent?.name === "DeleteStatement") return true;
      key = p.getChild("[")?.nextSibling;
    } else if (p?.name === "BinaryExpression" && children(p).some((c) => c.name === "in")) {
      key = same(p.firstChild, n) ? p.lastChild : p.firstChild;
    } else if (
      p?.name === "MemberExpression" &&
      /^(get|__contains__|__getitem__)$/.test(this.src.textOf(p.getChild("PropertyName") ?? p)) &&
      p.parent?.name === "CallExpression"
    ) {
      key = parseArgs(p.parent.lastChild, this.src).positional[0];
    }
    const k = key ? pyConstString(key, this.src) : undefined;
    if (k === undefined || !FRAMEWORK_MODULE.test(k)) return false;
    this.report(
      "tampering.branch_on_runner",
      n,
      `asks \`sys.modules\` whether \`${k}\` is loaded: the code behaves differently under the test runner`,
      this.sureOutsideTests(),
    );
    return true;
  }

  /** The command line, loaded modules, stack or environment compared with the runner's name: blocks anywhere. */
  private checkRunnerWord(n: SyntaxNode, q: string): void {
    const root = exprRoot(n);
    let word: string | undefined;
    const search = (m: SyntaxNode): void => {
      if (word) return;
      if (m.name === "String" || m.name === "FormatString")
        word = RUNNER_WORD.exec(decodePyString(this.src.textOf(m), "scan").value)?.[2];
      for (let c = m.firstChild; c; c = c.nextSibling) search(c);
    };
    search(root);
    if (word)
      this.report(
        "tampering.branch_on_runner",
        n,
        `\`${q}\` is checked for \`${word}\`: the code behaves differently under the test runner`,
        this.sureOutsideTests(),
      );
  }

  /** A dict with `case` and `pass`/`score` keys: a benchmark case record (review). */
  private checkDict(n: SyntaxNode): void {
    const keys = children(n)
      .filter((c) => c.name === "String" && c.nextSibling?.name === ":")
      .map((c) => decodePyString(this.src.textOf(c), "code").value);
    const message = benchRecordMessage(keys);
    if (message) this.report("tampering.result_file", n, message, false);
  }

  /** True for a docstring (a string that is a statement on its own). */
  private isDocstring(n: SyntaxNode): boolean {
    const p = n.parent;
    return p?.name === "ExpressionStatement" && same(p.firstChild, n) && same(p.lastChild, n);
  }

  /** Strings (constant concatenations folded) that name the verdict's machinery, the runner's environment or the evaluation. */
  private checkString(n: SyntaxNode): void {
    if (!["String", "FormatString", "ContinuedString", "BinaryExpression"].includes(n.name)) return;
    const p = n.parent;
    if (
      p &&
      (p.name === "ContinuedString" || (p.name === "BinaryExpression" && pyConstString(p, this.src) !== undefined))
    )
      return;
    const value = pyConstString(n, this.src);
    if (value === undefined || this.isDocstring(n)) return;
    for (const hit of scanTamperString(value))
      this.report(
        hit.rule,
        n,
        hit.message,
        hit.sure && (hit.rule === "tampering.result_file" || this.sureOutsideTests()),
      );
    const name = this.ctx.evaluation.find(value);
    if (!name) return;
    const cond = isCondition(n);
    this.report(
      "tampering.branch_on_runner",
      n,
      cond
        ? `a condition on \`${name}\`, a file of the evaluation: the code special-cases the benchmark or the check`
        : `names \`${name}\`, a file of the evaluation; check the code does not special-case it`,
      cond && this.sureOutsideTests(),
    );
  }
}

/**
 * Runs the tampering rules over a Python file the safety analyser has read, reporting into
 * its {@link SourceFile}. Call it only for files that are not tests (`isTestCode`).
 * @param src - the analysed file (its tree and text)
 * @param names - the analyser's name resolution for that file
 * @param ctx - the evaluation's names and what kind of file it is
 */
export function tamperPython(src: SourceFile, names: PyNames, ctx: TamperContext): void {
  new PyTamper(src, names, ctx).run();
}
