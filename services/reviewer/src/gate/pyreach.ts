/**
 * The targeted flips in Python (docs/GATE.md "Evaluation tampering"): code under test that
 * reaches past its own objects to change one test. It swaps a test function's code
 * (`tampering.code_swap`), reaches `sys.modules` or a function's internals through a name it
 * assembles (`tampering.hidden_name`), starts a thread at import that acts after the tests are
 * collected (`tampering.import_thread`), or walks the interpreter's objects and frames
 * (`tampering.object_walk`). Part of the tampering pass (`pytamper.ts`), which owns the
 * file's context and decides what runs at import.
 */
import type { SyntaxNode } from "@lezer/common";
import { assignedMembers, parseArgs } from "./pysyntax.js";
import type { PyNames } from "./python.js";
import { decodePyString } from "./pystrings.js";
import { children, walk, type SourceFile } from "./source.js";
import { reportTamper, type TamperContext, type TamperRule } from "./tampering.js";

/** A function's internals, and whether a write to each is the clear case (blocks) or goes to review. */
const FUNCTION_INTERNALS: ReadonlyMap<string, boolean> = new Map([
  ["__code__", true],
  ["__globals__", true],
  ["__closure__", true],
  ["__defaults__", false],
  ["__kwdefaults__", false],
]);
/** Methods that change a dict in place (`f.__globals__.update(…)`). */
const DICT_MUTATORS = new Set(["update", "setdefault", "__setitem__", "__delitem__", "pop", "popitem", "clear"]);
/** Modules an assembled import name must not spell (a dotted name counts by its first part). */
const HIDDEN_MODULES = new Set([
  "sys",
  "gc",
  "inspect",
  "builtins",
  "__builtin__",
  "threading",
  "_thread",
  "ctypes",
  "importlib",
  "pytest",
  "_pytest",
  "unittest",
  "doctest",
  "loopsmith_verdict",
]);
/** Attributes an assembled `getattr`/`setattr`/`hasattr`/subscript name must not spell. */
const HIDDEN_ATTRIBUTES = new Set([
  "modules",
  ...FUNCTION_INTERNALS.keys(),
  "__builtins__",
  "__import__",
  "import_module",
  "_getframe",
  "_current_frames",
  "currentframe",
  "stack",
  "getouterframes",
  "f_back",
  "f_globals",
  "f_locals",
  "get_objects",
  "get_referrers",
  "get_referents",
  "settrace",
  "setprofile",
  "start_new_thread",
  "_exit",
  "exit",
]);
/** Calls that take a name argument, and where it is. */
const NAMED_CALLS: ReadonlyMap<string, { at: number; what: "module" | "attribute" }> = new Map([
  ["builtins.__import__", { at: 0, what: "module" }],
  ["importlib.import_module", { at: 0, what: "module" }],
  ["importlib.__import__", { at: 0, what: "module" }],
  ["builtins.getattr", { at: 1, what: "attribute" }],
  ["builtins.setattr", { at: 1, what: "attribute" }],
  ["builtins.delattr", { at: 1, what: "attribute" }],
  ["builtins.hasattr", { at: 1, what: "attribute" }],
]);
/** Thread classes: their `.start()` at import starts code that runs beside the tests. */
const THREAD_CLASSES = new Set(["threading.Thread", "threading.Timer", "multiprocessing.dummy.Process"]);
/** Calls that start a thread at once. */
const THREAD_STARTERS = new Set(["_thread.start_new_thread", "_thread.start_new", "threading._start_new_thread"]);
/** Walks of every object the interpreter holds, and hooks that see every frame: block at import. */
const OBJECT_WALKS =
  /^(gc\.(get_objects|get_referrers|get_referents)|sys\.(settrace|setprofile)|threading\.(settrace|setprofile|settrace_all_threads|setprofile_all_threads))$/;
/** Frame walks: from a frame, code reaches its callers' globals (review). */
const FRAME_WALKS = /^(sys\.(_getframe|_current_frames)|inspect\.(currentframe|stack|getouterframes|trace))$/;
/** Builtins this pass reads when the file does not bind them. */
const BARE_BUILTINS = new Set(["getattr", "setattr", "delattr", "hasattr"]);

/** What the tampering pass lends this one: where code runs, and the file's name resolution. */
export interface ReachContext {
  readonly src: SourceFile;
  readonly names: PyNames;
  readonly ctx: TamperContext;
  /** How `node` runs when the module is imported (`"module"`, a description), or undefined. */
  atImport(node: SyntaxNode): string | undefined;
  /** True when `node` runs only when the file is the main program. */
  guarded(node: SyntaxNode): boolean;
}

/** The value of an expression made only of plain string literals joined (`"s" + "ys"`, `"mod" "ules"`); undefined for one literal or anything else. */
function assembledString(node: SyntaxNode, src: SourceFile): string | undefined {
  const value = (n: SyntaxNode): string | undefined => {
    switch (n.name) {
      case "String": {
        const s = decodePyString(src.textOf(n), "code");
        return s.format ? undefined : s.value;
      }
      case "ContinuedString": {
        const parts = children(n).map(value);
        return parts.every((p) => p !== undefined) ? parts.join("") : undefined;
      }
      case "ParenthesizedExpression": {
        const inner = n.firstChild?.nextSibling;
        return inner && inner.nextSibling?.name === ")" ? value(inner) : undefined;
      }
      case "BinaryExpression": {
        const [left, op, right] = children(n);
        if (!left || !op || !right || src.textOf(op) !== "+") return undefined;
        const l = value(left);
        const r = l === undefined ? undefined : value(right);
        return l === undefined || r === undefined ? undefined : l + r;
      }
      default:
        return undefined;
    }
  };
  let n = node;
  while (n.name === "ParenthesizedExpression" && n.firstChild?.nextSibling) n = n.firstChild.nextSibling;
  return n.name === "String" ? undefined : value(node);
}

/** True for a plain (not f-) string literal. */
function isPlainString(node: SyntaxNode, src: SourceFile): boolean {
  return node.name === "String" && !decodePyString(src.textOf(node), "code").format;
}

/** The property a member expression names (`f.__code__` → `__code__`), or undefined for a subscript. */
function propertyOf(node: SyntaxNode, src: SourceFile): string | undefined {
  const prop = node.name === "MemberExpression" ? node.getChild("PropertyName") : null;
  return prop ? src.textOf(prop) : undefined;
}

/** The first function internal named along a member chain (`f.__globals__["x"]` → `__globals__`). */
function internalAlong(node: SyntaxNode, src: SourceFile): string | undefined {
  for (let t: SyntaxNode | null = node; t?.name === "MemberExpression"; t = t.firstChild) {
    const prop = propertyOf(t, src);
    if (prop && FUNCTION_INTERNALS.has(prop)) return prop;
  }
  return undefined;
}

/** The targeted-flip rules over one Python file (see the module's comment). */
export class PyReach {
  /** Module-level classes that subclass a thread class. */
  private readonly threadClasses = new Set<string>();
  /** Names assigned a new thread somewhere in the file (`t = threading.Thread(…)`). */
  private readonly threadNames = new Set<string>();

  constructor(private readonly r: ReachContext) {}

  /** Reads the file's thread classes and thread variables; call once before {@link visit}. */
  prepare(): void {
    for (const stmt of children(this.r.src.tree.topNode)) {
      const cls = stmt.name === "DecoratedStatement" ? stmt.getChild("ClassDefinition") : stmt;
      if (cls?.name !== "ClassDefinition") continue;
      const name = cls.getChild("VariableName");
      const bases = cls.getChild("ArgList");
      if (name && bases && children(bases).some((b) => THREAD_CLASSES.has(this.r.names.resolve(b) ?? "")))
        this.threadClasses.add(this.r.src.textOf(name));
    }
    walk(this.r.src.tree, (n) => {
      if (n.name !== "AssignStatement") return;
      const kids = children(n);
      const value = kids.at(-1);
      const target = kids[0];
      if (value && target?.name === "VariableName" && kids[1]?.name === "AssignOp" && this.createsThread(value))
        this.threadNames.add(this.r.src.textOf(target));
    });
  }

  /** Checks one node of the walk. */
  visit(n: SyntaxNode): void {
    switch (n.name) {
      case "CallExpression":
        this.checkCall(n);
        break;
      case "AssignStatement":
      case "UpdateStatement":
      case "DeleteStatement":
        for (const t of assignedMembers(n)) this.checkWrite(t, n);
        break;
      case "MemberExpression":
        this.checkSubscript(n);
        this.checkWalk(n);
        break;
      case "VariableName":
        if (n.parent?.name !== "ImportStatement") this.checkWalk(n);
        break;
    }
  }

  private report(rule: TamperRule, node: SyntaxNode, message: string, sure: boolean): void {
    reportTamper(this.r.src, rule, node.from, message, sure);
  }

  /** Sure only outside test-support files (helpers under `tests/` may do this for the tests). */
  private sure(): boolean {
    return !this.r.ctx.testSupport;
  }

  /** Sure when it runs at import, outside scripts and test support. */
  private sureAtImport(via: string | undefined): boolean {
    return via !== undefined && !this.r.ctx.script && this.sure();
  }

  private where(via: string): string {
    return via === "module" ? "at module level" : `in ${via}`;
  }

  /** A callee's qualified name, with the builtins the safety analyser does not resolve. */
  private name(node: SyntaxNode | null | undefined): string | undefined {
    if (!node) return undefined;
    const q = this.r.names.resolve(node);
    if (q) return q;
    if (node.name === "MemberExpression") {
      const base = node.firstChild;
      const text = this.r.src.textOf(node).replace(/\s+/g, "");
      if (base?.name === "VariableName" && text === "object.__setattr__" && !this.r.names.isBound("object", base))
        return "builtins.setattr";
      return undefined;
    }
    if (node.name !== "VariableName") return undefined;
    const text = this.r.src.textOf(node);
    return BARE_BUILTINS.has(text) && !this.r.names.isBound(text, node) ? `builtins.${text}` : undefined;
  }

  /**
   * What a name argument that is not a plain literal spells: the watched name its pieces
   * make (a constant concatenation, or the pieces the trace found it built from, joined; a
   * single literal passed through a variable is written plainly, so it hides nothing), and
   * whether it is a concatenation of constants at all.
   */
  private spelled(arg: SyntaxNode, what: "module" | "attribute"): { hit?: string; assembled: boolean } {
    const watched = (w: string): boolean => {
      const word = w.trim();
      return what === "module" ? HIDDEN_MODULES.has(word.split(".")[0] ?? "") : HIDDEN_ATTRIBUTES.has(word);
    };
    const constant = assembledString(arg, this.r.src);
    if (constant !== undefined) return { assembled: true, ...(watched(constant) ? { hit: constant.trim() } : {}) };
    const origin = this.r.names.origin(arg);
    const joined = origin.material.join("").trim();
    const hit = origin.material.filter(Boolean).length >= 2 && watched(joined) ? joined : undefined;
    return { assembled: false, ...(hit !== undefined ? { hit } : {}) };
  }

  private checkCall(n: SyntaxNode): void {
    const q = this.name(n.firstChild);
    const args = parseArgs(n.lastChild, this.r.src);
    const named = q ? NAMED_CALLS.get(q) : undefined;
    if (q && named) this.checkNamed(n, q, named, args.positional[named.at] ?? args.keywords.get("name"));
    this.checkDictMutation(n);
    this.checkThread(n, q);
  }

  /** `setattr(f, "__code__", …)` (a code swap), and imports or attributes whose name is assembled (hidden). */
  private checkNamed(
    n: SyntaxNode,
    q: string,
    named: { at: number; what: "module" | "attribute" },
    arg: SyntaxNode | undefined,
  ): void {
    if (!arg) return;
    const fn = /__setattr__/.test(this.r.src.textOf(n.firstChild!))
      ? "object.__setattr__"
      : q.replace(/^builtins\./, "");
    const plain = isPlainString(arg, this.r.src);
    const spelled = plain ? { assembled: false } : this.spelled(arg, named.what);
    const attr = plain ? decodePyString(this.r.src.textOf(arg), "code").value : spelled.hit;
    if ((q === "builtins.setattr" || q === "builtins.delattr") && attr !== undefined && FUNCTION_INTERNALS.has(attr)) {
      const target = parseArgs(n.lastChild, this.r.src).positional[0];
      const call = `${fn}(${target ? this.r.src.textOf(target).slice(0, 40) : "…"}, ${this.r.src.textOf(arg).slice(0, 40)}, …)`;
      this.report(
        "tampering.code_swap",
        n,
        `\`${call}\`${plain ? "" : ` (the name spells \`${attr}\`)`} replaces a function's \`${attr}\` from outside it: the function then runs another body or sees other names (a failing test made to pass)`,
        (FUNCTION_INTERNALS.get(attr) ?? false) && this.sure(),
      );
      return;
    }
    if (plain) return;
    if (spelled.hit !== undefined)
      this.report(
        "tampering.hidden_name",
        n,
        named.what === "module"
          ? `\`${fn}\` of a module name assembled from pieces that spell \`${spelled.hit}\`: a hidden way to \`${spelled.hit}\`${spelled.hit === "sys" ? " and `sys.modules`, every loaded module (the tests included)" : ""}`
          : `\`${fn}\` with a name assembled from pieces that spell \`${spelled.hit}\`: a hidden way to ${spelled.hit === "modules" ? "`sys.modules`, every loaded module (the tests included)" : `\`${spelled.hit}\``}`,
        this.sure(),
      );
    else if (spelled.assembled)
      this.report(
        "tampering.hidden_name",
        n,
        `\`${fn}\` with a name assembled from string constants (\`${this.r.src.textOf(arg).slice(0, 60)}\`): the usual way to hide a name from a reader; check what it names`,
        false,
      );
  }

  /** `f.__globals__.update(…)`, `f.__kwdefaults__.setdefault(…)`: a code swap by mutation. */
  private checkDictMutation(n: SyntaxNode): void {
    const callee = n.firstChild;
    const method = callee ? propertyOf(callee, this.r.src) : undefined;
    if (!callee || !method || !DICT_MUTATORS.has(method) || !callee.firstChild) return;
    const internal = internalAlong(callee.firstChild, this.r.src);
    if (internal)
      this.report(
        "tampering.code_swap",
        n,
        `\`….${internal}.${method}(…)\` changes a function's \`${internal}\` from outside it: what the function sees (a test's names) is swapped`,
        (FUNCTION_INTERNALS.get(internal) ?? false) && this.sure(),
      );
  }

  /** `f.__code__ = …`, `f.__globals__[k] = …`, `f.__closure__[0].cell_contents = …`, `del f.__globals__[k]`. */
  private checkWrite(t: SyntaxNode, stmt: SyntaxNode): void {
    const internal = internalAlong(t, this.r.src);
    if (!internal) return;
    const how = stmt.name === "DeleteStatement" ? "deletes from" : "assigns";
    this.report(
      "tampering.code_swap",
      t,
      `${how} \`${this.r.src.textOf(t).slice(0, 80)}\`: replaces a function's \`${internal}\` from outside it, so the function runs another body or sees other names (a failing test made to pass)`,
      (FUNCTION_INTERNALS.get(internal) ?? false) && this.sure(),
    );
  }

  /** `x["mod" + "ules"]`: a subscript whose key is assembled to spell a watched name. */
  private checkSubscript(n: SyntaxNode): void {
    const open = n.getChild("[");
    const key = open?.nextSibling;
    if (!key || key.name === "]" || isPlainString(key, this.r.src)) return;
    const constant = assembledString(key, this.r.src);
    if (constant !== undefined && HIDDEN_ATTRIBUTES.has(constant.trim()))
      this.report(
        "tampering.hidden_name",
        n,
        `a subscript with a key assembled from pieces that spell \`${constant.trim()}\`: a hidden way to ${constant.trim() === "modules" ? "`sys.modules`" : `\`${constant.trim()}\``}`,
        this.sure(),
      );
  }

  /** True for a call that makes a thread (`threading.Thread(…)`, a subclass of it). */
  private createsThread(node: SyntaxNode): boolean {
    if (node.name !== "CallExpression") return false;
    const callee = node.firstChild;
    const q = this.r.names.resolve(callee);
    if (q && THREAD_CLASSES.has(q)) return true;
    return callee?.name === "VariableName" && this.threadClasses.has(this.r.src.textOf(callee));
  }

  /** A thread started when the module is imported: `threading.Thread(…).start()`, `t.start()`, `_thread.start_new_thread`. */
  private checkThread(n: SyntaxNode, q: string | undefined): void {
    let what: string | undefined;
    if (q && THREAD_STARTERS.has(q)) what = `\`${q}\``;
    else {
      const callee = n.firstChild;
      const receiver = callee?.name === "MemberExpression" ? callee.firstChild : null;
      if (!receiver || propertyOf(callee!, this.r.src) !== "start") return;
      if (this.createsThread(receiver)) what = `\`${this.r.src.textOf(receiver.firstChild!)}(…).start()\``;
      else if (receiver.name === "VariableName" && this.threadNames.has(this.r.src.textOf(receiver)))
        what = `\`${this.r.src.textOf(receiver)}.start()\` of a thread`;
    }
    if (!what || this.r.guarded(n)) return;
    const via = this.r.atImport(n);
    if (via)
      this.report(
        "tampering.import_thread",
        n,
        `${what} ${this.where(via)}: a thread started when the module is imported keeps running beside the tests and can change them after they are collected; check what it does`,
        false,
      );
  }

  /** `gc.get_objects`, trace hooks (block at import, else review) and frame walks (review). */
  private checkWalk(n: SyntaxNode): void {
    const p = n.parent;
    if (p?.name === "MemberExpression" && p.firstChild?.from === n.from && p.firstChild.to === n.to) return;
    const q = this.r.names.resolve(n);
    if (!q) return;
    if (OBJECT_WALKS.test(q)) {
      if (this.r.guarded(n)) return;
      const via = this.r.atImport(n);
      const what = q.startsWith("gc.")
        ? "walks every object the interpreter holds (other modules' functions, the tests' included)"
        : "installs a hook that sees every function call (the tests' included)";
      this.report(
        "tampering.object_walk",
        n,
        via
          ? `\`${q}\` ${this.where(via)}: ${what} when the module is imported`
          : `\`${q}\` in a function: ${what}; check why code under test needs it`,
        this.sureAtImport(via),
      );
    } else if (FRAME_WALKS.test(q)) {
      this.report(
        "tampering.object_walk",
        n,
        `\`${q}\` reaches the frames of its callers, and through them their globals (a test's included); check what it does with them`,
        false,
      );
    }
  }
}
