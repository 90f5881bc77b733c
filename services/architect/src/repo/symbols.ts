/**
 * What the repo map knows about one file, at two depths.
 * - {@link indexText}, for every file, cheap and lexical: the identifiers the file uses (every
 *   identifier token with its count, comments and strings included: the lexer fallback of
 *   aider's repo map) and the names it seems to define (line patterns such as `def name`,
 *   `class Name`, `export const name`). The ranking is computed from this alone.
 * - {@link extractSymbols}, with the lezer parsers (`@lezer/python`; `@lezer/javascript`, its
 *   `jsx`, `ts` and `ts jsx` dialects: the parsers of the reviewer's gate), only for the files
 *   the map may show: the top-level definitions (classes, functions, methods, exported
 *   variables; TypeScript interfaces, type aliases and enums) with a one-line signature.
 *   Definitions nested in a function body are left out; a file with syntax errors yields the
 *   definitions lezer's error recovery still parses.
 * Parsing is the cost (see bench/repomap.ts and docs/parsers.md for the figures), so no more
 * files are parsed than the map needs; see map.ts.
 */
import { closeSync, constants, fstatSync, openSync, readSync, readdirSync, realpathSync } from "node:fs";
import { dirname, extname, isAbsolute, join, normalize, sep } from "node:path";
import type { SyntaxNode, TreeCursor } from "@lezer/common";
import { parser as javascript } from "@lezer/javascript";
import { parser as python } from "@lezer/python";

/** Files larger than this (bytes, 256 KiB) are not parsed: they appear as bare paths. */
export const MAX_FILE_BYTES = 256 * 1024;

/** What a definition is. */
export type SymbolKind = "class" | "function" | "method" | "variable" | "interface" | "type" | "enum";

/** One definition of a file. */
export interface Definition {
  name: string;
  kind: SymbolKind;
  /** 1-based line of the definition keyword. */
  line: number;
  /** How many classes (or interfaces) enclose it: 0 top level, 1 a method. */
  depth: number;
  /** The declaration head on one line (whitespace collapsed, body left out, ≤ 200 characters). */
  signature: string;
}

/** What the map knows about one file. */
export interface FileSymbols {
  /** Definitions in source order. */
  defs: Definition[];
  /** Identifier tokens with their counts, sorted by name (see {@link tokenCounts}). */
  refs: Array<[string, number]>;
  /** Set when the file was not parsed because it is larger than {@link MAX_FILE_BYTES}. */
  skipped?: "too-large";
}

/** Tokens numbered once for many files (one table per commit): `tokens[ids.get(t)] === t`. */
export interface TokenTable {
  tokens: string[];
  ids: Map<string, number>;
}

/** The lexical index of one file (see the module comment). */
export interface FileIndex {
  /** Names the file seems to define, sorted, unique. */
  names: string[];
  /** The identifier tokens it uses and their counts, `[token number, count, …]`, in order of first use. */
  refs: number[];
  /** Set when the file was not read because it is larger than {@link MAX_FILE_BYTES}. */
  skipped?: "too-large";
}

/** The languages with a parser. */
export type SourceLanguage = "python" | "javascript" | "typescript" | "tsx";

const LANG_BY_EXT: Record<string, SourceLanguage> = {
  ".py": "python",
  ".pyi": "python",
  ".js": "javascript",
  ".mjs": "javascript",
  ".cjs": "javascript",
  ".jsx": "javascript",
  ".ts": "typescript",
  ".mts": "typescript",
  ".cts": "typescript",
  ".tsx": "tsx",
};

const BINARY_EXT = new Set(
  (
    "png jpg jpeg gif bmp ico webp tiff psd pdf zip gz tgz bz2 xz 7z rar jar war whl egg so dylib dll exe o a lib " +
    "pyc pyo class wasm bin dat db sqlite sqlite3 woff woff2 ttf otf eot mp3 mp4 wav ogg flac avi mov mkv webm " +
    "npy npz pkl pickle h5 parquet onnx pt ckpt"
  )
    .split(" ")
    .map((e) => `.${e}`),
);

/** The language of a path, by extension; undefined for files without a parser. */
export function languageOf(path: string): SourceLanguage | undefined {
  return LANG_BY_EXT[extname(path).toLowerCase()];
}

/** True for paths whose extension names a binary format (images, archives, compiled code…). */
export function isBinaryPath(path: string): boolean {
  return BINARY_EXT.has(extname(path).toLowerCase());
}

/** The parser of each language: `.js`/`.jsx` files in the `jsx` dialect, as JSX is common in `.js` files. */
const PARSERS: Record<SourceLanguage, typeof python> = {
  python,
  javascript: javascript.configure({ dialect: "jsx" }),
  typescript: javascript.configure({ dialect: "ts" }),
  tsx: javascript.configure({ dialect: "ts jsx" }),
};

/** Keywords and the commonest built-in names: noise in every file, kept out of the references. */
const NOT_REFS = new Set(
  (
    "self cls None True False and or not in is if elif else for while return def class import from as with try " +
    "except finally raise pass break continue lambda yield async await global nonlocal del assert this null " +
    "undefined true false function const let var new typeof instanceof void delete switch case default throw " +
    "catch extends implements interface type enum export static public private protected readonly string number " +
    "boolean any unknown never object super of do keyof declare namespace module require"
  ).split(" "),
);

/** A definition as found in the tree, before the filter of {@link finish}. */
interface Raw {
  kind: SymbolKind;
  name: string;
  /** Offsets in the text: the definition's node, and where its body starts (none for a bodiless one). */
  start: number;
  end: number;
  bodyStart: number | undefined;
  /** How many named classes and interfaces enclose it. */
  depth: number;
}

/** The head of a declaration on one line, up to its body. */
function signatureOf(text: string, d: Raw): string {
  // From the line's start when only keywords come before it (`export const`, `async`), else from the node.
  let lineStart = text.lastIndexOf("\n", d.start - 1) + 1;
  if (!/^[\w\s]*$/.test(text.slice(lineStart, d.start))) lineStart = d.start;
  let end = d.bodyStart ?? d.end;
  if (d.bodyStart === undefined && (d.kind === "variable" || d.kind === "type")) {
    const nl = text.indexOf("\n", d.start);
    if (nl >= 0 && nl < end) end = nl;
  } else if (d.bodyStart === undefined && text.charCodeAt(end - 1) === 59) end--; // an overload's or abstract method's `;`
  const head = text
    .slice(lineStart, Math.min(end, lineStart + 400))
    .split("\n")
    .map((l) => l.replace(/\s(?:#|\/\/)[^'"`]*$/, "")) // a trailing comment
    .join(" ")
    .replace(/\s+/g, " ")
    .replace(/\s*\{?\s*$/, "")
    .trim();
  return head.length > 200 ? `${head.slice(0, 199)}…` : head;
}

/** Whether a token counts as a reference: two characters or more, not a number, not a keyword. */
export function countsAsReference(id: string): boolean {
  const c = id.charCodeAt(0);
  return id.length > 1 && !(c >= 48 && c <= 57) && !NOT_REFS.has(id);
}

/** Identifier tokens of a text (see {@link countsAsReference}) and their counts, in order of first use. */
function countTokens(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const id of text.split(/[^\w$]+/)) if (countsAsReference(id)) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/** Identifier tokens of a text (see {@link countsAsReference}) with their counts, sorted by name. */
export function tokenCounts(text: string): Array<[string, number]> {
  return [...countTokens(text)].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/** What the walk does after a node: skip its children, enter them, or enter them one class deeper. */
const enum Next {
  Skip,
  Enter,
  Deeper,
}

/** Python nodes that hold statements; any other node holds no definition. */
const PY_BLOCKS = new Set([
  "Script",
  "Body",
  "IfStatement",
  "WhileStatement",
  "ForStatement",
  "TryStatement",
  "WithStatement",
  "DecoratedStatement",
  "MatchStatement",
  "MatchBody",
  "MatchClause",
  "StatementGroup",
]);

/** The offsets of the cursor node's first child with one of `names`, or undefined. */
function childNamed(c: TreeCursor, names: readonly string[]): { from: number; to: number } | undefined {
  const child = c.node.firstChild;
  for (let n = child; n; n = n.nextSibling) if (names.includes(n.name)) return { from: n.from, to: n.to };
  return undefined;
}

/** Whether the cursor's node is a statement of the module itself (`a = 1; b = 2` on one line included). */
function atModuleLevel(c: TreeCursor): boolean {
  const parent = c.node.parent;
  return parent?.name === "Script" || (parent?.name === "StatementGroup" && parent.parent?.name === "Script");
}

/** One Python node: a class or function definition, or a module-level assignment to one name (`x = …`, `x: T = …`). */
function visitPython(c: TreeCursor, text: string, depth: number, out: Raw[]): Next {
  const type = c.name;
  if (type === "ClassDefinition" || type === "FunctionDefinition") {
    const [name, body] = [childNamed(c, ["VariableName"]), childNamed(c, ["Body"])];
    const bodyStart = body && body.from + (text.charCodeAt(body.from) === 58 ? 1 : 0); // after the `:`
    const kind = type === "ClassDefinition" ? "class" : "function";
    if (name) out.push({ kind, name: text.slice(name.from, name.to), start: c.from, end: c.to, bodyStart, depth });
    return kind === "function" ? Next.Skip : name ? Next.Deeper : Next.Enter;
  }
  if (type === "AssignStatement" && depth === 0 && atModuleLevel(c)) {
    const first = c.node.firstChild;
    const after = nextSibling(first)?.name;
    if (first?.name === "VariableName" && (after === "AssignOp" || after === "TypeDef")) {
      out.push({
        kind: "variable",
        name: text.slice(first.from, first.to),
        start: c.from,
        end: c.to,
        bodyStart: undefined,
        depth,
      });
    }
  }
  return PY_BLOCKS.has(type) ? Next.Enter : Next.Skip;
}

const FUNCTION_VALUES = new Set(["ArrowFunction", "FunctionExpression"]);
const JS_DEFINITIONS: Record<string, { kind: SymbolKind; name: string[]; body?: string; next: Next }> = {
  FunctionDeclaration: { kind: "function", name: ["VariableDefinition"], body: "Block", next: Next.Skip },
  AmbientFunctionDeclaration: { kind: "function", name: ["VariableDefinition"], next: Next.Skip },
  ClassDeclaration: { kind: "class", name: ["VariableDefinition"], body: "ClassBody", next: Next.Deeper },
  ClassExpression: { kind: "class", name: ["VariableDefinition"], body: "ClassBody", next: Next.Deeper },
  MethodDeclaration: {
    kind: "method",
    name: ["PropertyDefinition", "PrivatePropertyDefinition"],
    body: "Block",
    next: Next.Skip,
  },
  MethodType: { kind: "method", name: ["PropertyDefinition"], next: Next.Skip },
  InterfaceDeclaration: { kind: "interface", name: ["TypeDefinition"], body: "ObjectType", next: Next.Deeper },
  TypeAliasDeclaration: { kind: "type", name: ["TypeDefinition"], next: Next.Skip },
  EnumDeclaration: { kind: "enum", name: ["TypeDefinition"], body: "EnumBody", next: Next.Skip },
};

/** The offsets of a computed method name, brackets included (`[Symbol.iterator]`), or undefined. */
function computedName(c: TreeCursor): { from: number; to: number } | undefined {
  let open: SyntaxNode | null = null;
  for (let n = c.node.firstChild; n; n = n.nextSibling) {
    if (n.name === "[") open = n;
    else if (n.name === "]" && open) return { from: open.from, to: n.to };
  }
  return undefined;
}

const COMMENTS = new Set(["Comment", "LineComment", "BlockComment"]);
/** A node's next sibling that is not a comment (comments are nodes of lezer's trees), or null. */
function nextSibling(n: SyntaxNode | null | undefined): SyntaxNode | null {
  let next = n?.nextSibling ?? null;
  while (next && COMMENTS.has(next.name)) next = next.nextSibling;
  return next;
}

/**
 * Where a function value's body starts: after an arrow function's `=>` (the next `=>` in the
 * text when lezer's recovery left it out, as it does after a type predicate `(v): v is T =>`),
 * at a function expression's block.
 */
function bodyOf(text: string, value: SyntaxNode): number | undefined {
  if (value.name !== "ArrowFunction") return value.getChild("Block")?.from;
  const arrow = value.getChild("Arrow");
  if (arrow) return arrow.to;
  const at = text.indexOf("=>", value.from);
  return at < 0 ? undefined : at + 2;
}

/**
 * One JavaScript or TypeScript node: a declaration of {@link JS_DEFINITIONS}; in a variable
 * declaration, each name bound to a function (any declaration) or to a value (an exported
 * one); an assignment `a.b.name = function …` or `= (…) => …` as a statement. Function
 * values and object-literal methods are scopes: nothing inside them is visited.
 */
function visitJs(c: TreeCursor, text: string, depth: number, out: Raw[]): Next {
  const type = c.name;
  const def = JS_DEFINITIONS[type];
  if (def) {
    let name = childNamed(c, def.name) ?? (def.kind === "method" ? computedName(c) : undefined);
    if (name && def.kind === "class" && text.startsWith("implements", name.from)) name = undefined; // `class implements I {…}`: lezer takes the keyword for a name
    const body = def.body === undefined ? undefined : childNamed(c, [def.body])?.from;
    if (name)
      out.push({
        kind: def.kind,
        name: text.slice(name.from, name.to),
        start: c.from,
        end: c.to,
        bodyStart: body,
        depth,
      });
    return def.next === Next.Deeper && !name ? Next.Enter : def.next;
  }
  if (FUNCTION_VALUES.has(type)) return Next.Skip;
  if (type === "Property") return childNamed(c, ["ParamList"]) ? Next.Skip : Next.Enter;
  if (type === "VariableDeclaration") {
    const node = c.node;
    const exported = node.parent?.name === "ExportDeclaration";
    for (let n = node.firstChild; n; n = n.nextSibling) {
      if (n.name !== "VariableDefinition") continue;
      let [end, value] = [n.to, nextSibling(n)];
      if (value?.name === "TypeAnnotation") [end, value] = [value.to, nextSibling(value)];
      value = value?.name === "Equals" ? nextSibling(value) : null;
      const name = text.slice(n.from, n.to);
      if (value && FUNCTION_VALUES.has(value.name))
        out.push({ kind: "function", name, start: n.from, end: value.to, bodyStart: bodyOf(text, value), depth });
      else if (exported)
        out.push({ kind: "variable", name, start: n.from, end: value?.to ?? end, bodyStart: undefined, depth });
    }
  } else if (type === "ExpressionStatement") {
    const assign = c.node.firstChild;
    const [target, value] = [assign?.firstChild, assign?.lastChild];
    const name = target?.name === "MemberExpression" ? target.lastChild : null;
    if (
      assign?.name === "AssignmentExpression" &&
      name?.name === "PropertyName" &&
      value &&
      FUNCTION_VALUES.has(value.name)
    ) {
      out.push({
        kind: "function",
        name: text.slice(name.from, name.to),
        start: assign.from,
        end: assign.to,
        bodyStart: bodyOf(text, value),
        depth,
      });
    }
  }
  return Next.Enter;
}

/**
 * The definitions of a text: walks the syntax tree in source order, one class deeper inside
 * a named class or interface, skipping function bodies (see {@link visitPython}, {@link visitJs}).
 */
function extract(lang: SourceLanguage, text: string): Definition[] {
  const c = PARSERS[lang].parse(text).cursor();
  const raws: Raw[] = [];
  const depths: number[] = [];
  let depth = 0;
  for (;;) {
    const next = lang === "python" ? visitPython(c, text, depth, raws) : visitJs(c, text, depth, raws);
    if (next !== Next.Skip && c.firstChild()) {
      depths.push(depth);
      if (next === Next.Deeper) depth++;
      continue;
    }
    while (!c.nextSibling()) {
      if (!c.parent()) return finish(text, raws);
      depth = depths.pop() ?? 0;
    }
  }
}

/**
 * The map's definitions from the raw ones: a function in a class is a method; a method
 * outside any class or interface (a member of a type literal) and a variable inside one are
 * left out, and so is a variable defined a second time. Lines are 1-based.
 */
function finish(text: string, raws: Raw[]): Definition[] {
  raws.sort((a, b) => a.start - b.start);
  const defs: Definition[] = [];
  const seenVariables = new Set<string>();
  let [pos, line] = [0, 1];
  for (const r of raws) {
    let kind = r.kind;
    if (kind === "function" && r.depth > 0) kind = "method";
    if (kind === "method" && r.depth === 0) continue;
    if (kind === "variable") {
      if (r.depth > 0 || seenVariables.has(r.name)) continue;
      seenVariables.add(r.name);
    }
    for (; pos < r.start; pos++) if (text.charCodeAt(pos) === 10) line++;
    defs.push({ name: r.name, kind, line, depth: r.depth, signature: signatureOf(text, { ...r, kind }) });
  }
  return defs;
}

/**
 * Symbols of one file's text; the language comes from the path's extension, and a file
 * without a parser (or over {@link MAX_FILE_BYTES} characters) has no definitions.
 */
export function extractSymbols(path: string, text: string): FileSymbols {
  const lang = languageOf(path);
  if (!lang) return { defs: [], refs: [] };
  if (text.length > MAX_FILE_BYTES) return { defs: [], refs: [], skipped: "too-large" };
  return { defs: extract(lang, text), refs: tokenCounts(text) };
}

const DEFINES: Record<"python" | "js", RegExp> = {
  python: /^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)|^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)/gm,
  js: new RegExp(
    [
      /^[ \t]*(?:export[ \t]+)?(?:default[ \t]+)?(?:declare[ \t]+)?(?:abstract[ \t]+)?(?:async[ \t]+)?(?:function\*?|class|interface|enum|type)[ \t]+([A-Za-z_$][\w$]*)/,
      /^(?:export[ \t]+)?(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)|^(?:module\.)?exports\.([A-Za-z_$][\w$]*)[ \t]*=/,
      /^[ \t]+(?:(?:public|private|protected|static|async|readonly|abstract|override|get|set)[ \t]+)*([A-Za-z_$][\w$]*)[ \t]*(?:<[^>\n]*>)?\([^()\n]*\)[ \t]*(?::[^{};\n]+)?\{[ \t]*$/,
    ]
      .map((r) => r.source)
      .join("|"),
    "gm",
  ),
};
const CONTROL = new Set(["if", "for", "while", "switch", "catch", "with", "return", "function"]);

/**
 * The lexical index of one file's text: its identifier tokens, and the names its lines seem
 * to define (Python `def`/`class` at any depth and module-level assignments; JavaScript and
 * TypeScript declarations, top-level `const`/`let`/`var`, `exports.name =`, and one-line
 * method heads). Files without a grammar get tokens only. New tokens are added to `table`.
 */
export function indexText(path: string, text: string, table: TokenTable): FileIndex {
  const lang = languageOf(path);
  const names = new Set<string>();
  if (lang) {
    for (const m of text.matchAll(DEFINES[lang === "python" ? "python" : "js"])) {
      const name = m.slice(1).find((g) => g !== undefined);
      if (name && !CONTROL.has(name)) names.add(name);
    }
  }
  const refs: number[] = [];
  for (const [token, count] of countTokens(text)) {
    let id = table.ids.get(token);
    if (id === undefined) table.ids.set(token, (id = table.tokens.push(token) - 1));
    refs.push(id, count);
  }
  return { names: [...names].sort(), refs };
}

/** The lexical index of one file under `root`, its tokens numbered in `table` (see {@link readSource} for what is null). */
export function indexFile(root: string, path: string, table: TokenTable, dirs?: Map<string, string>): FileIndex | null {
  const src = readSource(root, path, dirs);
  if (!src) return null;
  return src.tooLarge ? { names: [], refs: [], skipped: "too-large" } : indexText(path, src.text ?? "", table);
}

/**
 * Reads one workspace-relative file under `root` for the map. Returns null for what the map
 * leaves out: a missing file, a symbolic link or other non-regular file, a path leaving
 * `root` (`..`, absolute, or through a linked directory), a binary file (by extension, or a
 * NUL byte in its first 8 KiB). A file over {@link MAX_FILE_BYTES} or without a grammar is
 * not read: `text` is undefined. `dirs` memoises real directory paths.
 */
export function readSource(
  root: string,
  path: string,
  dirs = new Map<string, string>(),
): { text?: string; tooLarge?: true } | null {
  if (isAbsolute(path) || /^\.\.(?:[\\/]|$)/.test(normalize(path)) || isBinaryPath(path)) return null;
  const abs = join(root, path);
  const real = (dir: string): string => dirs.get(dir) ?? dirs.set(dir, realpathSync(dir)).get(dir) ?? dir;
  let fd: number | undefined;
  try {
    if (!(real(dirname(abs)) + sep).startsWith(real(root) + sep)) return null;
    fd = openSync(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK); // fails on a link; a FIFO does not block
    const st = fstatSync(fd);
    if (!st.isFile()) return null;
    if (st.size > MAX_FILE_BYTES) return { tooLarge: true };
    if (!languageOf(path)) return {};
    const buf = Buffer.allocUnsafe(st.size);
    const n = readSync(fd, buf, 0, st.size, 0);
    return buf.subarray(0, Math.min(n, 8192)).includes(0) ? null : { text: buf.toString("utf8", 0, n) };
  } catch {
    return null; // vanished, unreadable, or a link
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The symbols of one file under `root` (see {@link readSource} for what is null). */
export function readSymbols(root: string, path: string, dirs?: Map<string, string>): FileSymbols | null {
  const src = readSource(root, path, dirs);
  if (!src) return null;
  if (src.tooLarge) return { defs: [], refs: [], skipped: "too-large" };
  return extractSymbols(path, src.text ?? "");
}

const SKIP_DIRS = new Set([".git", "node_modules", "__pycache__", "dist", "build", ".venv"]);

/**
 * The regular files under `root`, relative, `/`-separated, sorted by UTF-16 code unit; skips
 * .git, node_modules, __pycache__, dist, build and .venv, and does not follow symbolic links.
 * @throws Error (from `readdir`) when `root` cannot be read
 */
export function walkTree(root: string): string[] {
  const [out, stack] = [[] as string[], [""]];
  for (let dir = stack.pop(); dir !== undefined; dir = stack.pop()) {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      const rel = dir ? `${dir}/${e.name}` : e.name;
      if (e.isDirectory() && !SKIP_DIRS.has(e.name)) stack.push(rel);
      else if (e.isFile()) out.push(rel);
    }
  }
  return out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
