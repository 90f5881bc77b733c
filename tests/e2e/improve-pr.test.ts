/**
 * `loopsmith improve` through the CLI, one generation (the real fix of the fixture):
 * `--pr github` checks the token against the GitHub API before anything runs (a 401 stops the
 * command at once), then pushes the accepted generation's branch to the remote (a local bare
 * repository here) and opens a pull request on a local fake GitHub API server that records
 * every request; and a benchmark that writes its own JUnit file (`--bench-junit`).
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, loopsmith } from "../fixtures/cli.js";
import { startFakeGitHub, type FakeAnswer, type FakeGitHub, type RecordedRequest } from "../fixtures/fake-github.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-improve-pr-"));
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
const git = (dir: string, ...args: string[]): string =>
  execFileSync("git", ["-C", dir, ...args], { env: gitEnv, encoding: "utf8" }).trim();

let github: FakeGitHub;
let api = "";
let recorded: RecordedRequest[] = [];

beforeAll(async () => {
  github = await startFakeGitHub(({ method, route, auth }): FakeAnswer => {
    if (auth !== "token good-token")
      return {
        status: 401,
        data: { message: "Bad credentials", documentation_url: "https://docs.github.com/rest", status: "401" },
      };
    if (method === "GET" && route === "/repos/acme/textkit")
      return { status: 200, data: { name: "textkit", full_name: "acme/textkit", default_branch: "main" } };
    if (method === "POST" && route === "/repos/acme/textkit/pulls")
      return { status: 201, data: { number: 7, html_url: "https://github.example/acme/textkit/pull/7" } };
    return { status: 404, data: { message: "Not Found" } };
  });
  api = github.url;
  recorded = github.recorded;
});
afterAll(() => github.close());

function repoWithRemote(): { repo: string; remote: string } {
  const repo = mkdtempSync(join(tmpdir(), "loopsmith-pr-repo-"));
  const remote = mkdtempSync(join(tmpdir(), "loopsmith-pr-remote-"));
  cpSync(join(REPO, "tests", "fixtures", "improve-repo"), repo, { recursive: true });
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "initial");
  execFileSync("git", ["init", "-q", "--bare", remote]);
  git(repo, "remote", "add", "origin", remote);
  git(repo, "push", "-q", "origin", "main");
  return { repo, remote };
}

const args = (repo: string, runId: string) => [
  "improve",
  "--repo",
  repo,
  "--run-id",
  runId,
  "--generations",
  "1",
  "--check",
  "python3 -m pytest -q",
  "--bench",
  "python3 bench/run.py",
  "--setup-cmd",
  "",
  "--provider",
  "scripted",
  "--script",
  join(REPO, "tests", "fixtures", "improve-fix-script.json"),
  "--pr",
  "github",
  "--github-repo",
  "acme/textkit",
];

describe("loopsmith improve: --pr github (fake GitHub API, local remote) and a JUnit benchmark", () => {
  it("stops before anything runs when GitHub refuses the token", async () => {
    const { repo } = repoWithRemote();
    const run = await loopsmith(
      args(repo, "pr-refused"),
      { ...env, GITHUB_TOKEN: "bad-token", GITHUB_API_URL: api },
      60_000,
    );
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toMatch(/GitHub refused the token \(401\)/);
    expect(run.stdout).not.toMatch(/submitted/);
    expect(git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/loopsmith")).toBe("");
  });

  it("pushes the accepted generation's branch and opens a pull request with its report", async () => {
    const { repo, remote } = repoWithRemote();
    recorded.length = 0;
    const run = await loopsmith(
      args(repo, "pr-run"),
      { ...env, GITHUB_TOKEN: "good-token", GITHUB_API_URL: api },
      600_000,
    );
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    // The branch is on the remote, at the commit made locally.
    expect(git(remote, "rev-parse", "loopsmith/improve/pr-run-gen-1")).toBe(
      git(repo, "rev-parse", "loopsmith/improve/pr-run-gen-1"),
    );
    const pulls = recorded.filter((r) => r.method === "POST" && r.path === "/repos/acme/textkit/pulls");
    expect(pulls).toHaveLength(1);
    expect(pulls[0]?.auth).toBe("token good-token");
    expect(pulls[0]?.body).toMatchObject({
      head: "loopsmith/improve/pr-run-gen-1",
      base: "main",
      title: expect.stringContaining("Transliterate accented letters"),
    });
    expect(String(pulls[0]?.body?.body)).toMatch(/McNemar/);
    expect(String(pulls[0]?.body?.body)).toMatch(/scripted/i);
    // The access check came first.
    expect(recorded[0]).toMatchObject({ method: "GET", path: "/repos/acme/textkit" });
  });

  it("reads a benchmark's own JUnit file (--bench-format junit --bench-junit) and decides on its cases", async () => {
    const { repo } = repoWithRemote();
    const out = mkdtempSync(join(tmpdir(), "loopsmith-junit-out-"));
    const junitArgs = args(repo, "junit-run")
      .slice(0, -4)
      .map((a) => (a === "python3 bench/run.py" ? "python3 bench/junit.py" : a));
    const run = await loopsmith(
      [...junitArgs, "--bench-format", "junit", "--bench-junit", "bench-out/junit.xml", "--out", out],
      env,
      600_000,
    );
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const report = JSON.parse(readFileSync(join(out, "reports", "gen-1.json"), "utf8")) as {
      decision: { reason: string };
      statistic: { fixed: number; broken: number };
      bench: { format: string; cases: Array<{ case: string }> };
    };
    expect(report.decision.reason).toBe("accepted");
    // Every accent-* case of the fixture's benchmark fails before the fix and passes after it.
    const accented = readFileSync(join(REPO, "tests/fixtures/improve-repo/bench/cases.json"), "utf8").match(
      /"case": "accent-/g,
    );
    expect(accented?.length).toBeGreaterThan(8);
    expect(report.statistic).toMatchObject({ fixed: accented?.length, broken: 0 });
    expect(report.bench.format).toBe("junit");
    expect(report.bench.cases.map((c) => c.case)).toContain("slugs::accent-cafe");
  });
});
