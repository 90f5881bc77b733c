/**
 * The task `loopsmith solve` submits, built from its flags: a goal string, a task file or a
 * HumanEval record, with the limits, review, memory and DAG flags, validated against the
 * `Task` contract.
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { Task, type Language, type TaskInput, type TaskLimits } from "@loopsmith/shared/contracts";
import { findHumanEval, humanevalTask, loadHumanEval } from "@loopsmith/evals";
import type { RepoOptions } from "./solve-repo.js";
import type { IssueOptions } from "./solve-issue.js";
import type { ModelOptions } from "./steering.js";

/** Options of `solve`, as commander gives them. */
export interface SolveOptions extends ModelOptions, RepoOptions, IssueOptions {
  /** Check the task and print the models, limits and build prompt budget; start and call nothing. */
  dryRun?: boolean;
  /** Write result.json, report.md (and change.patch in repo mode) here at the end. */
  out?: string;
  /** A task file in repo mode (a replay): snapshot its base commit from this checkout first. */
  snapshotFrom?: string;
  file?: string;
  humaneval?: string;
  dataset?: string;
  language?: Language;
  maxIterations?: number;
  budgetUsd?: number;
  budgetTokens?: number;
  /** `--timeout`: the task's wall-clock limit, in ms (`limits.timeLimitMs`). */
  timeout?: number;
  review?: boolean;
  /** `--audit`: the security audit before each run (else the configuration's `review.audit`). */
  audit?: boolean;
  /** `off`: the task recalls nothing (no memory hints in its prompts). */
  memory?: "on" | "off";
  taskId?: string;
  json?: boolean;
}

/** The task fields set by flags that every kind of task takes (`--review`, `--memory`). */
function taskFlags(o: SolveOptions): Pick<TaskInput, "review" | "memory"> {
  return {
    ...(o.review !== undefined ? { review: o.review } : {}),
    ...(o.memory !== undefined ? { memory: o.memory } : {}),
  };
}

/**
 * The task limits the flags set (`--max-iterations`, `--budget-usd`, `--budget-tokens`,
 * `--subtask-attempts`, `--timeout` and `--subtask-timeout`, both already in ms).
 */
export function limitsOf(o: SolveOptions): Partial<TaskLimits> {
  const l: Partial<TaskLimits> = {};
  if (o.maxIterations !== undefined) l.maxIterations = o.maxIterations;
  if (o.budgetUsd !== undefined) l.maxCostUsd = o.budgetUsd;
  if (o.budgetTokens !== undefined) l.maxTokens = o.budgetTokens;
  if (o.subtaskAttempts !== undefined) l.subtaskAttempts = o.subtaskAttempts;
  if (o.timeout !== undefined) l.timeLimitMs = o.timeout;
  if (o.subtaskTimeout !== undefined) l.subtaskTimeLimitMs = o.subtaskTimeout;
  return l;
}

/** The DAG task flags given (`--decompose`, `--parallel`, `--subtask-attempts`, `--subtask-timeout`), as named on the command line. */
function dagFlagsGiven(o: SolveOptions): string[] {
  return [
    o.decompose ? "--decompose" : "",
    o.parallel !== undefined ? "--parallel" : "",
    o.subtaskAttempts !== undefined ? "--subtask-attempts" : "",
    o.subtaskTimeout !== undefined ? "--subtask-timeout" : "",
  ].filter(Boolean);
}

/** Flags whose values end up in these task fields, to name them in errors. */
const FIELD_FLAGS: Record<string, string> = {
  taskId: "--task-id",
  language: "--language",
  review: "--review",
  audit: "--audit",
  memory: "--memory",
  "limits.maxIterations": "--max-iterations",
  "limits.maxCostUsd": "--budget-usd",
  "limits.maxTokens": "--budget-tokens",
  "limits.subtaskAttempts": "--subtask-attempts",
  "limits.timeLimitMs": "--timeout",
  "limits.subtaskTimeLimitMs": "--subtask-timeout",
  decompose: "--decompose",
  parallel: "--parallel",
};

/** `input` when it is a valid task; else a `bad_request` naming the fields (and their flags). */
function validated(input: TaskInput, what: string): TaskInput {
  const parsed = Task.safeParse(input);
  if (parsed.success) return input;
  const issues = parsed.error.issues.map((i) => {
    const path = i.path.join(".");
    const flag = FIELD_FLAGS[path];
    return `${flag ? `${flag} (${path})` : path || "task"}: ${i.message}`;
  });
  throw new LoopsmithError("bad_request", `${what} is invalid: ${issues.join("; ")}`);
}

/**
 * The task to submit, validated against the `Task` contract.
 * @throws LoopsmithError `bad_request` for a missing goal, an unreadable or invalid task file,
 *   a missing dataset or an invalid value (naming the flag); `not_found` for an unknown
 *   HumanEval id.
 */
export function buildTask(goal: string | undefined, o: SolveOptions): TaskInput {
  const dagFlags = dagFlagsGiven(o);
  if (dagFlags.length)
    throw new LoopsmithError(
      "bad_request",
      `${dagFlags.join(", ")} appl${dagFlags.length === 1 ? "ies" : "y"} to --repo only (a DAG task changes a repository)`,
    );
  const limits = limitsOf(o);
  if (o.humaneval) {
    if (!o.dataset) throw new LoopsmithError("bad_request", "--humaneval needs --dataset <path to humaneval.jsonl>");
    const rec = findHumanEval(loadHumanEval(o.dataset), o.humaneval);
    const task = humanevalTask(rec, { ...(o.taskId ? { taskId: o.taskId } : {}), limits });
    return validated({ ...task, ...taskFlags(o) }, `the task for ${rec.task_id}`);
  }
  if (o.file) {
    let raw: Record<string, unknown>;
    try {
      raw = JSON.parse(readFileSync(o.file, "utf8")) as Record<string, unknown>;
    } catch (err) {
      throw new LoopsmithError("bad_request", `cannot read the task file ${o.file}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (typeof raw !== "object" || raw === null || Array.isArray(raw))
      throw new LoopsmithError("bad_request", `the task file ${o.file} is not a JSON object`);
    return validated(
      {
        v: 1,
        taskId: o.taskId ?? `task-${randomBytes(5).toString("hex")}`,
        submittedAt: new Date().toISOString(),
        ...(raw as Partial<TaskInput>),
        limits: { ...((raw.limits as object | undefined) ?? {}), ...limits },
        ...taskFlags(o),
      } as TaskInput,
      `the task file ${o.file}`,
    );
  }
  if (!goal?.trim())
    throw new LoopsmithError("bad_request", "give a goal, --file <task.json> or --humaneval <id> --dataset <path>");
  return validated(
    {
      v: 1,
      taskId: o.taskId ?? `task-${randomBytes(5).toString("hex")}`,
      goal,
      language: o.language ?? "python",
      limits,
      ...taskFlags(o),
      submittedAt: new Date().toISOString(),
    },
    "the task",
  );
}
