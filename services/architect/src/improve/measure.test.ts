/**
 * The measuring scripts run by this machine's own `python3` and `node` on small trees: the
 * metrics that need only the language's standard library (documentation coverage, the import
 * check; for node also `node --test` and its coverage), the result line, and the script
 * deleting itself. The third-party tools (pytest, coverage, pyflakes, mypy, …) are the sandbox
 * image's: tests/architect/improve-metrics.test.ts runs them there.
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { QualityBenchmarks, type ExecutionResult } from "@loopsmith/shared";
import { measureCommand, readMeasurement } from "./metrics.js";

const FIXTURE = join(import.meta.dirname, "..", "..", "..", "..", "tests", "fixtures", "quality-repo");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Runs the script of `language` in `root` as the sandbox would (`sh -c`), and reads its line. */
function measure(root: string, language: "python" | "javascript", enabled: string[]) {
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
  }
  return root;
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
    expect(m.complexity).toEqual({
      status: "unavailable",
      reason: "no cyclomatic complexity tool for JavaScript/TypeScript in the sandbox",
    });
    expect(m.lint).toEqual({
      status: "unavailable",
      reason: "the repository has no eslint (node_modules/.bin/eslint)",
    });
  });
});
