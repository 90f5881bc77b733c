/**
 * The pull-request loop of `--pr --merge-when` (cli/src/github/review.ts) against the local
 * fake GitHub API: a pull request whose head, reviews, line comments, combined status, check
 * runs and merge answer each test sets and changes between polls (the loop's clock and sleep
 * are the test's). Each outcome: approved → merged with the head's SHA; changes requested →
 * feedback for another attempt (then approved and merged), or a rejection when no attempt can
 * be made; no review → closed with a comment at the timeout; a merge GitHub refuses (405,
 * 409) → closed, saying so; a failing check → not merged, closed; `now` → merged unreviewed.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { TaskResult } from "@loopsmith/shared";
import { githubClient, type GithubClient } from "../../cli/src/github/client.js";
import { followIssuePr, type IssueTask } from "../../cli/src/solve-issue.js";
import {
  followPullRequest,
  type AttemptResult,
  type PrLoopOptions,
  type ReviewFeedback,
} from "../../cli/src/github/review.js";
import { startFakeGitHub, type FakeAnswer, type FakeGitHub } from "../fixtures/fake-github.js";

const SHA1 = "1111111111111111111111111111111111111111";
const SHA2 = "2222222222222222222222222222222222222222";
const MERGED = "9999999999999999999999999999999999999999";
const PR = { number: 5, url: "https://github.com/acme/inventory/pull/5" };
const target = { owner: "acme", repo: "inventory" };

interface FakeReview {
  id: number;
  user: { login: string };
  state: string;
  body: string;
  commit_id: string;
}

/** The pull request as the fake API holds it; each test sets it, and `onPoll` changes it. */
let pull: {
  state: string;
  merged: boolean;
  /** The head's SHA; with `remote` set, the remote branch's commit instead (a real push moves it). */
  head: string;
  remote?: string;
  reviews: FakeReview[];
  comments: Array<{
    pull_request_review_id: number;
    user: { login: string };
    path: string;
    line: number;
    body: string;
  }>;
  statuses: Array<{ context: string; state: string }>;
  runs: Array<{ name: string; status: string; conclusion: string | null }>;
  merge: FakeAnswer;
};
let github: FakeGitHub;
let client: GithubClient;

beforeAll(async () => {
  github = await startFakeGitHub(({ method, route, body }): FakeAnswer => {
    const base = "/repos/acme/inventory";
    if (pull.remote) pull.head = git(pull.remote, "rev-parse", "loopsmith/task-1");
    if (method === "GET" && route === `${base}/pulls/5`)
      return {
        status: 200,
        data: {
          number: 5,
          state: pull.state,
          merged: pull.merged,
          draft: false,
          head: { sha: pull.head, ref: "loopsmith/task-1" },
        },
      };
    if (method === "GET" && route === `${base}/pulls/5/reviews`) return { status: 200, data: pull.reviews };
    if (method === "GET" && route === `${base}/pulls/5/comments`) return { status: 200, data: pull.comments };
    const commit = new RegExp(`^${base}/commits/([0-9a-f]{40})/(status|check-runs)$`).exec(route);
    if (method === "GET" && commit?.[1] === pull.head) {
      if (commit[2] === "status")
        return {
          status: 200,
          data: {
            state: pull.statuses.length ? "success" : "pending",
            total_count: pull.statuses.length,
            statuses: pull.statuses,
          },
        };
      return { status: 200, data: { total_count: pull.runs.length, check_runs: pull.runs } };
    }
    if (method === "PUT" && route === `${base}/pulls/5/merge`) {
      if (pull.merge.status === 200) pull.merged = true;
      return pull.merge;
    }
    if (method === "POST" && route === `${base}/issues/5/comments`)
      return { status: 201, data: { id: 1, body: body?.body } };
    if (method === "PATCH" && route === `${base}/pulls/5`) {
      if (body?.state === "closed") pull.state = "closed";
      return { status: 200, data: { number: 5, state: pull.state } };
    }
    return { status: 404, data: { message: "Not Found" } };
  });
  client = githubClient({ token: "good-token", baseUrl: github.url });
});
afterAll(() => github.close());

let clock = 0;
let polls = 0;
/** What changes on GitHub while the loop sleeps: called with the number of the sleep (1, 2, …). */
let onPoll: (n: number) => void = () => undefined;

beforeEach(() => {
  github.recorded.length = 0;
  clock = 1_000_000;
  polls = 0;
  onPoll = () => undefined;
  pull = {
    state: "open",
    merged: false,
    head: SHA1,
    reviews: [],
    comments: [],
    statuses: [{ context: "ci/build", state: "success" }],
    runs: [{ name: "tests", status: "completed", conclusion: "success" }],
    merge: { status: 200, data: { sha: MERGED, merged: true, message: "Pull Request successfully merged" } },
  };
});

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

const MINUTE = 60_000;
const options = (over: Partial<PrLoopOptions> = {}): PrLoopOptions => ({
  mergeWhen: "approved",
  timeoutMs: 10 * MINUTE,
  pollMs: MINUTE,
  now: () => clock,
  sleep: (ms) => {
    clock += ms;
    polls += 1;
    onPoll(polls);
    return Promise.resolve();
  },
  ...over,
});

const review = (id: number, login: string, state: string, commit: string, body = ""): FakeReview => ({
  id,
  user: { login },
  state,
  body,
  commit_id: commit,
});
const requests = (): string[] => github.recorded.map((r) => `${r.method} ${r.path.split("?")[0]}`);
const closing = () => ({
  comment: github.recorded.find((r) => r.method === "POST" && r.path === "/repos/acme/inventory/issues/5/comments")
    ?.body?.body,
  closed: github.recorded.some(
    (r) => r.method === "PATCH" && r.path === "/repos/acme/inventory/pulls/5" && r.body?.state === "closed",
  ),
});

describe("followPullRequest (fake GitHub API)", () => {
  it("approve: merges once the current head is approved and its checks pass, with the head's SHA", async () => {
    // An approval of an older head does not count; one of the current head, on the second poll, does.
    pull.reviews = [review(1, "alice", "APPROVED", "0".repeat(40))];
    onPoll = (n) => {
      if (n === 2) pull.reviews.push(review(2, "bob", "APPROVED", SHA1, "LGTM"));
    };
    const done = await followPullRequest(client, target, PR, options());
    expect(done).toMatchObject({
      outcome: "merged",
      sha: SHA1,
      mergeSha: MERGED,
      attempts: 0,
      closedByLoopsmith: false,
    });
    expect(done.message).toMatch(/^merged pull request #5 at 111111111111 \(approved; 2 checks passed\)/);
    expect(polls).toBe(2);
    const merge = github.recorded.filter((r) => r.method === "PUT");
    expect(merge).toHaveLength(1);
    expect(merge[0]).toMatchObject({
      path: "/repos/acme/inventory/pulls/5/merge",
      body: { sha: SHA1 },
      auth: "token good-token",
    });
    // The checks were read for the approved head: its combined status and its check runs.
    expect(requests()).toContain(`GET /repos/acme/inventory/commits/${SHA1}/status`);
    expect(requests()).toContain(`GET /repos/acme/inventory/commits/${SHA1}/check-runs`);
    expect(closing()).toEqual({ comment: undefined, closed: false });
  });

  it("request changes: the review and its line comments are the feedback of another attempt, whose new head is then approved and merged", async () => {
    pull.reviews = [review(10, "alice", "CHANGES_REQUESTED", SHA1, "The discount must also apply to returns.")];
    pull.comments = [
      {
        pull_request_review_id: 10,
        user: { login: "alice" },
        path: "inventory/pricing.py",
        line: 12,
        body: "Use >= here.",
      },
      { pull_request_review_id: 99, user: { login: "carol" }, path: "README.md", line: 1, body: "unrelated review" },
    ];
    const seen: ReviewFeedback[] = [];
    const attempt = (feedback: ReviewFeedback): Promise<AttemptResult> => {
      seen.push(feedback);
      // The attempt pushed a new head; alice approves it a poll later.
      pull.head = SHA2;
      onPoll = (n) => {
        if (n === 1) pull.reviews.push(review(11, "alice", "APPROVED", SHA2));
      };
      return Promise.resolve({ pushed: true });
    };
    const progress: string[] = [];
    const done = await followPullRequest(client, target, PR, options({ attempt, onProgress: (l) => progress.push(l) }));
    expect(seen).toHaveLength(1);
    expect(seen[0]?.reviewers).toEqual(["alice"]);
    expect(seen[0]?.text).toContain(
      "Review by @alice (changes requested):\n\nThe discount must also apply to returns.",
    );
    expect(seen[0]?.text).toContain("Comment by @alice on inventory/pricing.py:12:\n\nUse >= here.");
    expect(seen[0]?.text).not.toContain("unrelated review");
    expect(done).toMatchObject({ outcome: "merged", sha: SHA2, attempts: 1 });
    expect(github.recorded.find((r) => r.method === "PUT")?.body).toEqual({ sha: SHA2 });
    expect(progress[0]).toMatch(/@alice requested changes; attempt 1 of 2/);
  });

  it("request changes without an attempt mechanism (improve), or with the attempts used up: a rejection, closed with a comment", async () => {
    pull.reviews = [review(10, "alice", "CHANGES_REQUESTED", SHA1, "No.")];
    const rejected = await followPullRequest(
      client,
      target,
      PR,
      options({ noAttempt: "improve makes no other attempt at a generation" }),
    );
    expect(rejected).toMatchObject({ outcome: "changes_requested", closedByLoopsmith: true, attempts: 0 });
    expect(closing().closed).toBe(true);
    expect(closing().comment).toMatch(
      /^@alice requested changes on 111111111111; improve makes no other attempt at a generation, so the pull request is closed\./,
    );
    expect(github.recorded.some((r) => r.method === "PUT")).toBe(false);

    // Every attempt is met with another request for changes: after the last one allowed, closed.
    github.recorded.length = 0;
    pull.state = "open";
    let id = 20;
    const again = (): Promise<AttemptResult> => {
      pull.head = `${id}`.padEnd(40, "a");
      pull.reviews.push(review(id++, "alice", "CHANGES_REQUESTED", pull.head, "Still no."));
      return Promise.resolve({ pushed: true });
    };
    const used = await followPullRequest(client, target, PR, options({ attempt: again, maxAttempts: 2 }));
    expect(used).toMatchObject({ outcome: "changes_requested", attempts: 2, closedByLoopsmith: true });
    expect(closing().comment).toMatch(/after 2 attempts from review feedback, the most allowed/);

    // An attempt that makes nothing to push ends it too, saying why.
    github.recorded.length = 0;
    pull.state = "open";
    pull.head = SHA1;
    pull.reviews = [review(30, "alice", "CHANGES_REQUESTED", SHA1, "No.")];
    const failed = await followPullRequest(
      client,
      target,
      PR,
      options({ attempt: () => Promise.resolve({ pushed: false, reason: "the tests did not pass (failed)" }) }),
    );
    expect(failed).toMatchObject({ outcome: "changes_requested", attempts: 1 });
    expect(closing().comment).toMatch(/did not make a change to push \(the tests did not pass \(failed\)\)/);
  });

  it("time out: without an approving review the pull request is closed with a comment at the review timeout", async () => {
    // A comment-only review neither approves nor requests changes.
    pull.reviews = [review(1, "bob", "COMMENTED", SHA1, "Looking.")];
    const done = await followPullRequest(client, target, PR, options({ timeoutMs: 3 * MINUTE }));
    expect(done).toMatchObject({ outcome: "timeout", closedByLoopsmith: true });
    expect(clock).toBe(1_000_000 + 3 * MINUTE);
    expect(polls).toBe(3);
    const { comment, closed } = closing();
    expect(closed).toBe(true);
    expect(comment).toMatch(/^no merge within the review timeout \(3m\): no approving review of the current head/);
    expect(comment).toContain("Closed by loopsmith (`--merge-when approved`)");
    // The comment comes before the close.
    const order = requests();
    expect(order.indexOf("POST /repos/acme/inventory/issues/5/comments")).toBeLessThan(
      order.indexOf("PATCH /repos/acme/inventory/pulls/5"),
    );
    expect(order.filter((r) => r.startsWith("PUT"))).toEqual([]);
  });

  it.each([
    {
      status: 405,
      message: "Pull Request is not mergeable",
      says: /\(405: not mergeable\): Pull Request is not mergeable/,
    },
    {
      status: 409,
      message: "Head branch was modified. Review and try the merge again.",
      says: /\(409: the head moved or conflicts with the base\): Head branch was modified/,
    },
  ])(
    "merge conflict ($status from the merge): closed, the comment and the result saying why",
    async ({ status, message, says }) => {
      pull.reviews = [review(1, "alice", "APPROVED", SHA1)];
      pull.merge = { status, data: { message, documentation_url: "https://docs.github.com/rest" } };
      const done = await followPullRequest(client, target, PR, options());
      expect(done).toMatchObject({ outcome: "merge_conflict", closedByLoopsmith: true });
      expect(done.message).toMatch(says);
      expect(closing().closed).toBe(true);
      expect(closing().comment).toMatch(says);
    },
  );

  it("failing checks: not merged, closed naming the failed check; pending checks are waited for", async () => {
    pull.reviews = [review(1, "alice", "APPROVED", SHA1)];
    pull.runs = [
      { name: "tests", status: "in_progress", conclusion: null },
      { name: "lint", status: "completed", conclusion: "success" },
    ];
    onPoll = (n) => {
      if (n === 1) pull.runs[0] = { name: "tests", status: "completed", conclusion: "failure" };
    };
    const progress: string[] = [];
    const done = await followPullRequest(client, target, PR, options({ onProgress: (l) => progress.push(l) }));
    expect(done).toMatchObject({ outcome: "checks_failed", closedByLoopsmith: true });
    expect(done.message).toMatch(/the checks of 111111111111 failed: tests \(failure\)/);
    expect(progress).toContain("pull request #5: waiting for tests");
    expect(github.recorded.some((r) => r.method === "PUT")).toBe(false);
    expect(closing().closed).toBe(true);
    // A failed commit status counts as well.
    github.recorded.length = 0;
    pull.state = "open";
    pull.runs = [];
    pull.statuses = [{ context: "ci/build", state: "error" }];
    const status = await followPullRequest(client, target, PR, options());
    expect(status).toMatchObject({ outcome: "checks_failed" });
    expect(status.message).toContain("ci/build (error)");
  });

  it("--merge-when now: merges without reading reviews; a head with no checks waits one poll first", async () => {
    pull.reviews = [review(1, "alice", "CHANGES_REQUESTED", SHA1, "Wait.")];
    pull.statuses = [];
    pull.runs = [];
    const done = await followPullRequest(client, target, PR, options({ mergeWhen: "now" }));
    expect(done).toMatchObject({ outcome: "merged", sha: SHA1 });
    expect(done.message).toContain("--merge-when now: no review waited for; no checks");
    expect(polls).toBe(1);
    expect(requests().some((r) => r.endsWith("/reviews"))).toBe(false);
  });

  it("a pull request closed or merged on GitHub ends the loop without closing it again", async () => {
    pull.state = "closed";
    expect(await followPullRequest(client, target, PR, options())).toMatchObject({
      outcome: "closed",
      closedByLoopsmith: false,
    });
    pull.merged = true;
    expect(await followPullRequest(client, target, PR, options())).toMatchObject({ outcome: "merged" });
    expect(closing()).toEqual({ comment: undefined, closed: false });
  });
});

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
    pull.remote = remote;
    pull.reviews = [review(10, "alice", "CHANGES_REQUESTED", first, "Returns need the discount too.")];

    const task = {
      goal: "Resolve GitHub issue acme/inventory#12",
      root: repo,
      remote: "origin",
      target,
      client,
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
        onPoll = (n) => {
          if (n === 1) pull.reviews.push(review(11, "alice", "APPROVED", git(remote, "rev-parse", "loopsmith/task-1")));
        };
        return Promise.resolve(passed(taskId, git(repo, "rev-parse", base)));
      },
      { pollMs: MINUTE, now: () => clock, sleep: options().sleep },
    );
    pull.remote = undefined;
    const second = git(repo, "rev-parse", "loopsmith/task-1-review-1");
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ base: "loopsmith/task-1", taskId: "task-1-review-1" });
    expect(runs[0]?.goal).toMatch(/^Resolve GitHub issue acme\/inventory#12\n/);
    expect(runs[0]?.goal).toContain("Returns need the discount too.");
    // The attempt is on the pull request's branch on the remote, a fast-forward of the first.
    expect(git(remote, "rev-parse", "loopsmith/task-1")).toBe(second);
    expect(git(repo, "rev-parse", `${second}^`)).toBe(first);
    const comment = github.recorded.find((r) => r.method === "POST" && r.path.endsWith("/issues/5/comments"));
    expect(String(comment?.body?.body)).toMatch(/^loopsmith pushed attempt 1 from the review \(task `task-1-review-1`/);
    expect(done).toMatchObject({ outcome: "merged", sha: second, attempts: 1 });
    expect(github.recorded.find((r) => r.method === "PUT")?.body).toEqual({ sha: second });
  });
});
