/**
 * Where a computed Python value comes from: a small backward data-flow trace inside one file.
 * It answers the question the precise rules ask of the string that reaches `exec`,
 * `__import__` or `getattr`, or of the bytes that reach `pickle.loads`: did it come from
 * outside the program, was it decoded from another form, which literal text is it built
 * from, and is it the program's own serialised data?
 *
 * The trace follows, within the file: assignments (`=`, `+=`, `x[i] =`, `:=`, `for … in`,
 * `with … as`, comprehensions, `.append`/`.extend`/`.insert`/`.write`), parameters to the
 * arguments at the function's call sites, and calls of the file's own functions to the
 * values they `return` or `yield`. What it cannot follow (an attribute, another module's function, a free
 * name) is `unknown`: no evidence either way.
 */
import type { SyntaxNode } from "@lezer/common";
import { decodePyString } from "./pystrings.js";
import { isNetworkName } from "./pyimports.js";
import { enclosingFunction, parseArgs } from "./pysyntax.js";
import {
  PY_DECODER_METHODS,
  PY_DECODERS,
  PY_EXTERNAL_CALLS,
  PY_EXTERNAL_NAMES,
  PY_HIDING_CODECS,
  PY_NETWORK_CALLS,
  PY_READ_METHODS,
  PY_SERIALISERS,
} from "./rules.js";
import { children, type SourceFile, walk } from "./source.js";

/** What the analyser lends the trace: the file, its name resolution and its scopes. */
export interface FlowContext {
  readonly src: SourceFile;
  /** The qualified name an expression refers to through the file's imports (`os.environ`), if any. */
  resolve(node: SyntaxNode | null): string | undefined;
  /** True when `name` is bound by the file in a scope that encloses `node`. */
  isBound(name: string, node: SyntaxNode): boolean;
}

/** The sources of a value, as far as the trace could follow it. */
export interface Origin {
  /** Outside data it depends on, as written: `input()`, `sys.argv`, `.read()`. */
  external: string[];
  /** Decoders it went through: `base64.b64decode`, `chr`, `[::-1]`. */
  decoded: string[];
  /** The literal text it is built from, in the order the trace met it. */
  material: string[];
  /** True when some part is the result of `pickle.dumps` (or a relative). */
  serialised: boolean;
  /** True when some part could not be followed (an attribute, a free name, an unknown call). */
  unknown: boolean;
}

/** At most this many syntax nodes are visited for one question (bounds the cost on large files). */
const BUDGET = 3_000;

/** Builtins the trace knows by name when the file does not rebind them. */
const FLOW_BUILTINS = new Set(["input", "open", "chr", "bytes", "bytearray", "compile"]);
/** Builtins whose result is made only of their arguments. */
const PURE_BUILTINS = new Set([
  "str",
  "repr",
  "ascii",
  "format",
  "int",
  "float",
  "complex",
  "bool",
  "abs",
  "round",
  "len",
  "min",
  "max",
  "sum",
  "zip",
  "enumerate",
  "range",
  "list",
  "tuple",
  "set",
  "frozenset",
  "dict",
  "sorted",
  "reversed",
  "map",
  "filter",
  "iter",
  "next",
  "bytes",
  "bytearray",
]);
const MUTATORS = new Set(["append", "extend", "insert", "add", "write", "writelines"]);
/** String methods whose result is made of the receiver and the arguments (their text is material). */
const STRING_METHODS = new Set([
  "join",
  "format",
  "format_map",
  "replace",
  "strip",
  "lstrip",
  "rstrip",
  "upper",
  "lower",
  "title",
  "capitalize",
  "casefold",
  "swapcase",
  "center",
  "ljust",
  "rjust",
  "zfill",
  "expandtabs",
  "removeprefix",
  "removesuffix",
  "split",
  "rsplit",
  "splitlines",
  "partition",
  "rpartition",
  "encode",
  "decode",
]);
/** Argument shapes of `bytes(…)` that spell text as character codes (`bytes([111, 115])`; also `bytes(map(…))`). */
const CODE_SEQUENCES = new Set([
  "ArrayExpression",
  "TupleExpression",
  "ArrayComprehensionExpression",
  "ComprehensionExpression",
]);
const COMPREHENSIONS = new Set([
  "ArrayComprehensionExpression",
  "ComprehensionExpression",
  "SetComprehensionExpression",
  "DictionaryComprehensionExpression",
]);

/** Definitions of the file, indexed once, on the first question. Keys are `<scope offset>\0<name>` (-1: module). */
interface Index {
  values: Map<string, SyntaxNode[]>;
  params: Map<string, { fn: SyntaxNode; position: number }>;
  functions: Map<string, SyntaxNode[]>;
  calls: Map<string, SyntaxNode[]>;
  returns: Map<number, SyntaxNode[]>;
}

const keyOf = (scope: SyntaxNode | null, name: string): string => `${scope?.from ?? -1}\u0000${name}`;

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** True for a network name: a network module or one of its members, or a connecting `socket` call. */
function isNetwork(q: string): boolean {
  return PY_NETWORK_CALLS.test(q) || isNetworkName(q);
}

/** Traces values of one file back to where they come from. */
export class PyFlow {
  private index?: Index;
  private seen = new Set<string>();
  private budget = 0;
  /**
   * Above 0 while tracing the arguments of a call the trace does not understand: outside
   * data and decoders still count, but literal text does not (an argument such as a file
   * name or a mode is not part of the result).
   */
  private quiet = 0;

  constructor(private readonly ctx: FlowContext) {}

  /** Where the value of `node` comes from. Pure; bounded by {@link BUDGET} nodes. */
  origin(node: SyntaxNode): Origin {
    this.index ??= this.build();
    this.seen = new Set();
    this.budget = BUDGET;
    this.quiet = 0;
    const out: Origin = { external: [], decoded: [], material: [], serialised: false, unknown: false };
    this.trace(node, out);
    return out;
  }

  private text(node: SyntaxNode): string {
    return this.ctx.src.textOf(node);
  }

  private build(): Index {
    const ix: Index = {
      values: new Map(),
      params: new Map(),
      functions: new Map(),
      calls: new Map(),
      returns: new Map(),
    };
    const bindAt = (target: SyntaxNode, value: SyntaxNode): void => {
      const base = target.name === "MemberExpression" && target.getChild("[") ? target.firstChild : target;
      if (base?.name === "VariableName") push(ix.values, keyOf(enclosingFunction(base), this.text(base)), value);
    };
    walk(this.ctx.src.tree, (node) => {
      const kids = children(node);
      switch (node.name) {
        case "AssignStatement": {
          const value = kids.at(-1);
          const lastOp = kids.findLastIndex((k) => k.name === "AssignOp");
          if (value && lastOp > 0) for (const t of kids.slice(0, lastOp)) bindAt(t, value);
          break;
        }
        case "UpdateStatement":
        case "NamedExpression":
          if (kids[0] && kids[2]) bindAt(kids[0], kids[2]);
          break;
        case "WithStatement":
          kids.forEach((k, i) => k.name === "as" && kids[i + 1] && kids[i - 1] && bindAt(kids[i + 1]!, kids[i - 1]!));
          break;
        case "FunctionDefinition": {
          const name = node.getChild("VariableName");
          if (name) push(ix.functions, this.text(name), node);
          const params = node.getChild("ParamList");
          let position = 0;
          for (const p of params ? children(params) : []) {
            if (p.name === "VariableName" && p.prevSibling?.name !== "AssignOp")
              ix.params.set(keyOf(node, this.text(p)), { fn: node, position: position++ });
          }
          break;
        }
        case "ReturnStatement":
        case "YieldStatement":
        case "YieldExpression": {
          // What a function returns or yields (`return a, b` has no tuple node: every value).
          const fn = enclosingFunction(node);
          for (const value of kids)
            if (fn && !["return", "yield", "from", ","].includes(value.name)) push(ix.returns, fn.from, value);
          break;
        }
        case "CallExpression": {
          const callee = node.firstChild;
          const prop = callee?.name === "MemberExpression" ? callee.getChild("PropertyName") : null;
          const name = callee?.name === "VariableName" ? this.text(callee) : prop ? this.text(prop) : undefined;
          if (name) push(ix.calls, name, node);
          if (prop && MUTATORS.has(this.text(prop)) && callee?.firstChild) {
            for (const a of parseArgs(node.lastChild, this.ctx.src).positional) bindAt(callee.firstChild, a);
          }
          break;
        }
      }
      if (node.name === "ForStatement" || COMPREHENSIONS.has(node.name)) {
        // `for <targets> in <iterable>`: every target takes the iterable's elements.
        for (let i = 0; i < kids.length; i++) {
          if (kids[i]?.name !== "for") continue;
          const inAt = kids.findIndex((k, j) => j > i && k.name === "in");
          const iterable = kids[inAt + 1];
          if (inAt > 0 && iterable) for (const t of kids.slice(i + 1, inAt)) bindAt(t, iterable);
        }
      }
    });
    return ix;
  }

  private trace(node: SyntaxNode, out: Origin): void {
    const key = `${node.from}:${node.to}:${node.name}`;
    if (this.seen.has(key) || --this.budget < 0) return;
    this.seen.add(key);
    switch (node.name) {
      case "String":
        if (this.quiet === 0) out.material.push(decodePyString(this.text(node), "code").value);
        return;
      case "FormatString":
        return this.formatString(node, out);
      case "VariableName":
        return this.name(node, out);
      case "MemberExpression":
        return this.member(node, out);
      case "CallExpression":
        return this.call(node, out);
      case "LambdaExpression":
      case "Number":
      case "Boolean":
      case "None":
        return;
    }
    for (const kid of children(node)) this.trace(kid, out);
  }

  /** An f-string: its literal text, and whatever its `{…}` parts come from. */
  private formatString(node: SyntaxNode, out: Origin): void {
    let text = "";
    let at = node.from;
    for (const part of node.getChildren("FormatReplacement")) {
      text += this.ctx.src.text.slice(at, part.from);
      at = part.to;
      for (const kid of children(part))
        if (!["FormatConversion", "FormatSpec", "FormatSelfDoc"].includes(kid.name)) this.trace(kid, out);
    }
    text += this.ctx.src.text.slice(at, node.to);
    if (this.quiet === 0) out.material.push(decodePyString(text, "code").value);
  }

  private name(node: SyntaxNode, out: Origin): void {
    const ix = this.index!;
    const name = this.text(node);
    for (let scope = enclosingFunction(node); ; scope = scope ? enclosingFunction(scope) : null) {
      // A parameter takes its call sites' arguments, and anything assigned to it later.
      const param = scope ? ix.params.get(keyOf(scope, name)) : undefined;
      const values = ix.values.get(keyOf(scope, name));
      if (param) this.parameter(param.fn, param.position, name, out);
      for (const v of values ?? []) this.trace(v, out);
      if (param || values) return;
      if (!scope) break;
    }
    const q =
      this.ctx.resolve(node) ??
      (!this.ctx.isBound(name, node) && FLOW_BUILTINS.has(name) ? `builtins.${name}` : undefined);
    if (q && PY_EXTERNAL_NAMES.test(q)) out.external.push(q);
    else if (q && PY_DECODERS.test(q)) out.decoded.push(q.replace(/^builtins\./, ""));
    else out.unknown = true;
  }

  /** A parameter: the arguments its function's call sites in this file pass for it. */
  private parameter(fn: SyntaxNode, position: number, name: string, out: Origin): void {
    const fnName = fn.getChild("VariableName");
    const sites = fnName ? (this.index!.calls.get(this.text(fnName)) ?? []) : [];
    const method = fn.parent?.parent?.name === "ClassDefinition";
    if (sites.length === 0) out.unknown = true;
    for (const site of sites) {
      const args = parseArgs(site.lastChild, this.ctx.src);
      const viaMember = site.firstChild?.name === "MemberExpression";
      const arg = args.keywords.get(name) ?? args.positional[position - (method && viaMember ? 1 : 0)];
      if (arg) this.trace(arg, out);
    }
  }

  private member(node: SyntaxNode, out: Origin): void {
    const q = this.ctx.resolve(node);
    if (q && PY_EXTERNAL_NAMES.test(q)) {
      out.external.push(q);
      return;
    }
    if (!node.getChild("[")) {
      // An attribute: the trace does not follow object state.
      out.unknown = true;
      return;
    }
    const kids = children(node);
    const colons = kids.filter((k) => k.name === ":");
    const step = colons[1]?.nextSibling;
    if (colons.length === 2 && step?.name === "UnaryExpression" && this.text(step).startsWith("-"))
      out.decoded.push("[::-1]");
    if (q && PY_EXTERNAL_NAMES.test(q.split(".").slice(0, 2).join("."))) out.external.push(q);
    if (kids[0]) this.trace(kids[0], out);
  }

  private call(node: SyntaxNode, out: Origin): void {
    const callee = node.firstChild;
    if (!callee) return;
    const args = parseArgs(node.lastChild, this.ctx.src);
    const argNodes = [...args.positional, ...args.keywords.values()];
    const bare = callee.name === "VariableName" ? this.text(callee) : undefined;
    const q =
      this.ctx.resolve(callee) ??
      (bare && !this.ctx.isBound(bare, callee) && (FLOW_BUILTINS.has(bare) || PURE_BUILTINS.has(bare))
        ? `builtins.${bare}`
        : undefined);
    if (q && (PY_EXTERNAL_CALLS.test(q) || isNetwork(q))) {
      out.external.push(`${q.replace(/^builtins\./, "")}()`);
      return;
    }
    if (q && PY_SERIALISERS.test(q)) {
      out.serialised = true;
      return;
    }
    if (q && PY_DECODERS.test(q)) {
      out.decoded.push(q.replace(/^builtins\./, ""));
      return;
    }
    const codes = args.positional[0];
    const spelt =
      !!codes &&
      (CODE_SEQUENCES.has(codes.name) || (codes.name === "CallExpression" && /^map\b/.test(this.text(codes))));
    if ((q === "builtins.bytes" || q === "builtins.bytearray") && spelt) {
      out.decoded.push(`${q.slice(9)}([…])`);
      return;
    }
    if (q === "builtins.compile") {
      if (args.positional[0]) this.trace(args.positional[0], out);
      return;
    }
    const method = callee.name === "MemberExpression" ? callee.getChild("PropertyName") : null;
    if (method) {
      const m = this.text(method);
      if (PY_READ_METHODS.has(m)) {
        out.external.push(`.${m}()`);
        return;
      }
      if (PY_DECODER_METHODS.has(m)) {
        out.decoded.push(`.${m}()`);
        return;
      }
      const codec = args.positional[0] ?? args.keywords.get("encoding");
      if ((m === "decode" || m === "encode") && codec?.name === "String" && PY_HIDING_CODECS.test(this.text(codec))) {
        out.decoded.push(`.${m}(${this.text(codec)})`);
        return;
      }
      if (m === "join" && this.join(callee.firstChild, args.positional[0], out)) return;
      const known = STRING_METHODS.has(m);
      if (!known) out.unknown = true;
      this.traceAll([callee.firstChild, ...argNodes], out, known);
      return;
    }
    if (bare && this.index!.functions.has(bare) && this.ctx.isBound(bare, callee)) {
      // The file's own function: what it returns.
      for (const fn of this.index!.functions.get(bare) ?? [])
        for (const r of this.index!.returns.get(fn.from) ?? []) this.trace(r, out);
      return;
    }
    const pure = !!q && PURE_BUILTINS.has(q.replace(/^builtins\./, ""));
    if (!pure) out.unknown = true;
    this.traceAll(argNodes, out, pure);
  }

  /**
   * `sep.join(x)` where reversal matters: `"".join(reversed(s))` spells text backwards
   * (decoded); with a separator, `".".join(reversed(parts))` or `parts[::-1]` only reorders
   * parts, so the parts are traced without counting a reversal.
   * @returns true when the call was handled here
   */
  private join(receiver: SyntaxNode | null, first: SyntaxNode | undefined, out: Origin): boolean {
    if (receiver?.name !== "String" || !first) return false;
    const separator = decodePyString(this.text(receiver), "code").value;
    const reversedCall =
      first.name === "CallExpression" &&
      first.firstChild?.name === "VariableName" &&
      this.text(first.firstChild) === "reversed";
    const slice = first.name === "MemberExpression" && /\[\s*:\s*:\s*-\s*1\s*\]$/.test(this.text(first));
    if (!reversedCall && !slice) return false;
    if (separator === "") {
      out.decoded.push(reversedCall ? "reversed" : "[::-1]");
      return true;
    }
    out.material.push(separator);
    const inner = reversedCall ? parseArgs(first.lastChild, this.ctx.src).positional[0] : first.firstChild;
    if (inner) this.trace(inner, out);
    return true;
  }

  /** Traces nodes; unless `material` is true, their literal text is left out (see {@link quiet}). */
  private traceAll(nodes: (SyntaxNode | null)[], out: Origin, material: boolean): void {
    if (!material) this.quiet++;
    for (const n of nodes) if (n) this.trace(n, out);
    if (!material) this.quiet--;
  }
}

/**
 * Why a traced value is dangerous where it is used, or undefined when nothing says so.
 * @param origin - the value's {@link Origin}
 * @param names - the names that make literal material dangerous in this use (a module for
 *   `__import__`, an `os` function for `getattr(os, …)`, an escape for `exec`)
 * @returns a phrase that completes "a string …": `read from outside the program (\`input()\`)`
 */
export function danger(origin: Origin, names: (word: string) => boolean): string | undefined {
  if (origin.external.length > 0) return `read from outside the program (\`${origin.external[0]}\`)`;
  if (origin.decoded.length > 0) return `decoded with \`${origin.decoded[0]}\`, which hides what it says`;
  const words = new Set<string>();
  for (const text of [...origin.material, origin.material.join("")])
    for (const w of text.match(/[A-Za-z_][\w.]*/g) ?? []) words.add(w);
  const hit = [...words].find((w) => names(w) || w.split(".").some(names));
  return hit === undefined ? undefined : `assembled from pieces that name \`${hit}\``;
}
