import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { FileChange } from "@loopsmith/shared/contracts";
import { gate } from "./gate.js";
import { EvaluationNames, isTestCode, isTestSupport, scanTamperString, shadowFinding } from "./tampering.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../../..");

describe("tampering: which files, which names", () => {
  it("test files are the runners' by name, jest/vitest names, and conftest.py; helpers under tests/ are test support", () => {
    for (const p of [
      "test_x.py",
      "pkg/x_test.py",
      "tests/conftest.py",
      "conftest.py",
      "test/a.test.mjs",
      "src/a.spec.ts",
      "src/__tests__/a.js",
    ])
      expect(isTestCode(p), p).toBe(true);
    for (const p of [
      "solution.py",
      "tests/helpers.py",
      "tests/__init__.py",
      "src/testing.ts",
      "node_modules/x/a.test.js",
    ])
      expect(isTestCode(p), p).toBe(false);
    expect(isTestSupport("tests/helpers.py")).toBe(true);
    expect(isTestSupport("src/tests.py")).toBe(false);
  });

  it("evaluation names: path-like words and their file names, not options, commands or common names", () => {
    const names = new EvaluationNames([
      "python3",
      "-m",
      "pytest",
      "-q",
      "tests",
      "bench/run.py",
      "./bench-out/junit.xml",
      "setup.py",
      "pkg/__init__.py",
      "a.py",
    ]);
    expect(names.find("see bench/run.py")).toBe("bench/run.py");
    expect(names.find("/abs/x/run.py")).toBe("run.py");
    expect(names.find("bench-out/junit.xml")).toBe("bench-out/junit.xml");
    expect(names.find("rerun.py")).toBeUndefined();
    expect(names.find("run.pyc")).toBeUndefined();
    expect(names.find("pytest")).toBeUndefined();
    expect(names.find("setup.py")).toBeUndefined();
    expect(names.find("__init__.py")).toBeUndefined();
    expect(new EvaluationNames().find("bench/run.py")).toBeUndefined();
  });

  it("strings: which ones name the verdict's machinery, and how sure", () => {
    expect(scanTamperString("LOOPSMITH_JUNIT").map((h) => [h.rule, h.sure])).toEqual([["tampering.result_file", true]]);
    expect(scanTamperString("MY_LOOPSMITH_JUNIT_X")).toEqual([]);
    expect(scanTamperString("PYTEST_CURRENT_TEST").map((h) => [h.rule, h.sure])).toEqual([
      ["tampering.branch_on_runner", true],
    ]);
    expect(scanTamperString("JEST_WORKER_ID").map((h) => [h.rule, h.sure])).toEqual([
      ["tampering.branch_on_runner", false],
    ]);
    expect(scanTamperString("reports/TEST-unit.xml").map((h) => h.sure)).toEqual([false]);
    expect(scanTamperString("data.xml")).toEqual([]);
  });

  it("shadowing: the message says what and where", () => {
    expect(shadowFinding("pytest.py")).toMatchObject({
      severity: "blocker",
      rule: "tampering.shadow",
      line: 1,
      message: "a module named `pytest` at the root is imported instead of the real `pytest` when the tests run",
    });
    expect(shadowFinding("pytest_helpers.py")).toBeUndefined();
    expect(shadowFinding("docs/unittest.md")).toBeUndefined();
    expect(shadowFinding("conftest.py")).toBeUndefined();
  });

  it("a shadowing test file is still flagged (the other rules skip test files)", () => {
    const r = gate({
      v: 1,
      taskId: "t1",
      iteration: 1,
      idempotencyKey: "t1/1/gate",
      language: "python",
      files: [{ path: "tests/pytest.py", content: "import os\nos._exit(0)\n" }],
    });
    expect(r.findings.map((f) => `${f.severity} ${f.rule}@${f.line}`)).toEqual([
      "blocker tampering.shadow@1",
      "blocker tampering.exit@2",
    ]);
  });
});

/** The HumanEval file: `LOOPSMITH_HUMANEVAL`, else `../shared/datasets/humaneval.jsonl` beside the repository. */
const HUMANEVAL = process.env.LOOPSMITH_HUMANEVAL ?? resolve(ROOT, "../shared/datasets/humaneval.jsonl");

describe.skipIf(!existsSync(HUMANEVAL))("tampering: benign corpora (precision)", () => {
  it("HumanEval's canonical solutions: none blocked, none sent to review", () => {
    const records = readFileSync(HUMANEVAL, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { task_id: string; prompt: string; canonical_solution: string });
    expect(records.length).toBeGreaterThan(100);
    const flagged = records.flatMap((r) => {
      const g = gate({
        v: 1,
        taskId: "t1",
        iteration: 1,
        idempotencyKey: "t1/1/gate",
        language: "python",
        files: [{ path: "solution.py", content: r.prompt + r.canonical_solution }],
        evaluation: ["test_solution.py", "test_hidden.py"],
      });
      return g.blocked || g.findings.some((f) => f.rule?.startsWith("tampering.")) ? [r.task_id] : [];
    });
    expect(flagged).toEqual([]);
  });
});

describe("tampering: the bundled examples (precision)", () => {
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((n) => (statSync(join(dir, n)).isDirectory() ? walk(join(dir, n)) : [join(dir, n)]));
  const code = /\.(py|[cm]?[jt]s|sh)$/;

  it("no file of an example's tree or task, nor a scripted candidate's files, is blocked or flagged", () => {
    const examples = join(ROOT, "examples");
    const flagged: string[] = [];
    for (const name of readdirSync(examples)) {
      const dir = join(examples, name);
      const files: FileChange[] = walk(dir)
        .filter((p) => code.test(p))
        .map((p) => ({ path: relative(dir, p), content: readFileSync(p, "utf8") }));
      if (existsSync(join(dir, "task.json"))) {
        const task = JSON.parse(readFileSync(join(dir, "task.json"), "utf8")) as {
          files?: FileChange[];
          acceptanceTests?: FileChange[];
        };
        files.push(...(task.files ?? []), ...(task.acceptanceTests ?? []));
      }
      const script = existsSync(join(dir, "script.json"))
        ? (JSON.parse(readFileSync(join(dir, "script.json"), "utf8")) as { replies?: { build?: unknown[] } })
        : {};
      for (const b of script.replies?.build ?? []) {
        const reply = b as { files?: FileChange[]; tests?: FileChange[] };
        files.push(...(reply.files ?? []), ...(reply.tests ?? []));
      }
      for (const f of files) {
        // The self-improvement example's benchmark prints case records: it is the benchmark (a protected path), not a candidate.
        if (name === "self-improve" && f.path === "bench.ts") continue;
        const g = gate({
          v: 1,
          taskId: "t1",
          iteration: 1,
          idempotencyKey: "t1/1/gate",
          language: "python",
          files: [f],
        });
        if (g.blocked || g.findings.some((x) => x.rule?.startsWith("tampering."))) flagged.push(`${name}/${f.path}`);
      }
    }
    expect(flagged).toEqual([]);
  });
});
