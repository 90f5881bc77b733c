/**
 * The pull-request loop of `--pr --merge-when` (cli/src/github/review.ts) against the local
 * fake GitHub API: a pull request whose head, reviews, line comments, combined status, check
 * runs and merge answer each test sets and changes between polls (the loop's clock and sleep
 * are the test's). Each outcome: approved → merged with the head's SHA; changes requested →
 * feedback for another attempt (then approved and merged), or a rejection when no attempt can
 * be made; no review → closed with a comment at the timeout; a merge GitHub refuses (405,
 * 409) → closed, saying so; a failing check → not merged, closed; `now` → merged unreviewed;
 * GitHub not answering → asked again.
 */
import { describe, expect, it } from "vitest";
import {
  followPullRequest,
  shortDuration,
  type AttemptResult,
  type ReviewFeedback,
} from "../../cli/src/github/review.js";
import {
  FAKE_PR as PR,
  FAKE_REPO as target,
  HEAD_SHA as SHA1,
  MERGE_SHA as MERGED,
  fakePullRequestApi,
  fakeReview,
} from "../fixtures/fake-pull-request.js";

const SHA2 = "2222222222222222222222222222222222222222";
const MINUTE = 60_000;

/** The fake GitHub API and its pull request: each test sets `api.pull`, and `api.t.onPoll` changes it. */
const api = fakePullRequestApi();

const requests = (): string[] => api.github.recorded.map((r) => `${r.method} ${r.path.split("?")[0]}`);
const closing = () => ({
  comment: api.github.recorded.find((r) => r.method === "POST" && r.path === "/repos/acme/inventory/issues/5/comments")
    ?.body?.body,
  closed: api.github.recorded.some(
    (r) => r.method === "PATCH" && r.path === "/repos/acme/inventory/pulls/5" && r.body?.state === "closed",
  ),
});

describe("shortDuration", () => {
  it("names a timeout as it was given: hours up to two days, then days; minutes; seconds", () => {
    expect([86_400_000, 2 * 86_400_000, 36 * 3_600_000, 90 * 60_000, 2_000, 1_500].map(shortDuration)).toEqual([
      "24h",
      "2d",
      "36h",
      "90m",
      "2s",
      "2s",
    ]);
  });
});

describe("followPullRequest (fake GitHub API)", () => {
  it("approve: merges once the current head is approved and its checks pass, with the head's SHA", async () => {
    // An approval of an older head does not count; one of the current head, on the second poll, does.
    api.pull.reviews = [fakeReview(1, "alice", "APPROVED", "0".repeat(40))];
    api.t.onPoll = (n) => {
      if (n === 2) api.pull.reviews.push(fakeReview(2, "bob", "APPROVED", SHA1, "LGTM"));
    };
    const done = await followPullRequest(api.client, target, PR, api.t.options());
    expect(done).toMatchObject({
      outcome: "merged",
      sha: SHA1,
      mergeSha: MERGED,
      attempts: 0,
      closedByLoopsmith: false,
    });
    expect(done.message).toMatch(/^merged pull request #5 at 111111111111 \(approved; 2 checks passed\)/);
    expect(api.t.polls).toBe(2);
    const merge = api.github.recorded.filter((r) => r.method === "PUT");
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
    api.pull.reviews = [fakeReview(10, "alice", "CHANGES_REQUESTED", SHA1, "The discount must also apply to returns.")];
    api.pull.comments = [
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
      api.pull.head = SHA2;
      api.t.onPoll = (n) => {
        if (n === 1) api.pull.reviews.push(fakeReview(11, "alice", "APPROVED", SHA2));
      };
      return Promise.resolve({ pushed: true });
    };
    const progress: string[] = [];
    const done = await followPullRequest(
      api.client,
      target,
      PR,
      api.t.options({ attempt, onProgress: (l) => progress.push(l) }),
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]?.reviewers).toEqual(["alice"]);
    expect(seen[0]?.text).toContain(
      "Review by @alice (changes requested):\n\nThe discount must also apply to returns.",
    );
    expect(seen[0]?.text).toContain("Comment by @alice on inventory/pricing.py:12:\n\nUse >= here.");
    expect(seen[0]?.text).not.toContain("unrelated review");
    expect(done).toMatchObject({ outcome: "merged", sha: SHA2, attempts: 1 });
    expect(api.github.recorded.find((r) => r.method === "PUT")?.body).toEqual({ sha: SHA2 });
    expect(progress[0]).toMatch(/@alice requested changes; attempt 1 of 2/);
  });

  it("request changes without an attempt mechanism (improve), or with the attempts used up: a rejection, closed with a comment", async () => {
    api.pull.reviews = [fakeReview(10, "alice", "CHANGES_REQUESTED", SHA1, "No.")];
    const rejected = await followPullRequest(
      api.client,
      target,
      PR,
      api.t.options({ noAttempt: "improve makes no other attempt at a generation" }),
    );
    expect(rejected).toMatchObject({ outcome: "changes_requested", closedByLoopsmith: true, attempts: 0 });
    expect(closing().closed).toBe(true);
    expect(closing().comment).toMatch(
      /^@alice requested changes on 111111111111; improve makes no other attempt at a generation, so the pull request is closed\./,
    );
    expect(api.github.recorded.some((r) => r.method === "PUT")).toBe(false);

    // Every attempt is met with another request for changes: after the last one allowed, closed.
    api.github.recorded.length = 0;
    api.pull.state = "open";
    let id = 20;
    const again = (): Promise<AttemptResult> => {
      api.pull.head = `${id}`.padEnd(40, "a");
      api.pull.reviews.push(fakeReview(id++, "alice", "CHANGES_REQUESTED", api.pull.head, "Still no."));
      return Promise.resolve({ pushed: true });
    };
    const used = await followPullRequest(api.client, target, PR, api.t.options({ attempt: again, maxAttempts: 2 }));
    expect(used).toMatchObject({ outcome: "changes_requested", attempts: 2, closedByLoopsmith: true });
    expect(closing().comment).toMatch(/after 2 attempts from review feedback, the most allowed/);

    // An attempt that makes nothing to push ends it too, saying why.
    api.github.recorded.length = 0;
    api.pull.state = "open";
    api.pull.head = SHA1;
    api.pull.reviews = [fakeReview(30, "alice", "CHANGES_REQUESTED", SHA1, "No.")];
    const failed = await followPullRequest(
      api.client,
      target,
      PR,
      api.t.options({ attempt: () => Promise.resolve({ pushed: false, reason: "the tests did not pass (failed)" }) }),
    );
    expect(failed).toMatchObject({ outcome: "changes_requested", attempts: 1 });
    expect(closing().comment).toMatch(/did not make a change to push \(the tests did not pass \(failed\)\)/);
  });

  it("time out: without an approving review the pull request is closed with a comment at the review timeout", async () => {
    // A comment-only review neither approves nor requests changes.
    api.pull.reviews = [fakeReview(1, "bob", "COMMENTED", SHA1, "Looking.")];
    const done = await followPullRequest(api.client, target, PR, api.t.options({ timeoutMs: 3 * MINUTE }));
    expect(done).toMatchObject({ outcome: "timeout", closedByLoopsmith: true });
    expect(api.t.clock).toBe(1_000_000 + 3 * MINUTE);
    expect(api.t.polls).toBe(3);
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
      api.pull.reviews = [fakeReview(1, "alice", "APPROVED", SHA1)];
      api.pull.merge = { status, data: { message, documentation_url: "https://docs.github.com/rest" } };
      const done = await followPullRequest(api.client, target, PR, api.t.options());
      expect(done).toMatchObject({ outcome: "merge_conflict", closedByLoopsmith: true });
      expect(done.message).toMatch(says);
      expect(closing().closed).toBe(true);
      expect(closing().comment).toMatch(says);
    },
  );

  it("failing checks: not merged, closed naming the failed check; pending checks are waited for", async () => {
    api.pull.reviews = [fakeReview(1, "alice", "APPROVED", SHA1)];
    api.pull.runs = [
      { name: "tests", status: "in_progress", conclusion: null },
      { name: "lint", status: "completed", conclusion: "success" },
    ];
    api.t.onPoll = (n) => {
      if (n === 1) api.pull.runs[0] = { name: "tests", status: "completed", conclusion: "failure" };
    };
    const progress: string[] = [];
    const done = await followPullRequest(
      api.client,
      target,
      PR,
      api.t.options({ onProgress: (l) => progress.push(l) }),
    );
    expect(done).toMatchObject({ outcome: "checks_failed", closedByLoopsmith: true });
    expect(done.message).toMatch(/the checks of 111111111111 failed: tests \(failure\)/);
    expect(progress).toContain("pull request #5: waiting for tests");
    expect(api.github.recorded.some((r) => r.method === "PUT")).toBe(false);
    expect(closing().closed).toBe(true);
    // A failed commit status counts as well.
    api.github.recorded.length = 0;
    api.pull.state = "open";
    api.pull.runs = [];
    api.pull.statuses = [{ context: "ci/build", state: "error" }];
    const status = await followPullRequest(api.client, target, PR, api.t.options());
    expect(status).toMatchObject({ outcome: "checks_failed" });
    expect(status.message).toContain("ci/build (error)");
  });

  it("--merge-when now: merges without reading reviews; a head with no checks waits one poll first", async () => {
    api.pull.reviews = [fakeReview(1, "alice", "CHANGES_REQUESTED", SHA1, "Wait.")];
    api.pull.statuses = [];
    api.pull.runs = [];
    const done = await followPullRequest(api.client, target, PR, api.t.options({ mergeWhen: "now" }));
    expect(done).toMatchObject({ outcome: "merged", sha: SHA1 });
    expect(done.message).toContain("--merge-when now: no review waited for; no checks");
    expect(api.t.polls).toBe(1);
    expect(requests().some((r) => r.endsWith("/reviews"))).toBe(false);
  });

  it("GitHub not answering (502) is asked again at the next poll, and only past the deadline is an error", async () => {
    api.pull.reviews = [fakeReview(1, "alice", "APPROVED", SHA1)];
    api.pull.unanswered = 2;
    const progress: string[] = [];
    const done = await followPullRequest(
      api.client,
      target,
      PR,
      api.t.options({ onProgress: (l) => progress.push(l) }),
    );
    expect(done).toMatchObject({ outcome: "merged", sha: SHA1 });
    expect(api.t.polls).toBe(2);
    expect(progress[0]).toMatch(
      /^pull request #5: GitHub did not answer while reading pull request #5 .*\(502\).*asking again/,
    );
    // Past the deadline the error is the command's: nothing is closed, the pull request stays open.
    api.github.recorded.length = 0;
    api.pull.merged = false;
    api.pull.unanswered = 1_000;
    await expect(
      followPullRequest(api.client, target, PR, api.t.options({ timeoutMs: 2 * MINUTE })),
    ).rejects.toMatchObject({
      code: "unavailable",
    });
    expect(api.github.recorded.every((r) => r.method === "GET")).toBe(true);
  });

  it("a pull request closed or merged on GitHub ends the loop without closing it again", async () => {
    api.pull.state = "closed";
    expect(await followPullRequest(api.client, target, PR, api.t.options())).toMatchObject({
      outcome: "closed",
      closedByLoopsmith: false,
    });
    api.pull.merged = true;
    expect(await followPullRequest(api.client, target, PR, api.t.options())).toMatchObject({ outcome: "merged" });
    expect(closing()).toEqual({ comment: undefined, closed: false });
  });
});
