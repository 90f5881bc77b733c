/**
 * What the repo map knows about one file, at two depths.
 * - {@link indexText}, for every file, cheap and lexical: the identifiers the file uses (every
 *   identifier token with its count, comments and strings included: the lexer fallback of
 *   aider's repo map) and the names it seems to define (line patterns such as `def name`,
 *   `class Name`, `export const name`). The ranking is computed from this alone.
 * - {@link extractSymbols}, with tree-sitter (web-tree-sitter, wasm), only for the files the map
 *   may show: the top-level definitions (classes, functions, methods, exported variables;
 *   TypeScript interfaces, type aliases and enums) with a one-line signature. Definitions
 *   nested in a function body are left out; a file with syntax errors yields the definitions
 *   tree-sitter could still recognise.
 * Parsing is the cost (about 1 ms a 4 KB file on one core), so no more files are parsed than
 * the map needs; see map.ts.
 */
import { closeSync, constants, fstatSync, openSync, readSync, readdirSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, extname, isAbsolute, join, normalize, sep } from "node:path";
import { Language, Parser, Query } from "web-tree-sitter";

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

/** The languages with a grammar. */
export type SourceLanguage = "python" | "javascript" | "typescript" | "tsx";

const LANG_BY_EXT: Record<string, SourceLanguage> = {
  ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
  ".jsx": "javascript", ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
};

const BINARY_EXT = new Set(
  ("png jpg jpeg gif bmp ico webp tiff psd pdf zip gz tgz bz2 xz 7z rar jar war whl egg so dylib dll exe o a lib " +
    "pyc pyo class wasm bin dat db sqlite sqlite3 woff woff2 ttf otf eot mp3 mp4 wav ogg flac avi mov mkv webm " +
    "npy npz pkl pickle h5 parquet onnx pt ckpt").split(" ").map((e) => `.${e}`),
);

/** The grammar for a path, by extension; undefined for files without one. */
export function languageOf(path: string): SourceLanguage | undefined {
  return LANG_BY_EXT[extname(path).toLowerCase()];
}

/** True for paths whose extension names a binary format (images, archives, compiled code…). */
export function isBinaryPath(path: string): boolean {
  return BINARY_EXT.has(extname(path).toLowerCase());
}

const FUNCTIONS_JS = `
(function_declaration name: (identifier) @name body: (_)? @body) @def.function
(generator_function_declaration name: (identifier) @name body: (_)? @body) @def.function
(class_declaration name: (_) @name body: (_)? @body) @def.class
(method_definition name: (_) @name body: (_)? @body) @def.method
(variable_declarator name: (identifier) @name
  value: [(arrow_function body: (_) @body) (function_expression body: (_) @body) (generator_function body: (_) @body)]) @def.function
(export_statement declaration: [(lexical_declaration (variable_declarator name: (identifier) @name) @def.variable)
  (variable_declaration (variable_declarator name: (identifier) @name) @def.variable)])
[(arrow_function) (function_expression) (generator_function)] @scope
`;
const QUERIES: Record<SourceLanguage, string> = {
  python: `
(class_definition name: (identifier) @name body: (_)? @body) @def.class
(function_definition name: (identifier) @name body: (_)? @body) @def.function
(module (expression_statement (assignment left: (identifier) @name) @def.variable))
(lambda) @scope
`,
  javascript: `${FUNCTIONS_JS}
(class name: (_) @name body: (_)? @body) @def.class
(expression_statement (assignment_expression left: (member_expression property: (property_identifier) @name)
  right: [(arrow_function body: (_) @body) (function_expression body: (_) @body)]) @def.function)
`,
  typescript: `${FUNCTIONS_JS}
(function_signature name: (identifier) @name) @def.function
(abstract_class_declaration name: (_) @name body: (_)? @body) @def.class
(method_signature name: (_) @name) @def.method
(abstract_method_signature name: (_) @name) @def.method
(interface_declaration name: (_) @name body: (_)? @body) @def.interface
(type_alias_declaration name: (_) @name) @def.type
(enum_declaration name: (_) @name body: (_)? @body) @def.enum
`,
  tsx: "",
};
QUERIES.tsx = QUERIES.typescript;
const WASM: Record<SourceLanguage, string> = {
  python: "tree-sitter-python/tree-sitter-python.wasm",
  javascript: "tree-sitter-javascript/tree-sitter-javascript.wasm",
  typescript: "tree-sitter-typescript/tree-sitter-typescript.wasm",
  tsx: "tree-sitter-typescript/tree-sitter-tsx.wasm",
};

/** Keywords and the commonest built-in names: noise in every file, kept out of the references. */
const NOT_REFS = new Set(
  ("self cls None True False and or not in is if elif else for while return def class import from as with try " +
    "except finally raise pass break continue lambda yield async await global nonlocal del assert this null " +
    "undefined true false function const let var new typeof instanceof void delete switch case default throw " +
    "catch extends implements interface type enum export static public private protected readonly string number " +
    "boolean any unknown never object super of do keyof declare namespace module require").split(" "),
);

interface Grammar {
  language: Language;
  query: Query;
}
let parserReady: Promise<Parser> | undefined;
const grammars = new Map<SourceLanguage, Promise<Grammar>>();

function parser(): Promise<Parser> {
  parserReady ??= Parser.init().then(() => new Parser());
  return parserReady;
}

/** A grammar's wasm, resolved through its package (`<package>/package.json`, then the file beside it). */
function grammar(lang: SourceLanguage): Promise<Grammar> {
  let g = grammars.get(lang);
  if (!g) {
    const [pkg = "", file = ""] = WASM[lang].split("/");
    const wasm = join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), file);
    g = parser().then(async () => {
      const language = await Language.load(wasm);
      return { language, query: new Query(language, QUERIES[lang]) };
    });
    grammars.set(lang, g);
  }
  return g;
}

/**
 * Starts loading the grammars the given files need (their wasm compiles in the background,
 * so a caller can overlap it with other work); resolves when they are ready.
 * @throws Error when a grammar's wasm cannot be loaded
 */
export async function loadGrammars(paths: readonly string[]): Promise<void> {
  const langs = new Set<SourceLanguage>();
  for (const p of paths) {
    const lang = languageOf(p);
    if (lang) langs.add(lang);
  }
  await Promise.all([...langs].map(grammar));
}

interface Raw {
  kind: SymbolKind;
  start: number;
  end: number;
  row: number;
  name: string;
  nameStart: number;
  bodyStart: number | undefined;
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
  }
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

function extractWith(p: Parser, g: Grammar, text: string): Definition[] {
  p.setLanguage(g.language);
  const tree = p.parse(text);
  if (!tree) return [];
  const raws: Raw[] = [];
  const scopes: Array<[number, number]> = [];
  try {
    for (const m of g.query.matches(tree.rootNode)) {
      const def: Raw = { kind: "variable", start: 0, end: 0, row: 0, name: "", nameStart: 0, bodyStart: undefined };
      for (const { name, node } of m.captures) {
        if (name === "scope") scopes.push([node.startIndex, node.endIndex]);
        else if (name === "body") def.bodyStart = node.startIndex;
        else if (name === "name") [def.name, def.nameStart] = [node.text, node.startIndex];
        else if (name.startsWith("def.")) {
          [def.kind, def.start, def.end, def.row] = [name.slice(4) as SymbolKind, node.startIndex, node.endIndex, node.startPosition.row];
        }
      }
      if (def.name) raws.push(def);
    }
  } finally {
    tree.delete();
  }
  return keepTopLevel(text, raws, scopes);
}

/** Drops definitions inside function bodies and duplicates; sets depth and method kinds. */
function keepTopLevel(text: string, raws: Raw[], scopes: Array<[number, number]>): Definition[] {
  const byName = new Map<number, Raw>();
  for (const r of raws) {
    const seen = byName.get(r.nameStart);
    if (!seen || (seen.kind === "variable" && r.kind !== "variable")) byName.set(r.nameStart, r);
  }
  const all = [...byName.values()].sort((a, b) => a.start - b.start || a.nameStart - b.nameStart);
  for (const r of all) if (r.kind === "function" || r.kind === "method") scopes.push([r.start, r.end]);
  const containers = all.filter((r) => r.kind === "class" || r.kind === "interface");
  const encloses = (o: [number, number], r: Raw): boolean => o[0] <= r.start && r.end <= o[1] && !(o[0] === r.start && o[1] === r.end);
  const defs: Definition[] = [];
  const seenVariables = new Set<string>();
  for (const r of all) {
    if (scopes.some((s) => encloses(s, r))) continue;
    const depth = containers.filter((c) => encloses([c.start, c.end], r)).length;
    let kind = r.kind;
    if (kind === "function" && depth > 0) kind = "method";
    if (kind === "method" && depth === 0) continue; // object-literal methods, members of type literals
    if (kind === "variable") {
      if (depth > 0 || seenVariables.has(r.name)) continue;
      seenVariables.add(r.name);
    }
    defs.push({ name: r.name, kind, line: r.row + 1, depth, signature: signatureOf(text, r) });
  }
  return defs;
}

/**
 * Symbols of one file's text with tree-sitter; the language comes from the path's extension,
 * and a file without a grammar (or over {@link MAX_FILE_BYTES} characters) has no definitions.
 * @throws Error when a grammar's wasm cannot be loaded (a broken installation)
 */
export async function extractSymbols(path: string, text: string): Promise<FileSymbols> {
  const lang = languageOf(path);
  if (!lang) return { defs: [], refs: [] };
  if (text.length > MAX_FILE_BYTES) return { defs: [], refs: [], skipped: "too-large" };
  const [p, g] = await Promise.all([parser(), grammar(lang)]);
  return { defs: extractWith(p, g, text), refs: tokenCounts(text) };
}

const DEFINES: Record<"python" | "js", RegExp> = {
  python: /^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)|^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)/gm,
  js: new RegExp(
    [
      /^[ \t]*(?:export[ \t]+)?(?:default[ \t]+)?(?:declare[ \t]+)?(?:abstract[ \t]+)?(?:async[ \t]+)?(?:function\*?|class|interface|enum|type)[ \t]+([A-Za-z_$][\w$]*)/,
      /^(?:export[ \t]+)?(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)|^(?:module\.)?exports\.([A-Za-z_$][\w$]*)[ \t]*=/,
      /^[ \t]+(?:(?:public|private|protected|static|async|readonly|abstract|override|get|set)[ \t]+)*([A-Za-z_$][\w$]*)[ \t]*(?:<[^>\n]*>)?\([^()\n]*\)[ \t]*(?::[^{};\n]+)?\{[ \t]*$/,
    ].map((r) => r.source).join("|"),
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
export function readSource(root: string, path: string, dirs = new Map<string, string>()): { text?: string; tooLarge?: true } | null {
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

/**
 * Tree-sitter symbols of one file under `root` (see {@link readSource} for what is null).
 * @throws Error when a grammar's wasm cannot be loaded
 */
export async function readSymbols(root: string, path: string, dirs?: Map<string, string>): Promise<FileSymbols | null> {
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
