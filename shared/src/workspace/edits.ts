/**
 * Repo mode: applies the builder's search/replace edits ({@link Edit}) to a base tree, explains
 * the edits that do not apply in a way a model can act on, and turns the result into a
 * unified diff that `git apply` reads.
 *
 * Pure apart from `lstat` under `opts.root` (the symlink check): the base is read through a
 * {@link ReadBase} callback, nothing is written.
 */
import { lstatSync } from "node:fs";
import { join } from "node:path";
import { formatPatch, structuredPatch } from "diff";
import type { FileChange } from "../contracts/common.js";
import type { Edit, EditFailure, EditFailureReason } from "../contracts/repo.js";
import { LoopsmithError } from "../runtime/errors.js";

/** Reads a base file's text (`undefined` when the file is absent). Paths are normalised, repository-relative, `/`-separated. */
export type ReadBase = (path: string) => string | undefined;

/**
 * The outcome of {@link applyEdits}: every changed file in full and the deleted paths (both
 * sorted by path), or every failure found. Never a partial apply.
 */
export type ApplyResult =
  { ok: true; changed: FileChange[]; deleted: string[] } | { ok: false; failures: EditFailure[] };

/** The outcome of {@link checkEditPath}: the normalised path, or why it is refused. */
export type PathCheck = { ok: true; path: string } | { ok: false; message: string };

/** Context lines shown around the nearest window of a `not_found` failure. */
const CONTEXT = 2;
/** At most this many lines are quoted in one `nearest`. */
const MAX_QUOTED = 80;
/** At most this many (search line × file line) pairs are compared when looking for the nearest lines. */
const FUZZY_PAIRS = 200_000;

/**
 * Checks and normalises an edit's path. Refused: an empty path, an absolute path, a
 * backslash, NUL, a `..` segment, a `.git` segment (any case: `.git`, `.git/config`,
 * `vendor/x/.git/HEAD`), and, with `root` (a directory holding the extracted base tree), a
 * path on which an existing entry under `root` is a symbolic link (each segment is
 * `lstat`ed, the last one included). `.` and empty segments are dropped: `./a//b` is `a/b`.
 * @param root - the extracted tree; without it no file system access is made
 * @returns the normalised path, or a one-sentence reason. Never throws.
 */
export function checkEditPath(path: string, root?: string): PathCheck {
  if (typeof path !== "string" || path.length === 0) return { ok: false, message: "the path is empty" };
  if (path.includes("\0")) return { ok: false, message: "the path contains a NUL character" };
  if (path.includes("\\")) return { ok: false, message: "the path contains a backslash; use / between directories" };
  if (path.startsWith("/"))
    return { ok: false, message: "the path is absolute; paths are relative to the repository root" };
  const segments = path.split("/").filter((s) => s !== "" && s !== ".");
  if (segments.length === 0) return { ok: false, message: "the path names no file" };
  if (segments.includes("..")) return { ok: false, message: "the path contains a '..' segment" };
  if (segments.some((s) => s.toLowerCase() === ".git"))
    return { ok: false, message: "the path is inside git's own .git directory" };
  const normal = segments.join("/");
  if (root !== undefined) {
    for (let k = 1; k <= segments.length; k++) {
      const prefix = segments.slice(0, k).join("/");
      let isLink: boolean;
      try {
        isLink = lstatSync(join(root, prefix)).isSymbolicLink();
      } catch {
        break; // absent (or under a file): nothing further on the path exists
      }
      if (isLink)
        return { ok: false, message: `${prefix} is a symbolic link in the repository; edits may not go through links` };
    }
  }
  return { ok: true, path: normal };
}

/** Lines of a text; a final newline does not start another line. */
function splitLines(text: string): string[] {
  const lines = text.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/** 1-based line number of the character at `index`. */
function lineOf(text: string, index: number): number {
  let n = 1;
  for (let i = text.indexOf("\n"); i !== -1 && i < index; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

/** Start indices of `needle` in `hay`, overlapping ones included, at most `limit`. */
function occurrences(hay: string, needle: string, limit = 1_000): number[] {
  const out: number[] = [];
  for (let i = hay.indexOf(needle); i !== -1 && out.length < limit; i = hay.indexOf(needle, i + 1)) out.push(i);
  return out;
}

/** Lines `from`..`to` (0-based, end exclusive) with right-aligned 1-based numbers: `  12 | text`. */
function quote(lines: readonly string[], from: number, to: number): string {
  const stop = Math.min(to, lines.length);
  const start = Math.max(0, from);
  const end = Math.min(stop, start + MAX_QUOTED);
  const width = String(end).length;
  const out: string[] = [];
  for (let i = start; i < end; i++)
    out.push(`${String(i + 1).padStart(width)} | ${(lines[i] ?? "").replace(/\r$/, "")}`);
  if (end < stop) out.push(`${" ".repeat(width)} | … (${plural(stop - end, "more line")})`);
  return out.join("\n");
}

/** `n thing` or `n things`. */
function plural(n: number, thing: string): string {
  return `${n} ${thing}${n === 1 ? "" : "s"}`;
}

/** `line 4` or `lines 4–6` (1-based, inclusive). */
function lineRange(first: number, last: number): string {
  return first === last ? `line ${first}` : `lines ${first}–${last}`;
}

/** Character bigrams of a trimmed line, cached. */
function bigramsOf(cache: Map<string, Set<string>>, line: string): Set<string> {
  let grams = cache.get(line);
  if (!grams) {
    grams = new Set<string>();
    if (line.length < 2) grams.add(line);
    for (let i = 0; i + 1 < line.length; i++) grams.add(line.slice(i, i + 2));
    cache.set(line, grams);
  }
  return grams;
}

/** Dice similarity of two trimmed lines, in [0, 1]. */
function dice(cache: Map<string, Set<string>>, a: string, b: string): number {
  if (a === b) return 1;
  if (!a || !b) return 0;
  const ga = bigramsOf(cache, a);
  const gb = bigramsOf(cache, b);
  let common = 0;
  for (const g of ga) if (gb.has(g)) common++;
  return (2 * common) / (ga.size + gb.size);
}

/**
 * The window of `fileLines` (as long as the search, or the whole file when shorter) most
 * similar to `searchLines`: each probed search line scores its best match within two lines
 * of its place in the window (Dice on character bigrams of the trimmed lines). Blank search
 * lines are not probed; a match one or two lines away counts 0.98. In a large search only evenly spaced lines are, so that at most
 * {@link FUZZY_PAIRS} line pairs are compared. Ties go to the earliest window.
 */
function nearestWindow(
  fileLines: readonly string[],
  searchLines: readonly string[],
): { start: number; length: number; score: number } {
  const file = fileLines.map((l) => l.trim());
  const search = searchLines.map((l) => l.trim());
  const length = Math.min(search.length, file.length);
  const nonBlank = search.flatMap((l, i) => (l ? [i] : []));
  const count = Math.max(1, Math.min(nonBlank.length, Math.floor(FUZZY_PAIRS / Math.max(1, file.length))));
  const probes =
    nonBlank.length <= count
      ? nonBlank
      : Array.from({ length: count }, (_, k) => nonBlank[Math.floor((k * nonBlank.length) / count)] ?? 0);
  const cache = new Map<string, Set<string>>();
  // sims[p * m + j]: similarity of probe p and file line j, computed once (-1: not yet).
  const m = file.length;
  const sims = new Float32Array(probes.length * m).fill(-1);
  const sim = (p: number, j: number): number => {
    const at = p * m + j;
    let v = sims[at] ?? 0;
    if (v < 0) sims[at] = v = dice(cache, search[probes[p] ?? 0] ?? "", file[j] ?? "");
    return v;
  };
  let best = { start: 0, length, score: -1 };
  for (let s = 0; s + length <= m; s++) {
    let score = 0;
    probes.forEach((i, p) => {
      let top = 0;
      // A line found where it belongs beats one found a line or two away (which breaks ties).
      for (let j = Math.max(s, s + i - 2); j <= Math.min(s + length - 1, s + i + 2) && top < 1; j++)
        top = Math.max(top, j === s + i ? sim(p, j) : 0.98 * sim(p, j));
      score += top;
    });
    if (score > best.score) best = { start: s, length, score };
  }
  return { ...best, score: Math.max(0, best.score) / Math.max(1, probes.length) };
}

/**
 * Where `search` matches `text` line by line once `norm` is applied to both (the first
 * search line may be the end of a file line, the last one the start of one). Start line
 * indices, 0-based.
 */
function tolerantMatches(
  fileLines: readonly string[],
  searchLines: readonly string[],
  norm: (s: string) => string,
): number[] {
  const want = searchLines.map(norm);
  if (!want.some((l) => l.trim())) return [];
  const have = fileLines.map(norm);
  const n = want.length;
  const out: number[] = [];
  for (let s = 0; s + n <= have.length; s++) {
    let ok = true;
    for (let i = 0; i < n && ok; i++) {
      const h = have[s + i] ?? "";
      const w = want[i] ?? "";
      if (n === 1) ok = h.includes(w);
      else if (i === 0) ok = h.endsWith(w);
      else if (i === n - 1) ok = h.startsWith(w);
      else ok = h === w;
    }
    if (ok) out.push(s);
  }
  return out;
}

/** Why `search` is not in `text`, with the nearest lines. */
function notFound(index: number, path: string, text: string, search: string): EditFailure {
  const fileLines = splitLines(text);
  const searchLines = splitLines(search);
  const base = { index, path, reason: "not_found" as const };
  if (text.length === 0)
    return { ...base, message: `the search text of edit ${index + 1} is not in ${path}: the file is empty` };
  const kinds: Array<[string, (s: string) => string]> = [
    ["line endings (\\r\\n against \\n)", (s) => s.replace(/\r$/, "")],
    ["trailing whitespace", (s) => s.replace(/\s+$/, "")],
    ["indentation or other whitespace", (s) => s.trim().replace(/\s+/g, " ")],
  ];
  for (const [what, norm] of kinds) {
    const at = tolerantMatches(fileLines, searchLines, norm);
    const first = at[0];
    if (first === undefined) continue;
    const last = first + searchLines.length;
    const where =
      at.length === 1
        ? lineRange(first + 1, last)
        : `${at.length} places (the first, ${lineRange(first + 1, last)}, is shown)`;
    return {
      ...base,
      message: `the search text of edit ${index + 1} is not in ${path} exactly: it differs from ${where} only in ${what}; copy the exact text of the file into search`,
      nearest: quote(fileLines, first - CONTEXT, last + CONTEXT),
    };
  }
  const w = nearestWindow(fileLines, searchLines);
  const pct = Math.round(w.score * 100);
  return {
    ...base,
    message: `the search text of edit ${index + 1} (${plural(searchLines.length, "line")}) is not in ${path}; the most similar are ${lineRange(w.start + 1, w.start + w.length)} (about ${pct}% alike)`,
    nearest: quote(fileLines, w.start - CONTEXT, w.start + w.length + CONTEXT),
  };
}

/** `search` occurs more than once: where, with a line around each of the first three. */
function ambiguous(index: number, path: string, text: string, search: string, at: readonly number[]): EditFailure {
  const fileLines = splitLines(text);
  const span = splitLines(search).length;
  const lines = at.map((i) => lineOf(text, i));
  const shown = lines.slice(0, 8).join(", ") + (lines.length > 8 ? ", …" : "");
  const count = at.length >= 1_000 ? "1000 or more" : String(at.length);
  return {
    index,
    path,
    reason: "ambiguous",
    message: `the search text of edit ${index + 1} occurs ${count} times in ${path} (starting at lines ${shown}); it must occur exactly once: add neighbouring lines to it`,
    nearest: lines
      .slice(0, 3)
      .map((l) => quote(fileLines, l - 2, l - 1 + span + 1))
      .join("\n…\n"),
  };
}

/**
 * Applies `edits` in order to the base that `readBase` reads; several edits to one file each
 * see the result of the previous ones. All or nothing: when any edit fails, every failure
 * that can be found is reported (later edits still run against what applied so far) and no
 * change is returned.
 *
 * - a non-empty `search` must occur exactly once in the current text (`not_found`, with the
 *   nearest lines and a note when only whitespace differs, which is never applied silently;
 *   `ambiguous`, with the count); the file must exist (`missing_file`);
 * - an empty `search` creates the file with `replace` as its content: it must not exist
 *   (in base, or created earlier and not deleted since) and no parent may be a file
 *   (`file_exists`);
 * - `delete: true` removes the file, which must exist (`missing_file`);
 * - every path goes through {@link checkEditPath} (`path_escape`), with `opts.root` for the
 *   symlink check.
 *
 * A file whose final text equals its base is not in `changed`; a file edited and then
 * deleted is only in `deleted`; a file created and then edited is in `changed`.
 * @param opts.root - a directory holding the extracted base tree (symlink check; a created
 *   path that is a directory there is `file_exists`)
 * @returns {@link ApplyResult}; `changed` and `deleted` sorted by path. Throws only what
 *   `readBase` throws.
 */
export function applyEdits(edits: readonly Edit[], readBase: ReadBase, opts: { root?: string } = {}): ApplyResult {
  const work = new Map<string, string | null>(); // null: deleted
  const failures: EditFailure[] = [];
  const current = (p: string): string | undefined => (work.has(p) ? (work.get(p) ?? undefined) : readBase(p));
  const fail = (index: number, path: string, reason: EditFailureReason, message: string): void =>
    void failures.push({ index, path, reason, message });
  edits.forEach((edit, index) => {
    const checked = checkEditPath(edit.path, opts.root);
    if (!checked.ok)
      return fail(
        index,
        String(edit.path),
        "path_escape",
        `edit ${index + 1} cannot touch ${JSON.stringify(edit.path)}: ${checked.message}`,
      );
    const path = checked.path;
    const text = current(path);
    if (edit.delete) {
      if (text === undefined)
        return fail(index, path, "missing_file", `edit ${index + 1} deletes ${path}, which does not exist`);
      work.set(path, null);
      return;
    }
    const search = edit.search ?? "";
    const replace = edit.replace ?? "";
    if (search === "") {
      if (text !== undefined) {
        return fail(
          index,
          path,
          "file_exists",
          `edit ${index + 1} creates ${path} (its search is empty), but the file exists; to change it, search for the exact text to replace`,
        );
      }
      const segments = path.split("/");
      for (let k = 1; k < segments.length; k++) {
        const parent = segments.slice(0, k).join("/");
        if (current(parent) !== undefined)
          return fail(index, path, "file_exists", `edit ${index + 1} creates ${path}, but ${parent} is a file`);
      }
      if (opts.root !== undefined && !work.has(path) && isDirectory(join(opts.root, path))) {
        return fail(
          index,
          path,
          "file_exists",
          `edit ${index + 1} creates ${path}, but that is a directory in the repository`,
        );
      }
      work.set(path, replace);
      return;
    }
    if (text === undefined)
      return fail(
        index,
        path,
        "missing_file",
        `edit ${index + 1} changes ${path}, which does not exist; to create a file, leave search empty`,
      );
    const at = occurrences(text, search);
    const first = at[0];
    if (first === undefined) return void failures.push(notFound(index, path, text, search));
    if (at.length > 1) return void failures.push(ambiguous(index, path, text, search, at));
    work.set(path, text.slice(0, first) + replace + text.slice(first + search.length));
  });
  if (failures.length > 0) return { ok: false, failures };
  const changed: FileChange[] = [];
  const deleted: string[] = [];
  for (const [path, text] of [...work].sort(([a], [b]) => compare(a, b))) {
    const base = readBase(path);
    if (text === null && base !== undefined) deleted.push(path);
    else if (text !== null && text !== base) changed.push({ path, content: text });
  }
  return { ok: true, changed, deleted };
}

/** True when `p` is a directory (not through a final symlink). */
function isDirectory(p: string): boolean {
  try {
    return lstatSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** Code-unit order, as git sorts ASCII paths. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A Markdown fence longer than any run of backticks in `text`. */
function fenceFor(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  return "`".repeat(longest + 1);
}

/**
 * The text fed back to the builder when edits fail: that none was applied, then each
 * failure (its number, path, reason and message) and, where known, the nearest lines of the
 * file in a fence, numbered (`  12 | text`; the numbers and ` | ` are not part of the file).
 * @returns `""` for no failures
 */
export function renderEditFailures(failures: readonly EditFailure[]): string {
  if (failures.length === 0) return "";
  const n = failures.length;
  const out = [
    `${n === 1 ? "One edit" : `${n} edits`} could not be applied, so none of the edits was applied. Fix ${n === 1 ? "it" : "them"} and send the complete list of edits again. ` +
      "Each search must be copied exactly from the file (spaces, indentation and line breaks included) and occur in it exactly once.",
  ];
  for (const f of failures) {
    out.push("", `Edit ${f.index + 1} (${f.path}), ${f.reason}: ${f.message}.`.replace(/\.\.$/, "."));
    if (f.nearest) {
      const fence = fenceFor(f.nearest);
      out.push(
        `The nearest lines of ${f.path} (the line numbers and " | " are not part of the file):`,
        fence,
        f.nearest,
        fence,
      );
    }
  }
  return out.join("\n");
}

/**
 * A unified diff of the change against the base, for `git apply` (and `git apply --index`):
 * one `diff --git a/<p> b/<p>` section per file, paths sorted, three lines of context;
 * `new file mode 100644` for a path absent from the base, `deleted file mode 100644` for a
 * deleted one; `\ No newline at end of file` where a side ends without one; paths C-quoted
 * as git does when they hold special characters. A changed file equal to its base is left
 * out. `""` when nothing changes.
 * @throws LoopsmithError `bad_request` when a path is both changed and deleted, or a deleted
 *   path is not in the base
 */
export function unifiedPatch(readBase: ReadBase, changed: readonly FileChange[], deleted: readonly string[]): string {
  const entries = new Map<string, string | null>();
  for (const f of changed) entries.set(f.path, f.content);
  for (const p of deleted) {
    if (entries.has(p)) throw new LoopsmithError("bad_request", `${p} is both changed and deleted`);
    entries.set(p, null);
  }
  let out = "";
  for (const [path, text] of [...entries].sort(([a], [b]) => compare(a, b))) {
    const base = readBase(path);
    if (text === null && base === undefined)
      throw new LoopsmithError("bad_request", `cannot delete ${path}: it is not in the base`);
    if (text === base) continue;
    const isCreate = base === undefined;
    const isDelete = text === null;
    const patch = structuredPatch(
      isCreate ? "/dev/null" : `a/${path}`,
      isDelete ? "/dev/null" : `b/${path}`,
      base ?? "",
      text ?? "",
      undefined,
      undefined,
      { context: 3 },
    );
    out += formatPatch({ ...patch, isGit: true, isCreate, isDelete });
  }
  return out;
}
