/**
 * The client's side of repo mode, all done with `git` itself (simple-git, and `git archive`
 * for the snapshot's bytes): checking the repository before anything starts, the snapshot of
 * the base commit, and at the end the branch `loopsmith/<taskId>` with one commit — made
 * with plumbing (a temporary index, `commit-tree`, `update-ref`), so the user's branch,
 * index, work tree, stash and config are never touched. `--apply` then applies the change to
 * a work tree that was clean.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { promisify } from "node:util";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { MAX_SNAPSHOT_BYTES } from "@loopsmith/shared/bus";
import { type RepoChange } from "@loopsmith/shared/contracts";
import { git } from "@loopsmith/shared/git";

const execFileAsync = promisify(execFile);

/** A repository checked for a run. */
export interface CheckedRepo {
  /** The work tree's top-level directory. */
  root: string;
  /** The base commit, full id. */
  baseCommit: string;
  /** The directory's name, for reports. */
  name: string;
}

/** git with a vetted environment (shared/src/workspace/git.ts), re-exported for the repo-mode modules here. */
export { git };

/**
 * Checks `path` before anything starts.
 * @param opts.base - the ref to start from (`HEAD` by default)
 * @param opts.requireClean - `--apply`: the work tree must have no changes (untracked files included)
 * @throws LoopsmithError `repo_invalid` for a path that is not a git work tree, a bare
 *   repository, a repository without commits, an unknown base, or a dirty tree with `--apply`
 */
export async function checkRepo(
  path: string,
  opts: { base?: string; requireClean?: boolean } = {},
): Promise<CheckedRepo> {
  const dir = resolve(path);
  const g = git(dir);
  let inside: string;
  try {
    inside = await g.revparse(["--is-inside-work-tree"]);
  } catch (err) {
    const bare = await g.revparse(["--is-bare-repository"]).catch(() => "false");
    if (bare === "true")
      throw new LoopsmithError(
        "repo_invalid",
        `${dir} is a bare repository: repo mode needs a work tree (clone it first)`,
        { cause: err },
      );
    throw new LoopsmithError("repo_invalid", `${dir} is not a git repository (git: ${firstLine(err)})`, { cause: err });
  }
  if (inside !== "true")
    throw new LoopsmithError(
      "repo_invalid",
      `${dir} is not inside a git work tree (a bare repository or a .git directory)`,
    );
  const root = await g.revparse(["--show-toplevel"]);
  const base = opts.base ?? "HEAD";
  let baseCommit: string;
  try {
    baseCommit = await git(root).raw(["rev-parse", "--verify", "--quiet", "--end-of-options", `${base}^{commit}`]);
  } catch (err) {
    throw new LoopsmithError(
      "repo_invalid",
      base === "HEAD"
        ? `${root} has no commits yet: commit something to start from`
        : `unknown --base ${base}: not a commit in ${root}`,
      { cause: err },
    );
  }
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(baseCommit))
    throw new LoopsmithError("repo_invalid", `unknown --base ${base}: not a commit in ${root}`);
  if (opts.requireClean) {
    const status = await git(root).raw(["status", "--porcelain", "--untracked-files=normal"]);
    if (status.trim())
      throw new LoopsmithError(
        "repo_invalid",
        `--apply needs a clean work tree, and ${root} has changes:\n${status.split("\n").slice(0, 10).join("\n")}`,
      );
  }
  return { root, baseCommit, name: basename(root) };
}

function firstLine(err: unknown): string {
  return (
    String((err as Error)?.message ?? err)
      .split("\n")
      .find((l) => l.trim()) ?? ""
  );
}

/**
 * The snapshot of `commit`: `git archive --format=tar` (tracked files only, no `.git`,
 * nothing ignored; `export-ignore` attributes apply).
 * @throws LoopsmithError `repo_invalid` when git fails; `bad_request` over {@link MAX_SNAPSHOT_BYTES}
 */
export async function archiveCommit(root: string, commit: string): Promise<Buffer> {
  try {
    const { stdout } = await execFileAsync("git", ["-C", root, "archive", "--format=tar", commit], {
      encoding: "buffer",
      maxBuffer: MAX_SNAPSHOT_BYTES + 1,
    });
    return stdout;
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER")
      throw new LoopsmithError(
        "bad_request",
        `the tracked files of ${commit} are over ${MAX_SNAPSHOT_BYTES / 1048576} MiB`,
      );
    throw new LoopsmithError("repo_invalid", `git archive failed in ${root}: ${firstLine(err)}`, { cause: err });
  }
}

/** The branch a task's change is committed on. */
export function branchOf(taskId: string): string {
  return `loopsmith/${taskId}`;
}

/** The commit message: the model's summary, then why (the goal) and the task id. */
export function commitMessage(taskId: string, goal: string, change: RepoChange, passed: boolean): string {
  const subject = (change.summary.split("\n")[0] ?? "").trim().slice(0, 72) || `loopsmith: change for task ${taskId}`;
  const why = goal.trim().split("\n").slice(0, 20).join("\n");
  return `${subject}\n\nGoal:\n${why}\n\n${passed ? "The repository's tests pass with this change." : "The repository's tests did NOT all pass with this change."}\nloopsmith task: ${taskId}\n`;
}

/**
 * A commit of `patch` on `parent`, made without touching the user's HEAD, index, work tree,
 * stash or config: the patch is applied to a temporary index, written as a tree and
 * committed with `commit-tree`. No ref points at it yet.
 * @returns the new commit id
 * @throws LoopsmithError `repo_invalid` when the patch does not apply
 */
export async function commitPatch(root: string, parent: string, patch: string, message: string): Promise<string> {
  const tmp = await mkdtemp(join(tmpdir(), "loopsmith-commit-"));
  const index = join(tmp, "index");
  const file = join(tmp, "change.patch");
  // The user's identity (environment or git config) when there is one; else "loopsmith".
  const configured = async (key: string): Promise<string> =>
    (
      await git(root)
        .raw(["config", "--get", key])
        .catch(() => "")
    ).trim();
  const identity: Record<string, string> = {};
  const name = process.env.GIT_AUTHOR_NAME ?? (await configured("user.name"));
  const email = process.env.GIT_AUTHOR_EMAIL ?? (await configured("user.email"));
  if (!name) Object.assign(identity, { GIT_AUTHOR_NAME: "loopsmith", GIT_COMMITTER_NAME: "loopsmith" });
  if (!email)
    Object.assign(identity, { GIT_AUTHOR_EMAIL: "loopsmith@localhost", GIT_COMMITTER_EMAIL: "loopsmith@localhost" });
  const g = git(root, { GIT_INDEX_FILE: index, ...identity });
  try {
    await writeFile(file, patch, "utf8");
    await g.raw(["read-tree", parent]);
    if (patch.trim()) await g.raw(["apply", "--cached", "--whitespace=nowarn", file]);
    const tree = await g.raw(["write-tree"]);
    return await g.raw(["commit-tree", tree, "-p", parent, "-m", message]);
  } catch (err) {
    throw new LoopsmithError(
      "repo_invalid",
      `cannot commit the change on ${parent.slice(0, 12)} in ${root}: ${firstLine(err)}`,
      { cause: err },
    );
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * Points `refs/heads/<branch>` at `commit`, only if the branch is still at `expected`
 * (absent: only if it does not exist yet), with `update-ref`'s compare-and-swap. When the
 * branch is the one checked out in `root`, its index and work tree follow (a fast-forward
 * merge, which refuses rather than overwrite a local change), so the checkout does not show
 * the change reversed.
 * @throws LoopsmithError `repo_invalid` when the branch exists, or moved since `expected`, or
 *   (checked out) the work tree has changes the fast-forward would overwrite
 */
export async function setBranch(
  root: string,
  branch: string,
  commit: string,
  expected: string | undefined,
  reason: string,
): Promise<void> {
  const current = (
    await git(root)
      .raw(["symbolic-ref", "--quiet", "HEAD"])
      .catch(() => "")
  ).trim();
  if (expected && current === `refs/heads/${branch}`) {
    const at = (await git(root).raw(["rev-parse", "HEAD"])).trim();
    if (at !== expected)
      throw new LoopsmithError(
        "repo_invalid",
        `cannot move the branch ${branch} in ${root}: it moved since ${expected}`,
      );
    try {
      await git(root).raw(["merge", "--ff-only", "--quiet", commit]);
      return;
    } catch (err) {
      throw new LoopsmithError(
        "repo_invalid",
        `cannot move the checked-out branch ${branch} in ${root}: ${firstLine(err)} (commit or stash the local changes, then promote again)`,
        { cause: err },
      );
    }
  }
  try {
    await git(root).raw([
      "update-ref",
      "-m",
      reason,
      `refs/heads/${branch}`,
      commit,
      expected ?? "0".repeat(commit.length),
    ]);
  } catch (err) {
    throw new LoopsmithError(
      "repo_invalid",
      `cannot ${expected ? "move" : "create"} the branch ${branch} in ${root}: ${firstLine(err)}`,
      { cause: err },
    );
  }
}

/** The commit a branch points at, or undefined when there is no such branch. */
export async function branchCommit(root: string, branch: string): Promise<string | undefined> {
  const id = await git(root)
    .raw(["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`])
    .catch(() => "");
  return id.trim() || undefined;
}

/**
 * Commits `change` on a new branch `loopsmith/<taskId>` from its base commit (see
 * {@link commitPatch}; the branch is created with `update-ref`, which refuses an existing one).
 * @returns the branch name and the new commit id
 * @throws LoopsmithError `repo_invalid` when the patch does not apply or the branch exists
 */
export async function commitChange(
  root: string,
  taskId: string,
  message: string,
  change: RepoChange,
): Promise<{ branch: string; commit: string }> {
  const branch = branchOf(taskId);
  const commit = await commitPatch(root, change.baseCommit, change.patch, message);
  await setBranch(root, branch, commit, undefined, `loopsmith: task ${taskId}`);
  return { branch, commit };
}

/**
 * `--apply`: applies the change to the user's work tree (not the index), only when the tree
 * is still clean and still at the base commit.
 * @throws LoopsmithError `repo_invalid` when the tree changed since the start or the patch does not apply
 */
export async function applyToWorkTree(root: string, change: RepoChange): Promise<void> {
  const g = git(root);
  const head = await g.raw(["rev-parse", "HEAD"]);
  const status = await g.raw(["status", "--porcelain", "--untracked-files=normal"]);
  if (status.trim() || head !== change.baseCommit) {
    throw new LoopsmithError(
      "repo_invalid",
      `not applied: ${root} ${status.trim() ? "has changes now" : `is at ${head.slice(0, 12)}, not at the base ${change.baseCommit.slice(0, 12)}`}; the change stays on its branch`,
    );
  }
  const tmp = await mkdtemp(join(tmpdir(), "loopsmith-apply-"));
  try {
    await writeFile(join(tmp, "change.patch"), change.patch, "utf8");
    await g.raw(["apply", "--whitespace=nowarn", join(tmp, "change.patch")]);
  } catch (err) {
    throw new LoopsmithError("repo_invalid", `the change does not apply to ${root}: ${firstLine(err)}`, { cause: err });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}
