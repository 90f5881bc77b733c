/**
 * The measuring scripts run by this machine's own `python3` and `node` on small trees: the
 * metrics that need only the language's standard library (documentation coverage, the import
 * check; for node also `node --test` and its coverage), the result line, and the script
 * deleting itself. The third-party tools (pytest, coverage, pyflakes, mypy, …) are the sandbox
 * image's: tests/architect/improve-metrics.test.ts runs them there.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { QualityBenchmarks, type ExecutionResult } from "@loopsmith/shared/contracts";
import { METRICS_TOOLS } from "./measure-node.js";
import { measureCommand, readMeasurement } from "./metrics.js";

const FIXTURE = join(import.meta.dirname, "..", "..", "..", "..", "tests", "fixtures", "quality-repo");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Runs the script of `language` in `root` as the sandbox would (`sh -c`), and reads its line. */
function measure(root: string, language: "python" | "javascript" | "typescript", enabled: string[]) {
  const b = QualityBenchmarks.parse({ enabled });
  const { file, shell } = measureCommand(language, b);
  writeFileSync(join(root, file.path), file.content);
  const env = { ...process.env, NODE_OPTIONS: "" };
  const stdout = execFileSync("sh", ["-c", shell], { cwd: root, encoding: "utf8", env, timeout: 60_000 });
  expect(existsSync(join(root, file.path))).toBe(false); // it removed itself first
  const result: ExecutionResult = {
    status: "passed",
    exitCode: 0,
    durationMs: 1,
    stdout,
    stderr: "",
    truncated: false,
    tests: [],
  };
  return readMeasurement(result, b.enabled);
}

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-measure-test-"));
  dirs.push(root);
  for (const [p, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), content);
    if (p.startsWith("node_modules/.bin/")) chmodSync(join(root, p), 0o755);
  }
  return root;
}

/**
 * A stand-in for a test runner's executable (node_modules/.bin/NAME): `body` runs with `fs` and
 * `path`, and writes the reports the real runner writes, in the real runner's formats.
 */
function fakeRunner(body: string): string {
  return `#!/usr/bin/env node\nconst fs = require("node:fs");\nconst path = require("node:path");\n${body}\n`;
}

describe("the Python measuring script", () => {
  it("counts documented public definitions and importable modules of the fixture", () => {
    const root = tree({});
    cpSync(FIXTURE, root, { recursive: true });
    writeFileSync(join(root, "qualkit", "broken.py"), "import not_a_module_anywhere\n\ndef open_it():\n    pass\n");
    const m = measure(root, "python", ["doc_coverage", "imports"]);
    expect(m.doc_coverage).toMatchObject({
      status: "ok",
      value: 75,
      cases: {
        "qualkit/cli.py:sign#1": true,
        "qualkit/core.py:clamp#1": true,
        "qualkit/core.py:parse_level#1": true,
        "qualkit/broken.py:open_it#1": false,
      },
    });
    expect(m.imports).toMatchObject({
      status: "ok",
      cases: { qualkit: true, "qualkit.cli": true, "qualkit.core": true, "qualkit.broken": false },
    });
    expect(m.doc_coverage?.tool).toMatch(/^ast \(python 3\.\d+\)$/);
  });
});

describe("the Node.js measuring script", () => {
  it("reads node --test's JUnit and lcov, the TSDoc share and the import check", () => {
    const root = tree({
      "package.json": JSON.stringify({ name: "m", type: "module", scripts: { test: "node --test" } }),
      "src/math.js":
        "/** Adds. */\nexport function add(a, b) {\n  return a + b;\n}\n\nexport function sub(a, b) {\n  if (a < 0) return -1;\n  return a - b;\n}\n",
      "src/broken.js": 'import "./missing.js";\nexport const x = 1;\n',
      "test/math.test.js":
        'import { test } from "node:test";\nimport assert from "node:assert";\nimport { add } from "../src/math.js";\ntest("adds", () => assert.equal(add(1, 2), 3));\ntest("fails", () => assert.equal(add(1, 1), 3));\n',
    });
    const m = measure(root, "javascript", ["tests", "coverage", "doc_coverage", "imports", "complexity", "lint"]);
    expect(m.tests).toMatchObject({ status: "ok", value: 50, cases: { "test::adds#1": true, "test::fails#1": false } });
    expect(m.coverage).toMatchObject({
      status: "ok",
      cases: { "src/math.js:return a + b;#1": true, "src/math.js:return a - b;#1": false },
    });
    expect(m.doc_coverage).toMatchObject({
      status: "ok",
      cases: { "src/math.js:add#1": true, "src/math.js:sub#1": false, "src/broken.js:x#1": false },
    });
    expect(m.imports).toMatchObject({
      status: "ok",
      value: 50,
      cases: { "src/math.js": true, "src/broken.js": false },
    });
    // Complexity, and lint without the repository's eslint, are loopsmith's ESLint: the
    // sandbox-node image's, absent on this machine (tests/architect/improve-metrics-node.test.ts
    // runs it there).
    const missing = {
      status: "unavailable",
      reason: `loopsmith's ESLint is not in this sandbox image (${METRICS_TOOLS}): rebuild the sandbox-node image (deploy/build-images.sh node)`,
    };
    expect(m.complexity).toEqual(missing);
    expect(m.lint).toEqual(missing);
  });

  it("runs vitest when the test script reaches it through npm run, and reads its JUnit and istanbul reports", () => {
    const root = tree({
      "package.json": JSON.stringify({
        name: "v",
        scripts: { test: "npm run lint && npm run unit -- --coverage", lint: "true", unit: "vitest run" },
      }),
      "src/math.ts":
        "export function add(a: number, b: number): number {\n  return a + b;\n}\nexport const sub = (a: number, b: number) =>\n  a - b;\n",
      "node_modules/vitest/package.json": JSON.stringify({ name: "vitest", version: "3.2.7" }),
      "node_modules/@vitest/coverage-v8/package.json": JSON.stringify({
        name: "@vitest/coverage-v8",
        version: "3.2.7",
      }),
      // vitest's own report shapes (vitest 3.2.7 on a small project): a passing test, a skipped
      // one, an entity-escaped name, a file that failed to load (one case named by the file),
      // and istanbul's coverage-final.json (statements by line) with its coverage-summary.json.
      "node_modules/.bin/vitest": fakeRunner(`
        const arg = (k) => (process.argv.find((a) => a.startsWith(k + "=")) || "").slice(k.length + 1);
        const junit = arg("--outputFile.junit"), dir = arg("--coverage.reportsDirectory");
        fs.writeFileSync("args.json", JSON.stringify(process.argv.slice(2)));
        fs.mkdirSync(path.dirname(junit), { recursive: true });
        fs.writeFileSync(junit, '<?xml version="1.0" encoding="UTF-8" ?>\\n<testsuites name="vitest tests" tests="4" failures="2">' +
          '<testsuite name="test/math.test.ts" tests="3"><testcase classname="test/math.test.ts" name="math &gt; adds &apos;1&apos; &amp; 2" time="0.001"><system-out>&lt;failure&gt;</system-out></testcase>' +
          '<testcase classname="test/math.test.ts" name="math &gt; subs" time="0.002"><failure message="expected 1 to be 2" type="AssertionError">AssertionError</failure></testcase>' +
          '<testcase classname="test/math.test.ts" name="math &gt; later" time="0"><skipped/></testcase></testsuite>' +
          '<testsuite name="test/broken.test.ts" tests="1" failures="1"><testcase classname="test/broken.test.ts" name="test/broken.test.ts" time="0"><failure message="Cannot find module">Error</failure></testcase></testsuite></testsuites>');
        fs.mkdirSync(dir, { recursive: true });
        const file = path.resolve("src/math.ts");
        fs.writeFileSync(path.join(dir, "coverage-final.json"), JSON.stringify({ [file]: { path: file,
          statementMap: { 0: { start: { line: 1, column: 0 }, end: { line: 1, column: 50 } }, 1: { start: { line: 2, column: 2 }, end: { line: 2, column: 15 } },
            2: { start: { line: 4, column: 0 }, end: { line: 5, column: 7 } }, 3: { start: { line: 5, column: 2 }, end: { line: 5, column: 7 } } },
          s: { 0: 1, 1: 1, 2: 1, 3: 0 }, fnMap: {}, f: {}, branchMap: {}, b: {} } }));
        fs.writeFileSync(path.join(dir, "coverage-summary.json"), JSON.stringify({ total: { lines: { total: 4, covered: 3, skipped: 0, pct: 75 } } }));
        process.exit(1);
      `),
    });
    const m = measure(root, "typescript", ["tests", "coverage"]);
    expect(m.tests).toEqual({
      status: "ok",
      tool: "vitest 3.2.7",
      value: 100 / 3,
      cases: {
        "test/math.test.ts::math > adds '1' & 2#1": true,
        "test/math.test.ts::math > subs#1": false,
        "test/broken.test.ts::test/broken.test.ts#1": false,
      },
    });
    expect(m.coverage).toEqual({
      status: "ok",
      tool: "@vitest/coverage-v8 3.2.7",
      value: 75,
      cases: {
        "src/math.ts:export function add(a: number, b: number): number {#1": true,
        "src/math.ts:return a + b;#1": true,
        "src/math.ts:export const sub = (a: number, b: number) =>#1": true,
        "src/math.ts:a - b;#1": false,
      },
    });
    const args = JSON.parse(readFileSync(join(root, "args.json"), "utf8")) as string[];
    expect(args[0]).toBe("run");
    expect(args).toEqual(
      expect.arrayContaining([
        "--reporter=junit",
        "--coverage.enabled=true",
        "--coverage.provider=v8",
        "--coverage.reporter=json",
        "--coverage.reporter=json-summary",
        "--coverage.reportOnFailure=true",
      ]),
    );
  });

  it("says why coverage is unavailable when the repository has no vitest coverage provider, and why vitest did not run", () => {
    const junit =
      '<testsuites><testsuite name="a.test.js"><testcase classname="a.test.js" name="works"></testcase></testsuite></testsuites>';
    const root = tree({
      "package.json": JSON.stringify({ name: "v", devDependencies: { vitest: "^3.2.0" } }),
      "node_modules/vitest/package.json": JSON.stringify({ name: "vitest", version: "3.2.7" }),
      "node_modules/.bin/vitest": fakeRunner(`
        const junit = process.argv.find((a) => a.startsWith("--outputFile.junit=")).split("=")[1];
        if (process.argv.some((a) => a.startsWith("--coverage"))) process.exit(3);
        fs.mkdirSync(path.dirname(junit), { recursive: true });
        fs.writeFileSync(junit, ${JSON.stringify(junit)});
      `),
    });
    const m = measure(root, "javascript", ["tests", "coverage"]);
    expect(m.tests).toEqual({ status: "ok", tool: "vitest 3.2.7", value: 100, cases: { "a.test.js::works#1": true } });
    expect(m.coverage).toEqual({
      status: "unavailable",
      tool: "vitest 3.2.7",
      reason: "the repository has no vitest coverage provider (@vitest/coverage-v8 or @vitest/coverage-istanbul)",
    });
    rmSync(join(root, "node_modules"), { recursive: true });
    const none = measure(root, "javascript", ["tests"]);
    expect(none.tests).toEqual({
      status: "unavailable",
      reason: "vitest is not installed (node_modules/.bin): the setup command installs the repository's dependencies",
    });
  });

  it("runs jest and reads its --json result and its istanbul coverage", () => {
    const root = tree({
      "package.json": JSON.stringify({ name: "j", scripts: { test: "jest --runInBand" } }),
      "src/math.js": "function add(a, b) {\n  return a + b;\n}\nmodule.exports = { add };\n",
      "node_modules/jest/package.json": JSON.stringify({ name: "jest", version: "30.5.2" }),
      // jest 30.5.2's --json shapes: a file with a passing, a failing, a skipped and a todo
      // test, and a file that failed to run (status failed, no assertion results).
      "node_modules/.bin/jest": fakeRunner(`
        const arg = (k) => (process.argv.find((a) => a.startsWith(k + "=")) || "").slice(k.length + 1);
        fs.writeFileSync("args.json", JSON.stringify(process.argv.slice(2)));
        const test = path.resolve("__tests__/math.test.js"), broken = path.resolve("__tests__/broken.test.js");
        const a = (title, status) => ({ ancestorTitles: ["math"], title, fullName: "math " + title, status, failureMessages: [] });
        fs.writeFileSync(arg("--outputFile"), JSON.stringify({ numTotalTests: 4, success: false, testResults: [
          { name: test, status: "failed", message: "", assertionResults: [a("adds", "passed"), a("fails", "failed"), a("skipped", "pending"), a("later", "todo")] },
          { name: broken, status: "failed", message: "Test suite failed to run", assertionResults: [] } ] }));
        const dir = arg("--coverageDirectory"), file = path.resolve("src/math.js");
        fs.mkdirSync(dir, { recursive: true });
        fs.writeFileSync(path.join(dir, "coverage-final.json"), JSON.stringify({ [file]: { path: file,
          statementMap: { 0: { start: { line: 2, column: 2 }, end: { line: 2, column: 15 } }, 1: { start: { line: 4, column: 0 }, end: { line: 4, column: 25 } } },
          s: { 0: 0, 1: 1 } } }));
        fs.writeFileSync(path.join(dir, "coverage-summary.json"), JSON.stringify({ total: { lines: { total: 2, covered: 1, pct: 50 } } }));
        process.exit(1);
      `),
    });
    const m = measure(root, "javascript", ["tests", "coverage"]);
    expect(m.tests).toEqual({
      status: "ok",
      tool: "jest 30.5.2",
      value: 100 / 3,
      cases: {
        "__tests__/math.test.js::math > adds#1": true,
        "__tests__/math.test.js::math > fails#1": false,
        "__tests__/broken.test.js::__tests__/broken.test.js#1": false,
      },
    });
    expect(m.coverage).toEqual({
      status: "ok",
      tool: "jest 30.5.2",
      value: 50,
      cases: { "src/math.js:return a + b;#1": false, "src/math.js:module.exports = { add };#1": true },
    });
    const args = JSON.parse(readFileSync(join(root, "args.json"), "utf8")) as string[];
    expect(args).toEqual(
      expect.arrayContaining([
        "--ci",
        "--json",
        "--coverage",
        "--coverageReporters=json",
        "--coverageReporters=json-summary",
      ]),
    );
  });

  it("names the runner it does not measure", () => {
    const root = tree({ "package.json": JSON.stringify({ name: "m", scripts: { test: "mocha test/" } }) });
    const m = measure(root, "javascript", ["tests", "coverage"]);
    const reason = `the repository's tests run with "mocha test/"; vitest, jest and node --test are measured`;
    expect(m).toEqual({ tests: { status: "unavailable", reason }, coverage: { status: "unavailable", reason } });
  });
});
