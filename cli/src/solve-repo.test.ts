import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoToSolve } from "./solve-repo.js";

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
