/**
 * The README's quick start, run as it is written, on this machine with no key: the demo (the
 * first of "the two commands"; the second, `npm test`, is what `.ci/run` runs), then the
 * blocks after `<!-- quick-start -->` (a repo-mode fix on a copy of examples/repo-bugfix) and
 * `<!-- quick-start-improve -->` (`loopsmith improve` on a clone of this checkout, scripted),
 * each line through bash from the repository root. The one change to the lines: `/tmp/` is a
 * fresh temporary folder, so runs do not meet each other's leftovers.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared/contracts";
import { REPO, runBash, type CliRun } from "../fixtures/cli.js";
import { shBlock } from "../fixtures/doc-blocks.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-quickstart-data-"));
const tmp = mkdtempSync(join(tmpdir(), "loopsmith-quickstart-"));
// No key, no NATS, no database: what a fresh machine has.
const env: NodeJS.ProcessEnv = {
  ...process.env,
  LOOPSMITH_DATA_DIR: dataDir,
  NATS_URL: "",
  DATABASE_URL: "",
  ANTHROPIC_API_KEY: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "info",
};

/** A README line as it runs here: `/tmp/` moved into this run's own folder. */
const here = (line: string): string => line.replaceAll("/tmp/", `${tmp}/`);
/** A line without its trailing `# comment`. */
const command = (line: string): string => line.replace(/\s+#.*$/, "");

const twoCommands = shBlock("README.md", "two-commands").map(command);
const quickStart = shBlock("README.md", "quick-start");
const improveBlock = shBlock("README.md", "quick-start-improve");
const outcomes = new Map<string, CliRun>();

/** What a line printed, found by a pattern over the README's lines. */
function outcome(pattern: RegExp, lines: string[]): CliRun {
  const line = lines.find((l) => pattern.test(l));
  if (line === undefined) throw new Error(`no README line matches ${String(pattern)}`);
  const result = outcomes.get(line);
  if (!result) throw new Error(`not run: ${line}`);
  return result;
}

describe("the README's quick start, as written, without a key", () => {
  beforeAll(async () => {
    for (const line of [twoCommands[0] as string, ...quickStart, ...improveBlock]) {
      const result = await runBash(here(line), env, 600_000);
      outcomes.set(line, result);
      if (result.code !== 0)
        throw new Error(
          `README line failed (exit ${result.code}): ${line}\n${result.stdout.slice(-3000)}\n${result.stderr.slice(-3000)}`,
        );
    }
  }, 1_500_000);

  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("names the demo and the test command CI runs", () => {
    expect(twoCommands).toEqual(["npm run demo", "npm test"]);
    const ci = readFileSync(join(REPO, ".ci", "run"), "utf8")
      .trim()
      .split("\n");
    expect(ci.at(-1)).toBe(twoCommands[1]);
  });

  it("the demo solves the bundled task, scripted, after one failed iteration", () => {
    const demo = outcome(/^npm run demo$/, twoCommands);
    // npm prints the script's name first; the run's own first line says it is scripted.
    expect(demo.stdout.split("\n").find((l) => l !== "" && !l.startsWith(">"))).toMatch(/^SCRIPTED RUN/);
    expect(demo.stdout).toMatch(/iteration 1: failed/);
    expect(demo.stdout).toMatch(/PASSED: passed after 2 iterations/);
  });

  it("fixes the copied repository on a new branch, with its report and patch", () => {
    const solve = outcome(/loopsmith solve --repo/, quickStart);
    expect(solve.stdout.split("\n")[0]).toMatch(/^SCRIPTED RUN/);
    expect(solve.stdout).toMatch(/PASSED/);
    expect(solve.stdout).toContain("loopsmith/inventory-fix");
    const log = outcome(/^git -C .* loopsmith\/inventory-fix$/, quickStart);
    expect(log.stdout).toMatch(/^commit [0-9a-f]{40}/);
    expect(log.stdout).toMatch(/\| \d+ [+-]/);
    const report = outcome(/report\.md$/, quickStart);
    expect(report.stdout).toContain("test_bulk_discount_starts_at_threshold");
    expect(existsSync(join(tmp, "inventory-run", "change.patch"))).toBe(true);
    // The user's branch, commit and work tree are as they were: only loopsmith/* was added.
    const git = (...args: string[]): string =>
      execFileSync("git", ["-C", join(tmp, "inventory"), ...args], { encoding: "utf8" }).trim();
    const current = git("rev-parse", "--abbrev-ref", "HEAD");
    expect(git("branch", "--format=%(refname:short)").split("\n").sort()).toEqual(
      [current, "loopsmith/inventory-fix"].sort(),
    );
    expect(git("log", "-1", "--format=%s", "HEAD")).toBe("initial");
    expect(git("status", "--porcelain")).toBe("");
  });

  it("shows the failure memory kept, with its signature and fix", () => {
    const failures = outcome(/loopsmith failures --task inventory-fix/, quickStart);
    expect(failures.stdout).toMatch(/signature: \S+/);
    expect(failures.stdout).toMatch(/fix: \S+/);
  });

  it("improve accepts generation 1, rejects 2 for a regression and 3 as protected", () => {
    const improve = outcome(/loopsmith improve/, improveBlock);
    expect(improve.stdout.split("\n")[0]).toMatch(/^SCRIPTED RUN/);
    const verdicts = [1, 2, 3].map((n) => {
      const r = GenerationReport.parse(
        JSON.parse(readFileSync(join(tmp, "self-demo", "reports", `gen-${n}.json`), "utf8")),
      );
      return [r.decision.verdict, r.decision.reason];
    });
    expect(verdicts).toEqual([
      ["accepted", "accepted"],
      ["rejected", "regression"],
      ["rejected", "protected"],
    ]);
    const report = outcome(/loopsmith report self-demo/, improveBlock);
    expect(report.stdout).toMatch(/accepted\s+accepted/);
    expect(report.stdout).toMatch(/rejected\s+regression/);
    expect(report.stdout).toMatch(/rejected\s+protected/);
  });
});
