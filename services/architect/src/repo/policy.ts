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
import { isDependencyManifest, type DependencyPolicy, type FileChange } from "@loopsmith/shared";

/** Files that always configure a test runner or the interpreter's start-up. */
const RUNNER = /(^|\/)(conftest\.py|pytest\.ini|\.pytest\.ini|sitecustomize\.py|usercustomize\.py|[^/]*\.pth|\.npmrc|\.mocharc[^/]*|jest\.config\.[^/]+|vitest\.config\.[^/]+)$|(^|\/)node_modules(\/|$)/;
/** ini/TOML files whose sections are told apart: runner sections vs dependency sections. */
const SECTIONED = /(^|\/)(pyproject\.toml|setup\.cfg|tox\.ini)$/;

/** One finding of the policy: which path, which kind, and a sentence. */
export interface PolicyFinding {
  path: string;
  kind: "runner" | "dependencies";
  message: string;
}

/** `[section]` → its lines (the part before the first header is `""`). */
function sections(text: string): Map<string, string> {
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

/** Names of the sections whose content differs between `a` and `b`. */
function changedSections(a: string, b: string): string[] {
  const x = sections(a);
  const y = sections(b);
  return [...new Set([...x.keys(), ...y.keys()])].filter((k) => x.get(k) !== y.get(k)).sort();
}

/** The value of a top-level `key = …` (TOML arrays over several lines included) in a section's text. */
function keyValue(sectionText: string | undefined, key: string): string {
  if (!sectionText) return "";
  const m = new RegExp(`^${key}\\s*=\\s*(\\[[\\s\\S]*?\\]|.*)$`, "m").exec(sectionText);
  return (m?.[1] ?? "").replace(/\s+/g, " ").trim();
}

const json = (text: string | undefined): Record<string, unknown> => {
  try {
    const v = JSON.parse(text ?? "{}") as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
};

const DEP_FIELDS = ["dependencies", "devDependencies", "peerDependencies", "optionalDependencies", "bundleDependencies", "overrides", "resolutions"];
const RUNNER_FIELDS = ["scripts", "type", "imports", "exports", "main", "jest", "mocha", "ava", "c8", "nyc", "workspaces"];

/** Findings of one `package.json` change: which fields changed, by kind. */
function packageJson(path: string, before: string | undefined, after: string | undefined): PolicyFinding[] {
  const a = json(before);
  const b = json(after);
  const differs = (k: string): boolean => JSON.stringify(a[k]) !== JSON.stringify(b[k]);
  const out: PolicyFinding[] = [];
  const runner = RUNNER_FIELDS.filter(differs);
  if (runner.length) out.push({ path, kind: "runner", message: `${path}: changes ${runner.join(", ")}, which decide how the tests run` });
  const deps = DEP_FIELDS.filter(differs);
  if (deps.length) out.push({ path, kind: "dependencies", message: `${path}: changes ${deps.join(", ")}` });
  return out;
}

/** Findings of one pyproject.toml / setup.cfg / tox.ini change, by changed section. */
function sectioned(path: string, before: string, after: string): PolicyFinding[] {
  const changed = changedSections(before, after);
  const out: PolicyFinding[] = [];
  const runner = changed.filter((s) => /pytest|coverage|^tox|testenv/.test(s));
  if (runner.length) out.push({ path, kind: "runner", message: `${path}: changes [${runner.join("], [")}], which configure the test runner` });
  const depSections = changed.filter((s) => /dependencies|requires|^options$|^build-system$|poetry/.test(s) && !runner.includes(s));
  const projectDeps = changed.includes("project") && (keyValue(sections(before).get("project"), "dependencies") !== keyValue(sections(after).get("project"), "dependencies"));
  if (depSections.length || projectDeps) {
    const names = [...depSections, ...(projectDeps ? ["project.dependencies"] : [])];
    out.push({ path, kind: "dependencies", message: `${path}: changes ${names.join(", ")}` });
  }
  return out;
}

/**
 * The policy findings of a candidate's change.
 * @param changed - the changed files, full new content
 * @param deleted - removed paths
 * @param readBase - a base file's text, undefined when the file is new
 */
export function policyFindings(changed: readonly FileChange[], deleted: readonly string[], readBase: (path: string) => string | undefined): PolicyFinding[] {
  const out: PolicyFinding[] = [];
  const touched: Array<{ path: string; after: string | undefined }> = [...changed.map((f) => ({ path: f.path, after: f.content as string | undefined })), ...deleted.map((path) => ({ path, after: undefined }))];
  for (const { path, after } of touched) {
    const before = readBase(path);
    const verb = after === undefined ? "deletes" : before === undefined ? "adds" : "changes";
    if (RUNNER.test(path)) out.push({ path, kind: "runner", message: `${verb} ${path}, which configures the test runner` });
    else if (/(^|\/)package\.json$/.test(path)) out.push(...packageJson(path, before, after));
    else if (SECTIONED.test(path)) out.push(...sectioned(path, before ?? "", after ?? ""));
    else if (isDependencyManifest(path)) out.push({ path, kind: "dependencies", message: `${verb} ${path}` });
  }
  return out;
}

/** What the loop does with a candidate, given its findings and the task's policy. */
export type PolicyDecision = { action: "run" } | { action: "block"; reason: string; paths: string[] } | { action: "ask"; reason: string; paths: string[] };

/**
 * Runner changes always block; dependency changes follow `policy`.
 * @returns `run` when nothing stands in the way
 */
export function decide(findings: readonly PolicyFinding[], policy: DependencyPolicy): PolicyDecision {
  const runner = findings.filter((f) => f.kind === "runner");
  if (runner.length) return { action: "block", reason: `the change touches the test runner's configuration, which a candidate may not change: ${runner.map((f) => f.message).join("; ")}`, paths: runner.map((f) => f.path) };
  const deps = findings.filter((f) => f.kind === "dependencies");
  if (!deps.length || policy === "allow") return { action: "run" };
  const what = deps.map((f) => f.message).join("; ");
  const paths = deps.map((f) => f.path);
  return policy === "ask"
    ? { action: "ask", reason: `the change touches the dependencies (${what}); the task's policy is "ask": approve by running it again with dependencies "allow"`, paths }
    : { action: "block", reason: `the change touches the dependencies (${what}), and the task's dependency policy is "reject": solve the task without changing them`, paths };
}
