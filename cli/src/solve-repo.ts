/**
 * `solve --repo`: the task for a repository (checked, its base commit's snapshot made) and,
 * when the task ends, the branch with its commit and, with `--apply`, the change in the work
 * tree. The user's repository is only read until the end; then one new branch is written.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import type { NatsConnection } from "@nats-io/transport-node";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  Task,
  snapshotName,
  type RepoMode,
  type DependencyPolicy,
  type Language,
  type TaskInput,
  type TaskLimits,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { putSnapshot } from "@loopsmith/shared/bus";
import { applyToWorkTree, archiveCommit, checkRepo, commitChange, commitMessage, type CheckedRepo } from "./repo.js";
import { simpleGit } from "simple-git";

/** The repo-mode options of `solve`. */
export interface RepoOptions {
  repo?: string;
  base?: string;
  testCmd?: string;
  setupCmd?: string;
  dependencies?: DependencyPolicy;
  mapTokens?: number;
  /** Limit of one run of the repository's tests, in seconds (`RepoSpec.testTimeoutMs`); absent: derived from the baseline run. */
  testTimeout?: number;
  /** How the model works on the repository (`RepoSpec.mode`); absent: `repoModeOf` decides. */
  mode?: RepoMode;
  apply?: boolean;
  /** Plan the goal as a DAG of subtasks, each a child task (`task.decompose`). */
  decompose?: boolean;
  /** With `decompose`: subtasks running at once (`task.parallel`, 1 to 16). */
  parallel?: number;
  /** With `decompose`: attempts per subtask (`task.limits.subtaskAttempts`, 1 to 10; set through the limits). */
  subtaskAttempts?: number;
  /** With `decompose`: each subtask attempt's wall-clock limit, in ms (`task.limits.subtaskTimeLimitMs`; set through the limits). */
  subtaskTimeout?: number;
}

/** A repo-mode task ready to submit, and what the end of the run needs. */
export interface PreparedRepoTask {
  task: TaskInput;
  repo: CheckedRepo;
  /** The snapshot's tar bytes, to put in the object store once connected. */
  snapshot: Buffer;
  /** The goal as the commit message quotes it, when not the task's own (an issue's title, not its fenced text). */
  commitGoal?: string;
}

/**
 * The repository `solve` works on: `--repo` when given; else, for a goal given as words (no
 * `--file`, no `--humaneval`), the git work tree that holds `cwd` (its top-level folder, as
 * `git rev-parse --show-toplevel` prints it), so `cd myrepo && loopsmith solve "<goal>"` works
 * on `myrepo`; else `undefined`: an inline task (a goal outside any repository, a task file, a
 * HumanEval record, or a goal with `--language`, which only an inline task takes: a repository's
 * language is detected from its tree).
 * @param cwd the folder to look from (default: the process's working directory)
 * @returns an absolute path or `--repo` as given, or `undefined`
 */
export async function repoToSolve(
  goal: string | undefined,
  o: { repo?: string; file?: string; humaneval?: string; language?: string },
  cwd: string = process.cwd(),
): Promise<string | undefined> {
  if (o.repo) return o.repo;
  if (o.file || o.humaneval || o.language || !goal?.trim()) return undefined;
  try {
    const { stdout } = await promisify(execFile)("git", ["rev-parse", "--show-toplevel"], {
      cwd,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/" },
    });
    return stdout.trim() || undefined;
  } catch {
    // Not inside a work tree (or inside .git, or no git): an inline task.
    return undefined;
  }
}

/** The language a repository is mostly written in, from its tracked files at `commit`. */
export async function detectLanguage(root: string, commit: string): Promise<Language> {
  const files = (
    await simpleGit({ baseDir: root, trimmed: true })
      .env({ PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/" })
      .raw(["ls-tree", "-r", "--name-only", commit])
  ).split("\n");
  const count = (re: RegExp): number => files.filter((f) => re.test(f)).length;
  if (files.includes("tsconfig.json") || count(/\.(c|m)?tsx?$/) > count(/\.py$/))
    return count(/\.(c|m)?tsx?$/) ? "typescript" : "javascript";
  if (files.includes("package.json") && count(/\.(c|m)?jsx?$/) > count(/\.py$/)) return "javascript";
  return "python";
}

/**
 * Checks the repository and builds the task (nothing is written anywhere).
 * @throws LoopsmithError `repo_invalid` (see `checkRepo`), `bad_request` without a goal or
 *   for an invalid value
 */
export async function prepareRepoTask(
  goal: string | undefined,
  o: RepoOptions & { language?: Language; taskId?: string; review?: boolean; memory?: "on" | "off" },
  limits: Partial<TaskLimits>,
): Promise<PreparedRepoTask> {
  if (!o.repo) throw new LoopsmithError("internal", "prepareRepoTask without a repository");
  if (!goal?.trim())
    throw new LoopsmithError("bad_request", '--repo needs a goal: loopsmith solve --repo <path> "<what to change>"');
  if (!o.decompose && (o.parallel !== undefined || o.subtaskAttempts !== undefined || o.subtaskTimeout !== undefined))
    throw new LoopsmithError(
      "bad_request",
      "--parallel, --subtask-attempts and --subtask-timeout apply to --decompose only",
    );
  const repo = await checkRepo(o.repo, { ...(o.base ? { base: o.base } : {}), requireClean: !!o.apply });
  const snapshot = await archiveCommit(repo.root, repo.baseCommit);
  const input: TaskInput = {
    v: 1,
    taskId: o.taskId ?? `task-${randomBytes(5).toString("hex")}`,
    goal,
    language: o.language ?? (await detectLanguage(repo.root, repo.baseCommit)),
    limits,
    ...(o.review !== undefined ? { review: o.review } : {}),
    ...(o.memory !== undefined ? { memory: o.memory } : {}),
    ...(o.decompose ? { decompose: true } : {}),
    ...(o.parallel !== undefined ? { parallel: o.parallel } : {}),
    repo: {
      baseCommit: repo.baseCommit,
      snapshot: snapshotName(repo.baseCommit),
      name: repo.name,
      ...(o.testCmd ? { testCommand: o.testCmd } : {}),
      ...(o.setupCmd !== undefined ? { setupCommand: o.setupCmd } : {}),
      ...(o.dependencies ? { dependencies: o.dependencies } : {}),
      ...(o.mapTokens ? { mapTokens: o.mapTokens } : {}),
      ...(o.testTimeout !== undefined ? { testTimeoutMs: Math.round(o.testTimeout * 1000) } : {}),
      ...(o.mode ? { mode: o.mode } : {}),
    },
    submittedAt: new Date().toISOString(),
  };
  const parsed = Task.safeParse(input);
  if (!parsed.success)
    throw new LoopsmithError(
      "bad_request",
      `the task is invalid: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  return { task: input, repo, snapshot };
}

/** Puts the snapshot in `owner`'s object store (skipped when the commit's is already there). */
export async function uploadSnapshot(nc: NatsConnection, prepared: PreparedRepoTask, owner: string): Promise<boolean> {
  return putSnapshot(nc, snapshotName(prepared.repo.baseCommit), prepared.snapshot, owner);
}

/**
 * A recorded repo-mode task (a replay): puts the snapshot of its base commit, made from the
 * checkout at `path`, in `owner`'s store unless it still has it.
 * @throws LoopsmithError `repo_invalid` when `path` is not a checkout holding that commit
 */
export async function uploadRecordedSnapshot(
  nc: NatsConnection,
  path: string,
  repo: { baseCommit: string; snapshot: string },
  owner: string,
): Promise<boolean> {
  const checked = await checkRepo(path, { base: repo.baseCommit });
  return putSnapshot(nc, repo.snapshot, await archiveCommit(checked.root, repo.baseCommit), owner);
}

/** What the end of a repo-mode run did, for the terminal. */
export interface RepoOutcome {
  branch?: string;
  commit?: string;
  applied: boolean;
  /** Sentences for the user (what was written, what was not and why). */
  lines: string[];
}

/**
 * After the result: a passed task's change is committed on `loopsmith/<taskId>`; with
 * `apply`, also applied to the (still clean) work tree. A task that did not pass writes
 * nothing to the repository (its patch is in `show`/`export`), unless `commitFailed` (`solve
 * --issue --pr-always`): then its change is committed on the branch too, the commit message
 * saying the tests did not pass, and never applied.
 * @throws LoopsmithError `repo_invalid` when the branch cannot be made or the change not applied
 */
export async function finishRepo(
  prepared: PreparedRepoTask,
  result: TaskResult,
  apply: boolean,
  opts: { commitFailed?: boolean } = {},
): Promise<RepoOutcome> {
  const change = result.repo;
  if (!change) return { applied: false, lines: ["no change was produced; the repository is unchanged"] };
  const passed = result.status === "passed";
  if (!passed && !opts.commitFailed)
    return {
      applied: false,
      lines: [
        `the tests did not pass; the repository is unchanged (see the patch: loopsmith export ${result.taskId} --out <dir>)`,
      ],
    };
  const message = commitMessage(result.taskId, prepared.commitGoal ?? String(prepared.task.goal), change, passed);
  const { branch, commit } = await commitChange(prepared.repo.root, result.taskId, message, change);
  const lines = [
    `branch ${branch} (commit ${commit.slice(0, 12)}): ${change.changed.length} changed, ${change.deleted.length} deleted${passed ? "" : " (the tests did not pass)"}`,
  ];
  if (!apply || !passed) return { branch, commit, applied: false, lines };
  await applyToWorkTree(prepared.repo.root, change);
  lines.push(`applied to the work tree of ${prepared.repo.root} (not staged; see git diff)`);
  return { branch, commit, applied: true, lines };
}
