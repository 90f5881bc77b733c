/**
 * `loopsmith script validate <file>`: checks a replies file of the scripted provider
 * (docs/SCRIPTS.md) line by line: JSON syntax (with line:column), the file's frame, unknown
 * roles, and every entry against the schema its role answers with (`spec` → Plan, `plan` →
 * Plan or DagPlan (a DAG task's plan of subtasks), `build` → EditReply (repo mode) or Candidate
 * (inline), `review` → Review, `reflect` → Reflection, IntegrationReflection (a DAG task's) or
 * LessonReply (the lesson call of a task that passed after failing)). A string entry is raw
 * reply text: it goes through the providers' own reader.
 * The shared code (zod schemas, the reader) is loaded only when the command runs.
 *
 * Exit codes (`ExitCode`): 0 the file is valid (warnings allowed); 2 it is not, or cannot be
 * read; with `--json` stdout holds one report object and then, on exit 2, the error object.
 */
import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import type { z } from "zod";
import { report, runCommand, usageError, type CommandRunner } from "../errors.js";
import { ExitCode } from "../exit-codes.js";
import { jsonLine, printable } from "../terminal.js";
import { loadShared, type Shared } from "./script-shared.js";
import {
  JsonSyntax,
  field,
  locator,
  nodeAt,
  parseLocated,
  suggest,
  type Locate,
  type Located,
} from "./located-json.js";

/** The roles a script answers, and the shapes each accepts (tried in this order). */
const SHAPES = {
  spec: ["Plan"],
  plan: ["Plan", "DagPlan"],
  build: ["EditReply", "Candidate"],
  review: ["Review"],
  reflect: ["Reflection", "IntegrationReflection", "LessonReply"],
  improve: ["Hypothesis"],
} as const;
type ScriptRole = keyof typeof SHAPES;
/** A schema an entry can match. */
export type EntryShape =
  | "Plan"
  | "DagPlan"
  | "EditReply"
  | "Candidate"
  | "Review"
  | "Reflection"
  | "IntegrationReflection"
  | "LessonReply"
  | "Hypothesis";

/** One finding: where (1-based line and column of the JSON text), what, how bad. */
export interface ScriptProblem {
  severity: "error" | "warning";
  line: number;
  column: number;
  /** `replies.build[1]`, `replies`, or `""` for the file as a whole. */
  where: string;
  message: string;
}

/** One reply entry as checked. */
export interface ScriptEntry {
  /** `replies`, or `tasks.<key>` for the replies of some tasks. */
  block: string;
  role: ScriptRole;
  index: number;
  line: number;
  column: number;
  /** True for a string entry (raw reply text, read like a model's). */
  raw: boolean;
  /** The schema it matched; absent when it matched none. */
  shape?: EntryShape;
}

/** The outcome of {@link validateScript}. */
export interface ScriptReport {
  valid: boolean;
  /** Entries per role, for the roles the file has. */
  counts: Partial<Record<ScriptRole, number>>;
  entries: ScriptEntry[];
  /** Sorted by line, then column. */
  problems: ScriptProblem[];
}

/** Keys of each edit; an unknown one (`serch`) is dropped by the schema, which can turn an edit into a file creation. */
const EDIT_KEYS = ["path", "search", "replace", "delete"];

const ROLE_OF_SHAPE: Record<EntryShape, string> = {
  Plan: "a plan",
  DagPlan: "a plan of subtasks",
  EditReply: "repo mode",
  Candidate: "inline files",
  Review: "a review",
  Reflection: "a reflection",
  IntegrationReflection: "a DAG task's integration reflection",
  LessonReply: "the lessons of a task that passed after failing",
  Hypothesis: "a hypothesis",
};

type Add = (severity: ScriptProblem["severity"], offset: number, where: string, message: string) => void;

/** The schema of each shape. */
function schemasOf(shared: Shared): Record<EntryShape, z.ZodType<unknown>> {
  return {
    Plan: shared.Plan,
    DagPlan: shared.DagPlan,
    EditReply: shared.EditReply,
    Candidate: shared.Candidate,
    Review: shared.Review,
    Reflection: shared.Reflection,
    IntegrationReflection: shared.IntegrationReflection,
    LessonReply: shared.LessonReply,
    Hypothesis: shared.Hypothesis,
  };
}

/** A shape an entry was tried against and did not match, with the schema's issues. */
interface Tried {
  shape: EntryShape;
  issues: Array<{ path: string; message: string; line?: number }>;
}

/** What the checks of one entry work with. */
interface EntryCheck {
  shared: Shared;
  pos: Locate;
  item: Located;
  entry: ScriptEntry;
  add: Add;
  schemas: Record<EntryShape, z.ZodType<unknown>>;
  /** `replies.build[1]`: where the entry's problems are reported. */
  where: string;
}

/**
 * Tries the entry against the shapes of its role in order, until one matches (then sets
 * `entry.shape` and warns of unsafe edit paths); returns the ones that did not match.
 */
function tryShapes(c: EntryCheck): Tried[] {
  const { shared, pos, item, entry, add, schemas, where } = c;
  const tried: Tried[] = [];
  for (const shape of SHAPES[entry.role]) {
    const schema: z.ZodType<unknown> = schemas[shape];
    const read = entry.raw
      ? shared.readStructured(item.value as string, schema)
      : shared.validateValue(item.value, schema);
    if (read.ok) {
      entry.shape = shape;
      const edits = (read.value as { edits?: Array<{ path: string }> }).edits ?? [];
      for (const [k, ed] of edits.entries()) {
        const checked = shared.checkEditPath(ed.path);
        if (!checked.ok)
          add(
            "warning",
            item.start,
            where,
            `edits[${k}].path ${JSON.stringify(ed.path)} is unsafe: ${checked.message}; applying it fails with path_escape`,
          );
      }
      break;
    }
    const details = read.error.details as { issues?: Array<{ path: string; message: string }> } | undefined;
    const issues = (details?.issues ?? []).map((is) => {
      if (entry.raw || !is.path) return is;
      const at = nodeAt(
        item,
        is.path.split(".").map((p) => (/^\d+$/.test(p) ? Number(p) : p)),
      );
      return { ...is, line: pos(at.start).line };
    });
    if (entry.raw && issues.length === 0) issues.push({ path: "", message: read.error.message });
    tried.push({ shape, issues });
  }
  return tried;
}

/** The shape an unmatched entry most looks like (with edits or a summary and no files: an EditReply). */
function lookalikeOf(item: Located, role: ScriptRole): EntryShape {
  const looksRepo =
    item.entries?.some((e) => e.key === "edits" || e.key === "summary") && !item.entries.some((e) => e.key === "files");
  const has = (key: string): boolean => !!item.entries?.some((e) => e.key === key);
  return role === "plan"
    ? has("subtasks")
      ? "DagPlan"
      : "Plan"
    : role === "reflect"
      ? has("subtaskId")
        ? "IntegrationReflection"
        : has("lessons")
          ? "LessonReply"
          : "Reflection"
      : looksRepo
        ? "EditReply"
        : "Candidate";
}

/** Warns of the keys shape `like`'s schema drops silently: a misspelt `search` turns an edit into a file creation. */
function warnUnknownKeys(c: EntryCheck, like: EntryShape): void {
  const { item, add, schemas, where } = c;
  const unknownKeys = (node: Located, known: readonly string[], at: string, note = ""): void => {
    for (const e of node.entries ?? []) {
      if (known.includes(e.key)) continue;
      const near = suggest(e.key, known);
      add(
        "warning",
        e.keyStart,
        at,
        `unknown key ${JSON.stringify(e.key)}${near ? ` (did you mean "${near}"?)` : ""} is ignored${note}`,
      );
    }
  };
  unknownKeys(item, Object.keys((schemas[like] as unknown as { shape?: object }).shape ?? {}), where);
  field(item, "edits")?.node.items?.forEach((ed, k) =>
    unknownKeys(ed, EDIT_KEYS, `${where}.edits[${k}]`, "; an edit without search creates its file"),
  );
}

/** Reports an entry that matched no shape, with the issues of the one it most looks like (`first`). */
function reportUnmatched(c: EntryCheck, tried: readonly Tried[], first: Tried | undefined): void {
  const { item, entry, add, where } = c;
  const detail = (first?.issues ?? [])
    .slice(0, 12)
    .map(
      (is) =>
        `\n    - at ${is.path ? `\`${is.path}\`` : "the root"}${is.line ? ` (line ${is.line})` : ""}: ${is.message}`,
    )
    .join("");
  const names = SHAPES[entry.role]
    .map((s) => (s === "EditReply" || s === "Candidate" ? `${s} (${ROLE_OF_SHAPE[s]})` : s))
    .join(" nor ");
  if (entry.raw)
    add(
      "warning",
      item.start,
      where,
      `raw reply text that the reader cannot turn into ${names}: the provider re-asks, and the next entry answers the re-ask${detail}`,
    );
  else
    add(
      "error",
      item.start,
      where,
      `does not match ${names}${tried.length > 1 && first ? `; as ${first.shape}` : ""}:${detail}`,
    );
}

/**
 * Checks one reply entry against the shapes its role accepts (a string through the reader,
 * any other value as a scripted JSON reply is validated) and fills in `entry.shape`.
 */
function checkEntry(shared: Shared, pos: Locate, item: Located, entry: ScriptEntry, add: Add): void {
  const where = `${entry.block}.${entry.role}[${entry.index}]`;
  const c: EntryCheck = { shared, pos, item, entry, add, schemas: schemasOf(shared), where };
  const tried = tryShapes(c);
  // Unmatched: report against the shape it most looks like.
  const lookalike = lookalikeOf(item, entry.role);
  const first = tried.find((t) => t.shape === lookalike) ?? tried[0];
  const like = entry.shape ?? first?.shape;
  if (like && !entry.raw) warnUnknownKeys(c, like);
  if (entry.shape) {
    if (entry.shape === "EditReply" && item.entries?.some((e) => e.key === "files" || e.key === "tests")) {
      add("warning", item.start, where, "matches EditReply (repo mode), where files and tests are ignored");
    }
    return;
  }
  reportUnmatched(c, tried, first);
}

/** What the checks of a whole file work with; `counts` and `entries` are filled in as they go. */
interface FileCheck {
  shared: Shared;
  pos: Locate;
  add: Add;
  counts: ScriptReport["counts"];
  entries: ScriptEntry[];
}

/** Checks the file's frame: `v`, `kind`, `description` and no other top-level keys but `replies` and `tasks`. */
function checkFrame(root: Located, add: Add): void {
  const v = field(root, "v");
  if (v?.node.value !== 1)
    add("error", v?.node.start ?? root.start, "v", `"v" must be 1${v ? "" : " (it is missing)"}`);
  const kind = field(root, "kind");
  if (kind?.node.value !== "loopsmith-script")
    add(
      "error",
      kind?.node.start ?? root.start,
      "kind",
      `"kind" must be "loopsmith-script"${kind ? "" : " (it is missing)"}`,
    );
  const description = field(root, "description");
  if (description && typeof description.node.value !== "string")
    add("error", description.node.start, "description", '"description" must be a string');
  for (const e of root.entries ?? []) {
    if (!["v", "kind", "description", "replies", "tasks"].includes(e.key))
      add("warning", e.keyStart, e.key, `unknown key ${JSON.stringify(e.key)} is ignored`);
  }
}

/** Checks one block of replies by role (`replies`, or `tasks.<key>`): its roles, then each entry. */
function checkRoles(block: string, node: Located, c: FileCheck): void {
  const { pos, add, counts } = c;
  for (const { key, keyStart, node: list } of node.entries ?? []) {
    if (!Object.hasOwn(SHAPES, key)) {
      const near = suggest(key, Object.keys(SHAPES));
      add(
        "error",
        keyStart,
        `${block}.${key}`,
        `unknown role ${JSON.stringify(key)}${near ? ` (did you mean "${near}"?)` : ""}; the roles are ${Object.keys(SHAPES).join(", ")}`,
      );
      continue;
    }
    const role = key as ScriptRole;
    if (!list.items) {
      add("error", list.start, `${block}.${role}`, `${block}.${role} must be a list of entries`);
      continue;
    }
    counts[role] = (counts[role] ?? 0) + list.items.length;
    list.items.forEach((item, index) => {
      const entry: ScriptEntry = { block, role, index, ...pos(item.start), raw: typeof item.value === "string" };
      c.entries.push(entry);
      checkEntry(c.shared, pos, item, entry, add);
    });
  }
}

/** Checks `tasks`: an object of task id (or suffix) → replies by role, each block as {@link checkRoles} does. */
function checkTasks(root: Located, c: FileCheck): void {
  const tasks = field(root, "tasks");
  if (tasks && !tasks.node.entries)
    c.add(
      "error",
      tasks.node.start,
      "tasks",
      '"tasks" must be an object of task id (or id suffix such as "gen-2") → replies by role',
    );
  for (const t of tasks?.node.entries ?? []) {
    if (t.node.entries) checkRoles(`tasks.${t.key}`, t.node, c);
    else c.add("error", t.node.start, `tasks.${t.key}`, `tasks.${t.key} must be an object of role → list of entries`);
  }
}

/** Warns of what the whole file lacks or mixes: both build shapes, no plan or spec, no build. */
function checkWhole(replies: Located, c: FileCheck): void {
  const { add, counts } = c;
  const buildShapes = new Set(c.entries.flatMap((e) => (e.role === "build" && e.shape ? [e.shape] : [])));
  if (buildShapes.size > 1)
    add(
      "warning",
      replies.start,
      "replies.build",
      "build mixes EditReply (repo mode) and Candidate (inline) entries; a task uses one or the other",
    );
  if (!counts.plan && !counts.spec)
    add("warning", replies.start, "replies", "no plan or spec entries: every task starts with one of them");
  if (!counts.build) add("warning", replies.start, "replies", "no build entries: every iteration asks for one");
}

/**
 * Checks the text of a replies file. Loads what it needs of shared/ (`loadShared`) on first use.
 * @returns the report; `valid` is false when any problem is an error. Never throws for bad
 *   input.
 */
export async function validateScript(text: string): Promise<ScriptReport> {
  const shared = await loadShared();
  const problems: ScriptProblem[] = [];
  const pos = locator(text);
  const add: Add = (severity, offset, where, message) => {
    problems.push({ severity, ...pos(offset), where, message });
  };
  const c: FileCheck = { shared, pos, add, counts: {}, entries: [] };
  const done = (): ScriptReport => {
    problems.sort((a, b) => a.line - b.line || a.column - b.column);
    return { valid: !problems.some((p) => p.severity === "error"), counts: c.counts, entries: c.entries, problems };
  };
  let root: Located;
  try {
    root = parseLocated(text, (at, key) =>
      add("warning", at, "", `the key ${JSON.stringify(key)} appears again; the last one counts`),
    );
  } catch (err) {
    if (!(err instanceof JsonSyntax)) throw err;
    add("error", err.offset, "", `not valid JSON: ${err.message}`);
    return done();
  }
  if (!root.entries) {
    add("error", root.start, "", 'a script is a JSON object: {"v": 1, "kind": "loopsmith-script", "replies": {...}}');
    return done();
  }
  checkFrame(root, add);
  const replies = field(root, "replies");
  if (!replies?.node.entries) {
    add(
      "error",
      replies?.node.start ?? root.start,
      "replies",
      replies ? '"replies" must be an object of role → list of entries' : '"replies" is missing',
    );
    return done();
  }
  checkRoles("replies", replies.node, c);
  checkTasks(root, c);
  checkWhole(replies.node, c);
  return done();
}

/** The human lines of a report: problems and matched entries by line, then a summary. */
export function scriptReportText(file: string, r: ScriptReport): string {
  const name = printable(file);
  const rows: Array<{ line: number; column: number; text: string }> = [
    ...r.problems.map((p) => ({
      line: p.line,
      column: p.column,
      text: `${name}:${p.line}:${p.column}: ${p.severity}: ${p.where ? `${p.where}: ` : ""}${printable(p.message)}`,
    })),
    ...r.entries
      .filter((e) => e.shape)
      .map((e) => ({
        line: e.line,
        column: e.column,
        text: `${name}:${e.line}:${e.column}: ok: ${e.block}.${e.role}[${e.index}]: ${e.raw ? "raw text, reads as " : ""}${e.shape}${e.shape === "EditReply" || e.shape === "Candidate" ? ` (${ROLE_OF_SHAPE[e.shape]})` : ""}`,
      })),
  ].sort((a, b) => a.line - b.line || a.column - b.column);
  const errors = r.problems.filter((p) => p.severity === "error").length;
  const warnings = r.problems.length - errors;
  const counts =
    Object.entries(r.counts)
      .map(([role, n]) => `${role} ${n}`)
      .join(", ") || "no entries";
  const verdict = r.valid ? "valid" : `not valid: ${errors} error${errors === 1 ? "" : "s"}`;
  return [
    ...rows.map((x) => x.text),
    `${name}: ${verdict}${warnings ? `, ${warnings} warning${warnings === 1 ? "" : "s"}` : ""} (${counts})`,
    "",
  ].join("\n");
}

/**
 * `script validate`: reads `file`, prints the report (human lines, or one JSON object with
 * `--json`).
 * @returns 0 valid, 2 not valid (with `--json`, the error object follows the report)
 * @throws CliError `bad_request` when the file cannot be read
 */
export async function scriptValidate(file: string, opts: { json?: boolean }): Promise<number> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw usageError(`cannot read the script file ${file}: ${(err as Error).message}`);
  }
  const r = await validateScript(text);
  process.stdout.write(opts.json ? `${jsonLine({ kind: "script-report", file, ...r })}\n` : scriptReportText(file, r));
  if (r.valid) return ExitCode.ok;
  const errors = r.problems.filter((p) => p.severity === "error").length;
  return report(
    {
      kind: "error",
      code: "config_invalid",
      message: `${file} is not a valid script (${errors} error${errors === 1 ? "" : "s"})`,
      exitCode: ExitCode.usage,
    },
    { json: opts.json },
  );
}

/**
 * Registers `script validate <file>` on the program.
 * @param run - runs the action: sets the exit code, reports errors. @defaultValue `runCommand`
 */
export function registerScript(program: Command, run: CommandRunner = runCommand): void {
  const script = program.command("script").description("replies files of the scripted provider (docs/SCRIPTS.md)");
  script
    .command("validate")
    .description("check a replies file line by line; exit 0 when it is valid, 2 when not")
    .argument("<file>", "the replies file (JSON)")
    .option("--json", "print the report as one JSON object")
    .action(async (file: string, opts: { json?: boolean }) => run(opts.json, () => scriptValidate(file, opts)));
}
