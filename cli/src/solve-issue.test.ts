import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { TaskResult } from "@loopsmith/shared/contracts";
import {
  issuePrBody,
  prDecision,
  prLoopText,
  prOpened,
  prepareIssue,
  reviewGoal,
  rerunOptions,
  type IssueTask,
} from "./solve-issue.js";
import { checkIssueFlags } from "./solve-issue-flags.js";

const usage = {
  calls: 3,
  inputTokens: 1200,
  outputTokens: 300,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0.0123,
  latencyMs: 5,
};
const result = (over: Partial<TaskResult> = {}): TaskResult =>
  TaskResult.parse({
    v: 1,
    taskId: "task-1",
    status: "passed",
    stopReason: "passed",
    iterations: 2,
    files: [],
    tests: [],
    lastExecution: {
      status: "passed",
      durationMs: 10,
      tests: [
        { name: "test_a", classname: "tests.test_x", status: "passed" },
        { name: "test_b|c", classname: "", status: "skipped" },
      ],
    },
    hidden: null,
    failureIds: [],
    usage: { total: usage, byRole: {}, byIteration: [] },
    scripted: false,
    providers: ["anthropic"],
    durationMs: 100,
    message: "passed after 2 iterations",
    repo: {
      baseCommit: "0123456789abcdef0123456789abcdef01234567",
      patch: "",
      summary: "Give the bulk discount from the threshold on",
      changed: ["inventory/pricing.py"],
      deleted: [],
    },
    ...over,
  });

describe("prDecision", () => {
  it("opens only for a passed task with a change, unless --pr-always; says why not", () => {
    expect(prDecision(result(), false)).toEqual({ open: true });
    const failed = prDecision(result({ status: "failed", stopReason: "max_iterations" }), false);
    expect(failed).toEqual({
      open: false,
      reason: expect.stringMatching(/tests did not pass \(failed\).*nothing was pushed.*--pr-always/),
    });
    expect(prDecision(result({ status: "failed", stopReason: "max_iterations" }), true)).toEqual({ open: true });
    expect(prDecision(result({ repo: undefined }), true)).toEqual({
      open: false,
      reason: expect.stringContaining("no change"),
    });
  });
});

describe("issuePrBody", () => {
  it("holds Fixes #N, the summary, the tests that ran, the cost and how to see the run", () => {
    const body = issuePrBody(result(), 12, "python3 -m pytest -q");
    expect(body).toContain("Fixes #12");
    expect(body).toContain("**Summary:** Give the bulk discount from the threshold on");
    expect(body).toContain("**Files:** `inventory/pricing.py`");
    expect(body).toContain("**Result:** the repository's tests pass after 2 iterations");
    expect(body).toContain("**Tests that ran** (`python3 -m pytest -q`): 2: 1 passed, 0 failed, 0 errors, 1 skipped.");
    expect(body).toContain("| `tests.test_x::test_a` | passed |");
    expect(body).toContain("| `test_b\\|c` | skipped |");
    expect(body).toContain("**Cost:** 3 model calls, 1,500 tokens (1,200 in, 300 out), $0.0123");
    expect(body).toContain("`loopsmith show task-1`");
    expect(body).not.toMatch(/Scripted run/);
  });

  it("says first when the run was scripted, and when the tests did not pass", () => {
    const body = issuePrBody(result({ scripted: true, status: "failed", stopReason: "max_iterations" }), 3);
    expect(body.indexOf("**Scripted run:**")).toBeLessThan(body.indexOf("Fixes #3"));
    expect(body).toContain("the tests did **not** pass (failed, max_iterations)");
  });
});

describe("checkIssueFlags", () => {
  it("refuses what --issue does not take, and its flags without it", () => {
    expect(() => checkIssueFlags(undefined, { issue: "a/b#1", pr: true, prAlways: true })).not.toThrow();
    expect(() => checkIssueFlags("fix it", { issue: "a/b#1" })).toThrow(/give no a goal/);
    expect(() => checkIssueFlags(undefined, { issue: "a/b#1", file: "t.json" })).toThrow(/give no --file/);
    expect(() => checkIssueFlags(undefined, { issue: "a/b#1", language: "python" })).toThrow(/--language/);
    expect(() => checkIssueFlags(undefined, { issue: "a/b#1", prAlways: true })).toThrow(
      /--pr-always applies with --pr/,
    );
    expect(() => checkIssueFlags("g", { pr: true, remote: "up" })).toThrow(/^--remote, --pr apply to --issue/);
  });

  it("takes --merge-when with --pr only, --review-timeout with --merge-when only, and never now with --pr-always", () => {
    expect(() =>
      checkIssueFlags(undefined, { issue: "a/b#1", pr: true, mergeWhen: "approved", reviewTimeout: 60_000 }),
    ).not.toThrow();
    expect(() => checkIssueFlags(undefined, { issue: "a/b#1", pr: true, mergeWhen: "now" })).not.toThrow();
    expect(() => checkIssueFlags(undefined, { issue: "a/b#1", mergeWhen: "now" })).toThrow(
      /^--merge-when applies with --pr only/,
    );
    expect(() => checkIssueFlags(undefined, { issue: "a/b#1", pr: true, reviewTimeout: 60_000 })).toThrow(
      /^--review-timeout applies with --merge-when only/,
    );
    expect(() => checkIssueFlags(undefined, { issue: "a/b#1", pr: true, prAlways: true, mergeWhen: "now" })).toThrow(
      /--merge-when now merges without a review: it does not take --pr-always/,
    );
    expect(() => checkIssueFlags("g", { mergeWhen: "now", reviewTimeout: 1_000 })).toThrow(
      /^--merge-when, --review-timeout apply to --issue/,
    );
  });
});

describe("prepareIssue", () => {
  it("refuses an issue of another repository than the clone's remote, before asking GitHub", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-issue-unit-"));
    execFileSync("git", ["init", "-q", dir]);
    execFileSync("git", ["-C", dir, "remote", "add", "upstream", "git@github.com:Acme/Inventory.git"]);
    // Nothing listens here: any request would fail as unavailable, not repo_invalid.
    vi.stubEnv("GITHUB_API_URL", "http://127.0.0.1:9");
    await expect(prepareIssue({ issue: "acme/other#1", remote: "upstream", repo: dir })).rejects.toMatchObject({
      code: "repo_invalid",
      message: expect.stringMatching(
        /issue acme\/other#1 is on acme\/other, but .* is a clone of Acme\/Inventory \(remote "upstream"\)/,
      ),
    });
    await expect(prepareIssue({ issue: "acme/inventory#1", repo: dir })).rejects.toMatchObject({
      code: "repo_invalid",
      message: expect.stringContaining('has no remote "origin"'),
    });
    execFileSync("git", ["-C", dir, "remote", "add", "origin", "https://gitlab.com/acme/inventory.git"]);
    await expect(prepareIssue({ issue: "acme/inventory#1", repo: dir })).rejects.toMatchObject({
      code: "repo_invalid",
      message: expect.stringContaining("is not a github.com repository"),
    });
    // The same repository, names in another case: the check passes and GitHub is asked (nothing answers).
    await expect(prepareIssue({ issue: "acme/inventory#1", remote: "upstream", repo: dir })).rejects.toMatchObject({
      code: "unavailable",
    });
    vi.unstubAllEnvs();
  });
});

describe("the --merge-when loop's pieces", () => {
  const feedback = { reviewers: ["alice"], text: "Review by @alice (changes requested):\n\nAlso returns." };

  it("another attempt's goal: the issue's goal, the change already there, then the review fenced as untrusted", () => {
    const goal = reviewGoal("Resolve GitHub issue acme/inventory#12 …", feedback, 5);
    expect(goal.startsWith("Resolve GitHub issue acme/inventory#12 …\n")).toBe(true);
    expect(goal).toContain(
      "already holds a change for this issue (pull request #5), and a review of it requested changes",
    );
    const m = /^(UNTRUSTED-REVIEW-TEXT-[0-9a-f]{16}) BEGIN\n([\s\S]*)\n\1 END$/m.exec(goal);
    expect(m?.[2]).toBe(feedback.text);
    expect(goal).toContain(`The text between the two ${m?.[1]} lines comes from the pull request's reviews`);
    // Another review, another marker: a forged end line of one review cannot close another's fence.
    expect(reviewGoal("g", { ...feedback, text: "other" }, 5)).not.toContain(String(m?.[1]));
  });

  it("another attempt runs without --issue, --pr, --merge-when, --out or --apply, from the last branch", () => {
    const o = {
      issue: "a/b#1",
      pr: true,
      prAlways: false,
      mergeWhen: "approved" as const,
      reviewTimeout: 1_000,
      out: "/tmp/x",
      apply: true,
      repo: ".",
      taskId: "t",
      budgetUsd: 2,
    };
    const again = rerunOptions(o, "/clone", "loopsmith/t", "t-review-1");
    expect(again).toEqual({ repo: "/clone", base: "loopsmith/t", taskId: "t-review-1", budgetUsd: 2 });
    expect(o.issue).toBe("a/b#1"); // the caller's options are left as they were
  });

  it("follows only a passing task's opened pull request, and the summary names the outcome", () => {
    const t = {} as IssueTask;
    const pr = { number: 5, url: "https://github.com/acme/inventory/pull/5", branch: "loopsmith/task-1", lines: [] };
    expect(prOpened(t, result(), pr)?.pr).toEqual({ number: 5, url: pr.url, branch: "loopsmith/task-1" });
    expect(prOpened(t, result({ status: "failed", stopReason: "max_iterations" }), pr)).toBeUndefined();
    expect(prOpened(t, result(), { lines: ["no pull request"] })).toBeUndefined();
    const base = { number: 5, url: pr.url, sha: "a".repeat(40), attempts: 0 };
    expect(
      prLoopText({ ...base, outcome: "merged", closedByLoopsmith: false, message: "merged pull request #5 at aaa" }),
    ).toBe("pull request #5: merged: merged pull request #5 at aaa");
    expect(prLoopText({ ...base, outcome: "timeout", closedByLoopsmith: true, message: "no merge within 24h" })).toBe(
      `pull request #5: not merged (timeout): no merge within 24h (closed with that comment: ${pr.url})`,
    );
  });
});
