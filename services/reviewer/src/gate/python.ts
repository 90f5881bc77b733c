/**
 * The gate's Python analyser: walks the `@lezer/python` syntax tree, resolves names
 * through the file's imports (`import os as o`, `from os import system as s`, `from os
 * import *`, `__import__("os")`, `getattr(os, "system")`) and reports dangerous calls.
 */
import type { SyntaxNode } from "@lezer/common";
import { parser } from "@lezer/python";
import { children, isBound, SourceFile, walk } from "./source.js";
import { danger, PyFlow, type Origin } from "./pyflow.js";
import { binding, enclosingFunction, parseArgs, patchForParser, type Args } from "./pysyntax.js";
import { isNetworkName, normaliseModule, readImport, type Scope } from "./pyimports.js";
import {
  isRootOrHomePath,
  PY_CODE_ESCAPES,
  PY_NETWORK_CALLS,
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
/** The evaluators that run code (`compile` only makes a code object, which one of these must run). */
const RUNS_CODE = new Set(["builtins.eval", "builtins.exec"]);
const IMPORT_LIKE = new Set(["builtins.__import__", "importlib.import_module", "importlib.__import__"]);
const DELETE_TREE = new Set(["shutil.rmtree", "os.removedirs"]);

/** True for the qualified names the gate watches (for names that a star import brings). */
function isWatchedName(q: string): boolean {
  return (
    PY_OS_COMMAND.test(q) ||
    PY_SHELL_ALWAYS.test(q) ||
    PY_UNSAFE_LOAD.test(q) ||
    isNetworkName(q) ||
    PY_NETWORK_CALLS.test(q)
  );
}

/** True for a module name that `__import__` must not be handed in disguise. */
function isSensitiveModule(name: string): boolean {
  const top = normaliseModule(name).split(".")[0] ?? "";
  return PY_SENSITIVE_MODULES.has(top) || top === "sys" || isNetworkName(normaliseModule(name));
}

/** Loads that take bytes (not a file): a round trip of the program's own `dumps` is harmless. */
const BYTES_LOAD = /^(pickle|_pickle|cPickle|dill|cloudpickle|marshal)\.loads$/;

/**
 * Builtins that a star import replaces: `from re import *` brings `re.compile`, which is
 * not the builtin `compile`.
 */
const STAR_SHADOWS: Readonly<Record<string, readonly string[]>> = { re: ["compile"], regex: ["compile"] };

/** How the tampering pass (pytamper.ts) reads names: the analyser's own resolution. */
export interface PyNames {
  /** The qualified name an expression refers to (`os._exit`, `builtins.eval`), if known. */
  resolve(node: SyntaxNode | null): string | undefined;
  /** True when `name` is bound by the file in a scope that encloses `node`. */
  isBound(name: string, node: SyntaxNode): boolean;
  /** Where the value of an expression comes from, traced within the file ({@link PyFlow.origin}). */
  origin(node: SyntaxNode): Origin;
}

/** Analyses one Python source (a file, or a string literal passed to `exec`). */
class PythonAnalyser implements PyNames {
  private readonly scope: Scope;
  /**
   * Names bound by `def`, `class`, a parameter or an assignment, per scope (the offset of
   * the function node, -1 for the module): they shadow a builtin of the same name in that
   * scope (`def run(cmd, exec=False)`), never an import.
   */
  private readonly bound = new Map<number, Set<string>>();
  /** Where computed values come from (built lazily, on the first question). */
  private readonly flow: PyFlow;

  constructor(
    private readonly src: SourceFile,
    inherited?: Scope,
  ) {
    this.scope = {
      aliases: new Map(inherited?.aliases ?? []),
      starModules: [...(inherited?.starModules ?? [])],
    };
    this.flow = new PyFlow({ src, resolve: (n) => this.resolve(n), isBound: (name, at) => this.isBound(name, at) });
  }

  run(): void {
    if (this.src.depth === 0) this.src.reportSyntaxError();
    // First pass: imports and definitions, wherever they are (a function may use a module
    // imported below it).
    walk(this.src.tree, (node) => {
      if (node.name === "ImportStatement") readImport(node, this.src, this.scope);
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

  /** True when `name` is bound by the file in a scope that encloses `node`. */
  isBound(name: string, node: SyntaxNode): boolean {
    return isBound(this.bound, name, node, enclosingFunction);
  }

  /** Where the value of `node` comes from, traced within the file. */
  origin(node: SyntaxNode): Origin {
    return this.flow.origin(node);
  }

  /** The qualified name an expression refers to (`os.system`, `builtins.eval`), if known. */
  resolve(node: SyntaxNode | null): string | undefined {
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

  /**
   * The value of a constant string expression, decoded: a plain (non-f) literal, adjacent
   * literals, a `+` of constant strings, or one in parentheses (`"o" + "s"` is `"os"`);
   * undefined for anything computed.
   */
  private literal(node: SyntaxNode | null): string | undefined {
    if (!node) return undefined;
    switch (node.name) {
      case "String": {
        const s = decodePyString(this.src.textOf(node), "code");
        return s.format ? undefined : s.value;
      }
      case "ContinuedString": {
        const parts = children(node).map((c) => this.literal(c));
        return parts.every((p) => p !== undefined) ? parts.join("") : undefined;
      }
      case "ParenthesizedExpression": {
        const inner = node.firstChild?.nextSibling ?? null;
        return inner?.nextSibling?.name === ")" ? this.literal(inner) : undefined;
      }
      case "BinaryExpression": {
        const [left, op, right] = children(node);
        if (!left || !op || !right || this.src.textOf(op) !== "+") return undefined;
        const l = this.literal(left);
        const r = l === undefined ? undefined : this.literal(right);
        return l === undefined || r === undefined ? undefined : l + r;
      }
      default:
        return undefined;
    }
  }

  /** A name that is dangerous whatever its arguments, called or passed as a value. */
  private checkReference(node: SyntaxNode): void {
    const parent = node.parent;
    if (!parent || parent.name === "ImportStatement") return;
    if (parent.name === "MemberExpression" && parent.firstChild?.from === node.from && parent.firstChild.to === node.to)
      return;
    if (node.nextSibling?.name === "AssignOp" || parent.name === "ParamList") return;
    if ((parent.name === "FunctionDefinition" || parent.name === "ClassDefinition") && node.name === "VariableName")
      return;
    const q = this.resolve(node);
    if (!q) return;
    const isCallee =
      parent.name === "CallExpression" && parent.firstChild?.from === node.from && parent.firstChild.to === node.to;
    if (PY_OS_COMMAND.test(q)) {
      const what = /^(os\.(system|popen\d?)|platform\.popen|commands\.)/.test(q)
        ? "runs a shell command"
        : "runs another program";
      this.src.report("os-command", node.from, `\`${q}\` ${what}`);
    } else if (PY_SHELL_ALWAYS.test(q))
      this.src.report("subprocess-shell", node.from, `\`${q}\` runs its command through a shell`);
    else if (PY_UNSAFE_LOAD.test(q)) {
      if (isCallee && BYTES_LOAD.test(q) && this.isRoundTrip(parent)) return;
      this.src.report("unsafe-deserialization", node.from, `\`${q}\` can run code hidden in the data it loads`);
    } else if (isNetworkName(q)) this.src.report("network", node.from, `\`${q}\` opens network connections`);
    else if (PY_NETWORK_CALLS.test(q)) {
      if (this.usesNetwork(node, q, isCallee))
        this.src.report("network", node.from, `\`${q}\` opens a network connection or resolves a name`);
    } else if (RUNS_CODE.has(q) && !isCallee) {
      this.src.report(
        "dynamic-eval",
        node.from,
        `\`${q.slice(9)}\` is handed on as a value, so the gate cannot see the string it will run`,
      );
    }
  }

  /**
   * True when a reference to a `socket` network name uses it: a call (but a socket of
   * family `AF_UNIX` is a local file), a subclass (its instances are sockets), or a
   * connecting function passed on or stored. Looking at it
   * (`isinstance`, `hasattr`, an annotation, an `except` clause) or using the socket class
   * as a value (a registry key) is not.
   */
  private usesNetwork(node: SyntaxNode, q: string, isCallee: boolean): boolean {
    if (isCallee && /\.socket$/.test(q)) {
      // `socket.socket(socket.AF_UNIX, …)`: a local socket file, not the network.
      const args = parseArgs(node.parent?.lastChild ?? null, this.src);
      return this.resolve(args.positional[0] ?? args.keywords.get("family") ?? null) !== "socket.AF_UNIX";
    }
    if (isCallee) return true;
    const parent = node.parent;
    if (!parent || parent.name === "TypeDef" || parent.name === "TryStatement") return false;
    const owner = parent.name === "ArgList" ? parent.parent : null;
    if (owner?.name === "ClassDefinition") return true;
    const callee = owner?.name === "CallExpression" ? owner.firstChild : null;
    if (callee?.name === "VariableName" && /^(isinstance|issubclass|hasattr|getattr)$/.test(this.src.textOf(callee)))
      return false;
    return !/\.(socket|SocketType)$/.test(q);
  }

  /** True when a `loads` call's data is only what the program itself serialised (`loads(dumps(x))`). */
  private isRoundTrip(call: SyntaxNode): boolean {
    const data = parseArgs(call.lastChild, this.src).positional[0];
    if (!data) return false;
    const o = this.flow.origin(data);
    return o.serialised && !o.unknown && o.external.length === 0 && o.decoded.length === 0 && o.material.length === 0;
  }

  private checkCall(node: SyntaxNode): void {
    const q = this.resolve(node.firstChild);
    if (!q) return;
    const args = parseArgs(node.lastChild, this.src);
    if (EVAL_LIKE.has(q)) return this.checkEval(q.slice(9), args.positional[0] ?? args.keywords.get("source"), node);
    if (IMPORT_LIKE.has(q)) {
      const name = args.positional[0] ?? args.keywords.get("name");
      const why =
        name && this.literal(name) === undefined ? danger(this.flow.origin(name), isSensitiveModule) : undefined;
      if (why)
        this.src.report("dynamic-import", node.from, `\`${q.replace("builtins.", "")}\` of a module name ${why}`);
      return;
    }
    if (q === "builtins.getattr") {
      const base = this.resolve(args.positional[0] ?? null);
      const top = base?.split(".")[0];
      const attr = args.positional[1];
      if (!base || !top || !PY_SENSITIVE_MODULES.has(top) || !attr || this.literal(attr) !== undefined) return;
      const why = danger(this.flow.origin(attr), (m) => this.isDangerousMember(`${base}.${m}`));
      if (why) this.src.report("dynamic-attribute", node.from, `\`getattr(${base}, …)\` with a name ${why}`);
      return;
    }
    if (q.startsWith("subprocess.")) return this.checkSubprocess(q, args, node);
    if (DELETE_TREE.has(q) && args.positional[0] && this.isRootOrHome(args.positional[0])) {
      this.src.report(
        "destructive-delete",
        node.from,
        `\`${q}\` on \`${this.src.textOf(args.positional[0])}\` deletes the root or home directory`,
      );
      return;
    }
    if (q === "yaml.load" || q === "yaml.load_all") {
      const loader = args.keywords.get("Loader") ?? args.positional[1];
      if (!loader || !/Safe|Base/.test(this.src.textOf(loader))) {
        this.src.report(
          "unsafe-deserialization",
          node.from,
          `\`${q}\` without a safe Loader can build arbitrary objects; use yaml.safe_load`,
        );
      }
    }
  }

  /** True when `base.member` is a name some rule watches (`os.system`, `builtins.eval`, `shutil.rmtree`). */
  private isDangerousMember(q: string): boolean {
    const n = normaliseModule(q);
    return isWatchedName(n) || EVAL_LIKE.has(n) || IMPORT_LIKE.has(n) || DELETE_TREE.has(n) || n === "builtins.getattr";
  }

  /**
   * `eval`/`exec`/`compile`: a constant string is analysed as code; a computed one given to
   * `eval`/`exec` blocks only when its origin says why (outside data, decoded, or pieces
   * that name a way out). A computed `compile` runs nothing: the `exec` of its code object
   * is checked, and the trace follows it back through `compile` to the source.
   */
  private checkEval(fn: string, arg: SyntaxNode | undefined, call: SyntaxNode): void {
    if (!arg) return;
    const code = this.literal(arg);
    if (code === undefined && fn === "compile") return;
    if (code === undefined) {
      const why = danger(this.flow.origin(arg), (w) => PY_CODE_ESCAPES.has(w));
      if (why)
        this.src.report(
          "dynamic-eval",
          call.from,
          `\`${fn}\` of a string ${why}: it can run code the gate cannot check`,
        );
      return;
    }
    if (this.src.depth >= MAX_DEPTH) return;
    const oneLine = this.src.oneLine || !this.src.textOf(arg).includes("\n");
    const patched = patchForParser(code);
    const inner = new SourceFile(
      this.src.path,
      patched,
      parser.parse(patched),
      this.src.lineAt(arg.from) - 1,
      this.src.depth + 1,
      oneLine,
    );
    new PythonAnalyser(inner, this.scope).run();
    this.src.findings.push(...inner.findings);
  }

  private checkSubprocess(q: string, args: Args, call: SyntaxNode): void {
    const shell = args.keywords.get("shell");
    if (shell && !["False", "None", "0"].includes(this.src.textOf(shell))) {
      this.src.report(
        "subprocess-shell",
        call.from,
        `\`${q}(…, shell=${this.src.textOf(shell)})\` runs its command through a shell`,
      );
    } else if (!shell && args.starStar) {
      this.src.report(
        "subprocess-shell",
        call.from,
        `\`${q}(…, **kwargs)\` may pass shell=True; pass the arguments explicitly`,
        "warning",
      );
    }
    const argv = args.positional[0] ?? args.keywords.get("args");
    if (argv && (argv.name === "ArrayExpression" || argv.name === "TupleExpression")) {
      const parts = children(argv)
        .filter((c) => !["[", "]", "(", ")", ","].includes(c.name))
        .map((c) => this.literal(c));
      if (parts.length > 0 && parts.every((p) => p !== undefined))
        this.src.scanString(parts.join(" "), () => argv.from);
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
    if (
      parent &&
      (parent.name === "ContinuedString" ||
        (parent.name === "BinaryExpression" && pyConstString(parent, this.src) !== undefined))
    ) {
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
 * Analyses one Python file and returns its source with the findings.
 * @param path - workspace-relative path, reported in findings
 * @param text - the file's content
 */
export function analysePython(path: string, text: string): SourceFile {
  return analysePythonNames(path, text).src;
}

/**
 * {@link analysePython}, also returning how the file's names resolve (after the analysis,
 * so every import and binding of the file is known), for the tampering pass.
 */
export function analysePythonNames(path: string, text: string): { src: SourceFile; names: PyNames } {
  const patched = patchForParser(text);
  const src = new SourceFile(path, patched, parser.parse(patched));
  const analyser = new PythonAnalyser(src);
  analyser.run();
  return { src, names: analyser };
}
