/**
 * The gate's JavaScript/TypeScript analyser: walks the `@lezer/javascript` syntax tree
 * (dialect `ts` for TypeScript), resolves names through imports and `require`
 * (`import * as cp from "child_process"`, `const { rmSync: r } = require("node:fs")`,
 * `const f = globalThis.fetch`) and reports dangerous modules and calls.
 */
import type { SyntaxNode } from "@lezer/common";
import { parser } from "@lezer/javascript";
import { children, isBound, SourceFile, walk } from "./source.js";
import { isRootOrHomePath, JS_NETWORK_GLOBALS, JS_NETWORK_MODULES, JS_PROCESS_MODULES } from "./rules.js";

/** The dialects of `@lezer/javascript` this gate uses. */
export type JsDialect = "" | "jsx" | "ts" | "ts jsx";

/** How many string literals deep `eval("…")` contents are analysed as code. */
const MAX_DEPTH = 2;

/** Names that stand for the global object. */
const GLOBAL_OBJECTS = new Set(["globalThis", "window", "global", "self"]);
/** Globals the gate resolves by name when the file does not define them. */
const WATCHED_GLOBALS = new Set(["eval", "Function", "require", "process", "module", ...JS_NETWORK_GLOBALS]);
const VM_EVAL = /^vm\.(runInThisContext|runInNewContext|runInContext|compileFunction|Script)$/;
const FS_DELETE = /^fs\.(rm|rmSync|rmdir|rmdirSync)$/;
const NATIVE = new Set(["process.binding", "process._linkedBinding", "process.dlopen"]);

const ESCAPES: Readonly<Record<string, string>> = {
  n: "\n",
  t: "\t",
  r: "\r",
  "0": "\0",
  b: "\b",
  f: "\f",
  v: "\v",
  "\n": "",
};

/**
 * The content of a JS string or template literal. Mode `scan` keeps the length (escaped
 * newlines become `; `) so an index maps back to the source; mode `code` decodes escapes.
 */
function decodeJsString(text: string, mode: "code" | "scan"): string {
  const inner = text.length >= 2 ? text.slice(1, -1) : "";
  if (mode === "scan") return inner.replace(/\\[nr]/g, "; ").replace(/\\t/g, "  ");
  return inner.replace(/\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[\s\S])/g, (m, e: string) =>
    /^[xu]./.test(e) ? String.fromCharCode(parseInt(e.slice(1), 16)) : (ESCAPES[e] ?? e),
  );
}

/** `node:fs` → `fs`, `fs/promises` → `fs`, `axios/lib/x` → `axios`, `@scope/pkg/x` → `@scope/pkg`. */
function normaliseModule(spec: string): string {
  const bare = spec.replace(/^node:/, "");
  const parts = bare.split("/");
  return bare.startsWith("@") ? parts.slice(0, 2).join("/") : (parts[0] ?? bare);
}

function same(a: SyntaxNode | null | undefined, b: SyntaxNode): boolean {
  return !!a && a.from === b.from && a.to === b.to && a.name === b.name;
}

function argsOf(call: SyntaxNode): SyntaxNode[] {
  const list = call.getChild("ArgList");
  return list ? children(list).filter((c) => !["(", ")", ","].includes(c.name)) : [];
}

const FUNCTION_SCOPES = new Set(["FunctionDeclaration", "FunctionExpression", "ArrowFunction", "MethodDeclaration"]);

/** The function a node is inside, or null at module level. */
function enclosingFunction(node: SyntaxNode): SyntaxNode | null {
  for (let p = node.parent; p; p = p.parent) if (FUNCTION_SCOPES.has(p.name)) return p;
  return null;
}

/**
 * The scope a `VariableDefinition` binds in (null for the module): a parameter binds in its
 * function, a function or class declaration's own name in the scope around it, anything
 * else in the function it is in (block scopes are treated as their function's).
 */
function bindingScope(def: SyntaxNode): SyntaxNode | null {
  const parent = def.parent;
  if (parent?.name === "ParamList" && parent.parent) return parent.parent;
  if (parent && (parent.name === "FunctionDeclaration" || parent.name === "ClassDeclaration"))
    return enclosingFunction(parent);
  return enclosingFunction(def);
}

/** How the tampering pass (jstamper.ts) reads names: the analyser's own resolution. */
export interface JsNames {
  /** The module or qualified name an expression refers to (`process.exit`, `assert.strictEqual`), if known. */
  resolve(node: SyntaxNode | null): string | undefined;
  /** True when `name` is bound by the file in a scope that encloses `node`. */
  isBound(name: string, node: SyntaxNode): boolean;
  /** The value of a string, a template without `${…}`, or a constant `+` of them (escapes kept as written); undefined otherwise. */
  constString(node: SyntaxNode): string | undefined;
}

/** Analyses one JS/TS source (a file, or a string literal passed to `eval`). */
class JsAnalyser implements JsNames {
  private readonly aliases: Map<string, string>;
  /**
   * Names the file binds, per scope (the offset of the function node, -1 for the module):
   * a parameter or variable named `fetch` shadows the global only where it is visible.
   */
  private readonly bound = new Map<number, Set<string>>();

  constructor(
    private readonly src: SourceFile,
    private readonly dialect: JsDialect,
    inherited?: Map<string, string>,
  ) {
    this.aliases = new Map(inherited ?? []);
  }

  run(): void {
    if (this.src.depth === 0) this.src.reportSyntaxError();
    walk(this.src.tree, (node) => {
      if (node.name === "VariableDefinition") {
        const key = bindingScope(node)?.from ?? -1;
        const names = this.bound.get(key) ?? new Set<string>();
        names.add(this.src.textOf(node));
        this.bound.set(key, names);
      }
      if (node.name === "ImportDeclaration") this.bindImport(node);
      if (node.name === "VariableDeclaration") this.bindDeclaration(node);
    });
    walk(this.src.tree, (node) => {
      switch (node.name) {
        case "ImportDeclaration":
          if (!this.isTypeOnly(node)) this.checkModule(node.getChild("String"), node);
          break;
        case "ExportDeclaration":
          this.checkModule(node.getChild("String"), node);
          break;
        case "DynamicImport":
          this.checkLoad("import()", node.getChild("String") ?? node.lastChild?.prevSibling ?? null, node);
          break;
        case "CallExpression":
        case "NewExpression":
          this.checkCall(node);
          break;
      }
      if (node.name === "VariableName" || node.name === "MemberExpression") this.checkReference(node);
      this.checkString(node);
    });
  }

  /** `import type {…}`, or an import whose every specifier is `type`. */
  private isTypeOnly(node: SyntaxNode): boolean {
    const kids = children(node);
    if (kids[1]?.name === "type") return true;
    const group = node.getChild("ImportGroup");
    if (!group || kids.some((k) => k.name === "VariableDefinition" || k.name === "Star")) return false;
    const specs = children(group).filter((c) => c.name === "VariableDefinition");
    const typed = children(group).filter((c) => c.name === "type").length;
    return specs.length > 0 && typed >= specs.length;
  }

  private bindImport(node: SyntaxNode): void {
    const source = node.getChild("String");
    if (!source) return;
    const mod = normaliseModule(decodeJsString(this.src.textOf(source), "code"));
    for (const kid of children(node)) {
      if (kid.name === "VariableDefinition") this.aliases.set(this.src.textOf(kid), mod);
      if (kid.name !== "ImportGroup") continue;
      const specs = children(kid);
      for (let i = 0; i < specs.length; i++) {
        const s = specs[i]!;
        if (s.name === "VariableName" && specs[i + 1]?.name === "as" && specs[i + 2]?.name === "VariableDefinition") {
          this.aliases.set(this.src.textOf(specs[i + 2]!), `${mod}.${this.src.textOf(s)}`);
          i += 2;
        } else if (s.name === "VariableDefinition") {
          this.aliases.set(this.src.textOf(s), `${mod}.${this.src.textOf(s)}`);
        }
      }
    }
  }

  /** `const x = <expr>` and `const {a, b: c} = <expr>` where `<expr>` resolves to a module or name. */
  private bindDeclaration(node: SyntaxNode): void {
    let target: SyntaxNode | undefined;
    for (const kid of children(node)) {
      if (kid.name === "VariableDefinition" || kid.name === "ObjectPattern") target = kid;
      else if (kid.name === "Equals" && target && kid.nextSibling) {
        const q = this.resolve(kid.nextSibling);
        if (q && target.name === "VariableDefinition") this.aliases.set(this.src.textOf(target), q);
        if (q && target.name === "ObjectPattern") {
          for (const prop of target.getChildren("PatternProperty")) {
            const key = prop.getChild("PropertyName") ?? prop.getChild("VariableDefinition");
            const def = prop.getChild("VariableDefinition");
            if (key && def) this.aliases.set(this.src.textOf(def), this.qualify(q, this.src.textOf(key)));
          }
        }
        target = undefined;
      }
    }
  }

  private qualify(base: string, prop: string): string {
    if (base === "globalThis") return prop;
    const q = `${base}.${prop}`;
    if (q === "module.require" || q === "process.mainModule.require") return "require";
    return q.replace(/^fs\.promises\./, "fs.");
  }

  /** True when `name` is bound by the file in a scope that encloses `node`. */
  isBound(name: string, node: SyntaxNode): boolean {
    return isBound(this.bound, name, node, enclosingFunction);
  }

  /** The module or qualified name an expression refers to (`fs`, `fs.rmSync`, `fetch`), if known. */
  resolve(node: SyntaxNode | null): string | undefined {
    if (!node) return undefined;
    switch (node.name) {
      case "VariableName": {
        const name = this.src.textOf(node);
        const alias = this.aliases.get(name);
        if (alias) return alias;
        if (this.isBound(name, node)) return undefined;
        if (GLOBAL_OBJECTS.has(name)) return "globalThis";
        return WATCHED_GLOBALS.has(name) ? name : undefined;
      }
      case "ParenthesizedExpression":
      case "AwaitExpression":
        return this.resolve(node.lastChild?.name === ")" ? (node.lastChild.prevSibling ?? null) : node.lastChild);
      case "SequenceExpression":
        return this.resolve(node.lastChild);
      case "MemberExpression": {
        const base = this.resolve(node.firstChild);
        if (!base) return undefined;
        const prop = node.getChild("PropertyName");
        const key = prop
          ? this.src.textOf(prop)
          : this.literal(node.getChild("String") ?? node.getChild("TemplateString"));
        return key === undefined ? undefined : this.qualify(base, key);
      }
      case "CallExpression": {
        const callee = this.resolve(node.firstChild);
        const first = argsOf(node)[0];
        const spec = callee === "require" ? this.literal(first ?? null) : undefined;
        return spec === undefined ? undefined : normaliseModule(spec);
      }
      case "DynamicImport": {
        const spec = this.literal(node.getChild("String") ?? node.getChild("TemplateString"));
        return spec === undefined ? undefined : normaliseModule(spec);
      }
      default:
        return undefined;
    }
  }

  /** The value of a string literal or a template without `${…}`; undefined otherwise. */
  private literal(node: SyntaxNode | null): string | undefined {
    if (!node) return undefined;
    if (node.name === "String" || (node.name === "TemplateString" && !node.getChild("Interpolation"))) {
      return decodeJsString(this.src.textOf(node), "code");
    }
    return undefined;
  }

  /** Reports a module that reaches the network or spawns programs. */
  private checkModule(source: SyntaxNode | null, at: SyntaxNode): void {
    const spec = this.literal(source);
    if (spec === undefined) return;
    const mod = normaliseModule(spec);
    if (JS_PROCESS_MODULES.has(mod))
      this.src.report("child-process", at.from, `the module \`${spec}\` spawns programs`);
    else if (JS_NETWORK_MODULES.has(mod))
      this.src.report("network", at.from, `the module \`${spec}\` opens network connections`);
  }

  /** `require(x)` / `import(x)`: a literal is checked as a module; a computed name is blocked. */
  private checkLoad(what: string, arg: SyntaxNode | null, at: SyntaxNode): void {
    if (!arg) return;
    if (this.literal(arg) === undefined) {
      this.src.report("dynamic-import", at.from, `\`${what}\` loads a module whose name is computed at run time`);
    } else this.checkModule(arg, at);
  }

  private checkCall(node: SyntaxNode): void {
    const callee = node.name === "NewExpression" ? node.firstChild?.nextSibling : node.firstChild;
    const q = this.resolve(callee ?? null);
    if (!q) return;
    const args = argsOf(node);
    if (q === "require") return this.checkLoad("require()", args[0] ?? null, node);
    if (q === "eval" || q === "Function" || VM_EVAL.test(q)) {
      const code = q === "Function" ? args : args.slice(0, 1);
      if (code.some((a) => this.literal(a) === undefined)) {
        this.src.report(
          "dynamic-eval",
          node.from,
          `\`${q}\` of a computed string can run any code; only string literals are allowed`,
        );
      } else if (code.length > 0 && this.src.depth < MAX_DEPTH) {
        this.analyseNested(code[code.length - 1]!);
      }
      return;
    }
    if (FS_DELETE.test(q) && args[0] && this.isRootOrHome(args[0])) {
      this.src.report(
        "destructive-delete",
        node.from,
        `\`${q}\` on \`${this.src.textOf(args[0])}\` deletes the root or home directory`,
      );
    }
  }

  private analyseNested(arg: SyntaxNode): void {
    const code = this.literal(arg) ?? "";
    const tree = parser.configure({ dialect: this.dialect }).parse(code);
    const oneLine = this.src.oneLine || !this.src.textOf(arg).includes("\n");
    const inner = new SourceFile(this.src.path, code, tree, this.src.lineAt(arg.from) - 1, this.src.depth + 1, oneLine);
    new JsAnalyser(inner, this.dialect, this.aliases).run();
    this.src.findings.push(...inner.findings);
  }

  /** `"/"`, `"~"`, `os.homedir()`, `process.env.HOME`. */
  private isRootOrHome(node: SyntaxNode): boolean {
    const lit = this.literal(node);
    if (lit !== undefined) return isRootOrHomePath(lit);
    const target = node.name === "CallExpression" ? node.firstChild : node;
    const q = this.resolve(target);
    if (q === "os.homedir" || q === "process.env.HOME") return true;
    return /(^|\.)(homedir\(\)|env\.HOME)$/.test(this.src.textOf(node).replace(/\s+/g, ""));
  }

  /** Network globals, native bindings, and `eval`/`Function` passed as values. */
  private checkReference(node: SyntaxNode): void {
    const parent = node.parent;
    if (!parent || parent.name === "ImportGroup" || parent.name === "ExportGroup") return;
    if (parent.name === "MemberExpression" && same(parent.firstChild, node)) return;
    const q = this.resolve(node);
    if (!q) return;
    const isCallee =
      (parent.name === "CallExpression" && same(parent.firstChild, node)) ||
      (parent.name === "NewExpression" && same(parent.firstChild?.nextSibling, node));
    if (JS_NETWORK_GLOBALS.has(q)) this.src.report("network", node.from, `\`${q}\` opens network connections`);
    else if (NATIVE.has(q)) this.src.report("native-binding", node.from, `\`${q}\` reaches Node's native bindings`);
    else if ((q === "eval" || q === "Function") && !isCallee && parent.name !== "VariableDeclaration") {
      this.src.report("dynamic-eval", node.from, `\`${q}\` is used as a value, so it may run any string`);
    } else if ((q === "eval" || q === "Function") && parent.name === "VariableDeclaration") {
      this.src.report("dynamic-eval", node.from, `\`${q}\` is stored under another name, so it may run any string`);
    }
  }

  /** Strings, templates and constant `+` concatenations that contain shell commands. */
  private checkString(node: SyntaxNode): void {
    if (!["String", "TemplateString", "BinaryExpression"].includes(node.name)) return;
    const parent = node.parent;
    if (parent?.name === "BinaryExpression" && this.constString(parent) !== undefined) return;
    if (node.name !== "BinaryExpression") {
      const content = decodeJsString(this.src.textOf(node), "scan");
      this.src.scanString(content, (i) => node.from + 1 + i);
      return;
    }
    const folded = this.constString(node);
    if (folded !== undefined) this.src.scanString(folded, () => node.from);
  }

  constString(node: SyntaxNode): string | undefined {
    if (node.name === "String" || node.name === "TemplateString") return decodeJsString(this.src.textOf(node), "scan");
    if (node.name === "ParenthesizedExpression") {
      const inner = node.firstChild?.nextSibling;
      return inner && inner.nextSibling?.name === ")" ? this.constString(inner) : undefined;
    }
    if (node.name !== "BinaryExpression") return undefined;
    const [left, op, right] = children(node);
    if (!left || !op || !right || this.src.textOf(op) !== "+") return undefined;
    const l = this.constString(left);
    const r = l === undefined ? undefined : this.constString(right);
    return l === undefined || r === undefined ? undefined : l + r;
  }
}

/**
 * Works around two gaps of `@lezer/javascript` 1.5's TypeScript dialect that make valid,
 * common code look like a syntax error: a type on a catch binding (`catch (err: unknown)`)
 * and a definite assignment (`let x!: T`). The replacements are spaces of the same length,
 * so every offset and line stays exact; types never matter to the gate.
 */
export function patchTsForParser(text: string): string {
  return text
    .replace(/\bcatch\s*\(\s*[A-Za-z_$][\w$]*\s*(:\s*(?:any|unknown)\s*)\)/g, (m, type: string) =>
      m.replace(type, " ".repeat(type.length)),
    )
    .replace(/\b(let|var)(\s+[A-Za-z_$][\w$]*)!(?=\s*:)/g, "$1$2 ");
}

/**
 * Analyses one JavaScript or TypeScript file and returns its source with the findings.
 * @param path - workspace-relative path, reported in findings
 * @param text - the file's content
 * @param dialect - `""` for JavaScript, `"ts"` for TypeScript, with ` jsx` for JSX/TSX
 */
export function analyseJavaScript(path: string, text: string, dialect: JsDialect): SourceFile {
  return analyseJavaScriptNames(path, text, dialect).src;
}

/**
 * {@link analyseJavaScript}, also returning how the file's names resolve (after the
 * analysis, so every import and binding of the file is known), for the tampering pass.
 */
export function analyseJavaScriptNames(
  path: string,
  text: string,
  dialect: JsDialect,
): { src: SourceFile; names: JsNames } {
  const patched = dialect.startsWith("ts") ? patchTsForParser(text) : text;
  const src = new SourceFile(path, patched, parser.configure({ dialect }).parse(patched));
  const analyser = new JsAnalyser(src, dialect, undefined);
  analyser.run();
  return { src, names: analyser };
}
