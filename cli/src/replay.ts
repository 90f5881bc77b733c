/**
 * `loopsmith replay <taskId>`: runs a recorded task again with the model replies it recorded
 * (each LLM step event carries its validated reply in `data.llm`; an agent-mode run's model
 * turns are its recorded assistant messages, see `transcriptScriptTurns`), served by the scripted
 * provider from a script built here and labelled as a replay, against the same workspace or
 * base commit, and says whether it ended the same way (status, stop reason, iterations,
 * final files or patch).
 *
 * The pure parts ({@link replayScript}, {@link replayTask}, {@link compareRuns}) are
 * exported for tests; {@link replayCommand} fetches the run, writes the task and the script
 * to a temporary folder and runs them through the injected {@link RunTask} (the path `solve`
 * uses). Exit codes: 0 the replay ended the same way; 1 it did not; 2 no run of that task
 * (`not_found`), or a run that cannot be replayed; 3 infrastructure; 130 interrupted.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import type { FileChange, RunRecord, ScriptFile, TaskInput, TaskResult } from "@loopsmith/shared/contracts";
import type { Role } from "@loopsmith/shared/llm";
import { CliError } from "./errors.js";
import { ExitCode } from "./exit-codes.js";
import { fetchRun, withMemory } from "./runs.js";
import type { SolveOptions } from "./solve.js";
import { jsonLine, printable } from "./terminal.js";
import { transcriptScriptTurns } from "./transcript-record.js";

/** The LLM roles, in the order a script file lists them. */
const ROLE_NAMES = ["spec", "plan", "build", "review", "reflect"] as const satisfies readonly Role[];

/**
 * The script entry for a call whose reply was not readable: text with no JSON in it, so the
 * replay reads it as the original call was read (a bad reply), and re-asks or fails the step
 * the same way.
 */
export const UNREADABLE_REPLY =
  "(replay: the recorded reply to this call could not be read, so the model was asked again)";

/** `data.llm` of an LLM step event. */
const LlmNote = z.object({
  role: z.enum(ROLE_NAMES),
  callsBefore: z.number().int().nonnegative(),
  calls: z.number().int().min(1).max(1_000),
  value: z.unknown().refine((v) => v !== undefined, "a reply value"),
});

/**
 * The scripted provider's replies file that serves a run's recorded replies: for each LLM
 * step event, the call `callsBefore + calls - 1` of its role gets the recorded `value`; the
 * calls before it in the same step (`calls` 2: the first reply was unreadable and the model
 * was asked again) and calls that produced no reply at all (a step whose re-ask failed too,
 * counted only in the result's usage) get {@link UNREADABLE_REPLY}, so the replay makes the
 * same calls in the same order. An agent-mode run's `agent` replies are its model turns
 * (`transcriptScriptTurns`: the recorded assistant messages). Roles with no call are left out. Pure.
 */
export function replayScript(record: RunRecord): ScriptFile {
  const lists = new Map<Role, unknown[]>();
  for (const e of record.events) {
    const note = LlmNote.safeParse((e.data as { llm?: unknown } | undefined)?.llm);
    if (!note.success) continue;
    const { role, callsBefore, calls, value } = note.data;
    const list = lists.get(role) ?? [];
    list[callsBefore + calls - 1] = value;
    lists.set(role, list);
  }
  const replies: ScriptFile["replies"] = {};
  for (const role of ROLE_NAMES) {
    const list = lists.get(role) ?? [];
    const length = Math.max(list.length, record.result?.usage.byRole[role]?.calls ?? 0);
    if (length === 0) continue;
    replies[role] = Array.from({ length }, (_, i) => (list[i] === undefined ? UNREADABLE_REPLY : list[i]));
  }
  const agent = transcriptScriptTurns(record.events);
  if (agent.length) replies.agent = agent;
  return {
    v: 1,
    kind: "loopsmith-script",
    description: `replay of ${record.taskId} (recorded replies; no model is called)`,
    replies,
  };
}

/**
 * A warning when the agent turns rebuilt from the transcript are not as many as the agent
 * calls the run made (a model call that failed before any step, or events lost from a
 * truncated record): the replay may then take different steps.
 * Undefined when they match, or when the result counts no `agent` call.
 */
export function agentCallsNote(record: RunRecord, script: ScriptFile): string | undefined {
  const calls = record.result?.usage.byRole.agent?.calls ?? 0;
  const turns = script.replies.agent?.length ?? 0;
  if (calls === 0 || calls === turns) return undefined;
  return `the run of ${record.taskId} made ${calls} agent call${calls === 1 ? "" : "s"} but its transcript gives ${turns} turn${turns === 1 ? "" : "s"}; the replay serves them in order, and may take its steps differently`;
}

/** A task id for the replay of `taskId`: `<taskId (first 48 characters)>-replay-<6 hex>`. */
export function replayTaskId(taskId: string): string {
  return `${taskId.slice(0, 48)}-replay-${randomBytes(3).toString("hex")}`;
}

/**
 * The task to run for a replay: the recorded task's goal, language, files, acceptance and
 * hidden tests, review flag, limits, source and repository (the same base commit and
 * snapshot), under `newTaskId`, submitted now. Pure but for the clock.
 */
export function replayTask(record: RunRecord, newTaskId: string): TaskInput {
  const t = record.task;
  return {
    v: 1,
    taskId: newTaskId,
    goal: t.goal,
    language: t.language,
    files: t.files,
    acceptanceTests: t.acceptanceTests,
    hiddenTests: t.hiddenTests,
    ...(t.repo ? { repo: t.repo } : {}),
    review: t.review,
    limits: t.limits,
    source: t.source,
    submittedAt: new Date().toISOString(),
  };
}

/** How two results compare. */
export interface RunComparison {
  /** True when status, stop reason, iterations and the final files (or patch) are the same. */
  same: boolean;
  /** One sentence per difference, recorded value first. */
  differences: string[];
}

function compareFiles(kind: string, recorded: FileChange[], replayed: FileChange[]): string[] {
  const a = new Map(recorded.map((f) => [f.path, f.content]));
  const b = new Map(replayed.map((f) => [f.path, f.content]));
  const out: string[] = [];
  for (const [path, content] of a) {
    if (!b.has(path)) out.push(`${kind} ${path} is only in the recorded run`);
    else if (b.get(path) !== content) out.push(`${kind} ${path} differs`);
  }
  for (const path of b.keys()) if (!a.has(path)) out.push(`${kind} ${path} is only in the replay`);
  return out;
}

/**
 * Whether a replay ended the way the recorded run did: the same status, stop reason and
 * iterations, and the same final files and generated tests (by path and content) or, in
 * repo mode, the same patch and changed and deleted paths. Usage, time and providers are not
 * compared (a replay costs nothing). Pure.
 */
export function compareRuns(recorded: TaskResult, replayed: TaskResult): RunComparison {
  const d: string[] = [];
  if (recorded.status !== replayed.status)
    d.push(`status: ${recorded.status} in the recorded run, ${replayed.status} in the replay`);
  if (recorded.stopReason !== replayed.stopReason)
    d.push(`stop reason: ${recorded.stopReason} in the recorded run, ${replayed.stopReason} in the replay`);
  if (recorded.iterations !== replayed.iterations)
    d.push(`iterations: ${recorded.iterations} in the recorded run, ${replayed.iterations} in the replay`);
  if (recorded.repo || replayed.repo) {
    const a = recorded.repo;
    const b = replayed.repo;
    if (!a || !b) d.push(`only the ${a ? "recorded run" : "replay"} has a change against a base commit`);
    else {
      if (a.baseCommit !== b.baseCommit)
        d.push(`base commit: ${a.baseCommit} in the recorded run, ${b.baseCommit} in the replay`);
      if (a.patch !== b.patch)
        d.push(
          `the patch differs (${a.patch.split("\n").length} lines in the recorded run, ${b.patch.split("\n").length} in the replay)`,
        );
      const paths = (x: string[]): string => [...x].sort().join(", ") || "none";
      if (paths(a.changed) !== paths(b.changed))
        d.push(`changed files: ${paths(a.changed)} in the recorded run, ${paths(b.changed)} in the replay`);
      if (paths(a.deleted) !== paths(b.deleted))
        d.push(`deleted files: ${paths(a.deleted)} in the recorded run, ${paths(b.deleted)} in the replay`);
    }
  } else {
    d.push(
      ...compareFiles("file", recorded.files, replayed.files),
      ...compareFiles("generated test", recorded.tests, replayed.tests),
    );
  }
  return { same: d.length === 0, differences: d };
}

/**
 * Runs a task file through the path `solve` uses, with every LLM role served by the
 * scripted provider from `scriptFile` (see {@link replaySolveOptions}), printing its progress
 * and result as `solve` does.
 * @returns the task's result, or undefined when none came (interrupted)
 * @throws what `solve` throws before a result (configuration, infrastructure)
 */
export type RunTask = (taskFile: string, scriptFile: string) => Promise<TaskResult | undefined>;

/** Options of `replay`. */
export interface ReplayOptions {
  json?: boolean;
  config?: string;
  /**
   * Repo mode: a checkout of the recorded repository, to snapshot the recorded base commit
   * from when its snapshot is no longer in the object store (the runner's concern; the task
   * file keeps the recorded `repo` spec and base commit).
   */
  repo?: string;
}

/**
 * The `solve` options that run `taskFile` with every role (and the default) on the scripted
 * provider over `scriptFile`, so no configured model answers a replay. `opts.repo` is not
 * passed on: `solve --repo` builds a new task at HEAD, and a replay keeps the recorded one.
 */
export function replaySolveOptions(taskFile: string, scriptFile: string, opts: ReplayOptions = {}): SolveOptions {
  return {
    file: taskFile,
    script: scriptFile,
    provider: "scripted",
    providerSpec: "scripted",
    providerPlan: "scripted",
    providerBuild: "scripted",
    providerReview: "scripted",
    providerReflect: "scripted",
    ...(opts.json ? { json: true } : {}),
    ...(opts.config ? { config: opts.config } : {}),
  };
}

/**
 * `loopsmith replay <taskId>`: fetches the recorded run, writes its task (new id) and its
 * replies script to a temporary folder, runs them with `runTask`, and prints whether the
 * replay ended the same way (`--json`: `{"kind":"replay",…}` as the last line). A replay
 * answered by anything but its script (services already running with their own
 * configuration) does not count as the same.
 * @returns {@link ExitCode.ok} when it ended the same way, {@link ExitCode.failed} otherwise
 * @throws LoopsmithError `not_found` (no run of that task), `unavailable`/`timeout`; CliError
 *   `bad_request` for a run without a result or without recorded replies, `cancelled` when
 *   the replay was interrupted before its result
 */
export async function replayCommand(
  taskId: string,
  opts: ReplayOptions,
  log: Logger,
  runTask: RunTask,
): Promise<number> {
  const record = await withMemory(log, opts.config, (nc, owner) => fetchRun(nc, taskId, { owner }));
  const recorded = record.result;
  if (!recorded)
    throw new CliError(
      "bad_request",
      `the run of ${taskId} has no recorded result, so a replay would have nothing to compare with`,
    );
  const script = replayScript(record);
  const replies = Object.values(script.replies).flatMap((list) => list.filter((x) => x !== UNREADABLE_REPLY));
  if (replies.length === 0) {
    throw new CliError(
      "bad_request",
      `the run of ${taskId} recorded no model replies (it was recorded before replays were possible, or its events were lost), so it cannot be replayed`,
    );
  }
  const newId = replayTaskId(taskId);
  const dir = await mkdtemp(join(tmpdir(), "loopsmith-replay-"));
  try {
    const taskFile = join(dir, "task.json");
    const scriptFile = join(dir, `replay-${taskId}.json`);
    await writeFile(taskFile, `${JSON.stringify(replayTask(record, newId), null, 2)}\n`);
    await writeFile(scriptFile, `${JSON.stringify(script, null, 2)}\n`);
    const banner = `REPLAY of task ${taskId} as task ${newId}: the recorded model replies are served from ${scriptFile}; no model is called.`;
    process.stdout.write(
      opts.json
        ? `${jsonLine({ kind: "notice", replay: true, taskId, replayTaskId: newId, script: scriptFile, message: banner })}\n`
        : `${printable(banner)}\n`,
    );
    const agentNote = agentCallsNote(record, script);
    if (agentNote) process.stderr.write(`loopsmith: ${agentNote}\n`);
    if (record.eventsTruncated)
      process.stderr.write(
        `loopsmith: the run of ${taskId} keeps ${record.events.length} of its ${record.eventsTotal ?? "more"} events; replies left out are replayed as unreadable\n`,
      );
    const replayed = await runTask(taskFile, scriptFile);
    if (!replayed)
      throw new CliError("cancelled", `the replay of ${taskId} (task ${newId}) ended without a result`, {
        taskId: newId,
      });
    const comparison = compareRuns(recorded, replayed);
    const label = `scripted:script:${basename(scriptFile)}`;
    const others = replayed.providers.filter((p) => p !== label);
    if (others.length)
      comparison.differences.push(
        `the replay was answered by ${others.join(", ")}, not only by its script (services already running keep their own configuration)`,
      );
    if (recorded.stopReason === "budget" && replayed.stopReason !== "budget")
      comparison.differences.push(
        "the recorded run stopped on its budget; replayed replies cost nothing, so a replay cannot stop there",
      );
    const same = comparison.differences.length === 0;
    if (opts.json) {
      process.stdout.write(
        `${jsonLine({ kind: "replay", taskId, replayTaskId: newId, same, differences: comparison.differences })}\n`,
      );
    } else if (same) {
      process.stdout.write(
        `\nSAME: the replay ${newId} ended the way ${taskId} did (${recorded.status}, stop reason ${recorded.stopReason}, ${recorded.iterations} iterations, the same ${recorded.repo ? "patch" : "final files"})\n`,
      );
    } else {
      process.stdout.write(
        `\nDIFFERENT: the replay ${newId} did not end the way ${taskId} did:\n${comparison.differences.map((x) => `  - ${printable(x)}`).join("\n")}\n`,
      );
    }
    return same ? ExitCode.ok : ExitCode.failed;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
