/**
 * The tampering pass over one JavaScript or TypeScript file outside the tests
 * (`tampering.ts`, docs/GATE.md "Evaluation tampering"): exits when the module loads,
 * `node:test` and `assert` internals, the module loader, `process.exitCode`, branching on
 * the runner or the benchmark, and the verdict's names in strings. Names resolve through
 * the safety analyser's own resolution ({@link JsNames}): `import { strict as a } from
 * "node:assert"` makes `a.equal` `assert.strict.equal`.
 */
import { posix } from "node:path";
import type { SyntaxNode } from "@lezer/common";
import type { JsNames } from "./javascript.js";
import { children, walk, type SourceFile } from "./source.js";
import {
  benchRecordMessage,
  isTestCode,
  isTestSupport,
  reportTamper,
  scanTamperString,
  type TamperContext,
  type TamperRule,
} from "./tampering.js";

/** Exits that skip the runner's report even inside a function. */
const HARD_EXITS = new Set(["process.reallyExit", "process.abort"]);
/** Calls that run a function later without anyone calling it: a callback given at load runs then. */
const SCHEDULERS = new Set([
  "setTimeout",
  "setImmediate",
  "setInterval",
  "queueMicrotask",
  "process.nextTick",
  "process.on",
  "process.once",
  "process.addListener",
  "process.prependListener",
  "process.prependOnceListener",
]);
/** The module loader's hooks: patching them swaps what `require` returns (an `assert`, the code under test). */
const LOADER =
  /^(module\.(constructor\.)?(_load|_resolveFilename|_extensions|_cache|prototype\.require|prototype\._compile)|require\.(cache|extensions))(\.|$)/;
/** The module that loaded this one, and the main module: their exports are the importer's (a test file's). */
const IMPORTER = /^(module\.(parent|children)|require\.main|process\.mainModule)$/;
/** `process` members that decide or end the exit status. */
const PROCESS_EXIT_MEMBERS = /^process\.(exit|reallyExit|abort|kill|exitCode)$/;
/** Calls that define or overwrite properties of their first argument. */
const DEFINERS = new Set([
  "Object.defineProperty",
  "Object.defineProperties",
  "Object.assign",
  "Object.setPrototypeOf",
  "Reflect.set",
  "Reflect.defineProperty",
  "Reflect.deleteProperty",
]);
/** A string naming the test runner. */
const RUNNER_WORD = /node:test|(^|\s)--test(?![-\w])|(^|[^\w-])(vitest|jest|mocha)(?![\w-])/;
/** Where a program sees how it was started. */
const INTROSPECTION = /^(process\.(argv|execArgv|env|title|argv0)|require\.main|module\.parent)$/;
/** A main-module guard: CommonJS, Bun/Deno, and the ESM comparison of `import.meta` with `process.argv`. */
const GUARD =
  /require\.main\s*===?\s*module|module\s*===?\s*require\.main|import\.meta\.main|import\.meta\.(url|filename|dirname|path)[\s\S]*process\.argv|process\.argv[\s\S]*(import\.meta\.(url|filename|dirname|path)|__filename)|__filename[\s\S]*process\.argv/;

const FUNCTION_SCOPES = new Set(["FunctionDeclaration", "FunctionExpression", "ArrowFunction", "MethodDeclaration"]);
/** Where an expression ends: the statement, declaration or block around it. */
const BOUNDARY = /Statement$|Declaration$|^(Block|Script|ClassBody|SwitchBody)$/;

const same = (a: SyntaxNode | null | undefined, b: SyntaxNode): boolean => !!a && a.from === b.from && a.to === b.to;
const within = (outer: SyntaxNode | null | undefined, inner: SyntaxNode): boolean =>
  !!outer && outer.from <= inner.from && outer.to >= inner.to;

function enclosingFunction(node: SyntaxNode): SyntaxNode | null {
  for (let p = node.parent; p; p = p.parent) if (FUNCTION_SCOPES.has(p.name)) return p;
  return null;
}

/** The expression tested where `node` is (an `if`/`while` condition, a ternary's test, a comparison or logical operand), or undefined. */
function conditionOf(node: SyntaxNode): SyntaxNode | undefined {
  for (let child = node, p = node.parent; p; child = p, p = p.parent) {
    if (/^(If|While|Do)Statement$/.test(p.name)) return child.name === "ParenthesizedExpression" ? child : undefined;
    if (p.name === "ConditionalExpression" && same(p.firstChild, child)) return child;
    if (p.name === "BinaryExpression" && children(p).some((c) => /^(CompareOp|LogicOp|in|instanceof)$/.test(c.name)))
      return exprRoot(p);
    if (p.name === "UnaryExpression" && p.firstChild?.name === "LogicOp") return exprRoot(p);
    if (BOUNDARY.test(p.name)) return undefined;
  }
  return undefined;
}

/** The whole expression `node` is part of (up to its statement). */
function exprRoot(node: SyntaxNode): SyntaxNode {
  let n = node;
  while (n.parent && !BOUNDARY.test(n.parent.name)) n = n.parent;
  return n;
}

/**
 * True for a module specifier that names a test file or a test helper: a relative or absolute
 * path, resolved against the importing file's directory, that is a test ({@link isTestCode},
 * also without its extension) or lies under a test directory.
 */
function isTestModule(spec: string, from: string): boolean {
  if (!/^(\.{1,2}\/|\/)/.test(spec)) return false;
  const joined = spec.startsWith("/")
    ? spec.replace(/^\/workspace\//, "")
    : posix.normalize(posix.join(posix.dirname(from), spec));
  const path = joined.replace(/^(\.\.\/)+/, "");
  return isTestCode(path) || isTestCode(`${path}.js`) || isTestSupport(path);
}

class JsTamper {
  /** Module-level functions the module calls when it loads (outside a main guard). */
  private readonly calledAtImport = new Set<string>();
  /** Names bound to a whole module by path (`const h = require("./h")`, `import * as h`, a default import): name → specifier. */
  private readonly modules = new Map<string, string>();

  constructor(
    private readonly src: SourceFile,
    private readonly names: JsNames,
    private readonly ctx: TamperContext,
  ) {}

  run(): void {
    walk(this.src.tree, (n) => {
      if (
        n.name === "CallExpression" &&
        n.firstChild?.name === "VariableName" &&
        !enclosingFunction(n) &&
        !this.guarded(n)
      ) {
        this.calledAtImport.add(this.src.textOf(n.firstChild));
      }
      if (n.name === "VariableDeclaration" || n.name === "ImportDeclaration") this.bindModule(n);
    });
    walk(this.src.tree, (n) => this.visit(n));
  }

  /** Records a name bound to a whole module: `const h = require("…")`, `import h from "…"`, `import * as h from "…"`. */
  private bindModule(n: SyntaxNode): void {
    if (n.name === "ImportDeclaration") {
      const spec = n.getChild("String");
      const value = spec ? this.names.constString(spec) : undefined;
      if (value === undefined) return;
      for (const def of n.getChildren("VariableDefinition")) this.modules.set(this.src.textOf(def), value);
      return;
    }
    const kids = children(n);
    for (let i = 0; i + 2 < kids.length; i++) {
      const [def, eq, value] = [kids[i]!, kids[i + 1]!, kids[i + 2]!];
      if (def.name !== "VariableDefinition" || eq.name !== "Equals") continue;
      const spec = this.requiredSpec(value);
      if (spec !== undefined) this.modules.set(this.src.textOf(def), spec);
    }
  }

  /** The specifier of `require("…")` or `await import("…")`, or undefined. */
  private requiredSpec(node: SyntaxNode | null | undefined): string | undefined {
    let n = node;
    while (n && (n.name === "ParenthesizedExpression" || n.name === "AwaitExpression"))
      n = n.name === "AwaitExpression" ? n.lastChild : n.firstChild?.nextSibling;
    if (n?.name === "DynamicImport") {
      const s = n.getChild("String");
      return s ? this.names.constString(s) : undefined;
    }
    if (n?.name !== "CallExpression" || this.name(n.firstChild) !== "require") return undefined;
    const list = n.getChild("ArgList");
    const first = list ? children(list).find((c) => !["(", ")", ","].includes(c.name)) : undefined;
    return first ? this.names.constString(first) : undefined;
  }

  /** The module loader name along a member chain (`require.cache[k].exports.t` → `require.cache`), if any. */
  private loaderAlong(node: SyntaxNode | null | undefined): string | undefined {
    for (let t = node; t; t = t.name === "MemberExpression" ? t.firstChild : null) {
      const q = this.names.resolve(t);
      if (q && LOADER.test(q)) return q;
    }
    return undefined;
  }

  /**
   * What a write through a member chain replaces, when it is a test's: an export of a test
   * module (`require("./x.test.js").t`, `helpers.check` with `helpers` a test helper), or of
   * the importing or main module (`module.parent.exports.t`).
   * @param whole - the chain may be the module object itself (`Object.assign(helpers, …)`);
   *   an assignment needs a member of it (`helpers = …` only rebinds the name)
   */
  private testExportAlong(node: SyntaxNode | null | undefined, whole = false): string | undefined {
    let root = node;
    for (let t = node; t; t = t.name === "MemberExpression" ? t.firstChild : null) {
      const q = this.names.resolve(t);
      if (q && IMPORTER.test(q))
        return `\`${q}\`, ${q === "module.parent" ? "the module that loaded this one" : q === "module.children" ? "a module this one loaded" : "the main module (under the test runner, the test's)"}`;
      root = t;
    }
    if (!root || (root === node && !whole)) return undefined;
    const spec = root.name === "VariableName" ? this.modules.get(this.src.textOf(root)) : this.requiredSpec(root);
    return spec !== undefined && isTestModule(spec, this.src.path)
      ? `\`${spec}\`, a test file or test helper`
      : undefined;
  }

  private visit(n: SyntaxNode): void {
    switch (n.name) {
      case "ImportDeclaration":
      case "ExportDeclaration":
        if (!/^(import|export)\s+type\b/.test(this.src.textOf(n))) this.checkModule(n.getChild("String"), n);
        break;
      case "DynamicImport":
        this.checkModule(n.getChild("String"), n);
        break;
      case "CallExpression":
        this.checkCall(n);
        break;
      case "AssignmentExpression":
        this.checkAssignment(n, n.firstChild);
        break;
      case "UnaryExpression":
        if (n.firstChild?.name === "delete") this.checkAssignment(n, n.lastChild);
        break;
      case "MemberExpression":
        this.checkReference(n);
        break;
      case "ObjectExpression":
        this.checkObject(n);
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

  /** A callee's name: resolved, or a global the file does not bind (`setTimeout`, `Object.defineProperty`). */
  private name(node: SyntaxNode | null | undefined): string | undefined {
    if (!node) return undefined;
    const q = this.names.resolve(node);
    if (q) return q;
    if (node.name === "VariableName") {
      const text = this.src.textOf(node);
      return this.names.isBound(text, node) ? undefined : text;
    }
    if (node.name === "MemberExpression" && node.firstChild?.name === "VariableName") {
      const base = this.name(node.firstChild);
      const prop = node.getChild("PropertyName");
      return base && prop ? `${base}.${this.src.textOf(prop)}` : undefined;
    }
    return undefined;
  }

  /** True when `node` runs only when the file is the main program (`if (require.main === module)`, `cond && …`). */
  private guarded(node: SyntaxNode): boolean {
    for (let child = node, p = node.parent; p; child = p, p = p.parent) {
      if (
        p.name === "IfStatement" &&
        child.prevSibling?.name === "ParenthesizedExpression" &&
        GUARD.test(this.src.textOf(child.prevSibling))
      )
        return true;
      if (
        p.name === "BinaryExpression" &&
        same(p.lastChild, child) &&
        p.firstChild &&
        GUARD.test(this.src.textOf(p.firstChild)) &&
        /&&/.test(this.src.textOf(p.firstChild.nextSibling ?? p))
      ) {
        return true;
      }
    }
    return false;
  }

  /** The name a function is declared or assigned under at module level (`function f`, `const f = () => …`). */
  private topLevelName(fn: SyntaxNode): string | undefined {
    const p = fn.parent;
    const top = (n: SyntaxNode | null | undefined): boolean =>
      n?.name === "Script" || (n?.name === "ExportDeclaration" && n.parent?.name === "Script");
    if (fn.name === "FunctionDeclaration" && top(p)) {
      const def = fn.getChild("VariableDefinition");
      return def ? this.src.textOf(def) : undefined;
    }
    if (p?.name === "VariableDeclaration" && top(p.parent)) {
      let def = fn.prevSibling;
      while (def && def.name !== "VariableDefinition") def = def.prevSibling;
      return def ? this.src.textOf(def) : undefined;
    }
    return undefined;
  }

  /**
   * How `node` runs when the module loads: `"module"` at module level, a description of the
   * function that runs it then (a module-level function the module calls, a function called
   * in place, a callback given to a timer or a `process` event), or undefined when it runs
   * only if something calls it.
   */
  private atImport(node: SyntaxNode): string | undefined {
    const fn = enclosingFunction(node);
    if (!fn) return "module";
    let p = fn.parent;
    while (p?.name === "ParenthesizedExpression") p = p.parent;
    if (p?.name === "CallExpression" && within(p.firstChild, fn))
      return this.atImport(p) && "a function called in place when the module loads";
    if (p?.name === "ArgList" && p.parent?.name === "CallExpression") {
      const callee = this.name(p.parent.firstChild);
      if (callee && SCHEDULERS.has(callee) && this.atImport(p.parent))
        return `a callback given to \`${callee}\` when the module loads`;
    }
    const name = this.topLevelName(fn);
    return name && this.calledAtImport.has(name) ? `\`${name}\`, which the module calls when it loads` : undefined;
  }

  private where(via: string): string {
    return via === "module" ? "at module level" : `in ${via}`;
  }

  /** `node:test` from code under test blocks; another test framework goes to review. */
  private checkModule(source: SyntaxNode | null, at: SyntaxNode): void {
    const spec = source ? this.names.constString(source) : undefined;
    if (spec === undefined) return;
    if (/^node:test(\/|$)/.test(spec))
      this.report(
        "tampering.framework",
        at,
        `imports \`${spec}\`, the test runner, from code under test`,
        this.sureOutsideTests(),
      );
    else if (/^(vitest|jest|mocha|@jest\/|@vitest\/)/.test(spec))
      this.report(
        "tampering.framework",
        at,
        `imports \`${spec}\`, a test framework, from code under test; check what it does with it`,
        false,
      );
  }

  /** The exit a call performs (`process.exit`, `process.kill(process.pid)`), if it is one. */
  private exitOf(call: SyntaxNode): string | undefined {
    const q = this.names.resolve(call.firstChild);
    if (q === "process.exit" || (q && HARD_EXITS.has(q))) return q;
    if (q !== "process.kill") return undefined;
    const list = call.getChild("ArgList");
    const first = list ? children(list).find((c) => !["(", ")", ","].includes(c.name)) : undefined;
    return first && this.names.resolve(first) === "process.pid" ? "process.kill(process.pid, …)" : undefined;
  }

  private checkCall(n: SyntaxNode): void {
    const callee = this.name(n.firstChild);
    const list = n.getChild("ArgList");
    const args = list ? children(list).filter((c) => !["(", ")", ","].includes(c.name)) : [];
    if (callee === "require") this.checkModule(args[0] ?? null, n);
    const exit = this.exitOf(n);
    if (exit) {
      if (this.guarded(n)) return;
      const via = this.atImport(n);
      if (via)
        this.report(
          "tampering.exit",
          n,
          `\`${exit}\` ${this.where(via)}: loading the module ends the process before the tests report`,
          !this.ctx.script,
        );
      else if (exit !== "process.exit")
        this.report(
          "tampering.exit",
          n,
          `\`${exit}\` in a function: it ends the process without the runner's report; check why code under test needs it`,
          false,
        );
      return;
    }
    if (callee && DEFINERS.has(callee) && args[0]) {
      const target = this.names.resolve(args[0]);
      const key = args[1] ? this.names.constString(args[1]) : undefined;
      const exported = this.testExportAlong(args[0], true);
      if (exported && !this.loaderAlong(args[0])) {
        this.report(
          "tampering.code_swap",
          n,
          `\`${callee}(${this.src.textOf(args[0]).slice(0, 60)}, …)\` replaces exports of ${exported}: the tests would call the candidate's functions instead of their own`,
          this.sureOutsideTests(),
        );
      } else if (
        target === "assert" ||
        target?.startsWith("assert.") ||
        target === "test" ||
        (target && LOADER.test(target)) ||
        this.loaderAlong(args[0])
      ) {
        this.report(
          "tampering.framework",
          n,
          `\`${callee}(${this.src.textOf(args[0])}, …)\` rewrites the assertions or the module loader the tests rely on`,
          this.sureOutsideTests(),
        );
      } else if (target === "process" && (key === undefined || /^(exitCode|exit|reallyExit|abort|kill)$/.test(key))) {
        this.report(
          "tampering.framework",
          n,
          `\`${callee}(process, ${key === undefined ? "…" : JSON.stringify(key)}, …)\` takes over how the process exits`,
          key !== undefined,
        );
      }
    }
  }

  /** An assignment (or `delete`) of `assert`'s functions, the module loader, or the process's exit. */
  private checkAssignment(n: SyntaxNode, target: SyntaxNode | null): void {
    if (target?.name !== "MemberExpression") return;
    const loader = this.loaderAlong(target);
    if (loader) {
      this.report(
        "tampering.framework",
        n,
        `patches the module loader (\`${loader}\`): every later \`require\`, of \`assert\` or of the code under test, can be swapped`,
        this.sureOutsideTests(),
      );
      return;
    }
    const exported = this.testExportAlong(target);
    if (exported) {
      this.report(
        "tampering.code_swap",
        n,
        `${n.name === "UnaryExpression" ? "deletes" : "replaces"} \`${this.src.textOf(target).slice(0, 80)}\`, an export of ${exported}: the tests would call the candidate's function instead of their own`,
        this.sureOutsideTests(),
      );
      return;
    }
    const q = this.names.resolve(target) ?? this.names.resolve(target.firstChild);
    if (!q) return;
    if (q.startsWith("assert.") || q === "assert" || q.startsWith("test.")) {
      const text = this.src.textOf(target);
      this.report(
        "tampering.framework",
        n,
        `reassigns \`${text}\`${text === q ? "" : ` (\`${q}\`)`}: the tests' assertions would not check`,
        this.sureOutsideTests(),
      );
    } else if (LOADER.test(q)) {
      this.report(
        "tampering.framework",
        n,
        `patches the module loader (\`${q}\`): every later \`require\`, of \`assert\` or of the code under test, can be swapped`,
        this.sureOutsideTests(),
      );
    } else if (q === "process.exitCode") {
      if (this.guarded(n)) return;
      const via = this.atImport(n);
      if (via)
        this.report(
          "tampering.framework",
          n,
          `sets \`process.exitCode\` ${this.where(via)}: code under test decides the run's exit status`,
          !this.ctx.script,
        );
    } else if (PROCESS_EXIT_MEMBERS.test(q)) {
      this.report("tampering.framework", n, `reassigns \`${q}\`: takes over how the process exits`, true);
    }
  }

  private checkReference(n: SyntaxNode): void {
    const q = this.names.resolve(n);
    if (!q) return;
    if (q.startsWith("process.env.")) {
      const prop = n.getChild("PropertyName");
      for (const hit of prop ? scanTamperString(this.src.textOf(prop)) : [])
        this.report(
          hit.rule,
          n,
          hit.message,
          hit.sure && (hit.rule === "tampering.result_file" || this.sureOutsideTests()),
        );
    }
    if (q === "process.argv" || q === "process.execArgv") this.checkArgv(n, q);
    if (INTROSPECTION.test(q)) this.checkRunnerWord(n, q);
  }

  /** `process.argv` in a condition: at load it blocks; in a function (a tool's main) it goes to review; a main guard is fine. */
  private checkArgv(n: SyntaxNode, q: string): void {
    const cond = conditionOf(n);
    if (!cond || GUARD.test(this.src.textOf(cond)) || this.guarded(n)) return;
    const via = this.atImport(n);
    if (via) {
      this.report(
        "tampering.branch_on_runner",
        n,
        `\`${q}\` tested ${this.where(via)}: the module behaves differently depending on the program that loads it (the test runner or the benchmark)`,
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

  /** How the process was started compared with the runner's name (`process.execArgv.includes("--test")`): blocks anywhere. */
  private checkRunnerWord(n: SyntaxNode, q: string): void {
    let word: string | undefined;
    const search = (m: SyntaxNode): void => {
      if (word) return;
      if (m.name === "String" || m.name === "TemplateString")
        word = RUNNER_WORD.exec(this.names.constString(m) ?? this.src.textOf(m))?.[0].trim();
      for (let c = m.firstChild; c; c = c.nextSibling) search(c);
    };
    search(exprRoot(n));
    if (word)
      this.report(
        "tampering.branch_on_runner",
        n,
        `\`${q}\` is checked for \`${word}\`: the code behaves differently under the test runner`,
        this.sureOutsideTests(),
      );
  }

  /** An object with `case` and `pass`/`score` keys: a benchmark case record (review). */
  private checkObject(n: SyntaxNode): void {
    const keys = n.getChildren("Property").flatMap((p) => {
      const k = p.firstChild;
      if (k?.name === "PropertyDefinition" || k?.name === "PropertyName") return [this.src.textOf(k)];
      const s = k?.name === "String" ? this.names.constString(k) : undefined;
      return s === undefined ? [] : [s];
    });
    const message = benchRecordMessage(keys);
    if (message) this.report("tampering.result_file", n, message, false);
  }

  /** Strings, templates and constant concatenations that name the verdict's machinery, the runner's environment or the evaluation. */
  private checkString(n: SyntaxNode): void {
    if (!["String", "TemplateString", "BinaryExpression"].includes(n.name)) return;
    if (n.parent?.name === "BinaryExpression" && this.names.constString(n.parent) !== undefined) return;
    if (n.parent?.name === "ImportDeclaration" || n.parent?.name === "ExportDeclaration") return;
    const value = this.names.constString(n);
    if (value === undefined) return;
    for (const hit of scanTamperString(value))
      this.report(
        hit.rule,
        n,
        hit.message,
        hit.sure && (hit.rule === "tampering.result_file" || this.sureOutsideTests()),
      );
    const name = this.ctx.evaluation.find(value);
    if (!name) return;
    const cond = conditionOf(n) !== undefined;
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
 * Runs the tampering rules over a JavaScript or TypeScript file the safety analyser has
 * read, reporting into its {@link SourceFile}. Call it only for files that are not tests
 * (`isTestCode`).
 * @param src - the analysed file (its tree and text)
 * @param names - the analyser's name resolution for that file
 * @param ctx - the evaluation's names and what kind of file it is
 */
export function tamperJavaScript(src: SourceFile, names: JsNames, ctx: TamperContext): void {
  new JsTamper(src, names, ctx).run();
}
