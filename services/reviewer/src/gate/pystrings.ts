/** Python string literals: prefixes, quotes, escapes, and constant concatenation. */
import type { SyntaxNode } from "@lezer/common";
import { children, type SourceFile } from "./source.js";

/** A decoded string literal. */
export interface PyString {
  /** The content. */
  value: string;
  /** Offset of the content in the literal's source text (after prefix and opening quote). */
  start: number;
  /** True for f-strings: `{…}` parts are code, not text. */
  format: boolean;
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  n: "\n",
  t: "\t",
  r: "\r",
  "\\": "\\",
  "'": "'",
  '"': '"',
  "0": "\0",
  a: "\x07",
  b: "\b",
  f: "\f",
  v: "\v",
  "\n": "",
};

/**
 * Decodes the source text of one Python string literal (`r"…"`, `b'…'`, `"""…"""`, `f"…"`).
 * Mode `code` decodes escapes (for analysing `exec("…")` contents as code); mode `scan`
 * keeps the content's length so that an index maps back to a source offset (escaped
 * newlines become `; `, escaped tabs two spaces, as a shell would separate them).
 * An unterminated literal gives what is there.
 */
export function decodePyString(text: string, mode: "code" | "scan"): PyString {
  const prefix = /^[a-zA-Z]*/.exec(text)?.[0] ?? "";
  const rest = text.slice(prefix.length);
  const q = rest.startsWith('"""') || rest.startsWith("'''") ? 3 : 1;
  const quote = rest.slice(0, q);
  const closed = rest.length >= 2 * q && rest.endsWith(quote);
  const inner = rest.slice(q, closed ? rest.length - q : rest.length);
  const raw = /r/i.test(prefix);
  let value = inner;
  if (!raw && mode === "scan") value = inner.replace(/\\[nr]/g, "; ").replace(/\\t/g, "  ");
  if (!raw && mode === "code") {
    value = inner.replace(/\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[0-7]{1,3}|[\s\S])/g, (m, e: string) => {
      if (/^(x|u)/.test(e) && e.length > 1) return String.fromCharCode(parseInt(e.slice(1), 16));
      if (/^[0-7]+$/.test(e)) return String.fromCharCode(parseInt(e, 8));
      return SIMPLE_ESCAPES[e] ?? m;
    });
  }
  return { value, start: prefix.length + q, format: /f/i.test(prefix) };
}

/**
 * The value of a constant string expression: a literal, adjacent literals (`"a" "b"`), a
 * `+` of constant strings, or one in parentheses. f-strings count, with their `{…}` parts
 * left as written. Undefined for anything computed.
 */
export function pyConstString(node: SyntaxNode, src: SourceFile): string | undefined {
  switch (node.name) {
    case "String":
    case "FormatString":
      return decodePyString(src.textOf(node), "scan").value;
    case "ContinuedString": {
      const parts = children(node).map((c) => pyConstString(c, src));
      return parts.every((p) => p !== undefined) ? parts.join("") : undefined;
    }
    case "ParenthesizedExpression": {
      const inner = node.firstChild?.nextSibling;
      return inner && inner.nextSibling?.name === ")" ? pyConstString(inner, src) : undefined;
    }
    case "BinaryExpression": {
      const [left, op, right] = children(node);
      if (!left || !right || !op || src.textOf(op) !== "+") return undefined;
      const l = pyConstString(left, src);
      const r = l === undefined ? undefined : pyConstString(right, src);
      return l === undefined || r === undefined ? undefined : l + r;
    }
    default:
      return undefined;
  }
}
