/**
 * Agent mode's read-only session tools (`list`, `read`, `search`), answered from the host
 * copy of a session's candidate tree (session.ts): the base tree with the candidate's files,
 * never what a `run` left in the session container, because the candidate is what a verdict
 * judges. Every path is checked to stay inside the tree: no absolute path, no `..`, no link
 * that resolves outside it.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { open, readdir, readlink, realpath, stat } from "node:fs/promises";
import { join, posix, sep } from "node:path";
import vm from "node:vm";
import picomatch from "picomatch";
import { NEVER_FROM_TREE } from "./repo.js";

/** What a tool answers before the session adds `totalBytes` and `durationMs`. */
export interface ToolAnswer {
  output: string;
  ok: boolean;
  /** `list`: entries found; `read`: lines in the file; `search`: matches found (to {@link MAX_SEARCH_MATCHES}). */
  total?: number;
}

/** Most entries a `list` prints (it counts on, to {@link MAX_LIST_COUNT}). */
export const MAX_LIST_ENTRIES = 2_000;
/** Most entries a `list` counts. */
const MAX_LIST_COUNT = 100_000;
/** Largest file `read` opens, bytes. */
export const MAX_READ_BYTES = 16 * 1024 * 1024;
/** Files larger than this are not searched, bytes. */
export const MAX_SEARCH_FILE_BYTES = 1024 * 1024;
/** Matches a `search` counts at most (it prints `maxResults` of them). */
export const MAX_SEARCH_MATCHES = 10_000;
/** A matching line is printed up to this many characters, then `…`. */
export const MAX_LINE_CHARS = 500;
/** Longest a `search`'s matching may take in all, ms (a pattern that backtracks without end is stopped). */
export const SEARCH_TIMEOUT_MS = 10_000;
/** Bytes looked at for a NUL to call a file binary (git's rule: the first 8 000). */
const BINARY_PROBE_BYTES = 8_000;
/** Files a search reads between two yields to the event loop. */
const YIELD_EVERY = 64;
/** Text handed to the matcher per batch, characters. */
const BATCH_CHARS = 4 * 1024 * 1024;

/** A refusal a tool turns into `ok: false`: the path is outside the tree, missing, of the wrong kind. */
export class ToolRefusal extends Error {
  override readonly name = "ToolRefusal";
}

const refuse = (output: string): ToolAnswer => ({ output, ok: false });

/**
 * The absolute path of `rel` inside `root`, links resolved.
 * @param root - the tree's root, already a real path
 * @throws ToolRefusal when `rel` is absolute, has a `..` segment, does not exist, or resolves
 *   (through a link) outside `root`
 */
export async function resolveInside(root: string, rel: string): Promise<string> {
  const clean = rel.trim() === "" ? "." : rel.trim();
  if (posix.isAbsolute(clean) || clean.includes("\\") || clean.includes("\0") || clean.split("/").includes(".."))
    throw new ToolRefusal(`the path "${rel}" leaves the workspace: give a path relative to its root, without ".."`);
  let real: string;
  try {
    real = await realpath(join(root, clean));
  } catch {
    throw new ToolRefusal(`no such file or directory: ${clean}`);
  }
  if (real !== root && !real.startsWith(root + sep))
    throw new ToolRefusal(`the path "${clean}" is a link that points outside the workspace`);
  return real;
}

/** The workspace-relative form of an absolute path under `root` ("." for the root). */
const relOf = (root: string, abs: string): string =>
  abs === root
    ? "."
    : abs
        .slice(root.length + 1)
        .split(sep)
        .join("/");

/**
 * `list`: the entries under `path`, `depth` levels down, sorted, one workspace-relative path a
 * line; directories end with `/`, links show `-> target` (not followed). At most
 * {@link MAX_LIST_ENTRIES} are printed; `total` counts them all.
 */
export async function listTree(root: string, path: string, depth: number): Promise<ToolAnswer> {
  let start: string;
  try {
    start = await resolveInside(root, path);
  } catch (err) {
    if (err instanceof ToolRefusal) return refuse(err.message);
    throw err;
  }
  if (!(await stat(start)).isDirectory()) return refuse(`${relOf(root, start)} is a file, not a directory: use read`);
  const lines: string[] = [];
  let total = 0;
  const walk = async (dir: string, level: number): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      if (total >= MAX_LIST_COUNT) return;
      if (NEVER_FROM_TREE.has(e.name)) continue;
      const abs = join(dir, e.name);
      const rel = relOf(root, abs);
      total += 1;
      const line = e.isDirectory()
        ? `${rel}/`
        : e.isSymbolicLink()
          ? `${rel} -> ${await readlink(abs).catch(() => "?")}`
          : rel;
      if (lines.length < MAX_LIST_ENTRIES) lines.push(line);
      if (e.isDirectory() && level < depth) await walk(abs, level + 1);
    }
  };
  await walk(start, 1);
  if (total > lines.length) lines.push(`[${total - lines.length} more entries not shown]`);
  return { output: lines.join("\n"), ok: true, total };
}

/** True when the first {@link BINARY_PROBE_BYTES} of `data` hold a NUL byte. */
export function looksBinary(data: Buffer): boolean {
  return data.subarray(0, BINARY_PROBE_BYTES).includes(0);
}

/** A file's lines: split on `\n`, a final newline ending the last line (not starting another). */
function linesOf(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/**
 * `read`: lines `startLine`..`endLine` (1-based, inclusive; defaults: the whole file) of a
 * text file, each as `<n>: <line>`; `total` is the file's line count. Refused: a directory,
 * a binary file (a NUL in its first 8 000 bytes), a file over {@link MAX_READ_BYTES}, a
 * start past the end or an end before the start.
 */
export async function readLines(root: string, path: string, startLine?: number, endLine?: number): Promise<ToolAnswer> {
  let abs: string;
  try {
    abs = await resolveInside(root, path);
  } catch (err) {
    if (err instanceof ToolRefusal) return refuse(err.message);
    throw err;
  }
  const info = await stat(abs);
  if (info.isDirectory()) return refuse(`${path} is a directory: use list`);
  if (!info.isFile()) return refuse(`${path} is not a regular file`);
  if (info.size > MAX_READ_BYTES)
    return refuse(`${path} has ${info.size} bytes, more than read opens (${MAX_READ_BYTES}): use search or run`);
  const fh = await open(abs, "r");
  let data: Buffer;
  try {
    data = await fh.readFile();
  } finally {
    await fh.close();
  }
  if (looksBinary(data)) return refuse(`${path} is a binary file (${data.length} bytes)`);
  const lines = linesOf(data.toString("utf8"));
  const total = lines.length;
  const from = startLine ?? 1;
  const to = Math.min(endLine ?? total, total);
  if (total === 0) return { output: "", ok: true, total };
  if (from > total) return { output: `line ${from} is past the end: ${path} has ${total} lines`, ok: false, total };
  if (to < from) return { output: `endLine ${to} is before startLine ${from}`, ok: false, total };
  const out: string[] = [];
  for (let n = from; n <= to; n++) out.push(`${n}: ${lines[n - 1]}`);
  return { output: out.join("\n"), ok: true, total };
}

/** The matcher, run inside {@link vm} so that its timeout stops a pattern that backtracks without end. */
const MATCHER = new vm.Script(`
  (() => {
    const { pattern, texts, max, found } = input;
    const re = new RegExp(pattern);
    const hits = [];
    let count = found;
    for (let f = 0; f < texts.length && count < max; f++) {
      const lines = texts[f].split("\\n");
      for (let n = 0; n < lines.length && count < max; n++) {
        if (re.test(lines[n])) { hits.push([f, n + 1]); count++; }
      }
    }
    return hits;
  })()
`);
const context = vm.createContext({ input: undefined });

/**
 * Runs {@link MATCHER} over one batch of texts.
 * @returns `[text index, 1-based line]` pairs, in order
 * @throws Error (the vm's) when it passes `timeoutMs`
 */
function matchBatch(
  pattern: string,
  texts: string[],
  max: number,
  found: number,
  timeoutMs: number,
): [number, number][] {
  (context as { input: unknown }).input = { pattern, texts, max, found };
  try {
    return MATCHER.runInContext(context, { timeout: Math.max(1, Math.round(timeoutMs)) }) as [number, number][];
  } finally {
    (context as { input: unknown }).input = undefined;
  }
}

/**
 * Every regular file under `dir` (workspace-relative, sorted, links not followed), skipping
 * {@link NEVER_FROM_TREE}. Synchronous, as repo.ts reads a tree: many small reads through
 * libuv's thread pool cost several times the reads themselves on a loaded host; the search
 * yields to the event loop every {@link YIELD_EVERY} files.
 */
function* filesUnder(root: string, dir: string): Generator<string> {
  const entries = readdirSync(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    if (NEVER_FROM_TREE.has(e.name)) continue;
    const abs = join(dir, e.name);
    if (e.isDirectory()) yield* filesUnder(root, abs);
    else if (e.isFile()) yield relOf(root, abs);
  }
}

/** The glob's matcher (every path without one), or the refusal of a pattern or glob that does not compile. */
function compileSearch(pattern: string, glob: string | undefined): ((path: string) => boolean) | ToolAnswer {
  try {
    new RegExp(pattern);
  } catch (err) {
    return refuse(`invalid regular expression: ${(err as Error).message}`);
  }
  if (glob === undefined || glob.trim() === "") return () => true;
  try {
    return picomatch(glob, { dot: true, basename: !glob.includes("/") });
  } catch (err) {
    return refuse(`invalid glob "${glob}": ${(err as Error).message}`);
  }
}

/**
 * `search`: the lines matching `pattern` (a JavaScript regular expression, no flags), in the
 * text files whose workspace-relative path matches `glob` (picomatch; a glob without `/`
 * matches the file's name at any depth, so `*.py` finds `src/a.py`), printed as
 * `<path>:<n>: <line>` (a line cut at {@link MAX_LINE_CHARS}), `maxResults` at most; `total`
 * counts matches to {@link MAX_SEARCH_MATCHES}. Binary files and files over
 * {@link MAX_SEARCH_FILE_BYTES} are skipped; links are not followed. A pattern that does not
 * compile is refused with the engine's message; matching stops after `timeoutMs` (default
 * {@link SEARCH_TIMEOUT_MS}).
 */
export async function searchTree(
  root: string,
  pattern: string,
  glob: string | undefined,
  maxResults: number,
  timeoutMs = SEARCH_TIMEOUT_MS,
): Promise<ToolAnswer> {
  const isMatch = compileSearch(pattern, glob);
  if (typeof isMatch !== "function") return isMatch;
  const started = performance.now();
  const out: string[] = [];
  let total = 0;
  let batch: { path: string; text: string }[] = [];
  let batchChars = 0;
  const flush = (): void => {
    if (!batch.length) return;
    const left = timeoutMs - (performance.now() - started);
    if (left <= 0) throw new SearchTimeout();
    let hits: [number, number][];
    try {
      hits = matchBatch(
        pattern,
        batch.map((b) => b.text),
        MAX_SEARCH_MATCHES,
        total,
        left,
      );
    } catch (err) {
      if ((err as { code?: string }).code === "ERR_SCRIPT_EXECUTION_TIMEOUT") throw new SearchTimeout();
      throw err;
    }
    for (const [f, n] of hits) {
      total += 1;
      if (out.length >= maxResults) continue;
      const file = batch[f] as { path: string; text: string };
      const line = file.text.split("\n", n)[n - 1] ?? "";
      out.push(`${file.path}:${n}: ${line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line}`);
    }
    batch = [];
    batchChars = 0;
  };
  try {
    let seen = 0;
    for (const rel of filesUnder(root, root)) {
      if (total >= MAX_SEARCH_MATCHES) break;
      if (!isMatch(rel)) continue;
      if (++seen % YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
      const abs = join(root, rel);
      if ((statSync(abs, { throwIfNoEntry: false })?.size ?? Infinity) > MAX_SEARCH_FILE_BYTES) continue;
      const data = readFileSync(abs);
      if (looksBinary(data)) continue;
      const text = data.toString("utf8");
      batch.push({ path: rel, text });
      batchChars += text.length;
      if (batchChars >= BATCH_CHARS) flush();
    }
    flush();
  } catch (err) {
    if (err instanceof SearchTimeout)
      return refuse(`the pattern took more than ${timeoutMs / 1000} s to match (it backtracks too much): simplify it`);
    throw err;
  }
  if (total === 0) return { output: "no matches", ok: true, total };
  if (total > out.length)
    out.push(`[${total - out.length} more matches${total >= MAX_SEARCH_MATCHES ? " at least" : ""} not shown]`);
  return { output: out.join("\n"), ok: true, total };
}

/** Matching passed {@link SEARCH_TIMEOUT_MS}. */
class SearchTimeout extends Error {}
