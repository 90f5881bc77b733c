/**
 * A strict JSON reader that remembers where each value starts and ends, so a checker can
 * point at the line and column of a problem (used by `loopsmith script validate`).
 *
 * The parsing is jsonc-parser's `parseTree` with comments, trailing commas and empty content
 * turned off (its scanner takes only RFC 8259's white space, strings and numbers); this module
 * turns the first of its errors into a sentence at the offset where the problem is, and its
 * tree into {@link Located} nodes.
 *
 * It is imported as `#jsonc-parser` (cli/package.json `imports`): esbuild's `module` condition
 * gets the package's ES module build, as its default UMD build `require`s its own parts in a
 * way a bundle cannot follow (the app build's CLI would fail to start); Node, tsx and vitest get
 * the package as it is.
 */
import {
  createScanner,
  findNodeAtLocation,
  getLocation,
  parseTree,
  printParseErrorCode,
  type JSONPath,
  type Node,
  type ParseError,
} from "#jsonc-parser";

/** A parsed value and where it starts and ends (UTF-16 offsets into the text). */
export interface Located {
  start: number;
  end: number;
  value: unknown;
  items?: Located[];
  entries?: Array<{ key: string; keyStart: number; node: Located }>;
}

/** A JSON syntax error at `offset` (a UTF-16 offset into the text). */
export class JsonSyntax extends Error {
  constructor(
    readonly offset: number,
    message: string,
  ) {
    super(message);
  }
}

/** Most objects and arrays open at once; deeper text is refused (parseTree recurses). */
const MAX_DEPTH = 257;

/** Each {@link Located} node's jsonc-parser node, and back (for {@link nodeAt}). */
const treeOf = new WeakMap<Located, Node>();
const locatedOf = new WeakMap<Node, Located>();

const what = (text: string, at: number): string =>
  at >= text.length ? "the end of the file" : JSON.stringify(text[at]);
const CONTROL = "a control character (a raw line break or tab?) inside a string; write it as \\n or \\t";

/** The offset of the first `[` or `{` nested deeper than {@link MAX_DEPTH}, or -1. */
function tooDeep(text: string): number {
  const scanner = createScanner(text, true);
  let depth = 0;
  for (;;) {
    scanner.scan();
    const at = scanner.getTokenOffset();
    if (at >= text.length) return -1;
    const c = scanner.getTokenLength() === 1 ? text[at] : "";
    if (c === "[" || c === "{") {
      if (++depth > MAX_DEPTH) return at;
    } else if (c === "]" || c === "}") depth--;
  }
}

/** One of jsonc-parser's errors as a sentence at the offset of the offending character. */
function syntaxError(text: string, e: ParseError, root: Node | undefined): JsonSyntax {
  const token = text.slice(e.offset, e.offset + e.length);
  const found = what(text, e.offset);
  const code = printParseErrorCode(e.error);
  /** The character before the error, white space skipped (`{` or `[` when nothing is in it yet). */
  const opened = text.slice(0, e.offset).trimEnd().at(-1);
  if (root && e.offset >= root.offset + root.length && (code === "EndOfFileExpected" || code === "InvalidSymbol")) {
    return new JsonSyntax(e.offset, `unexpected ${found} after the end of the JSON value`);
  }
  switch (code) {
    case "UnexpectedEndOfString": {
      // The scanner ends a string at a raw line break, or at the end of the text.
      const end = e.offset + e.length;
      return end < text.length ? new JsonSyntax(end, CONTROL) : new JsonSyntax(e.offset, "a string is not closed");
    }
    case "InvalidCharacter": {
      let k = 0;
      while (k < token.length && token.charCodeAt(k) >= 0x20) k++;
      return new JsonSyntax(e.offset + (k < token.length ? k : 0), CONTROL);
    }
    case "InvalidEscapeCharacter":
    case "InvalidUnicode": {
      const k = /\\(?:u(?![0-9a-fA-F]{4})|[^"\\/bfnrtu]|$)/.exec(token)?.index ?? 0;
      return new JsonSyntax(e.offset + k, `an invalid escape \\${text[e.offset + k + 1] ?? ""} in a string`);
    }
    case "UnexpectedEndOfNumber":
    case "InvalidNumberFormat":
      return new JsonSyntax(e.offset, `the number ${JSON.stringify(token)} is not complete`);
    case "InvalidCommentToken":
    case "UnexpectedEndOfComment":
      return new JsonSyntax(e.offset, "a comment: JSON has none");
    case "InvalidSymbol":
      return new JsonSyntax(
        e.offset,
        `expected a value, found ${/^[\w.+-]{2,24}$/.test(token) ? JSON.stringify(token) : found}`,
      );
    case "ValueExpected":
      return new JsonSyntax(
        e.offset,
        text[e.offset] === "]" ? "expected a value, found ']' (a trailing comma?)" : `expected a value, found ${found}`,
      );
    case "PropertyNameExpected":
      return new JsonSyntax(
        e.offset,
        `expected a key in double quotes, found ${found}${text[e.offset] === "}" ? " (a trailing comma?)" : ""}`,
      );
    case "ColonExpected": {
      const key = getLocation(text, e.offset).path.at(-1);
      return new JsonSyntax(
        e.offset,
        `expected ':' after ${typeof key === "string" ? `the key ${JSON.stringify(key)}` : "a key"}, found ${found}`,
      );
    }
    case "CommaExpected": {
      const inArray = typeof getLocation(text, e.offset).path.at(-1) === "number";
      return new JsonSyntax(
        e.offset,
        inArray
          ? `expected ',' or ']' after a value in an array, found ${found}`
          : `expected ',' or '}' after a value in an object, found ${found}`,
      );
    }
    case "CloseBraceExpected":
      return new JsonSyntax(
        e.offset,
        opened === "{"
          ? `expected a key in double quotes, found ${found}`
          : `expected ',' or '}' after a value in an object, found ${found}`,
      );
    case "CloseBracketExpected":
      return new JsonSyntax(
        e.offset,
        opened === "["
          ? `expected a value, found ${found}`
          : `expected ',' or ']' after a value in an array, found ${found}`,
      );
    case "EndOfFileExpected":
      return new JsonSyntax(e.offset, `unexpected ${found} after the end of the JSON value`);
    default:
      return new JsonSyntax(e.offset, `${code} at ${found}`);
  }
}

/** The {@link Located} tree of an error-free jsonc-parser tree. */
function located(node: Node, duplicate: (keyStart: number, key: string) => void): Located {
  const start = node.offset;
  const end = node.offset + node.length;
  let out: Located;
  if (node.type === "object") {
    const obj: Record<string, unknown> = {};
    const entries: NonNullable<Located["entries"]> = [];
    const props = node.children ?? [];
    for (const prop of props) {
      const [keyNode, valueNode] = prop.children ?? [];
      if (!keyNode || !valueNode) throw new JsonSyntax(prop.offset, "a member without a value");
      const key = keyNode.value as string;
      const child = located(valueNode, duplicate);
      if (Object.hasOwn(obj, key)) duplicate(keyNode.offset, key);
      // defineProperty: a key "__proto__" is a plain member, as with JSON.parse.
      Object.defineProperty(obj, key, { value: child.value, enumerable: true, writable: true, configurable: true });
      entries.push({ key, keyStart: keyNode.offset, node: child });
    }
    // The last of repeated keys counts; findNodeAtLocation takes the first, so keep only the last.
    const last = new Map(entries.map((e, k) => [e.key, k]));
    if (last.size < props.length)
      props.splice(0, props.length, ...props.filter((_, k) => last.get(entries[k]?.key ?? "") === k));
    out = { start, end, value: obj, entries };
  } else if (node.type === "array") {
    const items = (node.children ?? []).map((child) => located(child, duplicate));
    out = { start, end, value: items.map((n) => n.value), items };
  } else {
    out = { start, end, value: node.value as unknown };
  }
  treeOf.set(out, node);
  locatedOf.set(node, out);
  return out;
}

/**
 * Parses strict JSON (RFC 8259) with positions: jsonc-parser's `parseTree` without comments,
 * trailing commas or empty content. Duplicate keys: the last wins, each repeat is reported.
 * @param duplicate - called with the offset of each repeated key
 * @throws JsonSyntax at the first syntax error (or at the 258th object or array open at once)
 */
export function parseLocated(text: string, duplicate: (keyStart: number, key: string) => void): Located {
  const deep = tooDeep(text);
  if (deep >= 0) throw new JsonSyntax(deep, "values are nested too deeply");
  const errors: ParseError[] = [];
  const root = parseTree(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const first = errors[0];
  if (first) throw syntaxError(text, first, root);
  if (!root) throw new JsonSyntax(0, `expected a value, found ${what(text, 0)}`);
  return located(root, duplicate);
}

/** Maps a UTF-16 offset to its 1-based line and column. */
export type Locate = (offset: number) => { line: number; column: number };

/** Maps offsets of `text` to 1-based lines and columns (a binary search over line starts). */
export function locator(text: string): Locate {
  const starts = [0];
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return (offset) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((starts[mid] ?? 0) <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - (starts[lo] ?? 0) + 1 };
  };
}

/**
 * The deepest node on a zod issue path (the entry itself when the path leaves the JSON), found
 * with jsonc-parser's `findNodeAtLocation` on the longest prefix of the path that exists.
 */
export function nodeAt(node: Located, path: readonly PropertyKey[]): Located {
  const tree = treeOf.get(node);
  if (!tree) return node;
  const segments: JSONPath = path.map((key) => (typeof key === "number" ? key : String(key)));
  for (let n = segments.length; n > 0; n--) {
    const found = findNodeAtLocation(tree, segments.slice(0, n));
    const at = found && locatedOf.get(found);
    if (at) return at;
  }
  return node;
}

/** The word of `options` nearest to a misspelt one (edit distance at most 2). */
export function suggest(word: string, options: readonly string[]): string | undefined {
  const dist = (a: string, b: string): number => {
    let prev = Array.from({ length: b.length + 1 }, (_, k) => k);
    for (let x = 1; x <= a.length; x++) {
      const row = [x];
      for (let y = 1; y <= b.length; y++)
        row.push(
          Math.min((prev[y] ?? 0) + 1, (row[y - 1] ?? 0) + 1, (prev[y - 1] ?? 0) + (a[x - 1] === b[y - 1] ? 0 : 1)),
        );
      prev = row;
    }
    return prev[b.length] ?? 99;
  };
  return options.find((o) => dist(word.toLowerCase(), o.toLowerCase()) <= 2);
}

/** The last member of an object node named `key`. */
export function field(node: Located, key: string): { key: string; keyStart: number; node: Located } | undefined {
  return node.entries?.findLast((e) => e.key === key);
}
