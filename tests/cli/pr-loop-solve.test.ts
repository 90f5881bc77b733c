/**
 * `solve --issue --pr --merge-when`'s attempt from a review (followIssuePr in
 * cli/src/solve-issue.ts) against the local fake GitHub API, on a real clone and bare remote:
 * the review's feedback runs the task again (a stand-in for the run) on the pull request's
 * branch, the passing attempt is pushed onto that branch, commented on, approved and merged.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TaskResult } from "@loopsmith/shared/contracts";
import { followIssuePr, type IssueTask } from "../../cli/src/solve-issue.js";
import { FAKE_PR as PR, FAKE_REPO as target, fakePullRequestApi, fakeReview } from "../fixtures/fake-pull-request.js";

const MINUTE = 60_000;

/** The fake GitHub API and its pull request: each test sets `api.pull`, and `api.t.onPoll` changes it. */
const api = fakePullRequestApi();

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: "User",
  GIT_AUTHOR_EMAIL: "user@example.com",
  GIT_COMMITTER_NAME: "User",
  GIT_COMMITTER_EMAIL: "user@example.com",
};
function git(dir: string, ...args: string[]): string {
  return execFileSync("git", ["-C", dir, ...args], { env: gitEnv, encoding: "utf8" }).trim();
}

describe("followIssuePr: solve --issue's attempt from a review (fake GitHub API, a real clone and bare remote)", () => {
  const passed = (taskId: string, baseCommit: string): TaskResult =>
    TaskResult.parse({
      v: 1,
      taskId,
      status: "passed",
      stopReason: "passed",
      iterations: 1,
      files: [],
      tests: [],
      lastExecution: { status: "passed", durationMs: 1, tests: [] },
      hidden: null,
      failureIds: [],
      usage: {
        total: {
          calls: 1,
          inputTokens: 1,
          outputTokens: 1,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          costUsd: 0,
          latencyMs: 1,
        },
        byRole: {},
        byIteration: [],
      },
      scripted: true,
      providers: ["scripted"],
      durationMs: 1,
      message: "passed",
      repo: { baseCommit, patch: "", summary: "Discount returns as well", changed: ["pricing.py"], deleted: [] },
    });

  it("runs the task again on the pull request's branch with the review, pushes the passing attempt onto it, comments, then merges its approved head", async () => {
    const repo = mkdtempSync(join(tmpdir(), "loopsmith-prloop-repo-"));
    const remote = mkdtempSync(join(tmpdir(), "loopsmith-prloop-remote-"));
    git(repo, "init", "-q", "-b", "main");
    writeFileSync(join(repo, "pricing.py"), "x = 1\n");
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "initial");
    git(repo, "checkout", "-q", "-b", "loopsmith/task-1");
    writeFileSync(join(repo, "pricing.py"), "x = 2\n");
    git(repo, "commit", "-q", "-am", "first attempt");
    git(repo, "checkout", "-q", "main");
    execFileSync("git", ["init", "-q", "--bare", remote]);
    git(repo, "remote", "add", "origin", remote);
    git(repo, "push", "-q", "origin", "main", "loopsmith/task-1");
    const first = git(repo, "rev-parse", "loopsmith/task-1");
    api.pull.remote = remote;
    api.pull.reviews = [fakeReview(10, "alice", "CHANGES_REQUESTED", first, "Returns need the discount too.")];

    const task = {
      goal: "Resolve GitHub issue acme/inventory#12",
      root: repo,
      remote: "origin",
      target,
      client: api.client,
    } as unknown as IssueTask;
    const runs: Array<{ goal: string; base: string; taskId: string }> = [];
    const done = await followIssuePr(
      { task, result: passed("task-1", first), pr: { ...PR, branch: "loopsmith/task-1" } },
      { mergeWhen: "approved", reviewTimeout: 10 * MINUTE },
      (goal, base, taskId) => {
        runs.push({ goal, base, taskId });
        // What a passing task's finishRepo leaves: its branch loopsmith/<taskId>, a commit on the base.
        git(repo, "branch", `loopsmith/${taskId}`, base);
        git(repo, "checkout", "-q", `loopsmith/${taskId}`);
        writeFileSync(join(repo, "pricing.py"), "x = 3\n");
        git(repo, "commit", "-q", "-am", "second attempt");
        git(repo, "checkout", "-q", "main");
        api.t.onPoll = (n) => {
          if (n === 1)
            api.pull.reviews.push(fakeReview(11, "alice", "APPROVED", git(remote, "rev-parse", "loopsmith/task-1")));
        };
        return Promise.resolve(passed(taskId, git(repo, "rev-parse", base)));
      },
      { pollMs: MINUTE, now: () => api.t.clock, sleep: api.t.options().sleep },
    );
    api.pull.remote = undefined;
    const second = git(repo, "rev-parse", "loopsmith/task-1-review-1");
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ base: "loopsmith/task-1", taskId: "task-1-review-1" });
    expect(runs[0]?.goal).toMatch(/^Resolve GitHub issue acme\/inventory#12\n/);
    expect(runs[0]?.goal).toContain("Returns need the discount too.");
    // The attempt is on the pull request's branch on the remote, a fast-forward of the first.
    expect(git(remote, "rev-parse", "loopsmith/task-1")).toBe(second);
    expect(git(repo, "rev-parse", `${second}^`)).toBe(first);
    const comment = api.github.recorded.find((r) => r.method === "POST" && r.path.endsWith("/issues/5/comments"));
    expect(String(comment?.body?.body)).toMatch(/^loopsmith pushed attempt 1 from the review \(task `task-1-review-1`/);
    expect(done).toMatchObject({ outcome: "merged", sha: second, attempts: 1 });
    expect(api.github.recorded.find((r) => r.method === "PUT")?.body).toEqual({ sha: second });
  });
});
