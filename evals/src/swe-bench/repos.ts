/**
 * The repositories of SWE-bench instances, offline: `--repos <dir>` holds, per repository
 * `owner/name`, a git bundle `owner__name.bundle`, or a bare clone `owner__name.git` or
 * `owner__name` (a clone with a work tree works too). An instance is checked out at its
 * `base_commit` into a fresh repository of its own: when the source has a ref
 * `refs/tags/<instance_id>` (as the shipped bundle has) only that ref is fetched, so no later
 * commit is in reach; else the commit itself, else every ref (and the commit must be among
 * their history). Nothing goes over the network.
 */
import { existsSync, statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { git } from "@loopsmith/shared/git";
import type { SweInstance } from "./instances.js";

/** The source of `repo` (`owner/name`) in `reposDir`. */
export function repoSource(reposDir: string, repo: string): string {
  const base = join(resolve(reposDir), repo.replace("/", "__"));
  for (const candidate of [`${base}.bundle`, `${base}.git`, base]) if (existsSync(candidate)) return candidate;
  throw new LoopsmithError(
    "not_found",
    `no repository for ${repo} in ${reposDir}: expected ${base}.bundle (git bundle), ${base}.git or ${base} (a clone)`,
  );
}

/** The first line of an error's message. */
function firstLine(err: unknown): string {
  return ((err as Error).message ?? String(err)).trim().split("\n")[0] ?? "";
}

/**
 * Checks `inst` out at its `base_commit` in `dir` (created; must not hold a repository).
 * @returns `dir`
 * @throws LoopsmithError `not_found` when `--repos` has no source for the repository,
 *   `repo_invalid` when the source does not hold `base_commit` or git fails
 */
export async function checkoutInstance(reposDir: string, inst: SweInstance, dir: string): Promise<string> {
  const source = repoSource(reposDir, inst.repo);
  await mkdir(dir, { recursive: true });
  const g = git(dir);
  await g.raw(["init", "-q"]);
  const bundle = statSync(source).isFile();
  const heads = await g.raw(bundle ? ["bundle", "list-heads", source] : ["ls-remote", source]).catch((err: unknown) => {
    throw new LoopsmithError(
      "repo_invalid",
      `${source} is not a readable git bundle or repository: ${firstLine(err)}`,
      {
        cause: err,
      },
    );
  });
  const tag = `refs/tags/${inst.instance_id}`;
  const tries: string[][] = [];
  if (heads.split("\n").some((l) => l.split(/\s+/)[1] === tag)) tries.push([tag]);
  tries.push([inst.base_commit], ["+refs/*:refs/swe-source/*"]);
  let last: unknown;
  for (const refspec of tries) {
    try {
      await g.raw(["fetch", "-q", "--no-tags", source, ...refspec]);
      await g.raw(["cat-file", "-e", `${inst.base_commit}^{commit}`]);
      await g.raw(["-c", "advice.detachedHead=false", "checkout", "-q", "--detach", inst.base_commit]);
      return dir;
    } catch (err) {
      last = err;
    }
  }
  throw new LoopsmithError(
    "repo_invalid",
    `${source} does not hold ${inst.instance_id}'s base_commit ${inst.base_commit}: ${firstLine(last)}`,
    { cause: last },
  );
}
