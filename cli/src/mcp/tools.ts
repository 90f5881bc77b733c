/**
 * The tools `loopsmith mcp` serves: their input schemas (strict zod objects, which the MCP SDK
 * turns into each tool's JSON Schema and checks every call against: an unknown argument is an
 * error naming it and the nearest known one, never dropped), the checks a schema cannot express, and how each answer is shaped into a tool result (text for people and
 * models, plus the same facts as `structuredContent`). Pure: no NATS, no process state.
 */
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { LoopsmithError, strictObject } from "@loopsmith/shared/runtime";
import {
  RunId,
  Task,
  TaskId,
  TaskResult,
  type DagProgress,
  type GenerationReport,
  type History,
  type RunRecord,
  type TaskEvent,
  type TaskInput,
  type TaskLimits,
} from "@loopsmith/shared/contracts";
import { LANGUAGES, MAX_ITERATIONS } from "@loopsmith/shared/contracts/values";
import { historyText, resultText } from "../output.js";
import { runText } from "../run-view.js";
import { transcriptSteps } from "../transcript-view.js";
import { reportTable } from "../improve/reports.js";
import { errorObject } from "../errors.js";
import type { RepoOutcome } from "../solve-repo.js";

/** A file given inline: a path relative to the task's workspace and its whole content. */
const InlineFile = strictObject({
  path: z.string().min(1).max(500).describe("path relative to the workspace, e.g. calc.py or tests/test_calc.py"),
  content: z.string().max(1_000_000).describe("the whole file"),
});

/** Most tasks one `history` call lists. */
export const MCP_HISTORY_MAX = 1_000;

/**
 * Input of the `solve` tool. With `repo`, repo mode (as `solve --repo`): the repository's own
 * tests decide, and a passing change lands on branch `loopsmith/<taskId>`. Without it, an
 * inline task (as `solve "<goal>" --language …`): `files` are the starting workspace and
 * `tests` the acceptance tests the model sees.
 */
export const SolveInput = strictObject({
  goal: z.string().min(1).max(100_000).describe("what to build or change, in words"),
  repo: z
    .string()
    .min(1)
    .optional()
    .describe(
      "repo mode: absolute path of a git repository to change (its committed files; your checkout is not touched)",
    ),
  base: z.string().min(1).optional().describe("repo mode: the commit to start from (default HEAD)"),
  testCmd: z
    .string()
    .min(1)
    .optional()
    .describe("repo mode: the test command (default detected: python3 -m pytest -q / npm test)"),
  setupCmd: z
    .string()
    .optional()
    .describe('repo mode: dependency install, once per base commit (default detected; "" for none)'),
  mode: z
    .enum(["agent", "oneshot"])
    .optional()
    .describe("repo mode: agent explores with tools before it edits; oneshot edits in one call (default agent)"),
  apply: z
    .boolean()
    .optional()
    .describe("repo mode: also apply a passing change to the work tree, which must be clean"),
  language: z.enum(LANGUAGES).optional().describe("inline task: its language (default python)"),
  files: z.array(InlineFile).max(200).optional().describe("inline task: the starting workspace"),
  tests: z.array(InlineFile).max(200).optional().describe("inline task: acceptance tests (visible to the model)"),
  maxIterations: z
    .number()
    .int()
    .min(MAX_ITERATIONS.min)
    .max(MAX_ITERATIONS.max)
    .optional()
    .describe(`iterations at most (${MAX_ITERATIONS.min} to ${MAX_ITERATIONS.max}; default 5)`),
  budgetUsd: z.number().positive().optional().describe("the task's LLM budget in USD"),
  budgetTokens: z.number().int().positive().optional().describe("the task's LLM budget in tokens (input + output)"),
  review: z.boolean().optional().describe("run the LLM review step before executing"),
  memory: z.enum(["on", "off"]).optional().describe("off: recall nothing from memory (default on)"),
  taskId: TaskId.optional().describe("the task's id (default generated); 1-64 letters, digits, '-' or '_'"),
});
/** What a `solve` call carries, once the SDK has checked it against {@link SolveInput}. */
export type SolveArgs = z.infer<typeof SolveInput>;

/** Input of the `status` tool. */
export const StatusInput = strictObject({ taskId: TaskId.describe("the task's id, as solve or history gave it") });
/** Input of the `show` tool. */
export const ShowInput = strictObject({
  taskId: TaskId.describe("the task's id"),
  transcript: z
    .boolean()
    .optional()
    .describe("agent mode: each step's thought and observation in the text (default true)"),
});
/** Input of the `history` tool. */
export const HistoryInput = strictObject({
  limit: z
    .number()
    .int()
    .min(1)
    .max(MCP_HISTORY_MAX)
    .optional()
    .describe(`how many recent tasks, newest first (1 to ${MCP_HISTORY_MAX}; default 20)`),
});
/** Input of the `improve_status` tool. */
export const ImproveStatusInput = strictObject({
  runId: RunId.describe("the improvement run's id (loopsmith improve --run-id)"),
  dir: z
    .string()
    .min(1)
    .optional()
    .describe("the run's directory (improve --out), read when the stack no longer holds the run"),
});

/** The repo-mode-only fields of {@link SolveInput}, as the tool names them. */
const REPO_ONLY = ["base", "testCmd", "setupCmd", "mode", "apply"] as const;
/** The inline-only fields of {@link SolveInput}. */
const INLINE_ONLY = ["language", "files", "tests"] as const;

/**
 * The checks of a `solve` call that its shape cannot express: repo-mode fields only with
 * `repo`, inline fields only without it, a repository given as an absolute path (the server's
 * working directory is the editor's choice, not the user's).
 * @throws LoopsmithError `bad_request` naming the fields
 */
export function checkSolveArgs(args: SolveArgs): void {
  if (args.repo !== undefined) {
    const inline = INLINE_ONLY.filter((k) => args[k] !== undefined);
    if (inline.length)
      throw new LoopsmithError(
        "bad_request",
        `${inline.join(", ")} appl${inline.length === 1 ? "ies" : "y"} to an inline task only, not with repo (a repository's language is detected and its own tests decide)`,
      );
    if (!args.repo.startsWith("/"))
      throw new LoopsmithError("bad_request", `repo must be an absolute path, not ${JSON.stringify(args.repo)}`);
  } else {
    const repoOnly = REPO_ONLY.filter((k) => args[k] !== undefined);
    if (repoOnly.length)
      throw new LoopsmithError(
        "bad_request",
        `${repoOnly.join(", ")} appl${repoOnly.length === 1 ? "ies" : "y"} to repo mode only (give repo: <path of a git repository>)`,
      );
  }
}

/** The task limits a `solve` call sets. */
export function limitsOfArgs(args: SolveArgs): Partial<TaskLimits> {
  return {
    ...(args.maxIterations !== undefined ? { maxIterations: args.maxIterations } : {}),
    ...(args.budgetUsd !== undefined ? { maxCostUsd: args.budgetUsd } : {}),
    ...(args.budgetTokens !== undefined ? { maxTokens: args.budgetTokens } : {}),
  };
}

/**
 * The inline task of a `solve` call without `repo`, validated against the `Task` contract.
 * @param now - the submission time
 * @throws LoopsmithError `bad_request` naming the invalid fields
 */
export function inlineTask(args: SolveArgs, now: Date = new Date()): TaskInput {
  const input: TaskInput = {
    v: 1,
    taskId: args.taskId ?? `task-${randomBytes(5).toString("hex")}`,
    goal: args.goal,
    language: args.language ?? "python",
    files: args.files ?? [],
    acceptanceTests: args.tests ?? [],
    limits: limitsOfArgs(args),
    ...(args.review !== undefined ? { review: args.review } : {}),
    ...(args.memory !== undefined ? { memory: args.memory } : {}),
    submittedAt: now.toISOString(),
  };
  const parsed = Task.safeParse(input);
  if (!parsed.success)
    throw new LoopsmithError(
      "bad_request",
      `the task is invalid: ${parsed.error.issues.map((i) => `${i.path.join(".") || "task"}: ${i.message}`).join("; ")}`,
    );
  return input;
}

/** A tool's answer, as the MCP SDK takes it (`CallToolResult`). */
export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: "text"; text: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** A result of `text` with `structured` as its structured content. */
function toolResult(text: string, structured: Record<string, unknown>): ToolResult {
  return { content: [{ type: "text", text }], structuredContent: structured };
}

/**
 * A failed call as a tool result (`isError`, so the calling model sees it and may correct
 * itself): the error's code and sentence, and the CLI's error object as structured content.
 */
export function errorResult(err: unknown): ToolResult {
  const obj = errorObject(err);
  return {
    content: [{ type: "text", text: `${obj.code}: ${obj.message}` }],
    structuredContent: { ...obj },
    isError: true,
  };
}

/** The first line of every scripted result: no model answered. */
export const SCRIPTED_BANNER = "SCRIPTED RUN: the replies were replayed from a file; no model was called.";

/**
 * The result of a finished `solve`: the CLI's result text (with a repo-mode task's patch,
 * and what was written to the repository), a scripted run saying so first; structured: the
 * `TaskResult` and the repository outcome. A task that did not pass is still a tool success:
 * its status says how it ended.
 */
export function solveResult(result: TaskResult, dag?: DagProgress, repo?: RepoOutcome): ToolResult {
  const lines = [...(result.scripted ? [SCRIPTED_BANNER] : []), resultText(result, dag).trim()];
  if (repo) lines.push("", ...repo.lines);
  return toolResult(lines.join("\n"), {
    taskId: result.taskId,
    status: result.status,
    stopReason: result.stopReason,
    scripted: result.scripted,
    result,
    ...(repo
      ? {
          repo: {
            applied: repo.applied,
            ...(repo.branch ? { branch: repo.branch } : {}),
            ...(repo.commit ? { commit: repo.commit } : {}),
          },
        }
      : {}),
  });
}

/** Where a task is, as the `status` tool reports it. */
export interface TaskStatus {
  taskId: string;
  /** `running`, or how it ended (a `TaskResult` status). */
  status: "running" | TaskResult["status"];
  /** The phase it is in (a running task) or ended in. */
  phase?: string;
  /** 1-based iteration (0 before building starts). */
  iteration?: number;
  stopReason?: TaskResult["stopReason"];
  message?: string;
  /** Where the answer came from: the architect's checkpoint or memory's recorded run. */
  source: "architect" | "memory";
  result?: TaskResult;
}

/** The fields of the architect's checkpoint (`TaskState`) that a status reads; the rest is left alone. */
const CheckpointView = z.looseObject({
  status: z.enum(["running", "final"]),
  phase: z.string().optional(),
  iteration: z.number().int().nonnegative().optional(),
  result: TaskResult.optional(),
});

/**
 * A task's status from the architect's checkpoint (the `status` endpoint's `state`), or, with
 * none, from the result of the run memory recorded.
 * @returns undefined when neither knows the task
 * @throws LoopsmithError `internal` when the checkpoint does not have a task state's shape
 */
export function taskStatus(taskId: string, state: unknown, recorded?: RunRecord): TaskStatus | undefined {
  if (state !== null && state !== undefined) {
    const parsed = CheckpointView.safeParse(state);
    if (!parsed.success)
      throw new LoopsmithError("internal", `the architect's checkpoint of ${taskId} is not a task state`);
    const s = parsed.data;
    const r = s.status === "final" ? s.result : undefined;
    return {
      taskId,
      status: r ? r.status : "running",
      ...(s.phase ? { phase: s.phase } : {}),
      ...(s.iteration !== undefined ? { iteration: s.iteration } : {}),
      ...(r ? { stopReason: r.stopReason, message: r.message, result: r } : {}),
      source: "architect",
    };
  }
  const r = recorded?.result;
  if (!r) return undefined;
  return {
    taskId,
    status: r.status,
    stopReason: r.stopReason,
    message: r.message,
    iteration: r.iterations,
    source: "memory",
    result: r,
  };
}

/** The `status` tool's result: one line (and the result's message once it ended). */
export function statusResult(s: TaskStatus): ToolResult {
  const where = [
    s.iteration !== undefined ? `iteration ${s.iteration}` : "",
    s.phase ? `phase ${s.phase}` : "",
    s.stopReason ? `stop reason ${s.stopReason}` : "",
  ].filter(Boolean);
  const text = `task ${s.taskId}: ${s.status}${where.length ? ` (${where.join(", ")})` : ""}${s.message ? `\n${s.message}` : ""}`;
  return toolResult(text, { ...s });
}

/**
 * The `show` tool's result: `loopsmith show`'s text (with the agent-mode transcript when
 * `transcript`), then the change: a repo-mode run's patch, or an inline run's files.
 * Structured: the result, the patch, and the transcript's steps.
 */
export function showResult(record: RunRecord, transcript = true): ToolResult {
  const r = record.result;
  const parts = [runText(record, { transcript, color: false }).trimEnd()];
  const patch = r?.repo?.patch;
  if (patch) parts.push("", "patch:", patch.trimEnd());
  else if (r?.files.length) for (const f of r.files) parts.push("", `--- ${f.path}`, f.content.trimEnd());
  return toolResult(parts.join("\n"), {
    taskId: record.taskId,
    goal: record.task.goal,
    result: r,
    ...(patch !== undefined ? { patch } : {}),
    transcript: transcriptSteps(record.events),
  });
}

/** The `history` tool's result: `loopsmith history`'s table; structured: the task records. */
export function historyResult(history: History): ToolResult {
  return toolResult(historyText(history).trimEnd(), { tasks: history.tasks });
}

/** One generation of an improvement run, as `improve_status` lists it (no patch, no cases). */
export interface GenerationSummary {
  generation: number;
  verdict: GenerationReport["decision"]["verdict"];
  reason: GenerationReport["decision"]["reason"];
  message: string;
  hypothesis?: string;
  taskId?: string;
  /** Cases the candidate fixed and broke, and the paired test's p-value. */
  fixed?: number;
  broken?: number;
  pValue?: number;
  costUsd: number;
}

/** The fields of an improvement run's checkpoint (`ImproveState`) that `improve_status` reads. */
const ImproveView = z.looseObject({
  status: z.enum(["running", "final"]),
  generation: z.number().int().min(1),
  summary: z
    .looseObject({
      status: z.string(),
      stopReason: z.string(),
      message: z.string(),
      accepted: z.array(z.number().int()),
    })
    .optional(),
});

/**
 * The `improve_status` tool's result: the run's state (running, at generation N; or how it
 * ended) when the architect holds it, then `loopsmith report`'s table of its generations.
 * @param state - the architect's `improve_status` state (null when it holds none)
 * @param reports - the generations' reports, from the architect or from the run's directory
 * @throws LoopsmithError `not_found` when there is neither a state nor a report
 */
export function improveStatusResult(runId: string, state: unknown, reports: GenerationReport[]): ToolResult {
  const parsed = state === null || state === undefined ? undefined : ImproveView.safeParse(state);
  if (parsed && !parsed.success)
    throw new LoopsmithError(
      "internal",
      `the architect's checkpoint of run ${runId} is not an improvement run's state`,
    );
  const s = parsed?.data;
  if (!s && reports.length === 0) throw new LoopsmithError("not_found", `no improvement run ${runId} is known`);
  const status = s ? (s.status === "final" ? (s.summary?.status ?? "final") : "running") : "finished";
  const head = s
    ? s.status === "running"
      ? `run ${runId}: running, generation ${s.generation}`
      : `run ${runId}: ${status} (${s.summary?.stopReason ?? "final"})${s.summary ? ` — ${s.summary.message}` : ""}`
    : `run ${runId}: ${reports.length} generation report(s) on disk`;
  const summary = s?.summary as Parameters<typeof reportTable>[1];
  const generations: GenerationSummary[] = reports.map((r) => ({
    generation: r.generation,
    verdict: r.decision.verdict,
    reason: r.decision.reason,
    message: r.decision.message,
    ...(r.hypothesis ? { hypothesis: r.hypothesis.title } : {}),
    ...(r.taskId ? { taskId: r.taskId } : {}),
    ...(r.statistic ? { fixed: r.statistic.fixed, broken: r.statistic.broken, pValue: r.statistic.pValue } : {}),
    costUsd: r.usage.costUsd,
  }));
  return toolResult([head, reportTable(reports, summary)].join("\n"), {
    runId,
    status,
    ...(s ? { generation: s.generation } : {}),
    ...(s?.summary ? { summary: s.summary } : {}),
    generations,
  });
}

/**
 * The message of a progress notification for one of the task's events: where the task is
 * (`iteration N · phase`) and what happened; undefined for events that say nothing new
 * (token usage, the result).
 */
export function progressMessage(e: TaskEvent): string | undefined {
  if (e.kind === "usage" || e.kind === "result") return undefined;
  const where = [e.iteration > 0 ? `iteration ${e.iteration}` : "start", e.phase].filter(Boolean).join(" · ");
  return `${where}: ${e.kind === "warning" ? "warning: " : ""}${e.message}`;
}
