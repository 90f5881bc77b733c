/**
 * Agent mode's tool table: each tool is ONE entry here, holding its argument schema, the
 * description the model reads, where it runs, how its call is summarised on the step's
 * event line, and how its observation is rendered (for the model, and in a few words for
 * people). The builder offers the tools from it (`agentToolSpecs` in `llm/agent-tools.ts`),
 * the architect dispatches by `runs` (`services/architect/src/agent/tools.ts`), the executor
 * answers the `executor` tools (`services/executor/src/session.ts`, whose handler table is
 * typed by {@link ExecutorToolName}), and the CLI draws steps with it
 * (`cli/src/transcript-view.ts`). Adding a tool is one entry here plus its implementation on
 * the side it runs. Pure data and functions over plain values: it imports no other contract
 * than the schemas it names.
 */
import { z } from "zod";
import { RelativePath } from "./common.js";
import { Edit } from "./repo.js";

/** `list`: a directory's entries, `depth` levels down (directories end with `/`). */
export const ListArgs = z.object({
  path: z.string().max(1_000).default("."),
  depth: z.number().int().min(1).max(4).default(2),
});
/** `read`: a file's lines `startLine`..`endLine` (1-based, inclusive), numbered. */
export const ReadArgs = z.object({
  path: RelativePath,
  startLine: z.number().int().min(1).optional(),
  endLine: z.number().int().min(1).optional(),
});
/** `search`: lines matching a regular expression (JavaScript syntax), in files matching `glob`. */
export const SearchArgs = z.object({
  pattern: z.string().min(1).max(1_000),
  glob: z.string().max(500).optional(),
  /** Matching lines at most. @defaultValue 100 */
  maxResults: z.number().int().min(1).max(1_000).default(100),
});
/** `symbol`: where a name is defined and referenced (the repo map's index). */
export const SymbolArgs = z.object({ name: z.string().min(1).max(200) });
/** `run`: a shell line (`sh -c`) at the workspace root of the session container. */
export const RunArgs = z.object({
  command: z.string().min(1).max(4_000),
  /** ms; capped by the task's run timeout. */
  timeoutMs: z.number().int().min(100).max(600_000).optional(),
});
/** `edit`: search/replace edits, applied in order over the candidate so far. */
export const EditArgs = z.object({ edits: z.array(Edit).min(1).max(20) });
/** `submit`: the change is done; `summary` is its one line. */
export const SubmitArgs = z.object({ summary: z.string().min(1).max(500) });

/**
 * Where a tool runs: `executor`, a call in the session container (the executor's session
 * calls answer it); `architect`, answered from what the architect holds (the repo map, the
 * edit engine and the policy, the loop itself for `submit`).
 */
export type ToolSide = "executor" | "architect";

/** The parts of a session's observation a tool's rendering reads (`SessionObservation` has them). */
export interface ObservationParts {
  /** `run`: the command's exit code; `null` when it was killed. */
  exitCode?: number | null;
  /** `run`: it passed its timeout and was killed. */
  timedOut?: boolean;
  /** `read`: lines in the file; `search`: matches found. */
  total?: number;
}

/** An observation as people read it, for {@link AgentTool.outcome}: the whole text, its non-blank lines, the first of them cut at 60. */
export interface ObservationView {
  text: string;
  lines: readonly string[];
  first: string;
}

/** One tool of the table. */
export interface AgentTool<S extends z.ZodTypeAny = z.ZodTypeAny> {
  /** The zod schema of its arguments (the JSON Schema each provider is sent is generated from it). */
  args: S;
  /** What it does, as the model reads it to decide when to call it. */
  description: string;
  runs: ToolSide;
  /** Its arguments in short, for the step's event line (the arguments as the model sent them, unchecked). */
  summary: (args: Readonly<Record<string, unknown>>) => string;
  /** `executor` tools: the line above a session's output in the observation (`exit code 1`, `4 matches`), if any. */
  heading?: (o: ObservationParts) => string | undefined;
  /** What a successful observation says in a few words (`4 matches`, `exit 1`), for `show` and the reports. */
  outcome: (o: ObservationView) => string;
}

const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;
const countOf = (o: ObservationView, re: RegExp): number => o.lines.filter((l) => re.test(l)).length;

/**
 * Arguments in short when a tool's own field is missing: the first of `command`, `pattern`,
 * `name`, the paths of `edits`, `summary` that is there, else the JSON (each cut at 120).
 */
export function argsSummary(a: Readonly<Record<string, unknown>>): string {
  if (typeof a.command === "string") return a.command.slice(0, 120);
  if (typeof a.pattern === "string")
    return `/${a.pattern.slice(0, 100)}/${typeof a.glob === "string" ? ` ${a.glob}` : ""}`;
  if (typeof a.name === "string") return a.name;
  if (Array.isArray(a.edits))
    return [...new Set(a.edits.map((e) => String((e as { path?: unknown }).path ?? "?")))].join(", ").slice(0, 120);
  if (typeof a.summary === "string") return a.summary.slice(0, 120);
  return JSON.stringify(a).slice(0, 120);
}

/** `path` or `path:start-end`, for `list` and `read`. */
const pathSummary = (a: Readonly<Record<string, unknown>>): string =>
  typeof a.path === "string"
    ? `${a.path}${a.startLine || a.endLine ? `:${String(a.startLine ?? 1)}-${String(a.endLine ?? "")}` : ""}`
    : argsSummary(a);

/** The tools of agent mode, in the order the model is offered them. */
export const AGENT_TOOLS = {
  list: {
    args: ListArgs,
    description: "List a directory of the repository, `depth` levels down (directories end with `/`).",
    runs: "executor",
    summary: pathSummary,
    outcome: (o) => plural(o.lines.length, "entry", "entries"),
  },
  read: {
    args: ReadArgs,
    description:
      "Read a file of the repository, optionally lines startLine..endLine (1-based, inclusive). Lines come numbered.",
    runs: "executor",
    summary: pathSummary,
    outcome: (o) => plural(countOf(o, /^\s*\d+: /), "line"),
  },
  search: {
    args: SearchArgs,
    description:
      "Search the repository for lines matching a regular expression (JavaScript syntax), optionally only in files matching a glob such as `src/**/*.py`.",
    runs: "executor",
    summary: argsSummary,
    heading: (o) => (o.total !== undefined ? `${o.total} matches` : undefined),
    outcome: (o) => {
      const total = /^(\d+) match(?:es)?$/.exec(o.lines[0] ?? "");
      return plural(total ? Number(total[1]) : countOf(o, /^[^\s:][^:]*:\d+:/), "match", "matches");
    },
  },
  symbol: {
    args: SymbolArgs,
    description: "Find where a name (function, class, method) is defined and where it is referenced.",
    runs: "architect",
    summary: argsSummary,
    outcome: (o) => o.first || "(no output)",
  },
  run: {
    args: RunArgs,
    description:
      "Run a shell command (`sh -c`) at the repository root of the sandbox, on the files as you have edited them: no network. Use it to run the tests or reproduce the bug.",
    runs: "executor",
    summary: argsSummary,
    heading: (o) =>
      o.timedOut
        ? "killed: it passed its timeout"
        : o.exitCode === null || o.exitCode === undefined
          ? "killed"
          : `exit code ${o.exitCode}`,
    outcome: (o) => {
      const exit = /\bexit(?:\s+code)?\s*[:=]?\s*(-?\d+)/i.exec(o.text);
      return exit ? `exit ${exit[1]}` : o.first.startsWith("killed") ? o.first : plural(o.lines.length, "line");
    },
  },
  edit: {
    args: EditArgs,
    description:
      "Change files with search/replace edits, applied in order. `search` must be copied exactly from the file and occur exactly once in it; an empty `search` creates the file; `delete: true` removes it.",
    runs: "architect",
    summary: argsSummary,
    outcome: (o) => o.first || "(no output)",
  },
  submit: {
    args: SubmitArgs,
    description: "End the task: your change is done. `summary` is one line saying what it does.",
    runs: "architect",
    summary: argsSummary,
    outcome: () => "submitted",
  },
} as const satisfies Record<string, AgentTool>;

/** A tool's name: a key of {@link AGENT_TOOLS}. */
export type AgentToolName = keyof typeof AGENT_TOOLS;

/** The names of the tools that run in the executor's session container. */
export type ExecutorToolName = {
  [N in AgentToolName]: (typeof AGENT_TOOLS)[N]["runs"] extends "executor" ? N : never;
}[AgentToolName];

/** The names of the tools the architect answers. */
export type ArchitectToolName = Exclude<AgentToolName, ExecutorToolName>;

/** The table's entry of `name`, or undefined for a name that is no tool (a model's invention, an old record). */
export function agentTool(name: string): AgentTool | undefined {
  return Object.hasOwn(AGENT_TOOLS, name) ? (AGENT_TOOLS as Record<string, AgentTool>)[name] : undefined;
}
