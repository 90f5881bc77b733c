/**
 * `loopsmith metrics` on a real TypeScript project that nobody here wrote: tests/fixtures/destr,
 * a snapshot of unjs/destr (MIT; its FIXTURE.md says which commit and what was left out),
 * whose tests run with vitest. One command, one stack start: the setup installs the project's
 * dependencies in the sandbox (`npm ci`, detected from its lock file; the npm registry is the
 * only network it needs), then the measuring script runs there with the network off. Every
 * metric is measured, none unavailable, and each names its tool and version: tests and coverage
 * from vitest's JUnit and its v8 provider's istanbul reports, lint from the project's own eslint,
 * type errors from its tsc, complexity and security from loopsmith's ESLint in the sandbox-node
 * image. The figures are checked against measures taken here, outside the sandbox: the test
 * count by running the same test files with this repository's vitest, the mean complexity by
 * ESLint's complexity rule run here on the same source files.
 */
import { cpSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ESLint } from "eslint";
import tseslint from "typescript-eslint";
import { describe, expect, it } from "vitest";
import { cliEnv, git } from "../fixtures/git-repo.js";
import { REPO, jsonLines, loopsmith, runNode } from "../fixtures/cli.js";

const FIXTURE = join(REPO, "tests", "fixtures", "destr");
const env = cliEnv("loopsmith-metrics-ts-");
/** A copy of the fixture in a folder of its own (a git repository when `commit`). */
function copy(commit: boolean): string {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-destr-"));
  cpSync(FIXTURE, dir, { recursive: true });
  if (commit) {
    git(dir, "init", "-q", "-b", "main");
    git(dir, "add", "-A");
    git(dir, "commit", "-q", "-m", "destr");
  }
  return dir;
}

/** The version a lock file pins for a package. */
function locked(lockFile: string, name: string): string {
  const lock = JSON.parse(readFileSync(lockFile, "utf8")) as { packages: Record<string, { version?: string }> };
  const v = lock.packages[`node_modules/${name}`]?.version;
  if (!v) throw new Error(`${lockFile} pins no ${name}`);
  return v;
}

/** The project's tests run here by this repository's vitest (its JSON reporter): how many ran and passed. */
async function testsCountedHere(): Promise<{ total: number; passed: number }> {
  const dir = copy(false);
  const out = join(dir, "vitest.json");
  const run = await runNode(
    join(REPO, "node_modules", "vitest", "vitest.mjs"),
    ["run", "--root", dir, "--reporter=json", `--outputFile=${out}`],
    {},
    120_000,
  );
  expect(run.code, run.stderr).toBe(0);
  const r = JSON.parse(readFileSync(out, "utf8")) as { numTotalTests: number; numPassedTests: number };
  return { total: r.numTotalTests, passed: r.numPassedTests };
}

/** Mean cyclomatic complexity per function of the non-test sources, by ESLint's complexity rule run here. */
async function complexityHere(dir: string, files: string[]): Promise<number> {
  const eslint = new ESLint({
    cwd: dir,
    overrideConfigFile: true,
    allowInlineConfig: false,
    overrideConfig: [
      { files: ["**/*.ts", "**/*.mts", "**/*.cts"], languageOptions: { parser: tseslint.parser } },
      { files: ["**/*.cjs"], languageOptions: { sourceType: "commonjs" } },
      { rules: { complexity: ["warn", { max: 0 }] } },
    ],
  });
  const cc = (await eslint.lintFiles(files)).flatMap((r) =>
    r.messages.flatMap((m) => {
      const k = /complexity of (\d+)/.exec(m.message);
      return m.ruleId === "complexity" && k ? [Number(k[1])] : [];
    }),
  );
  expect(cc.length).toBeGreaterThan(0);
  return cc.reduce((a, b) => a + b, 0) / cc.length;
}

type Figure = {
  status: string;
  value?: number;
  cases?: number;
  passing?: number;
  tool?: string;
  version?: string;
  reason?: string;
};

describe("loopsmith metrics on a real TypeScript project (destr, vitest)", () => {
  it("measures tests, coverage, lint, types, complexity and security in the sandbox, each with its tool", async () => {
    const repo = copy(true);
    const here = testsCountedHere();
    const run = await loopsmith(["metrics", "--repo", repo, "--json"], env, 480_000);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const [out] = jsonLines(run.stdout);
    const m = (out as { metrics: Record<string, Figure> }).metrics;
    console.log(`loopsmith metrics on destr in ${run.ms} ms: ${JSON.stringify(m)}`);
    expect(out).toMatchObject({ kind: "metrics", commit: git(repo, "rev-parse", "HEAD"), language: "typescript" });
    expect(Object.entries(m).filter(([, f]) => f.status !== "measured")).toEqual([]);

    const lock = join(FIXTURE, "package-lock.json");
    const tools = join(REPO, "deploy", "rootfs", "sandbox-node", "metrics", "package-lock.json");
    // Tests: every test vitest runs here ran there too (22 at this snapshot, some made in a loop).
    const counted = await here;
    expect(counted.total).toBeGreaterThan(0);
    expect(m.tests).toMatchObject({
      value: (100 * counted.passed) / counted.total,
      cases: counted.total,
      passing: counted.passed,
      tool: "vitest",
      version: locked(lock, "vitest"),
    });
    // Coverage: the summary's line percentage, and its lines as cases (the same count).
    expect(m.coverage).toMatchObject({ tool: "@vitest/coverage-v8", version: locked(lock, "@vitest/coverage-v8") });
    const cov = m.coverage as Required<Figure>;
    expect(cov.value).toBeGreaterThan(0);
    expect(cov.value).toBeLessThanOrEqual(100);
    expect(cov.cases).toBeGreaterThan(0);
    expect(Math.abs((100 * cov.passing) / cov.cases - cov.value)).toBeLessThan(0.01);
    // Lint and types: the project's own eslint (its eslint.config.mjs) and tsc.
    expect(m.lint).toMatchObject({ tool: "eslint", version: locked(lock, "eslint") });
    expect(m.type_errors).toMatchObject({ tool: "tsc", version: locked(lock, "typescript") });
    // Complexity and security: loopsmith's ESLint, as its lock file pins it.
    expect(m.complexity).toMatchObject({ tool: "eslint", version: locked(tools, "eslint") });
    const sources = git(repo, "ls-files")
      .split("\n")
      .filter((f) => /\.[cm]?[jt]s$/.test(f) && !f.startsWith("test/"));
    expect(m.complexity?.value).toBeCloseTo(await complexityHere(repo, sources), 6);
    expect(m.security).toMatchObject({
      tool: "eslint-plugin-security",
      version: locked(tools, "eslint-plugin-security"),
    });
    expect(m.security?.cases).toBe(m.security?.value);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });
});
