/**
 * `loopsmith improve` end to end on the scripted provider, through NATS, the five services,
 * the object store and the Docker sandbox, on tests/fixtures/improve-repo (a Python slugify
 * with a benchmark of 40 titles, 20 with accents that fail). Six generations: a no-op, a coin
 * flip per case, an edit of the benchmark, a skipped test, an edited test, and a real fix.
 * Only the real fix may be accepted; each gaming attempt is rejected with its reason code.
 * Then: the reports, the branches, the user's repository untouched, `report`, `dashboard`,
 * a resubmitted run id that is not run twice, and `--promote`; a dry run that measures its
 * parent, and `loopsmith metrics` measuring the fixture's quality metrics in the sandbox.
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared/contracts";
import { REPO, jsonLines, loopsmith } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-improve-e2e-"));
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

function fixtureRepo(): string {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-improve-repo-"));
  cpSync(join(REPO, "tests", "fixtures", "improve-repo"), dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "initial");
  return dir;
}

const common = [
  "--check",
  "python3 -m pytest -q",
  "--bench",
  "python3 bench/run.py",
  "--setup-cmd",
  "",
  "--provider",
  "scripted",
  "--script",
  join(REPO, "tests", "fixtures", "improve-script.json"),
];

describe("loopsmith improve (scripted, real sandbox)", () => {
  const repo = fixtureRepo();
  const base = git(repo, "rev-parse", "HEAD");
  const runId = `fixture-${Date.now().toString(36)}`;
  const out = mkdtempSync(join(tmpdir(), "loopsmith-improve-out-"));

  it("rejects every gaming attempt with its reason code and accepts only the real fix", async () => {
    const run = await loopsmith(
      ["improve", "--repo", repo, "--generations", "6", "--repeats", "2", "--run-id", runId, "--out", out, ...common],
      env,
      900_000,
    );
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/^SCRIPTED RUN/);
    const files = readdirSync(join(out, "reports")).sort();
    expect(files).toEqual(["gen-1.json", "gen-2.json", "gen-3.json", "gen-4.json", "gen-5.json", "gen-6.json"]);
    const reports = files.map((f) => GenerationReport.parse(JSON.parse(readFileSync(join(out, "reports", f), "utf8"))));
    expect(reports.map((r) => [r.generation, r.decision.verdict, r.decision.reason])).toEqual([
      [1, "rejected", "no_improvement"],
      [2, "rejected", "regression"],
      [3, "rejected", "protected"],
      [4, "rejected", "tests_skipped"],
      [5, "rejected", "protected"],
      [6, "accepted", "accepted"],
    ]);
    const [noop, coin, bench, , , fix] = reports as [
      GenerationReport,
      GenerationReport,
      GenerationReport,
      GenerationReport,
      GenerationReport,
      GenerationReport,
    ];
    // The no-op: measured, nothing moved.
    expect(noop.statistic).toMatchObject({ test: "mcnemar_exact", fixed: 0, broken: 0, pValue: 1 });
    // The coin flip broke cases that passed on the parent.
    expect(coin.statistic?.broken).toBeGreaterThan(0);
    // Protected: rejected before any benchmark ran.
    expect(bench.bench).toBeUndefined();
    expect(bench.decision.message).toContain("bench/cases.json");
    // The fix: all 20 accented cases fixed, none broken. The selection set (the cases shown,
    // 70 % of each stratum) decides by a one-sided exact sign test, p = 0.5^fixed; the held-out
    // confirmation set confirms it on its own parent-failing cases (issue #36).
    expect(fix.statistic).toMatchObject({ test: "mcnemar_exact", fixed: 20, broken: 0 });
    const { selection, confirmation } = fix.statistic ?? {};
    expect(selection).toMatchObject({ test: "sign_exact", fixed: selection?.parentFailing, broken: 0, passed: true });
    expect(selection?.pValue).toBeCloseTo(0.5 ** (selection?.fixed ?? 0), 10);
    expect(confirmation).toMatchObject({ fixed: confirmation?.parentFailing, broken: 0, passed: true });
    expect((selection?.fixed ?? 0) + (confirmation?.fixed ?? 0)).toBe(20);
    expect(fix.bench?.cases.filter((c) => c.candidate.passes === 2)).toHaveLength(40);
    expect(fix.candidate).toMatch(/^[0-9a-f]{64}$/);
    expect(fix.check?.parent).toMatchObject({ total: 4, passed: 4 });

    // Branches: one per generation with a change; the run's branch at the accepted fix.
    const runBranch = `loopsmith/improve/${runId}`;
    expect(git(repo, "rev-parse", `${runBranch}^`)).toBe(base);
    expect(git(repo, "show", `${runBranch}:textkit/slug.py`)).toContain("unicodedata.normalize");
    expect(git(repo, "rev-parse", `loopsmith/improve/${runId}-gen-3`)).toMatch(/^[0-9a-f]{40}$/);
    expect(git(repo, "show", `loopsmith/improve/${runId}-gen-3:bench/cases.json`)).toContain("caf-au-lait");
    // The user's branch, index and work tree are as they were.
    expect(git(repo, "rev-parse", "main")).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(existsSync(join(out, "summary.json"))).toBe(true);
    expect(readFileSync(join(out, "dashboard.html"), "utf8")).toContain("circle");
  });

  it("prints the table, writes the dashboard, follows a resubmitted run instead of running it again, and promotes on request", async () => {
    const table = await loopsmith(["report", runId, "--dir", out], env, 60_000);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/tests_skipped/);
    expect(table.stdout.split("\n").filter((l) => /^\s*[1-6]\s/.test(l))).toHaveLength(6);
    const dash = await loopsmith(["dashboard", runId, "--dir", out, "--out", join(out, "d.html")], env, 60_000);
    expect(dash.code, dash.stderr).toBe(0);
    expect(readFileSync(join(out, "d.html"), "utf8")).toContain(runId);

    // The same run id again: it finished, so nothing runs twice (no generation event, no stack).
    const again = await loopsmith(
      [
        "improve",
        "--repo",
        repo,
        "--generations",
        "6",
        "--repeats",
        "2",
        "--run-id",
        runId,
        "--out",
        out,
        "--promote",
        "main",
        "--json",
        ...common,
      ],
      env,
      300_000,
    );
    expect(again.code, `${again.stdout}\n${again.stderr}`).toBe(0);
    const lines = jsonLines(again.stdout);
    expect(lines.some((l) => l.kind === "submitted" && l.duplicate === true)).toBe(true);
    expect(lines.filter((l) => l.kind === "generation")).toHaveLength(0);
    const summary = lines.find((l) => l.kind === "summary");
    expect(summary).toMatchObject({ stopReason: "completed", accepted: [6], promoted: "main" });
    expect(git(repo, "rev-parse", "main")).toBe(git(repo, "rev-parse", `loopsmith/improve/${runId}`));
    // main is checked out: its work tree follows, nothing shows as changed.
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(readFileSync(join(repo, "textkit", "slug.py"), "utf8")).toContain("unicodedata.normalize");
  });

  it("--dry-run plans and implements one generation, shows the evidence it would need, and writes no branch", async () => {
    const dry = mkdtempSync(join(tmpdir(), "loopsmith-improve-dry-"));
    const refs = git(repo, "for-each-ref", "--format=%(refname)");
    const run = await loopsmith(
      // From the base: the run above promoted its fix onto main.
      [
        "improve",
        "--repo",
        repo,
        "--base",
        base,
        "--dry-run",
        "--run-id",
        `${runId}-dry`,
        "--out",
        dry,
        "--json",
        ...common,
      ],
      env,
      300_000,
    );
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const report = GenerationReport.parse(JSON.parse(readFileSync(join(dry, "reports", "gen-1.json"), "utf8")));
    expect(report.decision).toMatchObject({ verdict: "dry_run", reason: "dry_run" });
    expect(report.decision.message).toMatch(/at least 6 case\(s\) fixed/);
    expect(report.change?.changed).toEqual(["textkit/slug.py"]);
    expect(report.bench).toBeUndefined();
    // It measured the parent first: the benchmark once, 20 of its 40 titles (the accented ones fail).
    const lines = jsonLines(run.stdout);
    const summary = lines.find((l) => l.kind === "summary") as { parent?: { tree: string; bench?: unknown } };
    expect(summary.parent?.tree).toBe(base);
    expect(summary.parent?.bench).toMatchObject({ status: "measured", cases: 40, passed: 20, passRate: 50 });
    expect(
      lines.some((l) => l.kind === "step" && /the parent [0-9a-f]{12}: benchmark: 20 of 40/.test(String(l.message))),
    ).toBe(true);
    expect(git(repo, "for-each-ref", "--format=%(refname)")).toBe(refs);
  });

  it("metrics measures the quality metrics in the sandbox and changes nothing", async () => {
    const refs = git(repo, "for-each-ref", "--format=%(refname)");
    const run = await loopsmith(["metrics", "--repo", repo, "--base", base, "--setup-cmd", "", "--json"], env, 300_000);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const [out, ...rest] = jsonLines(run.stdout);
    expect(rest).toEqual([]);
    type Figure = { status: string; value?: number; cases?: number; passing?: number; tool?: string; version?: string };
    const m = (out as { metrics: Record<string, Figure> }).metrics;
    console.log(`loopsmith metrics on the fixture in ${run.ms} ms: ${JSON.stringify(m)}`);
    expect(out).toMatchObject({ kind: "metrics", commit: base, language: "python" });
    // The fixture's own tests, counted from its source: every one ran, and passes.
    const tests = readdirSync(join(repo, "tests"))
      .filter((f) => f.startsWith("test_"))
      .flatMap((f) => readFileSync(join(repo, "tests", f), "utf8").match(/^def test_/gm) ?? []);
    expect(tests.length).toBeGreaterThan(0);
    expect(m.tests).toMatchObject({
      status: "measured",
      value: 100,
      cases: tests.length,
      passing: tests.length,
      tool: "pytest",
    });
    expect(m.tests?.version).toMatch(/^\d+\.\d+/);
    expect(m.coverage?.status).toBe("measured");
    expect(m.coverage?.value).toBeGreaterThan(0);
    expect(m.coverage?.value).toBeLessThanOrEqual(100);
    expect(m.coverage?.tool).toBe("coverage");
    // Static measures of a small clean module: no lint finding, no type error, one documented function.
    expect(m.lint).toMatchObject({ status: "measured", value: 0, tool: "pyflakes" });
    expect(m.type_errors).toMatchObject({ status: "measured", value: 0, tool: "mypy" });
    expect(m.doc_coverage).toMatchObject({ status: "measured", value: 100, cases: 1, passing: 1 });
    expect(Object.keys(m)).toEqual([
      "tests",
      "coverage",
      "lint",
      "type_errors",
      "complexity",
      "doc_coverage",
      "imports",
      "security",
    ]);
    expect(git(repo, "for-each-ref", "--format=%(refname)")).toBe(refs);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("refuses bad input before anything starts", async () => {
    // With no --bench the quality metrics judge the run (issue #36 part 3); an unknown one is bad input.
    const config = join(mkdtempSync(join(tmpdir(), "loopsmith-improve-config-")), "config.json");
    writeFileSync(config, JSON.stringify({ improve: { benchmarks: { enabled: ["speed"] } } }));
    const badMetric = await loopsmith(
      [
        "improve",
        "--repo",
        repo,
        "--config",
        config,
        "--provider",
        "scripted",
        "--script",
        join(REPO, "tests", "fixtures", "improve-script.json"),
      ],
      env,
      60_000,
    );
    expect(badMetric.code).toBe(2);
    expect(badMetric.stderr).toMatch(/benchmarks\.enabled/);
    const badFlag = await loopsmith(["metrics", "--repo", repo, "--metrics", "tests,speed"], env, 60_000);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/"speed" is not a metric/);
    const notRepo = await loopsmith(["improve", "--repo", tmpdir(), ...common], env, 60_000);
    expect(notRepo.code).toBe(2);
    git(repo, "branch", "loopsmith/improve/leftover-gen-1", "main");
    const leftover = await loopsmith(["improve", "--repo", repo, "--run-id", "leftover", ...common], env, 60_000);
    expect(leftover.code).toBe(2);
    expect(leftover.stderr).toMatch(/left branches .*loopsmith\/improve\/leftover-gen-1/);
    const noToken = await loopsmith(
      ["improve", "--repo", repo, "--pr", "github", "--github-repo", "acme/widgets", ...common],
      { ...env, GITHUB_TOKEN: "", GH_TOKEN: "" },
      60_000,
    );
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/GITHUB_TOKEN/);
  });
});
