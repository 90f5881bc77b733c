/**
 * Repo mode's view of the base tree (the extracted snapshot, one directory per commit): the
 * default commands, reading base files without following links, and the files a prompt sees
 * in full (the plan's, the failing tests', the ones a traceback names), within a budget.
 */
import { lstatSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { approxTokens } from "@loopsmith/shared/llm";
import { type FileChange } from "@loopsmith/shared/contracts";
import { walkTree } from "./symbols.js";

/** Largest base file read into a prompt, in bytes (64 KiB). */
export const MAX_PROMPT_FILE_BYTES = 64 * 1024;

const listed = new Map<string, string[]>();
/** Trees listed at most: each is one commit's, and never changes. */
const LISTED_TREES = 8;

/**
 * Every regular file of an extracted tree, workspace-relative and sorted ({@link walkTree}:
 * no links, no `.git`, `node_modules` or build output), walked once per tree: a commit's tree
 * never changes, and every prompt of a task needs the list.
 */
export function listTree(root: string): string[] {
  let files = listed.get(root);
  if (!files) {
    files = walkTree(root);
    listed.set(root, files);
    if (listed.size > LISTED_TREES) listed.delete(listed.keys().next().value as string);
  }
  return files;
}

/**
 * A base file's text; undefined when it is absent, not a regular file, or reached through
 * a symbolic link (a link in a repository never makes the conductor read outside the tree).
 */
export function readBaseFile(root: string, path: string): string | undefined {
  const segments = path.split("/");
  let at = root;
  for (let i = 0; i < segments.length; i++) {
    at = join(at, segments[i] ?? "");
    let st;
    try {
      st = lstatSync(at);
    } catch {
      return undefined;
    }
    if (st.isSymbolicLink()) return undefined;
    if (i === segments.length - 1 && !st.isFile()) return undefined;
  }
  return readFileSync(at, "utf8");
}

/** The commands a repository's files suggest. */
export interface DetectedCommands {
  /** `python3 -m pytest -q` / `npm test`; undefined when nothing was recognised. */
  testCommand?: string;
  /** `pip install -r requirements.txt`, `pip install -e .`, `npm ci`, `npm install`; `""` when nothing needs installing. */
  setupCommand: string;
  /** Why, for the event that reports it. */
  why: string;
}

/**
 * Detects the default test and setup commands: pytest when the repository has
 * pytest configuration or `test_*.py` / `*_test.py` files; `npm test` when `package.json` has
 * a `test` script. `python3 -m pytest` rather than `pytest` so the repository root is on
 * `sys.path` as users expect. Setup only when there is something to install: a
 * `requirements.txt`, a pyproject with `dependencies`, a `setup.py`; `npm ci` with a lock
 * file, `npm install` with dependencies and no lock file.
 */
export function detectCommands(files: readonly string[], read: (path: string) => string | undefined): DetectedCommands {
  const has = (p: string): boolean => files.includes(p);
  const pkg = has("package.json") ? safeJson(read("package.json")) : undefined;
  const scripts = (pkg?.scripts ?? {}) as Record<string, unknown>;
  const pyproject = has("pyproject.toml") ? (read("pyproject.toml") ?? "") : "";
  const pytestConfig =
    has("pytest.ini") ||
    has("conftest.py") ||
    /\[tool\.pytest/.test(pyproject) ||
    /\[tool:pytest\]/.test(read("setup.cfg") ?? "") ||
    /\[pytest\]/.test(read("tox.ini") ?? "");
  const pyTests = files.some((f) => /(^|\/)(test_[^/]*|[^/]*_test)\.py$/.test(f));
  let testCommand: string | undefined;
  let why = "";
  if (typeof scripts.test === "string" && !/no test specified/.test(scripts.test)) {
    testCommand = "npm test";
    why = "package.json has a test script";
  } else if (pytestConfig || pyTests) {
    testCommand = "python3 -m pytest -q";
    why = pytestConfig ? "the repository configures pytest" : "the repository has test_*.py files";
  }
  let setupCommand = "";
  if (has("requirements.txt")) setupCommand = "pip install -r requirements.txt";
  else if (has("setup.py") || /^\s*dependencies\s*=\s*\[\s*["']/m.test(pyproject)) setupCommand = "pip install -e .";
  else if (pkg && (has("package-lock.json") || has("npm-shrinkwrap.json"))) setupCommand = "npm ci";
  else if (
    pkg &&
    Object.keys({ ...(pkg.dependencies as object | undefined), ...(pkg.devDependencies as object | undefined) }).length
  )
    setupCommand = "npm install";
  return { ...(testCommand ? { testCommand } : {}), setupCommand, why };
}

function safeJson(text: string | undefined): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text ?? "") as unknown;
    return v && typeof v === "object" ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Paths named by test ids and tracebacks: `tests/test_x.py::test_y` → `tests/test_x.py`,
 * `File "pkg/mod.py", line 3` → `pkg/mod.py`, `at f (src/a.js:1:2)` → `src/a.js`, kept when
 * they exist in the tree.
 */
export function pathsIn(texts: readonly string[], files: readonly string[]): string[] {
  const known = new Set(files);
  const found = new Set<string>();
  const pattern = /(?:^|[\s"'(/])((?:[\w.-]+\/)*[\w.-]+\.(?:py|[cm]?[jt]sx?))(?=[:"'),\s]|::|$)/gm;
  for (const text of texts) {
    for (const m of text.matchAll(pattern)) {
      const p = (m[1] ?? "").replace(/^\/?workspace\//, "").replace(/^\.\//, "");
      if (known.has(p)) found.add(p);
    }
  }
  return [...found];
}

/**
 * A reader of the candidate's current tree: its changed files over the base, its deleted
 * paths absent.
 */
export function currentReader(
  root: string,
  candidate: { files: readonly FileChange[]; deleted?: readonly string[] } | undefined,
): (path: string) => string | undefined {
  const changed = new Map((candidate?.files ?? []).map((f) => [f.path, f.content]));
  const deleted = new Set(candidate?.deleted ?? []);
  return (path) => (deleted.has(path) ? undefined : (changed.get(path) ?? readBaseFile(root, path)));
}

/**
 * The files a prompt sees in full, in order of `wanted` (duplicates and unreadable ones
 * dropped), until `maxTokens` is spent; a file over {@link MAX_PROMPT_FILE_BYTES} is left out.
 */
export function promptFiles(
  read: (path: string) => string | undefined,
  wanted: readonly string[],
  maxTokens: number,
): FileChange[] {
  const out: FileChange[] = [];
  let used = 0;
  for (const path of [...new Set(wanted)]) {
    const content = read(path);
    if (content === undefined || content.length > MAX_PROMPT_FILE_BYTES) continue;
    const cost = approxTokens(content) + 20;
    if (used + cost > maxTokens) continue;
    used += cost;
    out.push({ path, content });
  }
  return out;
}
