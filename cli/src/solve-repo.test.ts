import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TaskResult } from "@loopsmith/shared/contracts";
import { finishRepo, repoToSolve, type PreparedRepoTask } from "./solve-repo.js";

const tmp = realpathSync(mkdtempSync(join(tmpdir(), "loopsmith-repo-to-solve-")));
const repo = join(tmp, "project");
const outside = join(tmp, "plain");
mkdirSync(join(repo, "src", "deep"), { recursive: true });
mkdirSync(outside);
writeFileSync(join(repo, "README.md"), "x\n");
execFileSync("git", ["init", "-q", repo]);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("repoToSolve: the repository `solve` works on", () => {
  it("is the work tree holding the working directory, from its root or any folder inside", async () => {
    expect(await repoToSolve("fix it", {}, repo)).toBe(repo);
    expect(await repoToSolve("fix it", {}, join(repo, "src", "deep"))).toBe(repo);
  });

  it("is --repo when given, wherever the command runs", async () => {
    expect(await repoToSolve("fix it", { repo: "/elsewhere" }, repo)).toBe("/elsewhere");
    expect(await repoToSolve("fix it", { repo: "/elsewhere" }, outside)).toBe("/elsewhere");
  });

  it("is none outside a work tree, inside .git, or for a task file or a HumanEval record", async () => {
    expect(await repoToSolve("fix it", {}, outside)).toBeUndefined();
    expect(await repoToSolve("fix it", {}, join(repo, ".git"))).toBeUndefined();
    expect(await repoToSolve(undefined, { file: "task.json" }, repo)).toBeUndefined();
    expect(await repoToSolve(undefined, { humaneval: "12" }, repo)).toBeUndefined();
    expect(await repoToSolve("   ", {}, repo)).toBeUndefined();
  });

  it("is none for a goal with --language, which only an inline task takes", async () => {
    expect(await repoToSolve("a function add(a, b)", { language: "python" }, repo)).toBeUndefined();
    expect(await repoToSolve("fix it", { language: "python", repo: "/elsewhere" }, repo)).toBe("/elsewhere");
  });
});

describe("finishRepo: the branch of a task's change", () => {
  /** A repository with one commit, and a change of its file as a patch. */
  function changed(): { root: string; base: string; patch: string } {
    const root = realpathSync(mkdtempSync(join(tmpdir(), "loopsmith-finish-")));
    const git = (...args: string[]): string =>
      execFileSync("git", ["-C", root, "-c", "user.name=U", "-c", "user.email=u@example.com", ...args], {
        encoding: "utf8",
      }).trim();
    git("init", "-q", "-b", "main");
    writeFileSync(join(root, "a.py"), "x = 1\n");
    git("add", "a.py");
    git("commit", "-q", "-m", "initial");
    writeFileSync(join(root, "a.py"), "x = 2\n");
    const patch = `${git("diff", "--src-prefix=a/", "--dst-prefix=b/")}\n`;
    git("checkout", "-q", "--", "a.py");
    return { root, base: git("rev-parse", "HEAD"), patch };
  }
  const prepared = (root: string, base: string): PreparedRepoTask => ({
    task: { goal: "the fenced issue text" } as PreparedRepoTask["task"],
    repo: { root, baseCommit: base, name: "r" },
    snapshot: Buffer.alloc(0),
    commitGoal: "GitHub issue acme/r#3: x is wrong",
  });
  const result = (status: "passed" | "failed", base: string, patch: string): TaskResult =>
    ({
      taskId: `t-${status}`,
      status,
      repo: { baseCommit: base, patch, summary: "Set x to 2", changed: ["a.py"], deleted: [] },
    }) as unknown as TaskResult;

  it("a failed task writes no branch, unless commitFailed: then a commit saying the tests did not pass", async () => {
    const { root, base, patch } = changed();
    const none = await finishRepo(prepared(root, base), result("failed", base, patch), false);
    expect(none.branch).toBeUndefined();
    expect(none.lines[0]).toMatch(/tests did not pass; the repository is unchanged/);
    const kept = await finishRepo(prepared(root, base), result("failed", base, patch), true, { commitFailed: true });
    expect(kept).toMatchObject({ branch: "loopsmith/t-failed", applied: false });
    expect(kept.lines[0]).toMatch(/\(the tests did not pass\)$/);
    const message = execFileSync("git", ["-C", root, "log", "-1", "--format=%B", "loopsmith/t-failed"], {
      encoding: "utf8",
    });
    expect(message).toContain("GitHub issue acme/r#3: x is wrong");
    expect(message).not.toContain("fenced issue text");
    expect(message).toContain("did NOT all pass");
    // Never applied to the work tree, even with apply.
    expect(execFileSync("git", ["-C", root, "status", "--porcelain"], { encoding: "utf8" })).toBe("");
  });
});
