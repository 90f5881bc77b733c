import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { TaskResult } from "@loopsmith/shared";
import { issuePrBody, prDecision, prepareIssue } from "./solve-issue.js";
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
