/**
 * `loopsmith script validate <file>`: checks a replies file of the scripted provider
 * (docs/SCRIPTS.md) line by line: JSON syntax (with line:column), the file's frame, unknown
 * roles, and every entry against the schema its role answers with (`plan`/`spec` → Plan,
 * `build` → EditReply (repo mode) or Candidate (inline), `review` → Review, `reflect` →
 * Reflection). A string entry is raw reply text: it goes through the providers' own reader.
 * The shared code (zod schemas, the reader) is loaded only when the command runs.
 *
 * Exit codes (`ExitCode`): 0 the file is valid (warnings allowed); 2 it is not, or cannot be
 * read; with `--json` stdout holds one report object and then, on exit 2, the error object.
 */
import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import type * as SharedModule from "@loopsmith/shared";
import type { z } from "zod";
import { report, runCommand, usageError, type CommandRunner } from "../errors.js";
import { ExitCode } from "../exit-codes.js";
import { jsonLine, printable } from "../terminal.js";

/** The roles a script answers, and the shapes each accepts (tried in this order). */
const SHAPES = {
  spec: ["Plan"],
  plan: ["Plan"],
  build: ["EditReply", "Candidate"],
  review: ["Review"],
  reflect: ["Reflection"],
} as const;
type ScriptRole = keyof typeof SHAPES;
/** A schema an entry can match. */
export type EntryShape = "Plan" | "EditReply" | "Candidate" | "Review" | "Reflection";

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

// ---- A JSON reader that remembers where each value starts ------------------------------

/** A parsed value and where it starts and ends (UTF-16 offsets into the text). */
interface Located {
  start: number;
  end: number;
  value: unknown;
  items?: Located[];
  entries?: Array<{ key: string; keyStart: number; node: Located }>;
}

class JsonSyntax extends Error {
  constructor(readonly offset: number, message: string) {
    super(message);
  }
}

/** Parses strict JSON (RFC 8259) with positions. Duplicate keys: the last wins, each repeat is reported. */
function parseLocated(text: string, duplicate: (keyStart: number, key: string) => void): Located {
  let i = 0;
  const ws = (): void => {
    while (i < text.length && " \t\n\r".includes(text[i] ?? "")) i++;
  };
  const what = (at: number): string => (at >= text.length ? "the end of the file" : `${JSON.stringify(text[at])}`);
  const expectChar = (c: string, context: string): void => {
    if (text[i] !== c) throw new JsonSyntax(i, `expected '${c}' ${context}, found ${what(i)}`);
    i++;
  };
  const str = (): string => {
    const start = i++;
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new JsonSyntax(start, "a string is not closed");
      if (c === '"') break;
      if (c < " ") throw new JsonSyntax(i, "a control character (a raw line break or tab?) inside a string; write it as \\n or \\t");
      if (c === "\\") {
        const e = text[i + 1] ?? "";
        if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 6;
        else if ('"\\/bfnrt'.includes(e) && e !== "") i += 2;
        else throw new JsonSyntax(i, `an invalid escape \\${e} in a string`);
      } else i++;
    }
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (depth: number): Located => {
    ws();
    const start = i;
    if (depth > 256) throw new JsonSyntax(i, "values are nested too deeply");
    const c = text[i];
    if (c === "{") {
      i++;
      const obj: Record<string, unknown> = {};
      const entries: NonNullable<Located["entries"]> = [];
      ws();
      if (text[i] === "}") return { start, end: ++i, value: obj, entries };
      for (;;) {
        ws();
        if (text[i] !== '"') throw new JsonSyntax(i, `expected a key in double quotes, found ${what(i)}${text[i] === "}" ? " (a trailing comma?)" : ""}`);
        const keyStart = i;
        const key = str();
        ws();
        expectChar(":", `after the key ${JSON.stringify(key)}`);
        const node = value(depth + 1);
        if (Object.hasOwn(obj, key)) duplicate(keyStart, key);
        Object.defineProperty(obj, key, { value: node.value, enumerable: true, writable: true, configurable: true });
        entries.push({ key, keyStart, node });
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "}") return { start, end: ++i, value: obj, entries };
        else throw new JsonSyntax(i, `expected ',' or '}' after a value in an object, found ${what(i)}`);
      }
    }
    if (c === "[") {
      i++;
      const items: Located[] = [];
      ws();
      if (text[i] === "]") return { start, end: ++i, value: [], items };
      for (;;) {
        ws();
        if (text[i] === "]") throw new JsonSyntax(i, "expected a value, found ']' (a trailing comma?)");
        items.push(value(depth + 1));
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "]") return { start, end: ++i, value: items.map((n) => n.value), items };
        else throw new JsonSyntax(i, `expected ',' or ']' after a value in an array, found ${what(i)}`);
      }
    }
    if (c === '"') return { start, value: str(), end: i };
    const lit = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i, i + 400));
    if (!lit) throw new JsonSyntax(i, `expected a value, found ${what(i)}`);
    i += lit[0].length;
    return { start, end: i, value: JSON.parse(lit[0]) as unknown };
  };
  const root = value(0);
  ws();
  if (i < text.length) throw new JsonSyntax(i, `unexpected ${what(i)} after the end of the JSON value`);
  return root;
}

type Locate = (offset: number) => { line: number; column: number };

/** Maps offsets of `text` to 1-based lines and columns (a binary search over line starts). */
function locator(text: string): Locate {
  const starts = [0];
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return (offset) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((starts[mid] ?? 0) <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - (starts[lo] ?? 0) + 1 };
  };
}

/** The deepest node on a zod issue path (the entry itself when the path leaves the JSON). */
function nodeAt(node: Located, path: readonly PropertyKey[]): Located {
  let at = node;
  for (const key of path) {
    const next = typeof key === "number" ? at.items?.[key] : at.entries?.findLast((e) => e.key === String(key))?.node;
    if (!next) break;
    at = next;
  }
  return at;
}

/** The word of `options` nearest to a misspelt one (edit distance at most 2). */
function suggest(word: string, options: readonly string[]): string | undefined {
  const dist = (a: string, b: string): number => {
    let prev = Array.from({ length: b.length + 1 }, (_, k) => k);
    for (let x = 1; x <= a.length; x++) {
      const row = [x];
      for (let y = 1; y <= b.length; y++) row.push(Math.min((prev[y] ?? 0) + 1, (row[y - 1] ?? 0) + 1, (prev[y - 1] ?? 0) + (a[x - 1] === b[y - 1] ? 0 : 1)));
      prev = row;
    }
    return prev[b.length] ?? 99;
  };
  return options.find((o) => dist(word.toLowerCase(), o.toLowerCase()) <= 2);
}

/** Keys of each edit; an unknown one (`serch`) is dropped by the schema, which can turn an edit into a file creation. */
const EDIT_KEYS = ["path", "search", "replace", "delete"];

const ROLE_OF_SHAPE: Record<EntryShape, string> = { Plan: "a plan", EditReply: "repo mode", Candidate: "inline files", Review: "a review", Reflection: "a reflection" };

/** The last member of an object node named `key`. */
function field(node: Located, key: string): { key: string; keyStart: number; node: Located } | undefined {
  return node.entries?.findLast((e) => e.key === key);
}

type Shared = typeof SharedModule;
type Add = (severity: ScriptProblem["severity"], offset: number, where: string, message: string) => void;

/**
 * Checks one reply entry against the shapes its role accepts (a string through the reader,
 * any other value as a scripted JSON reply is validated) and fills in `entry.shape`.
 */
function checkEntry(shared: Shared, pos: Locate, item: Located, entry: ScriptEntry, add: Add): void {
  const where = `replies.${entry.role}[${entry.index}]`;
  const schemas = { Plan: shared.Plan, EditReply: shared.EditReply, Candidate: shared.Candidate, Review: shared.Review, Reflection: shared.Reflection } as const;
  const tried: Array<{ shape: EntryShape; issues: Array<{ path: string; message: string; line?: number }> }> = [];
  for (const shape of SHAPES[entry.role]) {
    const schema: z.ZodType<unknown> = schemas[shape];
    const read = entry.raw ? shared.readStructured(item.value as string, schema) : shared.validateValue(item.value, schema);
    if (read.ok) {
      entry.shape = shape;
      const edits = (read.value as { edits?: Array<{ path: string }> }).edits ?? [];
      for (const [k, ed] of edits.entries()) {
        const checked = shared.checkEditPath(ed.path);
        if (!checked.ok) add("warning", item.start, where, `edits[${k}].path ${JSON.stringify(ed.path)} is unsafe: ${checked.message}; applying it fails with path_escape`);
      }
      break;
    }
    const details = read.error.details as { issues?: Array<{ path: string; message: string }> } | undefined;
    const issues = (details?.issues ?? []).map((is) => {
      if (entry.raw || !is.path) return is;
      const at = nodeAt(item, is.path.split(".").map((p) => (/^\d+$/.test(p) ? Number(p) : p)));
      return { ...is, line: pos(at.start).line };
    });
    if (entry.raw && issues.length === 0) issues.push({ path: "", message: read.error.message });
    tried.push({ shape, issues });
  }
  // Unmatched: report against the shape it most looks like (with edits or a summary and no files: an EditReply).
  const looksRepo = item.entries?.some((e) => e.key === "edits" || e.key === "summary") && !item.entries.some((e) => e.key === "files");
  const first = tried.find((t) => t.shape === (looksRepo ? "EditReply" : "Candidate")) ?? tried[0];
  // Keys the schema drops silently: a misspelt `search` turns an edit into a file creation.
  const like = entry.shape ?? first?.shape;
  const unknownKeys = (node: Located, known: readonly string[], at: string, note = ""): void => {
    for (const e of node.entries ?? []) {
      if (known.includes(e.key)) continue;
      const near = suggest(e.key, known);
      add("warning", e.keyStart, at, `unknown key ${JSON.stringify(e.key)}${near ? ` (did you mean "${near}"?)` : ""} is ignored${note}`);
    }
  };
  if (like && !entry.raw) {
    unknownKeys(item, Object.keys((schemas[like] as unknown as { shape?: object }).shape ?? {}), where);
    field(item, "edits")?.node.items?.forEach((ed, k) => unknownKeys(ed, EDIT_KEYS, `${where}.edits[${k}]`, "; an edit without search creates its file"));
  }
  if (entry.shape) {
    if (entry.shape === "EditReply" && item.entries?.some((e) => e.key === "files" || e.key === "tests")) {
      add("warning", item.start, where, "matches EditReply (repo mode), where files and tests are ignored");
    }
    return;
  }
  const detail = (first?.issues ?? []).slice(0, 12).map((is) => `\n    - at ${is.path ? `\`${is.path}\`` : "the root"}${is.line ? ` (line ${is.line})` : ""}: ${is.message}`).join("");
  const names = SHAPES[entry.role].map((s) => (s === "EditReply" || s === "Candidate" ? `${s} (${ROLE_OF_SHAPE[s]})` : s)).join(" nor ");
  if (entry.raw) add("warning", item.start, where, `raw reply text that the reader cannot turn into ${names}: the provider re-asks, and the next entry answers the re-ask${detail}`);
  else add("error", item.start, where, `does not match ${names}${tried.length > 1 && first ? `; as ${first.shape}` : ""}:${detail}`);
}

/**
 * Checks the text of a replies file. Loads `@loopsmith/shared` (schemas, the reader, the
 * edit path check) on first use.
 * @returns the report; `valid` is false when any problem is an error. Never throws for bad
 *   input.
 */
export async function validateScript(text: string): Promise<ScriptReport> {
  const shared = await import("@loopsmith/shared");
  const problems: ScriptProblem[] = [];
  const entries: ScriptEntry[] = [];
  const counts: ScriptReport["counts"] = {};
  const pos = locator(text);
  const add: Add = (severity, offset, where, message) => {
    problems.push({ severity, ...pos(offset), where, message });
  };
  const done = (): ScriptReport => {
    problems.sort((a, b) => a.line - b.line || a.column - b.column);
    return { valid: !problems.some((p) => p.severity === "error"), counts, entries, problems };
  };
  let root: Located;
  try {
    root = parseLocated(text, (at, key) => add("warning", at, "", `the key ${JSON.stringify(key)} appears again; the last one counts`));
  } catch (err) {
    if (!(err instanceof JsonSyntax)) throw err;
    add("error", err.offset, "", `not valid JSON: ${err.message}`);
    return done();
  }
  if (!root.entries) {
    add("error", root.start, "", 'a script is a JSON object: {"v": 1, "kind": "loopsmith-script", "replies": {...}}');
    return done();
  }
  const v = field(root, "v");
  if (v?.node.value !== 1) add("error", v?.node.start ?? root.start, "v", `"v" must be 1${v ? "" : " (it is missing)"}`);
  const kind = field(root, "kind");
  if (kind?.node.value !== "loopsmith-script") add("error", kind?.node.start ?? root.start, "kind", `"kind" must be "loopsmith-script"${kind ? "" : " (it is missing)"}`);
  const description = field(root, "description");
  if (description && typeof description.node.value !== "string") add("error", description.node.start, "description", '"description" must be a string');
  for (const e of root.entries) {
    if (!["v", "kind", "description", "replies"].includes(e.key)) add("warning", e.keyStart, e.key, `unknown key ${JSON.stringify(e.key)} is ignored`);
  }
  const replies = field(root, "replies");
  if (!replies?.node.entries) {
    add("error", replies?.node.start ?? root.start, "replies", replies ? '"replies" must be an object of role → list of entries' : '"replies" is missing');
    return done();
  }
  for (const { key, keyStart, node } of replies.node.entries) {
    if (!Object.hasOwn(SHAPES, key)) {
      const near = suggest(key, Object.keys(SHAPES));
      add("error", keyStart, `replies.${key}`, `unknown role ${JSON.stringify(key)}${near ? ` (did you mean "${near}"?)` : ""}; the roles are ${Object.keys(SHAPES).join(", ")}`);
      continue;
    }
    const role = key as ScriptRole;
    if (!node.items) {
      add("error", node.start, `replies.${role}`, `replies.${role} must be a list of entries`);
      continue;
    }
    counts[role] = node.items.length;
    node.items.forEach((item, index) => {
      const entry: ScriptEntry = { role, index, ...pos(item.start), raw: typeof item.value === "string" };
      entries.push(entry);
      checkEntry(shared, pos, item, entry, add);
    });
  }
  const buildShapes = new Set(entries.flatMap((e) => (e.role === "build" && e.shape ? [e.shape] : [])));
  if (buildShapes.size > 1) add("warning", replies.node.start, "replies.build", "build mixes EditReply (repo mode) and Candidate (inline) entries; a task uses one or the other");
  if (!counts.plan && !counts.spec) add("warning", replies.node.start, "replies", "no plan or spec entries: every task starts with one of them");
  if (!counts.build) add("warning", replies.node.start, "replies", "no build entries: every iteration asks for one");
  return done();
}

/** The human lines of a report: problems and matched entries by line, then a summary. */
export function scriptReportText(file: string, r: ScriptReport): string {
  const name = printable(file);
  const rows: Array<{ line: number; column: number; text: string }> = [
    ...r.problems.map((p) => ({ line: p.line, column: p.column, text: `${name}:${p.line}:${p.column}: ${p.severity}: ${p.where ? `${p.where}: ` : ""}${printable(p.message)}` })),
    ...r.entries
      .filter((e) => e.shape)
      .map((e) => ({ line: e.line, column: e.column, text: `${name}:${e.line}:${e.column}: ok: replies.${e.role}[${e.index}]: ${e.raw ? "raw text, reads as " : ""}${e.shape}${e.shape === "EditReply" || e.shape === "Candidate" ? ` (${ROLE_OF_SHAPE[e.shape]})` : ""}` })),
  ].sort((a, b) => a.line - b.line || a.column - b.column);
  const errors = r.problems.filter((p) => p.severity === "error").length;
  const warnings = r.problems.length - errors;
  const counts = Object.entries(r.counts).map(([role, n]) => `${role} ${n}`).join(", ") || "no entries";
  const verdict = r.valid ? "valid" : `not valid: ${errors} error${errors === 1 ? "" : "s"}`;
  return [...rows.map((x) => x.text), `${name}: ${verdict}${warnings ? `, ${warnings} warning${warnings === 1 ? "" : "s"}` : ""} (${counts})`, ""].join("\n");
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
  return report({ kind: "error", code: "config_invalid", message: `${file} is not a valid script (${errors} error${errors === 1 ? "" : "s"})`, exitCode: ExitCode.usage }, { json: opts.json });
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
