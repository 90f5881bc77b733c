/**
 * Which packages a dependency manifest change adds, removes or re-pins: what a person is asked
 * to approve and what an allowlist is matched against. Read from `requirements*.txt`,
 * `pyproject.toml` (PEP 621 `project.dependencies` and `optional-dependencies`, PEP 735
 * `dependency-groups`, Poetry's dependency tables, `build-system.requires`) and `package.json`
 * (`dependencies`, `devDependencies`, `peerDependencies`, `optionalDependencies`). Whatever
 * else changes in a manifest (a lock file, `setup.py`, an index URL, npm `overrides`, a Poetry
 * source) is one entry named after the file, which no allowlist approves: only a person can.
 */
import { createHash } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { parse as parseToml } from "smol-toml";
import { packageKey, type PackageChange } from "@loopsmith/shared/contracts";

/** A manifest's packages: normalised name → the name as written and its requirement. */
type Packages = Map<string, { name: string; spec: string }>;

type Table = Record<string, unknown>;
const isTable = (v: unknown): v is Table => typeof v === "object" && v !== null && !Array.isArray(v);

/** A PEP 508 requirement's name and the rest (extras, versions, markers), or undefined when the line is not one. */
function pep508(line: string): { name: string; spec: string } | undefined {
  const m = /^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$/.exec(line.trim());
  return m?.[1] ? { name: m[1], spec: (m[2] ?? "").trim() } : undefined;
}

/** Adds a requirement to `into` (a package listed twice keeps both requirements). */
function add(into: Packages, name: string, spec: string): void {
  const key = packageKey(name);
  const had = into.get(key);
  into.set(key, { name, spec: had && had.spec !== spec ? `${had.spec}, ${spec}` : spec });
}

/** The requirements of a `requirements*.txt`; `rest` collects what is not a requirement (`-r`, `--index-url`, URLs). */
function requirements(text: string, rest: string[]): Packages {
  const out: Packages = new Map();
  for (const raw of text.split("\n")) {
    const line = raw.replace(/(^|\s)#.*$/, "").trim();
    if (!line) continue;
    const req = line.startsWith("-") || line.includes("://") ? undefined : pep508(line);
    if (req) add(out, req.name, req.spec);
    else rest.push(line);
  }
  return out;
}

/** The package tables and lists of a parsed pyproject, removed from `doc` (what is left is compared as a whole). */
function pyprojectPackages(doc: Table): Packages {
  const out: Packages = new Map();
  const list = (v: unknown): void => {
    if (!Array.isArray(v)) return;
    for (const item of v)
      if (typeof item === "string")
        (({ name, spec }) => add(out, name, spec))(pep508(item) ?? { name: item, spec: "" });
  };
  const poetry = (v: unknown): void => {
    if (!isTable(v)) return;
    for (const [name, spec] of Object.entries(v))
      add(out, name, typeof spec === "string" ? spec : JSON.stringify(spec));
  };
  const project = isTable(doc.project) ? doc.project : undefined;
  if (project) {
    list(project.dependencies);
    delete project.dependencies;
    if (isTable(project["optional-dependencies"])) Object.values(project["optional-dependencies"]).forEach(list);
    delete project["optional-dependencies"];
  }
  if (isTable(doc["dependency-groups"])) {
    // Plain requirements; an `{include-group = …}` table stays for the whole-file comparison.
    for (const [group, items] of Object.entries(doc["dependency-groups"])) {
      if (!Array.isArray(items)) continue;
      list(items.filter((i) => typeof i === "string"));
      doc["dependency-groups"][group] = items.filter((i) => typeof i !== "string");
    }
  }
  const build = isTable(doc["build-system"]) ? doc["build-system"] : undefined;
  if (build) {
    list(build.requires);
    delete build.requires;
  }
  const tool = isTable(doc.tool) && isTable(doc.tool.poetry) ? doc.tool.poetry : undefined;
  if (tool) {
    for (const field of ["dependencies", "dev-dependencies"]) {
      poetry(tool[field]);
      delete tool[field];
    }
    if (isTable(tool.group))
      for (const g of Object.values(tool.group))
        if (isTable(g)) {
          poetry(g.dependencies);
          delete g.dependencies;
        }
  }
  return out;
}

/** A TOML text parsed, undefined when it is not TOML. */
function toml(text: string): Table | undefined {
  try {
    return parseToml(text);
  } catch {
    return undefined;
  }
}

/** An object's field as JSON, for comparing. */
const field = (o: unknown, k: string): string => JSON.stringify(isTable(o) ? o[k] : undefined);

const NPM_FIELDS = ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies"];
/** Fields of package.json that change what is installed but name no package of their own. */
const NPM_OTHER = ["bundleDependencies", "bundledDependencies", "overrides", "resolutions"];

/** The packages of a package.json's dependency fields; `rest` says when another install field changed. */
function npmPackages(text: string | undefined): { packages: Packages; doc: unknown } {
  let doc: unknown;
  try {
    doc = JSON.parse(text ?? "{}");
  } catch {
    doc = undefined;
  }
  const out: Packages = new Map();
  for (const f of NPM_FIELDS) {
    const deps = isTable(doc) ? doc[f] : undefined;
    if (isTable(deps))
      for (const [name, spec] of Object.entries(deps))
        add(out, name, typeof spec === "string" ? spec : JSON.stringify(spec));
  }
  return { packages: out, doc };
}

/** What changed between two package maps. */
function diff(manifest: string, before: Packages, after: Packages): PackageChange[] {
  const out: PackageChange[] = [];
  for (const key of [...new Set([...before.keys(), ...after.keys()])].sort()) {
    const a = before.get(key);
    const b = after.get(key);
    if (a?.spec === b?.spec) continue;
    out.push({
      manifest,
      name: (b ?? a)?.name ?? key,
      ...(a ? { before: a.spec } : {}),
      ...(b ? { after: b.spec } : {}),
    });
  }
  return out;
}

/** The entry for a change that names no package (or none could be read): the file, with a hash of its new content (`deleted` when removed). */
export function fileEntry(path: string, before: string | undefined, after: string | undefined): PackageChange {
  const hash = (t: string): string => `sha256:${createHash("sha256").update(t).digest("hex").slice(0, 12)}`;
  return {
    manifest: path,
    name: path,
    ...(before !== undefined ? { before: hash(before) } : {}),
    ...(after !== undefined ? { after: hash(after) } : {}),
  };
}

/**
 * The package changes of one manifest, base text to new text (either undefined: the file is
 * added or deleted). Nothing when the texts are equal.
 */
export function packageChanges(path: string, before: string | undefined, after: string | undefined): PackageChange[] {
  if (before === after) return [];
  const base = path.slice(path.lastIndexOf("/") + 1);
  if (/^requirements.*\.(txt|in)$/.test(base)) {
    const restA: string[] = [];
    const restB: string[] = [];
    const out = diff(path, requirements(before ?? "", restA), requirements(after ?? "", restB));
    return isDeepStrictEqual(restA, restB) ? out : [...out, fileEntry(path, before, after)];
  }
  if (base === "pyproject.toml") {
    const a = toml(before ?? "") ?? {};
    const b = after === undefined ? {} : toml(after);
    if (!b) return [fileEntry(path, before, after)];
    const out = diff(path, pyprojectPackages(a), pyprojectPackages(b));
    // What is left of the install tables once the packages are taken out must be unchanged.
    const restChanged =
      ["build-system", "dependency-groups"].some((k) => field(a, k) !== field(b, k)) ||
      field(a.tool, "poetry") !== field(b.tool, "poetry") ||
      field(a.project, "optional-dependencies") !== field(b.project, "optional-dependencies");
    return restChanged ? [...out, fileEntry(path, before, after)] : out;
  }
  if (base === "package.json") {
    const a = npmPackages(before);
    const b = npmPackages(after);
    const out = diff(path, a.packages, b.packages);
    const restChanged = NPM_OTHER.some((k) => field(a.doc, k) !== field(b.doc, k));
    return restChanged ? [...out, fileEntry(path, before, after)] : out;
  }
  return [fileEntry(path, before, after)];
}
