/**
 * The judging code of loopsmith, derived from its imports, for improvement runs on loopsmith
 * itself (`self`). A list of paths goes stale as soon as code moves: a rule moved to a new
 * file would leave the list and become editable by the generations it judges. So the
 * protected code is what the judging code imports, followed transitively over the PARENT
 * tree of the generation (the repository being improved is a copy of loopsmith, not the
 * loopsmith that runs): a module that moves is still imported by the code that uses it, and
 * stays protected wherever it lands.
 *
 * The roots ({@link JUDGING_ROOTS}) are the improvement loop (`services/architect/src/improve/`:
 * the decision, the guards, the change validation and the tampering check, the benchmark and
 * metric runs, the calibration and the split), the executor (the sandbox and its verdict) and
 * the reviewer (the static gate and the LLM review). From each, relative imports and imports of
 * the repository's workspace packages are followed. The rule is whole files by module specifier:
 * an import of a barrel such as `@loopsmith/shared` (`shared/src/index.ts`, which re-exports a
 * few hundred names) protects every module the barrel re-exports, so all of `shared/src` but
 * its tests is protected, and so is the part of the architect the loop uses (the file listing
 * and repository map of a generation, the durable consumer of the improver). That is what the
 * judging code really loads; a finer rule (only the names an importer takes from a barrel) is
 * not needed while the rest of the repository (the memory service, the builder, the CLI, the
 * architect's agent loop and conductor) stays open to improvement.
 */
import { posix } from "node:path";
import picomatch from "picomatch";
import ts from "typescript";
import { LoopsmithError } from "@loopsmith/shared/runtime";

/**
 * Where the judging code starts, as globs of tree paths (`**` allowed): the improvement loop, and
 * the executor's and the reviewer's sources (their `main.ts` processes included), tests included.
 */
export const JUDGING_ROOTS: readonly string[] = [
  "services/architect/src/improve/**",
  "services/executor/src/**",
  "services/reviewer/src/**",
];

/** The files of a tree and a way to read one (undefined when it cannot be read as text). */
export interface SourceTree {
  files: readonly string[];
  read(path: string): string | undefined;
}

/** A test file beside the code (`*.test.ts`, `*.spec.js`, …). */
const isTest = (path: string) => /\.(test|spec)\.[cm]?[jt]sx?$/.test(path);
/** Files whose imports are followed. */
const CODE = /\.[cm]?[jt]sx?$/;
/** Files that configure the code of their folder and the folders below it. */
const CONFIG = /^(package\.json|package-lock\.json|tsconfig(\.[^/]*)?\.json)$/;

/** A workspace package of the tree: its folder and its manifest's `main` and `exports`. */
interface Workspace {
  dir: string;
  main: unknown;
  exports: unknown;
}

/**
 * The judging code of a loopsmith tree, each path with why it is protected, as a clause that
 * follows the path in a sentence: `is judging code (services/architect/src/improve/**)` for a
 * root, `is imported by services/architect/src/improve/decision.ts (via shared/src/index.ts)`
 * for an import (the shortest chain from a root, root first), `configures judging code below
 * it (…)` for a `package.json`, `package-lock.json` or `tsconfig*.json` in the folder of a
 * protected module or a folder above it.
 *
 * Resolution follows the repository's own layout: a relative specifier names a file of the
 * tree, a `.js` (`.mjs`, `.cjs`, `.jsx`) specifier its `.ts` (`.mts`, `.cts`, `.tsx`) source
 * as NodeNext resolution does, a bare one a file or folder `index`; a package specifier whose
 * name is a workspace of the root `package.json` (`workspaces`) resolves through that
 * package's `exports` (every target of the matching entry, conditions included; `*` patterns
 * understood), else its `main` or its `index`. Other packages (`node_modules`) and Node's
 * built-ins are not in the tree and are not followed. Imports come from `ts.preProcessFile`:
 * static and dynamic imports, `export … from`, `require` calls and `import x = require()`,
 * type-only ones included; nothing is type-checked.
 * @param roots - where the judging code starts (see {@link JUDGING_ROOTS})
 * @throws LoopsmithError `repo_invalid` when a root matches no file of the tree: the tree is not
 *   the loopsmith the roots describe, and protecting nothing would let its judging code change
 */
export function judgingCode(tree: SourceTree, roots: readonly string[] = JUDGING_ROOTS): Map<string, string> {
  const files = new Set(tree.files);
  const workspaces = workspacePackages(tree);
  /** Each protected module's importer on the shortest chain from a root; undefined for a root. */
  const importer = new Map<string, string | undefined>();
  const rootOf = new Map<string, string>();
  for (const root of roots) {
    const isRoot = picomatch(root, { dot: true });
    const hits = tree.files.filter((f) => isRoot(f));
    if (hits.length === 0)
      throw new LoopsmithError(
        "repo_invalid",
        `the judging code of loopsmith starts at ${root}, which matches no file of the repository: it cannot be protected`,
      );
    for (const hit of hits) if (!rootOf.has(hit)) rootOf.set(hit, root);
  }
  // Modules before tests, so that a chain names the code that imports a file rather than a test of it.
  const order = [...rootOf.keys()].sort((a, b) => Number(isTest(a)) - Number(isTest(b)));
  for (const root of order) importer.set(root, undefined);
  for (let i = 0; i < order.length; i++) {
    const file = order[i] ?? "";
    const text = CODE.test(file) ? tree.read(file) : undefined;
    if (text === undefined) continue;
    for (const spec of importsOf(text))
      for (const target of resolveImport(spec, file, files, workspaces)) {
        if (importer.has(target)) continue;
        importer.set(target, file);
        order.push(target);
      }
  }
  const out = new Map<string, string>();
  for (const path of order) {
    const chain: string[] = [];
    for (let at = importer.get(path); at !== undefined; at = importer.get(at)) chain.unshift(at);
    const [root, ...via] = chain;
    out.set(
      path,
      root === undefined
        ? `is judging code (${rootOf.get(path) ?? path})`
        : `is imported by ${root}${via.length ? ` (via ${via.join(" → ")})` : ""}`,
    );
  }
  const configs = new Map<string, string[]>();
  for (const f of tree.files) {
    if (!CONFIG.test(posix.basename(f))) continue;
    const dir = posix.dirname(f);
    configs.set(dir, [...(configs.get(dir) ?? []), f]);
  }
  for (const path of order)
    for (let dir = posix.dirname(path); ; dir = posix.dirname(dir)) {
      for (const config of configs.get(dir) ?? [])
        if (!out.has(config)) out.set(config, `configures judging code below it (${path})`);
      if (dir === ".") break;
    }
  return out;
}

/** The module specifiers a file imports or re-exports. */
function importsOf(text: string): string[] {
  return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
}

/** The tree files a specifier of `from` resolves to: none for a package outside the tree. */
function resolveImport(
  spec: string,
  from: string,
  files: ReadonlySet<string>,
  workspaces: ReadonlyMap<string, Workspace>,
): string[] {
  if (spec === "." || spec === ".." || spec.startsWith("./") || spec.startsWith("../"))
    return resolveFile(posix.join(posix.dirname(from), spec), files);
  const parts = spec.split("/");
  const nameLength = spec.startsWith("@") ? 2 : 1;
  const ws = workspaces.get(parts.slice(0, nameLength).join("/"));
  if (!ws) return [];
  const sub = parts.slice(nameLength).join("/");
  return exportTargets(ws, sub === "" ? "." : `./${sub}`, files);
}

/** The tree file a path names: its TypeScript source for a `.js` path, else itself, else with an extension or as a folder's `index`. */
function resolveFile(path: string, files: ReadonlySet<string>): string[] {
  if (path.startsWith("../")) return [];
  const js = /\.([cm]?)js(x?)$/.exec(path);
  const stem = js ? path.slice(0, -js[0].length) : path;
  const candidates = js
    ? [`${stem}.${js[1] ?? ""}ts${js[2] ?? ""}`, path]
    : [path, ...["", "/index"].flatMap((s) => [".ts", ".tsx", ".d.ts", ".js", ".mjs"].map((e) => `${path}${s}${e}`))];
  const hit = candidates.find((c) => files.has(c));
  return hit === undefined ? [] : [hit];
}

/** The files a workspace's `exports` entry for `sub` (`.` or `./x`) names, or its `main`/`index` without `exports`. */
function exportTargets(ws: Workspace, sub: string, files: ReadonlySet<string>): string[] {
  let targets: string[];
  if (ws.exports === undefined || ws.exports === null)
    targets = sub === "." ? [typeof ws.main === "string" ? ws.main : "index"] : [sub];
  else {
    const map =
      typeof ws.exports === "object" &&
      !Array.isArray(ws.exports) &&
      Object.keys(ws.exports).some((k) => k.startsWith("."))
        ? (ws.exports as Record<string, unknown>)
        : { ".": ws.exports };
    targets = leaves(map[sub]);
    if (targets.length === 0)
      for (const [key, value] of Object.entries(map)) {
        const star = key.indexOf("*");
        if (star < 0) continue;
        const [pre, post] = [key.slice(0, star), key.slice(star + 1)];
        if (sub.length < key.length - 1 || !sub.startsWith(pre) || !sub.endsWith(post)) continue;
        const part = sub.slice(pre.length, sub.length - post.length);
        targets.push(...leaves(value).map((t) => t.replaceAll("*", part)));
      }
  }
  return [...new Set(targets.flatMap((t) => resolveFile(posix.join(ws.dir, t), files)))];
}

/** The strings of an `exports` value: itself, an array's, or every condition's. */
function leaves(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(leaves);
  if (value && typeof value === "object") return Object.values(value).flatMap(leaves);
  return [];
}

/** The workspace packages of the root `package.json` (`workspaces`, an array or `{packages}`), by name. */
function workspacePackages(tree: SourceTree): Map<string, Workspace> {
  const out = new Map<string, Workspace>();
  const root = manifest(tree.read("package.json"));
  const ws = root?.workspaces;
  const patterns = Array.isArray(ws)
    ? ws
    : ws && typeof ws === "object" && Array.isArray((ws as { packages?: unknown }).packages)
      ? (ws as { packages: unknown[] }).packages
      : [];
  const globs = patterns.filter((p): p is string => typeof p === "string").map((p) => p.replace(/^\.\/|\/$/g, ""));
  if (globs.length === 0) return out;
  const isWorkspace = picomatch(globs);
  for (const f of tree.files) {
    if (!f.endsWith("/package.json") || f.split("/").includes("node_modules")) continue;
    const dir = posix.dirname(f);
    if (!isWorkspace(dir)) continue;
    const m = manifest(tree.read(f));
    if (typeof m?.name === "string" && !out.has(m.name)) out.set(m.name, { dir, main: m.main, exports: m.exports });
  }
  return out;
}

/** A `package.json`'s fields, or undefined when it is absent or not a JSON object. */
function manifest(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The judging code of {@link judgingCode} in few lines, for a prompt: a folder whose files are
 * all protected as `dir/*`, one whose files but its tests are as `dir/* (not its tests)`, and
 * the other protected files one a line; sorted.
 * @param files - the files of the tree the code was derived from
 */
export function summarizeJudgingCode(code: ReadonlyMap<string, string>, files: readonly string[]): string[] {
  const inDir = new Map<string, string[]>();
  for (const f of files) {
    const dir = posix.dirname(f);
    inDir.set(dir, [...(inDir.get(dir) ?? []), f]);
  }
  const out = new Set<string>();
  for (const path of [...code.keys()].sort()) {
    const dir = posix.dirname(path);
    const all = inDir.get(dir) ?? [];
    const modules = all.filter((f) => !isTest(f));
    const prefix = dir === "." ? "" : `${dir}/`;
    if (all.length > 1 && all.every((f) => code.has(f))) out.add(`${prefix}*`);
    else if (modules.length > 1 && modules.every((f) => code.has(f))) out.add(`${prefix}* (not its tests)`);
    else out.add(path);
  }
  return [...out];
}
