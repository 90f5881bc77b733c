/**
 * The repo map of repo mode: the files with their top-level symbols, ranked by relevance to the
 * goal and the failing tests, cut to a token budget. After aider's repo map: a personalised
 * PageRank over the reference graph (file A uses an identifier file B defines: an edge A→B),
 * each file's rank shared out over the definitions it points at, then as many of the best
 * definitions as fit, grouped by file, best file first. The graph comes from every file's
 * lexical index; lezer parses only the files whose definitions can still reach the map (in the
 * order of an upper bound on their best entry), so the text is the one parsing every file
 * would give. The PageRank is computed here, not with graphology-metrics: that one has no
 * personalisation vector, and materialised edges cost referencers × definers per identifier
 * where, factorised through the identifiers, an iteration costs references + definitions.
 */
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CHARS_PER_TOKEN, approxTokens } from "@loopsmith/shared/llm";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  countsAsReference,
  indexFile,
  languageOf,
  readSymbols,
  walkTree,
  type FileIndex,
  type FileSymbols,
  type TokenTable,
} from "./symbols.js";

/** What to map. */
export interface RepoMapInput {
  /** Directory holding the extracted tree (no .git). */
  root: string;
  /** Cache key: the base commit id. Tags are cached per commit (memory LRU + an optional JSON file in cacheDir) so a second map for the same commit does not re-parse. */
  commit: string;
  /** Workspace-relative file paths to consider (tracked files); when absent, walk `root` (skip .git, node_modules, __pycache__, dist, build, .venv). */
  files?: string[];
  /** The task, in words; its identifiers that some file defines count as mentioned (see `focusSymbols`). */
  goal: string;
  /** Files to favour (failing tests' files, files the planner named). */
  focusFiles?: string[];
  /** Identifiers to favour (from failing test names, the goal). The goal's words that match defined identifiers count automatically. */
  focusSymbols?: string[];
  /** Token budget (1 token ≈ 4 characters, use CHARS_PER_TOKEN or approxTokens from @loopsmith/shared). */
  maxTokens: number;
  /** Directory for one JSON file per commit (index, parsed signatures), created when missing; no disk cache when absent. */
  cacheDir?: string;
}

/** A map and how it was made. */
export interface RepoMap {
  /** `path:` lines, each followed by its chosen definitions as `  12│ signature`, best file first. */
  text: string;
  /** Every file considered (binary and unreadable ones left out), best first; scores sum to about 2. */
  ranked: Array<{ path: string; score: number }>;
  /** `approxTokens(text)`, never more than `maxTokens`. */
  tokens: number;
  /** True when no file had to be read: the index and every needed signature came from the cache. */
  fromCache: boolean;
  /** Wall time of the call, ms. */
  ms: number;
  /** Number of files considered. */
  files: number;
}

/** Version of the disk cache; bump it when what an entry holds changes (2: signatures from the lezer parsers, which keep comments out of them). */
const CACHE_VERSION = 2;
const MEMORY_COMMITS = 4;
const IDENT = /[A-Za-z_$][\w$]*/g;
const ALPHA = 0.85;
const NO_SYMBOLS: FileSymbols = { defs: [], refs: [] };

/** What is known at one commit: the walked file list, the tokens, every file's index, the signatures parsed so far. */
interface CommitCache {
  walked?: string[];
  table: TokenTable;
  index: Map<string, FileIndex | null>;
  tags: Map<string, FileSymbols>;
  graph?: { key: string; files: string[]; index: FileIndex[]; g: Graph };
}
const memory = new Map<string, CommitCache>();

/** Empties the in-memory cache (the files in `cacheDir` stay). */
export function clearRepoMapCache(): void {
  memory.clear();
}

/** `a[i]`, 0 when out of range (typed arrays under `noUncheckedIndexedAccess`). */
const at = (a: ArrayLike<number>, i: number): number => a[i] ?? 0;

/** A Float64Array of `n` values `fn(i)` (a loop: `Float64Array.from` with a mapper is ten times slower). */
function fill(n: number, fn: (i: number) => number): Float64Array {
  const a = new Float64Array(n);
  for (let i = 0; i < n; i++) a[i] = fn(i);
  return a;
}

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function cacheFile(cacheDir: string, commit: string): string {
  return join(cacheDir, `repomap-v${CACHE_VERSION}-${commit.replace(/[^\w.-]/g, "_")}.json`);
}

function loadDisk(cacheDir: string, commit: string): CommitCache | undefined {
  try {
    type Stored = {
      v?: number;
      commit?: string;
      walked?: string[];
      tokens?: string[];
      index?: Array<[string, FileIndex | null]>;
      tags?: Array<[string, FileSymbols]>;
    };
    const data = JSON.parse(readFileSync(cacheFile(cacheDir, commit), "utf8")) as Stored;
    const { walked, tokens, index, tags } = data;
    if (data.v !== CACHE_VERSION || data.commit !== commit || !tokens || !index || !tags) return undefined;
    return {
      walked,
      table: { tokens, ids: new Map(tokens.map((t, i) => [t, i])) },
      index: new Map(index),
      tags: new Map(tags),
    };
  } catch {
    return undefined; // absent or unreadable: read the files again
  }
}

/** Writes the commit's cache; a cache that cannot be written is only a slower next call. */
function saveDisk(cacheDir: string, commit: string, c: CommitCache): void {
  const [file, tmp] = [cacheFile(cacheDir, commit), `${cacheFile(cacheDir, commit)}.${process.pid}.tmp`];
  try {
    mkdirSync(cacheDir, { recursive: true });
    writeFileSync(
      tmp,
      JSON.stringify({
        v: CACHE_VERSION,
        commit,
        walked: c.walked,
        tokens: c.table.tokens,
        index: [...c.index],
        tags: [...c.tags],
      }),
    );
    renameSync(tmp, file);
  } catch {
    /* best effort */
  }
}

/** The commit's cache (memory, then disk, then empty), made the most recently used. */
function commitCache(input: RepoMapInput): CommitCache {
  const c = memory.get(input.commit) ??
    (input.cacheDir ? loadDisk(input.cacheDir, input.commit) : undefined) ?? {
      table: { tokens: [], ids: new Map() },
      index: new Map(),
      tags: new Map(),
    };
  memory.delete(input.commit);
  memory.set(input.commit, c);
  while (memory.size > MEMORY_COMMITS) memory.delete(memory.keys().next().value ?? "");
  return c;
}

/** The files to map (given, or walked once per commit) and their indexes; `read` counts files read now. */
function filesAndIndex(
  input: RepoMapInput,
  c: CommitCache,
  dirs: Map<string, string>,
): { files: string[]; read: number } {
  let files: string[];
  if (input.files) files = [...new Set(input.files.map((f) => f.replace(/^\.\//, "")))].sort(byCodeUnit);
  else {
    if (!c.walked && !statSync(input.root, { throwIfNoEntry: false })?.isDirectory()) {
      throw new LoopsmithError("workspace_invalid", `the repository tree ${input.root} is not a directory`);
    }
    files = c.walked ??= walkTree(input.root);
  }
  const todo = files.filter((f) => !c.index.has(f));
  for (const f of todo) c.index.set(f, indexFile(input.root, f, c.table, dirs));
  return { files, read: todo.length };
}

/** How much the references to one identifier weigh (aider's factors). */
function identWeight(ident: string, definers: number): number {
  const specific = ident.length >= 8 && (ident.includes("_") || (/[A-Z]/.test(ident) && /[a-z]/.test(ident)));
  return (specific ? 10 : 1) * (ident.startsWith("_") ? 0.1 : 1) * (definers > 5 ? 0.1 : 1);
}

/**
 * The reference graph, factorised through identifiers. Definition slot d: identifier
 * `defIdent[d]` defined in file `defFile[d]` (slots sorted by identifier, then file).
 * Reference j: file `refs.file[j]` uses identifier `refs.ident[j]` (`refs.root[j]`² times) and
 * some other file defines it; `refs.self[j]` is the using file's own slot for it, or -1.
 */
interface Graph {
  idents: string[];
  identIndex: Map<string, number>;
  /** Slots of identifier k: `defStart[k] .. defStart[k + 1]`. */
  defStart: Int32Array;
  defFile: Int32Array;
  defIdent: Int32Array;
  refs: { file: Int32Array; ident: Int32Array; root: Float64Array; self: Int32Array };
  /** aider's weight of each identifier, before the boost of a mentioned one. */
  baseWeight: Float64Array;
}

/** Slot of identifier `k` in file `f` (binary search), or -1. */
function slot(g: Pick<Graph, "defStart" | "defFile">, k: number, f: number): number {
  let [lo, hi] = [at(g.defStart, k), at(g.defStart, k + 1) - 1];
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (at(g.defFile, mid) === f) return mid;
    [lo, hi] = at(g.defFile, mid) < f ? [mid + 1, hi] : [lo, mid - 1];
  }
  return -1;
}

function buildGraph(index: FileIndex[], table: TokenTable): Graph {
  const defines = new Map<string, number[]>();
  index.forEach((x, i) => x.names.forEach((name) => (defines.get(name) ?? defines.set(name, []).get(name))?.push(i)));
  const idents = [...defines.keys()];
  const identIndex = new Map(idents.map((id, k) => [id, k]));
  const defStart = new Int32Array(idents.length + 1);
  const defFile: number[] = [];
  const defIdent: number[] = [];
  idents.forEach((id, k) => {
    for (const f of defines.get(id) ?? []) {
      defFile.push(f);
      defIdent.push(k);
    }
    defStart[k + 1] = defFile.length;
  });
  const g = { defStart, defFile: new Int32Array(defFile) };
  const identOf = new Int32Array(table.tokens.length).fill(-1); // token number → identifier, or -1
  for (const [k, id] of idents.entries()) if (table.ids.has(id)) identOf[table.ids.get(id) ?? 0] = k;
  const refs = { file: [] as number[], ident: [] as number[], root: [] as number[], self: [] as number[] };
  index.forEach((x, r) => {
    for (let i = 0; i + 1 < x.refs.length; i += 2) {
      const k = identOf[x.refs[i] ?? -1] ?? -1;
      const own = k < 0 ? -1 : slot(g, k, r);
      if (k < 0 || at(defStart, k + 1) - at(defStart, k) === (own >= 0 ? 1 : 0)) continue; // unknown, or defined only here
      refs.file.push(r);
      refs.ident.push(k);
      refs.root.push(Math.sqrt(x.refs[i + 1] ?? 1));
      refs.self.push(own);
    }
  });
  const baseWeight = fill(idents.length, (k) => identWeight(idents[k] ?? "", at(defStart, k + 1) - at(defStart, k)));
  const [file, ident, root, self] = [
    new Int32Array(refs.file),
    new Int32Array(refs.ident),
    new Float64Array(refs.root),
    new Int32Array(refs.self),
  ];
  return {
    idents,
    identIndex,
    defStart,
    defFile: g.defFile,
    defIdent: new Int32Array(defIdent),
    refs: { file, ident, root, self },
    baseWeight,
  };
}

function personalisation(files: string[], g: Graph, input: RepoMapInput, mentioned: Map<string, number>): Float64Array {
  const n = files.length;
  const p = new Float64Array(n);
  const index = new Map(files.map((f, i) => [f, i]));
  for (const f of input.focusFiles ?? []) {
    const i = index.get(f.replace(/^\.\//, ""));
    if (i !== undefined) p[i] = at(p, i) + 1;
  }
  const base = (f: string): string => f.slice(f.lastIndexOf("/") + 1);
  const basenames = new Map<string, number>();
  for (const f of files) basenames.set(base(f), (basenames.get(base(f)) ?? 0) + 1);
  files.forEach((f, i) => {
    const b = base(f);
    if (
      (f.includes("/") && input.goal.includes(f)) ||
      (basenames.get(b) === 1 && b.includes(".") && input.goal.includes(b))
    )
      p[i] = at(p, i) + 1;
  });
  for (const [ident, w] of [...mentioned].sort((a, b) => byCodeUnit(a[0], b[0]))) {
    const k = g.identIndex.get(ident);
    const [from, to] = k === undefined ? [0, 0] : [at(g.defStart, k), at(g.defStart, k + 1)];
    for (let d = from; d < to; d++) p[at(g.defFile, d)] = at(p, at(g.defFile, d)) + w / (to - from);
  }
  const total = p.reduce((a, b) => a + b, 0);
  if (total === 0) p.fill(1 / Math.max(1, n));
  else for (let i = 0; i < n; i++) p[i] = at(p, i) / total;
  return p;
}

/** File scores (PageRank + personalisation share) and the rank flowing into each definition slot. */
type Ranking = { score: Float64Array; p: Float64Array; defFlow: Float64Array; mentioned: Map<string, number> };

/**
 * Personalised PageRank over the files: a referencer links to every other definer of an
 * identifier it uses, weight w(identifier) · √(uses); teleport and dangling mass go to the
 * personalisation. Per identifier, what its referencers send is summed once and handed to
 * each definer, less what a referencer would send to itself.
 */
function rank(files: string[], g: Graph, input: RepoMapInput): Ranking {
  const n = files.length;
  // Mentioned identifiers and how much: a focus symbol 1, a word of the goal 1 / (1 + files using it),
  // so that "urlsplit" outweighs "when". A mention boosts references up to ×10 (aider's factor).
  const users = new Int32Array(g.idents.length);
  for (const k of g.refs.ident) users[k] = at(users, k) + 1;
  const mentioned = new Map<string, number>();
  for (const m of input.goal.matchAll(IDENT)) {
    const k = g.identIndex.get(m[0]);
    if (m[0].length >= 3 && k !== undefined) mentioned.set(m[0], 1 / (1 + at(users, k)));
  }
  for (const s of input.focusSymbols ?? []) for (const m of s.matchAll(IDENT)) mentioned.set(m[0], 1);
  const p = personalisation(files, g, input, mentioned);
  const weight = fill(g.idents.length, (k) => (1 + 9 * (mentioned.get(g.idents[k] ?? "") ?? 0)) * at(g.baseWeight, k));
  const { file: rFile, ident: rIdent, root: rRoot, self: rSelf } = g.refs;
  const R = rFile.length;
  const out = new Float64Array(n);
  for (let j = 0; j < R; j++) {
    const k = at(rIdent, j);
    const others = at(g.defStart, k + 1) - at(g.defStart, k) - (at(rSelf, j) >= 0 ? 1 : 0);
    out[at(rFile, j)] = at(out, at(rFile, j)) + at(weight, k) * at(rRoot, j) * others;
  }
  // cn[j]: the share of its file's rank that reference j sends to each other definer.
  const cn = fill(R, (j) => (at(weight, at(rIdent, j)) * at(rRoot, j)) / at(out, at(rFile, j)));
  const mass = new Float64Array(g.idents.length);
  const spread = (x: Float64Array, next: Float64Array): void => {
    mass.fill(0);
    for (let j = 0; j < R; j++) mass[at(rIdent, j)] = at(mass, at(rIdent, j)) + at(x, at(rFile, j)) * at(cn, j);
    for (let d = 0; d < g.defFile.length; d++)
      next[at(g.defFile, d)] = at(next, at(g.defFile, d)) + ALPHA * at(mass, at(g.defIdent, d));
    for (let j = 0; j < R; j++) {
      if (at(rSelf, j) >= 0) next[at(rFile, j)] = at(next, at(rFile, j)) - ALPHA * at(x, at(rFile, j)) * at(cn, j);
    }
  };
  let x: Float64Array = new Float64Array(p);
  for (let iter = 0; iter < 100; iter++) {
    let dangling = 0;
    for (let i = 0; i < n; i++) if (out[i] === 0) dangling += at(x, i);
    const next = fill(n, (i) => at(p, i) * (1 - ALPHA + ALPHA * dangling));
    spread(x, next);
    let err = 0;
    for (let i = 0; i < n; i++) err += Math.abs(at(next, i) - at(x, i));
    x = next;
    if (err < 1e-8 * Math.max(1, n)) break;
  }
  spread(x, new Float64Array(n));
  const defFlow = fill(g.defIdent.length, (d) => ALPHA * at(mass, at(g.defIdent, d)));
  for (let j = 0; j < R; j++) {
    const d = at(rSelf, j);
    if (d >= 0) defFlow[d] = at(defFlow, d) - ALPHA * at(x, at(rFile, j)) * at(cn, j);
  }
  return { score: fill(n, (i) => at(x, i) + at(p, i)), p, defFlow, mentioned };
}

/** One unit of the map: definition `def` of file `file`, or (def -1) a file without definitions. */
type Entry = { file: number; def: number; score: number; line: number };

/** The map's text for the chosen entries: files best first, each with its definitions (and their classes) in source order. */
function render(files: string[], syms: Map<number, FileSymbols>, score: Float64Array, chosen: Entry[]): string {
  const shown = new Map<number, Set<number>>();
  for (const e of chosen) {
    const set = shown.get(e.file) ?? new Set<number>();
    shown.set(e.file, set);
    const defs = syms.get(e.file)?.defs ?? [];
    for (let i = e.def, depth = Infinity; i >= 0 && depth > 0; i--) {
      const d = defs[i]?.depth ?? 0;
      if (d < depth) {
        set.add(i); // the definition, then each enclosing one (the nearest earlier with less depth)
        depth = d;
      }
    }
  }
  const lines: string[] = [];
  for (const f of [...shown.keys()].sort(
    (a, b) => at(score, b) - at(score, a) || byCodeUnit(files[a] ?? "", files[b] ?? ""),
  )) {
    const set = [...(shown.get(f) ?? [])].sort((a, b) => a - b);
    lines.push(set.length > 0 ? `${files[f]}:` : (files[f] ?? ""));
    for (const d of set.map((i) => syms.get(f)?.defs[i]))
      if (d) lines.push(`${String(d.line).padStart(4)}│ ${"    ".repeat(d.depth)}${d.signature}`);
  }
  return lines.length > 0 ? `${lines.join("\n")}\n` : "";
}

/**
 * Builds the repo map of a tree (see the module comment). Deterministic: the same input and
 * tree give the same text, whatever the cache held.
 * @throws LoopsmithError `workspace_invalid` when `files` is absent and `root` is not a directory
 */
export async function buildRepoMap(input: RepoMapInput): Promise<RepoMap> {
  const [t0, c, dirs] = [performance.now(), commitCache(input), new Map<string, string>()];
  const { files: all, read } = filesAndIndex(input, c, dirs);
  const key = all.join("\n");
  if (c.graph?.key !== key) {
    const files = all.filter((f) => c.index.get(f));
    const index = files.map((f) => c.index.get(f) as FileIndex);
    c.graph = { key, files, index, g: buildGraph(index, c.table) };
  }
  const { files, index, g } = c.graph;
  const { score, p, defFlow, mentioned } = rank(files, g, input);
  // A file's own share (a tenth of its score, a third of its personalisation), spread over the names its
  // index found: known before parsing, so the bound below is tight.
  const own = fill(
    files.length,
    (f) => (0.1 * at(score, f) + 0.3 * at(p, f)) / Math.max(1, index[f]?.names.length ?? 0),
  );
  // Upper bound of each file's best entry; files are parsed best bound first.
  const best = new Float64Array(files.length);
  for (let d = 0; d < defFlow.length; d++)
    best[at(g.defFile, d)] = Math.max(at(best, at(g.defFile, d)), at(defFlow, d));
  // A file defining a mentioned name has it among its tokens (a name the tokens leave out: any file may).
  const ids = [...mentioned].map(([m, w]) => [countsAsReference(m) ? (c.table.ids.get(m) ?? -1) : -2, w] as const);
  const has = (f: number, id: number): boolean =>
    id === -2 || (id >= 0 && (index[f]?.refs ?? []).some((t, i) => i % 2 === 0 && t === id));
  const named = (f: number): number => Math.max(0, ...ids.filter(([id]) => has(f, id)).map(([, w]) => w));
  const bound = fill(files.length, (f) => (at(best, f) + at(own, f) + named(f) * at(score, f)) * (1 + 1e-9));
  const order = files.map((_, f) => f).sort((a, b) => at(bound, b) - at(bound, a) || a - b);
  const hi = Math.max(0, Math.floor((input.maxTokens * CHARS_PER_TOKEN) / 2)); // a line has ≥ 2 characters
  const syms = new Map<number, FileSymbols>();
  const entries: Entry[] = [];
  let [next, parsed, lo, text] = [0, 0, 0, ""];
  for (;;) {
    for (const end = Math.min(files.length, next + Math.max(16, next >> 2)); next < end && hi > 0; next++) {
      const f = order[next] ?? 0;
      const path = files[f] ?? "";
      let s = c.tags.get(path) ?? (index[f]?.skipped || !languageOf(path) ? NO_SYMBOLS : undefined);
      if (!s) {
        c.tags.set(path, (s = readSymbols(input.root, path, dirs) ?? NO_SYMBOLS));
        parsed++;
      }
      syms.set(f, s);
      const fs = at(score, f);
      if (s.defs.length === 0) entries.push({ file: f, def: -1, score: at(own, f), line: 0 });
      const same = new Map<string, number>(); // definitions sharing a name share its flow
      for (const d of s.defs) same.set(d.name, (same.get(d.name) ?? 0) + 1);
      s.defs.forEach((d, i) => {
        const k = g.identIndex.get(d.name);
        const flow = k === undefined ? 0 : at(defFlow, slot(g, k, f)) / (same.get(d.name) ?? 1);
        entries.push({ file: f, def: i, score: flow + at(own, f) + (mentioned.get(d.name) ?? 0) * fs, line: d.line });
      });
    }
    entries.sort(
      (a, b) =>
        b.score - a.score || byCodeUnit(files[a.file] ?? "", files[b.file] ?? "") || a.line - b.line || a.def - b.def,
    );
    // Entries scoring above every unparsed file's bound are in their final order.
    const limit = next < files.length && hi > 0 ? at(bound, order[next] ?? 0) : -Infinity;
    const certain = entries.findIndex((e) => e.score <= limit);
    const known = certain < 0 ? entries.length : certain;
    let top = Math.min(known, hi);
    while (lo < top) {
      const mid = Math.ceil((lo + top) / 2);
      const candidate = render(files, syms, score, entries.slice(0, mid));
      if (approxTokens(candidate) <= input.maxTokens) [lo, text] = [mid, candidate];
      else top = mid - 1;
    }
    if (lo < known || lo >= hi || next >= files.length) break;
  }
  if ((read > 0 || parsed > 0) && input.cacheDir) saveDisk(input.cacheDir, input.commit, c);
  const ranked = files
    .map((path, i) => ({ path, score: at(score, i) }))
    .sort((a, b) => b.score - a.score || byCodeUnit(a.path, b.path));
  return {
    text,
    ranked,
    tokens: approxTokens(text),
    fromCache: read === 0 && parsed === 0,
    ms: performance.now() - t0,
    files: files.length,
  };
}
