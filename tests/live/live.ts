/**
 * `npm run test:live`: the live check with a real model. Never part of
 * `npm test` (vitest's projects leave tests/live out) and run by .ci/run only when a key is set.
 *
 * With ANTHROPIC_API_KEY or OPENAI_API_KEY set it runs, through the real CLI and stack:
 * 1. one `loopsmith improve` generation on tests/fixtures/live-target (a missing type hint, a
 *    function with no docstring, a missing `__init__.py`, a failing test) and checks that the
 *    generation completes, its report and the run's summary load back (`loopsmith report`
 *    too), the generation's branch holds the change, the benchmark scored every case before
 *    (parent) and after (candidate), and the decision's reason is a valid one;
 * 2. one SWE-bench instance of examples/swe-bench through the agent, graded.
 * It prints what each part cost (USD and tokens, from the run's own records) and exits 1 on the
 * first failed check. Without a key it prints one line saying it is skipped and why, and exits 0.
 *
 * The provider is the one the key names (anthropic before openai-compatible); ANTHROPIC_BASE_URL
 * or OPENAI_BASE_URL and LOOPSMITH_MODEL are passed through as set.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DecisionReason, ImproveSummary } from "@loopsmith/shared/contracts";
import { readReports } from "../../cli/src/improve/reports.js";
import { REPO, jsonLines, loopsmith } from "../fixtures/cli.js";

const provider = process.env.ANTHROPIC_API_KEY
  ? "anthropic"
  : process.env.OPENAI_API_KEY
    ? "openai-compatible"
    : undefined;

if (!provider) {
  process.stdout.write(
    "LIVE TEST SKIPPED: neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set, so no real model can be called (set one to run one improve generation and one SWE-bench instance; it costs money)\n",
  );
  process.exit(0);
}

const work = mkdtempSync(join(tmpdir(), "loopsmith-live-"));
const env = { LOOPSMITH_DATA_DIR: join(work, "data"), NATS_URL: "", DATABASE_URL: "", LOOPSMITH_PROVIDER: provider };
const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: "Live",
  GIT_AUTHOR_EMAIL: "live@example.com",
  GIT_COMMITTER_NAME: "Live",
  GIT_COMMITTER_EMAIL: "live@example.com",
};
const git = (dir: string, ...args: string[]): string =>
  execFileSync("git", ["-C", dir, ...args], { env: gitEnv, encoding: "utf8" }).trim();
const say = (line: string): boolean => process.stdout.write(`live: ${line}\n`);

/** Part 1: one improve generation on the target with intentional issues. */
async function improveOnce(): Promise<{ usd: number; tokens: number }> {
  const repo = join(work, "target");
  cpSync(join(REPO, "tests", "fixtures", "live-target"), repo, { recursive: true });
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "the target with four intentional issues");
  const base = git(repo, "rev-parse", "HEAD");
  const runId = `live-${Date.now().toString(36)}`;
  const out = join(work, "improve");
  // Four failing cases of eleven: --alpha 0.2 with no held-out set lets a fix of three of them
  // be significant at one generation (0.5^3 = 0.125 < 0.2); the default 0.05 could never accept.
  const args = [
    "improve",
    "--repo",
    repo,
    "--goal",
    "fix the package's issues: the failing test, the missing type hint, the missing docstring and the missing __init__.py",
    "--check",
    "python3 -m pytest -q tests",
    "--bench",
    "python3 bench/run.py",
    "--setup-cmd",
    "",
    "--generations",
    "1",
    "--alpha",
    "0.2",
    "--confirmation-fraction",
    "0",
    "--calibration-runs",
    "1",
    "--run-id",
    runId,
    "--out",
    out,
  ];
  say(`loopsmith ${args.join(" ")}`);
  const run = await loopsmith(args, env, 1_800_000);
  process.stdout.write(run.stdout);
  assert.equal(run.code, 0, `improve exited ${run.code}: ${run.stderr.slice(-2000)}`);
  const summary = ImproveSummary.parse(JSON.parse(readFileSync(join(out, "summary.json"), "utf8")));
  assert.equal(summary.stopReason, "completed", summary.message);
  assert.equal(summary.generations, 1);
  const [report] = await readReports(out);
  assert.ok(report, "reports/gen-1.json is missing");
  assert.equal(report.generation, 1);
  assert.ok(DecisionReason.options.includes(report.decision.reason), `unknown reason ${report.decision.reason}`);
  assert.notEqual(report.decision.reason, "error", `the generation ended in an error: ${report.decision.message}`);
  assert.ok(report.decision.message.length > 0, "the decision has no message");
  // Scores before (parent) and after (candidate), every case.
  assert.ok(report.bench, `no benchmark ran (${report.decision.reason}: ${report.decision.message})`);
  assert.equal(report.bench.cases.length, 11);
  for (const c of report.bench.cases) {
    assert.ok(c.parent.runs >= 1 && c.candidate.runs >= 1, `case ${c.case} was not run on both sides`);
  }
  // The git history holds the change, on the generation's own branch from the base.
  assert.ok(report.change, "the generation made no change");
  const branch = `loopsmith/improve/${runId}-gen-1`;
  assert.equal(git(repo, "rev-parse", `${branch}^`), base);
  const changed = git(repo, "diff", "--name-only", base, branch).split("\n").filter(Boolean).sort();
  assert.deepEqual(changed, [...report.change.changed, ...report.change.deleted].sort());
  // The report loads back through the CLI too.
  const table = await loopsmith(["report", runId, "--dir", out], env, 60_000);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, new RegExp(`^\\s*1\\s+${report.decision.verdict}\\s+${report.decision.reason}\\s`, "m"));
  say(`improve: generation 1 ${report.decision.verdict} (${report.decision.reason}): ${report.decision.message}`);
  return { usd: summary.usage.costUsd, tokens: summary.usage.inputTokens + summary.usage.outputTokens };
}

/** Part 2: one SWE-bench instance through the agent, graded. */
async function sweBenchOnce(): Promise<{ usd: number; tokens: number }> {
  const ex = join(REPO, "examples", "swe-bench");
  const id = String(jsonLines(readFileSync(join(ex, "instances.jsonl"), "utf8"))[0]?.instance_id);
  const out = join(work, "swe-bench");
  const args = [
    "bench",
    "--format",
    "swe-bench",
    "--dataset",
    join(ex, "instances.jsonl"),
    "--repos",
    join(ex, "repos"),
    "--env",
    join(ex, "env.json"),
    "--ids",
    id,
    "--out",
    out,
    "--json",
  ];
  say(`loopsmith ${args.join(" ")}`);
  const run = await loopsmith(args, env, 1_800_000);
  assert.equal(run.code, 0, `bench exited ${run.code}: ${run.stderr.slice(-2000)}`);
  const results = jsonLines(readFileSync(join(out, "results.jsonl"), "utf8"));
  assert.equal(results.length, 1);
  const r = results[0] as {
    caseId: string;
    costUsd?: number;
    tokensIn?: number;
    tokensOut?: number;
    swe?: { status: string };
    error?: string;
  };
  assert.equal(r.caseId, id);
  // Graded: resolved, unresolved or a patch that does not apply is the model's result; an
  // instance that could not be graded (status error) is a failure of the check.
  assert.ok(
    r.swe && ["resolved", "unresolved", "patch_failed"].includes(r.swe.status),
    `${id}: ${JSON.stringify(r.swe ?? r.error)}`,
  );
  say(`swe-bench: ${id} ${r.swe.status}`);
  return { usd: r.costUsd ?? 0, tokens: (r.tokensIn ?? 0) + (r.tokensOut ?? 0) };
}

let cost = { improve: { usd: 0, tokens: 0 }, swe: { usd: 0, tokens: 0 } };
try {
  say(`provider ${provider}; working in ${work}`);
  cost = { ...cost, improve: await improveOnce() };
  cost = { ...cost, swe: await sweBenchOnce() };
} catch (err) {
  process.stderr.write(`live: FAILED: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  say(
    `cost: improve $${cost.improve.usd.toFixed(4)} (${cost.improve.tokens} tokens), swe-bench $${cost.swe.usd.toFixed(4)} (${cost.swe.tokens} tokens), total $${(cost.improve.usd + cost.swe.usd).toFixed(4)}`,
  );
  if (!process.exitCode) rmSync(work, { recursive: true, force: true });
}
