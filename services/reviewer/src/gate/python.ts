/**
 * The gate's Python analyser: walks the `@lezer/python` syntax tree, resolves names
 * through the file's imports (`import os as o`, `from os import system as s`, `from os
 * import *`, `__import__("os")`, `getattr(os, "system")`) and reports dangerous calls.
 */
import type { SyntaxNode } from "@lezer/common";
import { parser } from "@lezer/python";
import { children, isBound, SourceFile, walk } from "./source.js";
import {
  isRootOrHomePath,
  PY_MODULE_ALIASES,
  PY_NETWORK_MODULES,
  PY_OS_COMMAND,
  PY_SENSITIVE_MODULES,
  PY_SHELL_ALWAYS,
  PY_UNSAFE_LOAD,
  PY_WATCHED_BUILTINS,
} from "./rules.js";
import { decodePyString, pyConstString } from "./pystrings.js";

/** How many string literals deep `exec("…")` contents are analysed as code. */
const MAX_DEPTH = 2;

const EVAL_LIKE = new Set(["builtins.eval", "builtins.exec", "builtins.compile"]);
const IMPORT_LIKE = new Set(["builtins.__import__", "importlib.import_module", "importlib.__import__"]);
const DELETE_TREE = new Set(["shutil.rmtree", "os.removedirs"]);

/** Imports in scope: local name → qualified name, and modules imported with `*`. */
interface Scope {
  aliases: Map<string, string>;
  starModules: string[];
}

function normaliseModule(name: string): string {
  const [head, ...rest] = name.split(".");
  const canonical = PY_MODULE_ALIASES[head ?? ""] ?? head ?? "";
  return [canonical, ...rest].join(".");
}

function isNetworkName(q: string): boolean {
  return PY_NETWORK_MODULES.some((m) => q === m || q.startsWith(`${m}.`));
}

/** True for the qualified names that are dangerous whatever their arguments. */
function isWatchedName(q: string): boolean {
  return PY_OS_COMMAND.test(q) || PY_SHELL_ALWAYS.test(q) || PY_UNSAFE_LOAD.test(q) || isNetworkName(q);
}

/** Arguments of a call: positional expressions, keyword values, and whether `*`/`**` appear. */
interface Args {
  positional: SyntaxNode[];
  keywords: Map<string, SyntaxNode>;
  starStar: boolean;
}

function parseArgs(argList: SyntaxNode | null, src: SourceFile): Args {
  const args: Args = { positional: [], keywords: new Map(), starStar: false };
  if (!argList || argList.name !== "ArgList") return args;
  const kids = children(argList).filter((c) => !["(", ")", ","].includes(c.name));
  if (kids.some((c) => c.name === "for")) {
    if (kids[0]) args.positional.push(kids[0]);
    return args;
  }
  for (let i = 0; i < kids.length; i++) {
    const kid = kids[i]!;
    const next = kids[i + 1];
    if (kid.name === "**") {
      args.starStar = true;
      i++;
    } else if (kid.name === "*") {
      i++;
    } else if (kid.name === "VariableName" && next?.name === "AssignOp") {
      const value = kids[i + 2];
      if (value) args.keywords.set(src.textOf(kid), value);
      i += 2;
    } else {
      args.positional.push(kid);
    }
  }
  return args;
}

const FUNCTION_SCOPES = new Set(["FunctionDefinition", "LambdaExpression"]);

/** The function (`def` or `lambda`) a node is inside, or null at module level. */
function enclosingFunction(node: SyntaxNode): SyntaxNode | null {
  for (let p = node.parent; p; p = p.parent) if (FUNCTION_SCOPES.has(p.name)) return p;
  return null;
}

/**
 * The name a node binds and the scope it binds it in: `def f`/`class C` bind in the whole
 * file (kept simple: a function named like a builtin is the file's own), a parameter binds
 * in its function, `x = …` binds in the function (or module) it is in.
 * @returns `[name node, scope node or null for the module]`, or null when nothing is bound
 */
function binding(node: SyntaxNode): [SyntaxNode, SyntaxNode | null] | null {
  if (node.name === "FunctionDefinition" || node.name === "ClassDefinition") {
    const name = node.getChild("VariableName");
    return name ? [name, null] : null;
  }
  if (node.name !== "VariableName" || !node.parent) return null;
  if (node.parent.name === "ParamList" && node.prevSibling?.name !== "AssignOp" && node.parent.parent) {
    return [node, node.parent.parent];
  }
  const next = node.nextSibling?.name;
  if (node.parent.name === "AssignStatement" && (next === "AssignOp" || next === "TypeDef")) return [node, enclosingFunction(node)];
  return null;
}

/**
 * Builtins that a star import replaces: `from re import *` brings `re.compile`, which is
 * not the builtin `compile`.
 */
const STAR_SHADOWS: Readonly<Record<string, readonly string[]>> = { re: ["compile"], regex: ["compile"] };

/** Analyses one Python source (a file, or a string literal passed to `exec`). */
class PythonAnalyser {
  private readonly scope: Scope;
  /**
   * Names bound by `def`, `class`, a parameter or an assignment, per scope (the offset of
   * the function node, -1 for the module): they shadow a builtin of the same name in that
   * scope (`def run(cmd, exec=False)`), never an import.
   */
  private readonly bound = new Map<number, Set<string>>();

  constructor(
    private readonly src: SourceFile,
    inherited?: Scope,
  ) {
    this.scope = {
      aliases: new Map(inherited?.aliases ?? []),
      starModules: [...(inherited?.starModules ?? [])],
    };
  }

  run(): void {
    if (this.src.depth === 0) this.src.reportSyntaxError();
    // First pass: imports and definitions, wherever they are (a function may use a module
    // imported below it).
    walk(this.src.tree, (node) => {
      if (node.name === "ImportStatement") this.readImport(node);
      const bind = binding(node);
      if (bind) {
        const key = bind[1]?.from ?? -1;
        const names = this.bound.get(key) ?? new Set<string>();
        names.add(this.src.textOf(bind[0]));
        this.bound.set(key, names);
      }
    });
    walk(this.src.tree, (node) => {
      if (node.name === "CallExpression") this.checkCall(node);
      if (node.name === "VariableName" || node.name === "MemberExpression" || node.name === "CallExpression") {
        this.checkReference(node);
      }
      this.checkString(node);
    });
  }

  /** Records the names an import binds and reports network modules. */
  private readImport(node: SyntaxNode): void {
    const tokens = children(node).map((c) => ({ name: c.name, text: this.src.textOf(c), from: c.from }));
    const fromIdx = tokens.findIndex((t) => t.name === "from");
    const importIdx = tokens.findIndex((t) => t.name === "import");
    if (importIdx < 0) return;
    // Groups of `a.b.c [as d]` separated by commas.
    const groups: { dotted: string; alias?: string }[] = [];
    let current: { dotted: string; alias?: string } | undefined;
    for (const t of tokens.slice(importIdx + 1)) {
      if (t.name === "," || t.name === "(" || t.name === ")") {
        current = undefined;
      } else if (t.name === "*") {
        groups.push({ dotted: "*" });
      } else if (t.name === "as") {
        if (current) current.alias = "";
      } else if (t.name === "VariableName" && current?.alias === "") {
        current.alias = t.text;
      } else if (t.name === "VariableName" && current && current.dotted.endsWith(".")) {
        current.dotted += t.text;
      } else if (t.name === "VariableName") {
        current = { dotted: t.text };
        groups.push(current);
      } else if (t.name === "." && current) {
        current.dotted += ".";
      }
    }
    if (fromIdx >= 0) {
      const moduleTokens = tokens.slice(fromIdx + 1, importIdx);
      if (moduleTokens[0]?.name === ".") return; // a relative import: the task's own modules
      const mod = normaliseModule(moduleTokens.map((t) => t.text).join(""));
      for (const g of groups) {
        if (g.dotted === "*") {
          this.scope.starModules.push(mod);
          if (isNetworkName(mod)) this.src.report("network", node.from, `\`from ${mod} import *\` imports a network module`);
          continue;
        }
        const qualified = `${mod}.${g.dotted}`;
        this.scope.aliases.set(g.alias || g.dotted, qualified);
        if (isNetworkName(mod) || isNetworkName(qualified)) {
          this.src.report("network", node.from, `\`${isNetworkName(mod) ? mod : qualified}\` opens network connections`);
        }
      }
      return;
    }
    for (const g of groups) {
      const mod = normaliseModule(g.dotted);
      if (g.alias) this.scope.aliases.set(g.alias, mod);
      else {
        const head = g.dotted.split(".")[0]!;
        this.scope.aliases.set(head, normaliseModule(head));
      }
      if (isNetworkName(mod)) this.src.report("network", node.from, `\`import ${g.dotted}\`: \`${mod}\` opens network connections`);
    }
  }

  /** True when `name` is bound by the file in a scope that encloses `node`. */
  private isBound(name: string, node: SyntaxNode): boolean {
    return isBound(this.bound, name, node, enclosingFunction);
  }

  /** The qualified name an expression refers to (`os.system`, `builtins.eval`), if known. */
  private resolve(node: SyntaxNode | null): string | undefined {
    if (!node) return undefined;
    switch (node.name) {
      case "VariableName": {
        const name = this.src.textOf(node);
        const alias = this.scope.aliases.get(name);
        if (alias) return alias;
        if (this.isBound(name, node)) return undefined;
        for (const mod of this.scope.starModules) {
          if (isWatchedName(`${mod}.${name}`) || STAR_SHADOWS[mod]?.includes(name)) return `${mod}.${name}`;
        }
        if (PY_WATCHED_BUILTINS.has(name)) return `builtins.${name}`;
        return name === "__builtins__" ? "builtins" : undefined;
      }
      case "ParenthesizedExpression":
        return this.resolve(node.firstChild?.nextSibling ?? null);
      case "MemberExpression": {
        const base = this.resolve(node.firstChild);
        if (!base) return undefined;
        const prop = node.getChild("PropertyName");
        const key = prop ? this.src.textOf(prop) : this.literal(node.firstChild?.nextSibling?.nextSibling ?? null);
        if (key === undefined) return undefined;
        return key === "__dict__" ? base : normaliseModule(`${base}.${key}`);
      }
      case "CallExpression": {
        const callee = this.resolve(node.firstChild);
        const args = parseArgs(node.lastChild, this.src);
        if (callee && IMPORT_LIKE.has(callee)) {
          const name = this.literal(args.positional[0] ?? args.keywords.get("name") ?? null);
          return name === undefined ? undefined : normaliseModule(name);
        }
        if (callee === "builtins.getattr") {
          const base = this.resolve(args.positional[0] ?? null);
          const attr = this.literal(args.positional[1] ?? null);
          return base && attr !== undefined ? normaliseModule(`${base}.${attr}`) : undefined;
        }
        return undefined;
      }
      default:
        return undefined;
    }
  }

  /** The value of a plain (non-f) string literal, decoded; undefined for anything else. */
  private literal(node: SyntaxNode | null): string | undefined {
    if (!node) return undefined;
    if (node.name === "String") {
      const s = decodePyString(this.src.textOf(node), "code");
      return s.format ? undefined : s.value;
    }
    if (node.name === "ContinuedString") {
      const parts = children(node).map((c) => this.literal(c));
      return parts.every((p) => p !== undefined) ? parts.join("") : undefined;
    }
    return undefined;
  }

  /** A name that is dangerous whatever its arguments, called or passed as a value. */
  private checkReference(node: SyntaxNode): void {
    const parent = node.parent;
    if (!parent || parent.name === "ImportStatement") return;
    if (parent.name === "MemberExpression" && parent.firstChild?.from === node.from && parent.firstChild.to === node.to) return;
    if (node.nextSibling?.name === "AssignOp" || parent.name === "ParamList") return;
    if ((parent.name === "FunctionDefinition" || parent.name === "ClassDefinition") && node.name === "VariableName") return;
    const q = this.resolve(node);
    if (!q) return;
    const isCallee = parent.name === "CallExpression" && parent.firstChild?.from === node.from && parent.firstChild.to === node.to;
    if (PY_OS_COMMAND.test(q)) this.src.report("os-command", node.from, `\`${q}\` runs a shell command`);
    else if (PY_SHELL_ALWAYS.test(q)) this.src.report("subprocess-shell", node.from, `\`${q}\` runs its command through a shell`);
    else if (PY_UNSAFE_LOAD.test(q)) {
      this.src.report("unsafe-deserialization", node.from, `\`${q}\` can run code hidden in the data it loads`);
    } else if (isNetworkName(q)) this.src.report("network", node.from, `\`${q}\` opens network connections`);
    else if (EVAL_LIKE.has(q) && !isCallee) {
      this.src.report("dynamic-eval", node.from, `\`${q.slice(9)}\` is used as a value, so it may run any string`);
    }
  }

  private checkCall(node: SyntaxNode): void {
    const q = this.resolve(node.firstChild);
    if (!q) return;
    const args = parseArgs(node.lastChild, this.src);
    if (EVAL_LIKE.has(q)) return this.checkEval(q.slice(9), args.positional[0] ?? args.keywords.get("source"), node);
    if (IMPORT_LIKE.has(q)) {
      const name = args.positional[0] ?? args.keywords.get("name");
      if (name && this.literal(name) === undefined) {
        this.src.report("dynamic-import", node.from, `\`${q.replace("builtins.", "")}\` imports a module whose name is computed at run time`);
      }
      return;
    }
    if (q === "builtins.getattr") {
      const base = this.resolve(args.positional[0] ?? null);
      const top = base?.split(".")[0];
      if (top && PY_SENSITIVE_MODULES.has(top) && args.positional[1] && this.literal(args.positional[1]) === undefined) {
        this.src.report("dynamic-attribute", node.from, `\`getattr(${base}, …)\` fetches an attribute of \`${top}\` by a computed name`);
      }
      return;
    }
    if (q.startsWith("subprocess.")) return this.checkSubprocess(q, args, node);
    if (DELETE_TREE.has(q) && args.positional[0] && this.isRootOrHome(args.positional[0])) {
      this.src.report("destructive-delete", node.from, `\`${q}\` on \`${this.src.textOf(args.positional[0])}\` deletes the root or home directory`);
      return;
    }
    if (q === "yaml.load" || q === "yaml.load_all") {
      const loader = args.keywords.get("Loader") ?? args.positional[1];
      if (!loader || !/Safe|Base/.test(this.src.textOf(loader))) {
        this.src.report("unsafe-deserialization", node.from, `\`${q}\` without a safe Loader can build arbitrary objects; use yaml.safe_load`);
      }
    }
  }

  private checkEval(fn: string, arg: SyntaxNode | undefined, call: SyntaxNode): void {
    if (!arg) return;
    const code = this.literal(arg);
    if (code === undefined) {
      this.src.report("dynamic-eval", call.from, `\`${fn}\` of a computed string can run any code; only string literals are allowed`);
      return;
    }
    if (this.src.depth >= MAX_DEPTH) return;
    const oneLine = this.src.oneLine || !this.src.textOf(arg).includes("\n");
    const patched = patchForParser(code);
    const inner = new SourceFile(this.src.path, patched, parser.parse(patched), this.src.lineAt(arg.from) - 1, this.src.depth + 1, oneLine);
    new PythonAnalyser(inner, this.scope).run();
    this.src.findings.push(...inner.findings);
  }

  private checkSubprocess(q: string, args: Args, call: SyntaxNode): void {
    const shell = args.keywords.get("shell");
    if (shell && !["False", "None", "0"].includes(this.src.textOf(shell))) {
      this.src.report("subprocess-shell", call.from, `\`${q}(…, shell=${this.src.textOf(shell)})\` runs its command through a shell`);
    } else if (!shell && args.starStar) {
      this.src.report("subprocess-shell", call.from, `\`${q}(…, **kwargs)\` may pass shell=True; pass the arguments explicitly`, "warning");
    }
    const argv = args.positional[0] ?? args.keywords.get("args");
    if (argv && (argv.name === "ArrayExpression" || argv.name === "TupleExpression")) {
      const parts = children(argv)
        .filter((c) => !["[", "]", "(", ")", ","].includes(c.name))
        .map((c) => this.literal(c));
      if (parts.length > 0 && parts.every((p) => p !== undefined)) this.src.scanString(parts.join(" "), () => argv.from);
    }
  }

  /** `"/"`, `"~"`, `os.path.expanduser("~")`, `Path.home()`, `Path("/")`, `os.environ["HOME"]`, `os.sep`. */
  private isRootOrHome(node: SyntaxNode): boolean {
    const lit = this.literal(node);
    if (lit !== undefined) return isRootOrHomePath(lit);
    const q = this.resolve(node.name === "CallExpression" ? node.firstChild : node);
    const text = this.src.textOf(node).replace(/\s+/g, "");
    if (q === "os.sep" || /(^|\.)Path\.home\(\)$/.test(text) || /(^|\.)getenv\(["']HOME["']\)$/.test(text)) return true;
    if (/environ(\[["']HOME["']\]|\.get\(["']HOME["']\))$/.test(text)) return true;
    if (node.name === "CallExpression") {
      const args = parseArgs(node.lastChild, this.src);
      const first = args.positional[0];
      const callee = this.src.textOf(node.firstChild!);
      if (first && /(^|\.)(expanduser|abspath|realpath|Path|str)$/.test(callee)) return this.isRootOrHome(first);
    }
    return false;
  }

  /** Strings (and constant concatenations of them) that contain shell commands. */
  private checkString(node: SyntaxNode): void {
    if (!["String", "FormatString", "ContinuedString", "BinaryExpression"].includes(node.name)) return;
    const parent = node.parent;
    if (parent && (parent.name === "ContinuedString" || (parent.name === "BinaryExpression" && pyConstString(parent, this.src) !== undefined))) {
      return;
    }
    if (node.name === "String" || node.name === "FormatString") {
      const s = decodePyString(this.src.textOf(node), "scan");
      this.src.scanString(s.value, (i) => node.from + s.start + i);
      return;
    }
    const folded = pyConstString(node, this.src);
    if (folded !== undefined) this.src.scanString(folded, () => node.from);
  }
}

/**
 * Works around three gaps of `@lezer/python` 1.1 that make valid code look like a syntax
 * error (found by parsing CPython 3.11's own library): a bare `yield` (pytest fixtures,
 * context managers), a float with a trailing dot (`24.`), and a form feed between
 * definitions. Each replacement has the same length as what it replaces (`yield` → `_y_()`,
 * `24.` → `24 `, form feed → space), so every offset and line stays exact; none of them
 * changes what the gate looks for.
 */
export function patchForParser(text: string): string {
  return text
    .replace(/\f/g, " ")
    .replace(/\byield\b(?=[ \t]*(?:[)\]},;#\r\n]|$))/g, "_y_()")
    .replace(/(?<![\w.])(\d+)\.(?![\w.])/g, "$1 ");
}

/**
 * Analyses one Python file and returns its source with the findings.
 * @param path - workspace-relative path, reported in findings
 * @param text - the file's content
 */
export function analysePython(path: string, text: string): SourceFile {
  const patched = patchForParser(text);
  const src = new SourceFile(path, patched, parser.parse(patched));
  new PythonAnalyser(src).run();
  return src;
}
