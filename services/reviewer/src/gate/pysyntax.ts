/**
 * Small helpers over the `@lezer/python` syntax tree that the Python analyser and its data
 * flow tracer share: call arguments, function scopes, the names a node binds, and the
 * parser work-arounds.
 */
import type { SyntaxNode } from "@lezer/common";
import { children, type SourceFile } from "./source.js";

/** Arguments of a call: positional expressions, keyword values, and whether `*`/`**` appear. */
export interface Args {
  positional: SyntaxNode[];
  keywords: Map<string, SyntaxNode>;
  starStar: boolean;
}

/**
 * The arguments of a call's `ArgList` (a generator argument, `f(x for x in y)`, is one
 * positional argument). Empty for anything that is not an `ArgList`.
 */
export function parseArgs(argList: SyntaxNode | null, src: SourceFile): Args {
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
export function enclosingFunction(node: SyntaxNode): SyntaxNode | null {
  for (let p = node.parent; p; p = p.parent) if (FUNCTION_SCOPES.has(p.name)) return p;
  return null;
}

/**
 * The member expressions an assignment, augmented assignment or `del` statement writes
 * (`a.b = …`, `x[k] += …`, `del a.b`), tuples unpacked.
 */
export function assignedMembers(stmt: SyntaxNode): SyntaxNode[] {
  const kids = children(stmt);
  let out: SyntaxNode[];
  if (stmt.name === "UpdateStatement") out = kids.slice(0, 1);
  else if (stmt.name === "DeleteStatement") out = kids.slice(1);
  else {
    const last = kids.map((k) => k.name).lastIndexOf("AssignOp");
    out = kids.slice(0, Math.max(0, last)).filter((k) => k.name !== "AssignOp");
  }
  return out
    .flatMap((t) => (/^(TupleExpression|ArrayExpression|ParenthesizedExpression)$/.test(t.name) ? children(t) : [t]))
    .filter((t) => t.name === "MemberExpression");
}

/**
 * The name a node binds and the scope it binds it in: `def f`/`class C` bind in the whole
 * file (kept simple: a function named like a builtin is the file's own), a parameter binds
 * in its function, `x = …` binds in the function (or module) it is in.
 * @returns `[name node, scope node or null for the module]`, or null when nothing is bound
 */
export function binding(node: SyntaxNode): [SyntaxNode, SyntaxNode | null] | null {
  if (node.name === "FunctionDefinition" || node.name === "ClassDefinition") {
    const name = node.getChild("VariableName");
    return name ? [name, null] : null;
  }
  if (node.name !== "VariableName" || !node.parent) return null;
  if (node.parent.name === "ParamList" && node.prevSibling?.name !== "AssignOp" && node.parent.parent) {
    return [node, node.parent.parent];
  }
  const next = node.nextSibling?.name;
  if (node.parent.name === "AssignStatement" && (next === "AssignOp" || next === "TypeDef"))
    return [node, enclosingFunction(node)];
  return null;
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
