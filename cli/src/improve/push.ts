/** `--pr github`'s git side: the remote's URL, and pushing a generation's branch to it. */
import { LoopsmithError } from "@loopsmith/shared";
import { git } from "../repo.js";

/**
 * The URL of `remote` in the repository at `root`.
 * @throws LoopsmithError `repo_invalid` when there is no such remote
 */
export async function remoteUrl(root: string, remote: string): Promise<string> {
  const url = (
    await git(root)
      .raw(["remote", "get-url", "--", remote])
      .catch(() => "")
  ).trim();
  if (!url)
    throw new LoopsmithError(
      "repo_invalid",
      `--pr github: ${root} has no remote "${remote}" (give --remote, or --github-repo owner/name)`,
    );
  return url;
}

/**
 * Pushes `branch` to `remote` (the same name there), with the user's own git credentials.
 * @throws LoopsmithError `repo_invalid` when git refuses (no access, a diverged branch)
 */
export async function pushBranch(root: string, remote: string, branch: string): Promise<void> {
  try {
    await git(root).raw(["push", "--", remote, `refs/heads/${branch}:refs/heads/${branch}`]);
  } catch (err) {
    throw new LoopsmithError(
      "repo_invalid",
      `cannot push ${branch} to ${remote}: ${String((err as Error).message).split("\n")[0]}`,
      { cause: err },
    );
  }
}
