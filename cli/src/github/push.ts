/** The git side of a pull request: the remote's URL, and pushing a branch to it. */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { git } from "../repo.js";

/**
 * The (fetch) URL of `remote` in the repository at `root`; a push goes to its `pushurl` when
 * one is set (`git remote set-url --push`).
 * @param hint - what to give instead, for the error (default: improve's `--remote`/`--github-repo`)
 * @throws LoopsmithError `repo_invalid` when there is no such remote
 */
export async function remoteUrl(
  root: string,
  remote: string,
  hint = "--pr github: give --remote, or --github-repo owner/name",
): Promise<string> {
  const url = (
    await git(root)
      .raw(["remote", "get-url", "--", remote])
      .catch(() => "")
  ).trim();
  if (!url) throw new LoopsmithError("repo_invalid", `${root} has no remote "${remote}" (${hint})`);
  return url;
}

/**
 * Pushes local `branch` to `remote`'s branch `to` (default the same name), with the user's own
 * git credentials; never forced, so `to` moves only forward.
 * @throws LoopsmithError `repo_invalid` when git refuses (no access, a diverged branch)
 */
export async function pushBranch(root: string, remote: string, branch: string, to: string = branch): Promise<void> {
  try {
    await git(root).raw(["push", "--", remote, `refs/heads/${branch}:refs/heads/${to}`]);
  } catch (err) {
    throw new LoopsmithError(
      "repo_invalid",
      `cannot push ${branch}${to === branch ? "" : ` as ${to}`} to ${remote}: ${String((err as Error).message).split("\n")[0]}`,
      { cause: err },
    );
  }
}
