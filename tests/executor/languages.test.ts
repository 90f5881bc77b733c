/**
 * Python with hypothesis (its pytest plugin loaded by name, plugin autoloading off),
 * JavaScript and TypeScript in the node sandbox (node's test runner, per-test results from
 * its JUnit reporter; TypeScript with no build step), and `loopsmith sandbox run`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Command } from "commander";
import type { ExecutionResult } from "@loopsmith/shared/contracts";
import type { Executor } from "@loopsmith/executor";
import { registerSandboxCommand } from "../../cli/src/commands/sandbox.js";
import { docker, expectIdleHost, LABEL_FILTER, request, startExecutor } from "./helpers.js";

let ex: Executor;
beforeAll(async () => {
  ex = await startExecutor({ warmPoolSize: 1 });
});
afterAll(async () => {
  await ex?.stop();
});

const JS_LIB = "function add(a, b) { return a + b; }\nmodule.exports = { add };\n";
const JS_TEST = `const { test } = require("node:test");
const assert = require("node:assert/strict");
const { add } = require("./math.js");
test("adds", () => assert.equal(add(1, 2), 3));
test("test_check", () => assert.equal(add(2, 2), 5));
`;
const TS_LIB =
  "export interface Pair { a: number; b: number }\nexport function add({ a, b }: Pair): number {\n  return a + b;\n}\n";
const TS_TEST = `import { test } from "node:test";
import assert from "node:assert/strict";
import { add, type Pair } from "./math.js";
const p: Pair = { a: 2, b: 2 };
test("adds", () => assert.equal(add({ a: 1, b: 2 }), 3));
test("test_check", () => assert.equal(add(p), 5));
`;

describe("python with hypothesis", () => {
  it("runs property tests (the plugin loaded by name, autoloading off) and names the failing property", async () => {
    const lib = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a + b\n";
    const test = [
      "from hypothesis import given, strategies as st",
      "from lib import add, sub",
      "",
      "@given(st.integers(), st.integers())",
      "def test_add_commutes(a, b):",
      "    assert add(a, b) == add(b, a)",
      "",
      "@given(st.integers(), st.integers())",
      "def test_sub_inverts_add(a, b):",
      "    assert sub(add(a, b), b) == a",
      "",
    ].join("\n");
    const r = await ex.run(
      request("python", [
        { path: "lib.py", content: lib },
        { path: "test_lib.py", content: test },
      ]),
    );
    expect(r.status).toBe("failed");
    expect(r.tests.map((t) => [t.name, t.status])).toEqual([
      ["test_add_commutes", "passed"],
      ["test_sub_inverts_add", "failed"],
    ]);
    expect(`${r.tests[1]?.message ?? ""}${r.stdout}`).toContain("Falsifying example");
  });
});

describe("javascript", () => {
  it("runs node's test runner and names the failing test", async () => {
    const r = await ex.run(
      request("javascript", [
        { path: "math.js", content: JS_LIB },
        { path: "math.test.js", content: JS_TEST },
      ]),
    );
    expect(r.status).toBe("failed");
    expect(r.tests.map((t) => [t.name, t.status])).toEqual([
      ["adds", "passed"],
      ["test_check", "failed"],
    ]);
    expect(r.tests[1]?.message).toContain("4 !== 5");
    const ok = await ex.run(
      request("javascript", [
        { path: "math.js", content: JS_LIB },
        { path: "test/math.js", content: JS_TEST.replace("5)", "4)").replace("./math.js", "../math.js") },
      ]),
    );
    expect(ok.status).toBe("passed");
    expect(ok.tests).toHaveLength(2);
  });

  it("reports a syntax error as error", async () => {
    const r = await ex.run(request("javascript", [{ path: "bad.test.js", content: "const x = (;\n" }]));
    expect(r.status).toBe("error");
  });
});

describe("typescript", () => {
  it("runs .ts tests with no build step and names the failing test", async () => {
    const r = await ex.run(
      request("typescript", [
        { path: "math.ts", content: TS_LIB },
        { path: "math.test.ts", content: TS_TEST },
      ]),
    );
    expect(r.status).toBe("failed");
    expect(r.tests.map((t) => [t.name, t.status])).toEqual([
      ["adds", "passed"],
      ["test_check", "failed"],
    ]);
  });

  it("reports a TypeScript syntax error as error, and runs a custom node command on .ts", async () => {
    const bad = await ex.run(request("typescript", [{ path: "bad.test.ts", content: "const x: = 1;\n" }]));
    expect(bad.status).toBe("error");
    const custom = await ex.run(
      request(
        "typescript",
        [
          { path: "math.ts", content: TS_LIB },
          { path: "main.ts", content: "import { add } from './math';\nconsole.log(add({ a: 20, b: 22 }));\n" },
        ],
        {
          command: ["node", "main.ts"],
        },
      ),
    );
    expect(custom.status).toBe("passed");
    expect(custom.stdout.trim()).toBe("42");
    await expectIdleHost(ex, 2);
  });
});

describe("loopsmith sandbox run", () => {
  async function cli(args: string[]): Promise<{ code: number; out: string }> {
    const program = new Command().exitOverride();
    registerSandboxCommand(program);
    let out = "";
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array) => {
      out += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString();
      return true;
    }) as typeof process.stdout.write;
    const before = process.exitCode;
    try {
      await program.parseAsync(["node", "loopsmith", ...args]);
      return { code: Number(process.exitCode ?? 0), out };
    } finally {
      process.stdout.write = write;
      process.exitCode = before;
    }
  }

  it("runs the default tests over a copy of a directory; the exit code says whether they passed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-cli-"));
    try {
      writeFileSync(
        join(dir, "test_math.py"),
        "def test_ok():\n    assert True\n\ndef test_check():\n    assert 2 + 2 == 5\n",
      );
      const failed = await cli(["sandbox", "run", "--language", "python", "--dir", dir, "--json"]);
      expect(failed.code).toBe(1);
      const result = JSON.parse(failed.out) as ExecutionResult;
      expect(result.status).toBe("failed");
      expect(result.tests.find((t) => t.status === "failed")?.name).toBe("test_check");

      const passed = await cli([
        "sandbox",
        "run",
        "-l",
        "python",
        "-d",
        dir,
        "--timeout-ms",
        "20000",
        "--memory-mb",
        "256",
        "--",
        "python3",
        "-c",
        "print('hello from the sandbox')",
      ]);
      expect(passed.code).toBe(0);
      expect(passed.out).toContain("hello from the sandbox");
      expect(passed.out).toContain("PASSED");

      const timeout = await cli([
        "sandbox",
        "run",
        "-l",
        "python",
        "-d",
        dir,
        "--timeout-ms",
        "1000",
        "--json",
        "--",
        "sleep",
        "30",
      ]);
      expect(timeout.code).toBe(1);
      expect((JSON.parse(timeout.out) as ExecutionResult).status).toBe("timeout");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // The CLI's executor stopped and removed its containers (only this file's warm ones remain).
    const mine = await docker.listContainers({ all: true, filters: { label: [LABEL_FILTER] } });
    expect(mine.every((c) => c.Labels[LABEL_FILTER] === ex.instanceId)).toBe(true);
  });
});
