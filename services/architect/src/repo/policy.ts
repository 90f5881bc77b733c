/**
 * What a repo-mode candidate may change. Two kinds of change are not the candidate's to make
 * silently:
 * - the test runner's configuration (pytest's `conftest.py`, ini sections, `package.json`
 *   `scripts`, …): a change there can make the repository's own checks report a pass that
 *   did not happen, so it is always blocked (docs/SANDBOX.md, "Verdicts");
 * - the dependencies (manifests and lock files): handled by the task's
 *   {@link DependencyPolicy} — `reject` blocks, `ask` stops for a person, `allow` runs with a
 *   setup layer built for the new manifests.
 */
import { isDeepStrictEqual } from "node:util";
import { parse as parseToml } from "smol-toml";
import { isDependencyManifest } from "@loopsmith/shared/workspace";
import { type DependencyPolicy, type FileChange } from "@loopsmith/shared/contracts";

/** Files that always configure a test runner or the interpreter's start-up. */
const RUNNER =
  /(^|\/)(conftest\.py|pytest\.ini|\.pytest\.ini|sitecustomize\.py|usercustomize\.py|[^/]*\.pth|\.npmrc|\.mocharc[^/]*|jest\.config\.[^/]+|vitest\.config\.[^/]+)$|(^|\/)node_modules(\/|$)/;
/** Files whose sections are told apart (runner sections vs dependency sections): TOML, read with smol-toml… */
const PYPROJECT = /(^|\/)pyproject\.toml$/;
/** …and ini, read by section headers. */
const INI = /(^|\/)(setup\.cfg|tox\.ini)$/;

/** One finding of the policy: which path, which kind, and a sentence. */
export interface PolicyFinding {
  path: string;
  kind: "runner" | "dependencies";
  message: string;
}

/** An ini file's `[section]` → its lines (the part before the first header is `""`); setup.cfg and tox.ini. */
function iniSections(text: string): Map<string, string> {
  const out = new Map<string, string[]>();
  let current = "";
  for (const line of text.split("\n")) {
    const header = /^\s*\[\[?([^\]]+)\]\]?\s*$/.exec(line);
    if (header) current = (header[1] ?? "").trim();
    else {
      const list = out.get(current) ?? [];
      list.push(line.trimEnd());
      out.set(current, list);
    }
  }
  return new Map([...out].map(([k, v]) => [k, v.join("\n").trim()]));
}

type Table = Record<string, unknown>;
const isTable = (v: unknown): v is Table =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);

/**
 * A parsed TOML document's tables by dotted name (`tool.pytest.ini_options`; the root is
 * `""`), each with its own values (its sub-tables are tables of their own); an array of
 * tables (`[[tool.poetry.source]]`) is one table holding the array. However a table is
 * written (a `[header]`, dotted keys, an inline table), it has the same name.
 */
function tomlTables(doc: Table): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const walk = (table: Table, name: string): void => {
    const own: Table = {};
    let subTables = 0;
    for (const [key, value] of Object.entries(table)) {
      const sub = name ? `${name}.${key}` : key;
      if (isTable(value)) {
        walk(value, sub);
        subTables++;
      } else if (Array.isArray(value) && value.length > 0 && value.every(isTable)) {
        out.set(sub, value);
        subTables++;
      } else own[key] = value;
    }
    if (Object.keys(own).length > 0 || subTables === 0) out.set(name, own);
  };
  walk(doc, "");
  return out;
}

/** Names of the tables whose values differ between two parsed TOML documents. */
function changedTables(a: Table, b: Table): string[] {
  const x = tomlTables(a);
  const y = tomlTables(b);
  return [...new Set([...x.keys(), ...y.keys()])].filter((k) => !isDeepStrictEqual(x.get(k), y.get(k))).sort();
}

/** Names of the ini sections whose content differs between `a` and `b`. */
function changedIniSections(a: string, b: string): string[] {
  const x = iniSections(a);
  const y = iniSections(b);
  return [...new Set([...x.keys(), ...y.keys()])].filter((k) => x.get(k) !== y.get(k)).sort();
}

/** A TOML text parsed by smol-toml, or the parser's error as a sentence with its line and column. */
function readToml(text: string): { ok: true; doc: Table } | { ok: false; error: string } {
  try {
    return { ok: true, doc: parseToml(text) };
  } catch (err) {
    const e = err as { line?: number; column?: number; message?: string };
    const what = (e.message ?? String(err)).split("\n")[0]?.replace(/^Invalid TOML document: /, "") ?? "";
    return { ok: false, error: `${e.line !== undefined ? `line ${e.line}, column ${e.column ?? 0}: ` : ""}${what}` };
  }
}

const json = (text: string | undefined): Record<string, unknown> => {
  try {
    const v = JSON.parse(text ?? "{}") as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
};

const DEP_FIELDS = [
  "dependencies",
  "devDependencies",
  "peerDependencies",
  "optionalDependencies",
  "bundleDependencies",
  "overrides",
  "resolutions",
];
const RUNNER_FIELDS = [
  "scripts",
  "type",
  "imports",
  "exports",
  "main",
  "jest",
  "mocha",
  "ava",
  "c8",
  "nyc",
  "workspaces",
];

/** Findings of one `package.json` change: which fields changed, by kind. */
function packageJson(path: string, before: string | undefined, after: string | undefined): PolicyFinding[] {
  const a = json(before);
  const b = json(after);
  const differs = (k: string): boolean => JSON.stringify(a[k]) !== JSON.stringify(b[k]);
  const out: PolicyFinding[] = [];
  const runner = RUNNER_FIELDS.filter(differs);
  if (runner.length)
    out.push({
      path,
      kind: "runner",
      message: `${path}: changes ${runner.join(", ")}, which decide how the tests run`,
    });
  const deps = DEP_FIELDS.filter(differs);
  if (deps.length) out.push({ path, kind: "dependencies", message: `${path}: changes ${deps.join(", ")}` });
  return out;
}

/** Table or section names that configure the test runner (pytest, coverage, tox). */
const RUNNER_SECTION = /pytest|coverage|^tox|^tool\.tox(\.|$)|testenv/;
/** Table or section names that hold dependencies. */
const DEP_SECTION = /dependencies|requires|^options$|^build-system$|poetry|^dependency-groups$/;

/** Findings of a change, given the names of the changed tables or sections. */
function bySection(path: string, changed: readonly string[], projectDeps = false): PolicyFinding[] {
  const out: PolicyFinding[] = [];
  const runner = changed.filter((s) => RUNNER_SECTION.test(s));
  if (runner.length)
    out.push({
      path,
      kind: "runner",
      message: `${path}: changes [${runner.join("], [")}], which configure the test runner`,
    });
  const depSections = changed.filter((s) => DEP_SECTION.test(s) && !runner.includes(s));
  if (depSections.length || projectDeps) {
    const names = [...depSections, ...(projectDeps ? ["project.dependencies"] : [])];
    out.push({ path, kind: "dependencies", message: `${path}: changes ${names.join(", ")}` });
  }
  return out;
}

/**
 * Findings of one pyproject.toml change, from its parsed tables (smol-toml). New text that is
 * not TOML blocks as a runner change (pytest reads the file, and what changed cannot be
 * told); base text that is not TOML counts as empty, so every table of the new text is new.
 */
function pyproject(path: string, before: string, after: string): PolicyFinding[] {
  if (before === after) return [];
  const b = readToml(after);
  if (!b.ok)
    return [
      {
        path,
        kind: "runner",
        message: `${path}: is not valid TOML after the change (${b.error}), so which of its sections change cannot be told; pytest reads its configuration from this file`,
      },
    ];
  const a = readToml(before);
  const base = a.ok ? a.doc : {};
  const changed = changedTables(base, b.doc);
  const project = (doc: Table): unknown => (isTable(doc.project) ? doc.project.dependencies : undefined);
  return bySection(path, changed, !isDeepStrictEqual(project(base), project(b.doc)));
}

/**
 * The policy findings of a candidate's change.
 * @param changed - the changed files, full new content
 * @param deleted - removed paths
 * @param readBase - a base file's text, undefined when the file is new
 */
export function policyFindings(
  changed: readonly FileChange[],
  deleted: readonly string[],
  readBase: (path: string) => string | undefined,
): PolicyFinding[] {
  const out: PolicyFinding[] = [];
  const touched: Array<{ path: string; after: string | undefined }> = [
    ...changed.map((f) => ({ path: f.path, after: f.content as string | undefined })),
    ...deleted.map((path) => ({ path, after: undefined })),
  ];
  for (const { path, after } of touched) {
    const before = readBase(path);
    const verb = after === undefined ? "deletes" : before === undefined ? "adds" : "changes";
    if (RUNNER.test(path))
      out.push({ path, kind: "runner", message: `${verb} ${path}, which configures the test runner` });
    else if (/(^|\/)package\.json$/.test(path)) out.push(...packageJson(path, before, after));
    else if (PYPROJECT.test(path)) out.push(...pyproject(path, before ?? "", after ?? ""));
    else if (INI.test(path)) out.push(...bySection(path, changedIniSections(before ?? "", after ?? "")));
    else if (isDependencyManifest(path)) out.push({ path, kind: "dependencies", message: `${verb} ${path}` });
  }
  return out;
}

/** What the loop does with a candidate, given its findings and the task's policy. */
export type PolicyDecision =
  | { action: "run" }
  | { action: "block"; reason: string; paths: string[] }
  | { action: "ask"; reason: string; paths: string[] };

/**
 * Runner changes always block; dependency changes follow `policy`.
 * @returns `run` when nothing stands in the way
 */
export function decide(findings: readonly PolicyFinding[], policy: DependencyPolicy): PolicyDecision {
  const runner = findings.filter((f) => f.kind === "runner");
  if (runner.length)
    return {
      action: "block",
      reason: `the change touches the test runner's configuration, which a candidate may not change: ${runner.map((f) => f.message).join("; ")}`,
      paths: runner.map((f) => f.path),
    };
  const deps = findings.filter((f) => f.kind === "dependencies");
  if (!deps.length || policy === "allow") return { action: "run" };
  const what = deps.map((f) => f.message).join("; ");
  const paths = deps.map((f) => f.path);
  return policy === "ask"
    ? {
        action: "ask",
        reason: `the change touches the dependencies (${what}); the task's policy is "ask": it runs once approved (by the person at the terminal, or an allowlist), or when run again with dependencies "allow"`,
        paths,
      }
    : {
        action: "block",
        reason: `the change touches the dependencies (${what}), and the task's dependency policy is "reject": solve the task without changing them`,
        paths,
      };
}
