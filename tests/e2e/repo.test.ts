/**
 * Repo mode end to end, as the README shows it: `loopsmith solve --repo <dir> "<goal>"` on
 * the two examples (Python with pytest, JavaScript with `npm test`), on the scripted provider,
 * through NATS, the five services, the object store and the Docker sandbox. Asserts the branch,
 * its one commit, the patch and the report, and that the user's repository — branch, index,
 * work tree, stash, config, refs — is exactly as it was. Then replays the recorded run.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO, loopsmith } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-repo-e2e-"));
const env = {
  LOOPSMITH_DATA_DIR: dataDir,
  NATS_URL: "",
  DATABASE_URL: "",
  ANTHROPIC_API_KEY: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "info",
};
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

/** A user's repository made from an example: committed, plus a local change, an untracked file, a stash and a config value. */
function userRepo(example: string): string {
  const dir = mkdtempSync(join(tmpdir(), `loopsmith-user-${example}-`));
  cpSync(join(REPO, "examples", example, "repo"), dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "initial");
  writeFileSync(join(dir, "NOTES.txt"), "stashed work\n");
  git(dir, "add", "NOTES.txt");
  git(dir, "stash", "push", "-q", "-m", "user stash");
  git(dir, "config", "user.signingkey", "ABC123");
  writeFileSync(
    join(dir, "README.md"),
    `${readFileSync(join(dir, "README.md"), "utf8")}\nA local edit, not committed.\n`,
  );
  writeFileSync(join(dir, "scratch.txt"), "untracked\n");
  return dir;
}

/** Everything of the user's repository a run must not change (new loopsmith/* branches aside). */
function state(dir: string): Record<string, string> {
  const files: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.name === ".git") continue;
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else files.push(`${relative(dir, p)}:${createHash("sha256").update(readFileSync(p)).digest("hex")}`);
    }
  };
  walk(dir);
  const hash = (p: string): string =>
    existsSync(p) ? createHash("sha256").update(readFileSync(p)).digest("hex") : "absent";
  return {
    head: readFileSync(join(dir, ".git", "HEAD"), "utf8"),
    headCommit: git(dir, "rev-parse", "HEAD"),
    index: hash(join(dir, ".git", "index")),
    config: hash(join(dir, ".git", "config")),
    stash: git(dir, "stash", "list"),
    status: git(dir, "status", "--porcelain"),
    refs: git(dir, "for-each-ref", "--format=%(refname) %(objectname)")
      .split("\n")
      .filter((l) => !l.startsWith("refs/heads/loopsmith/"))
      .join("\n"),
    files: files.sort().join("\n"),
  };
}

const cases = [
  {
    example: "repo-bugfix",
    goal: "Fix the failing test tests/test_pricing.py::test_bulk_discount_starts_at_threshold",
    changed: "inventory/pricing.py",
    fix: "    return quantity >= BULK_THRESHOLD",
    undone: "(1 - BULK_DISCOUNT)",
  },
  {
    example: "repo-bugfix-ts",
    goal: "Fix the failing pager test: a gap of one page shows that page instead (start)",
    changed: "src/links.js",
    fix: "",
    undone: "Math.max(2, page - radius)",
  },
];

describe.each(cases)(
  "solve --repo on examples/$example (scripted, real sandbox)",
  ({ example, goal, changed, fix, undone }) => {
    it("fixes it in two iterations on a new branch, writes the report and the patch, and leaves the user's repository as it was", async () => {
      const dir = userRepo(example);
      const before = state(dir);
      const base = git(dir, "rev-parse", "HEAD");
      const out = mkdtempSync(join(tmpdir(), "loopsmith-out-"));
      const taskId = `repo-${example}-${Date.now().toString(36)}`;
      const run = await loopsmith(
        [
          "solve",
          "--repo",
          dir,
          goal,
          "--provider",
          "scripted",
          "--script",
          join(REPO, "examples", example, "script.json"),
          "--task-id",
          taskId,
          "--out",
          out,
        ],
        env,
        300_000,
      );
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      expect(run.stdout).toMatch(/^SCRIPTED RUN/);
      expect(run.stdout).toMatch(/baseline at [0-9a-f]{12}: failed/);
      expect(run.stdout).toMatch(/PASSED: passed after 2 iterations/);
      expect(run.stdout).toContain(`branch loopsmith/${taskId}`);
      // The branch: one commit on the base, whose message says what and why, with the task id.
      expect(git(dir, "rev-parse", `loopsmith/${taskId}~1`)).toBe(base);
      const message = git(dir, "log", "-1", "--format=%B", `loopsmith/${taskId}`);
      expect(message).toContain(`loopsmith task: ${taskId}`);
      expect(message).toContain(goal);
      const diff = git(dir, "diff", base, `loopsmith/${taskId}`);
      expect(git(dir, "diff", "--name-only", base, `loopsmith/${taskId}`).split("\n")).toContain(changed);
      if (fix) expect(diff).toContain(`+${fix}`);
      // Edits are cumulative: the second reply undid the first attempt's edit, so only the fix is committed.
      expect(diff).not.toContain(undone);
      // The export: result, report (each failure with its signature and reflection), the patch.
      expect(readdirSync(out).sort()).toEqual(["change.patch", "report.md", "result.json"]);
      expect(readFileSync(join(out, "change.patch"), "utf8")).toContain(`b/${changed}`);
      const report = readFileSync(join(out, "report.md"), "utf8");
      expect(report).toContain(goal);
      expect(report).toMatch(/signature/i);
      expect(report).toMatch(/root cause/i);
      // Nothing of the user's repository changed but the new branch.
      expect(state(dir)).toEqual(before);
      if (example !== "repo-bugfix") return;
      // The run is recorded: `show` prints it again; `replay` re-runs it from the recorded replies.
      const shown = await loopsmith(["show", taskId], env, 120_000);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain(goal);
      expect(shown.stdout).toMatch(/edit|signature/i);
      const replay = await loopsmith(["replay", taskId, "--repo", dir], env, 300_000);
      expect(replay.code, `${replay.stdout}\n${replay.stderr}`).toBe(0);
      expect(replay.stdout).toMatch(/^REPLAY of task/m);
      expect(replay.stdout).toMatch(/SAME: the replay [\w-]+ ended the way/);
      expect(state(dir)).toEqual(before);
    }, 600_000);
  },
);

describe("repo mode refuses bad input before anything starts", () => {
  it("not a repository, an unknown base, a dirty tree with --apply", async () => {
    const plain = mkdtempSync(join(tmpdir(), "loopsmith-plain-"));
    const a = await loopsmith(
      [
        "solve",
        "--repo",
        plain,
        "fix it",
        "--provider",
        "scripted",
        "--script",
        join(REPO, "examples", "repo-bugfix", "script.json"),
        "--json",
      ],
      env,
      60_000,
    );
    expect(a.code).toBe(2);
    expect(a.stdout).toMatch(/"code":"repo_invalid".*not a git repository/);
    const dir = userRepo("repo-bugfix");
    const b = await loopsmith(
      [
        "solve",
        "--repo",
        dir,
        "fix it",
        "--base",
        "no-such-ref",
        "--provider",
        "scripted",
        "--script",
        join(REPO, "examples", "repo-bugfix", "script.json"),
        "--json",
      ],
      env,
      60_000,
    );
    expect(b.code).toBe(2);
    expect(b.stdout).toMatch(/unknown --base no-such-ref/);
    const c = await loopsmith(
      [
        "solve",
        "--repo",
        dir,
        "fix it",
        "--apply",
        "--provider",
        "scripted",
        "--script",
        join(REPO, "examples", "repo-bugfix", "script.json"),
        "--json",
      ],
      env,
      60_000,
    );
    expect(c.code).toBe(2);
    expect(c.stdout).toMatch(/--apply needs a clean work tree/);
  }, 120_000);
});
