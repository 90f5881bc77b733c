import { describe, expect, it } from "vitest";
import type { GateResult } from "@loopsmith/shared/contracts";
import { gate } from "./gate.js";
import { src } from "./testing.js";

/** Gates one file (with the evaluation's names, when given). */
function run(path: string, content: string, evaluation?: string[]): GateResult {
  return gate({
    v: 1,
    taskId: "t1",
    iteration: 1,
    idempotencyKey: "t1/1/gate",
    language: "javascript",
    files: [{ path, content }],
    ...(evaluation ? { evaluation } : {}),
  });
}

const js = (...lines: string[]) => run("src/solution.js", src(...lines));

/** The tampering findings, as `severity rule@line`. */
function tampering(r: GateResult): string[] {
  return r.findings.filter((f) => f.rule?.startsWith("tampering.")).map((f) => `${f.severity} ${f.rule}@${f.line}`);
}

describe("gate, evaluation tampering in JavaScript/TypeScript: what blocks", () => {
  it("1. result files: the JUnit variable (as a member or a string), the result directory, node's reporter option", () => {
    const r = js(
      "const fs = require('fs');",
      "fs.writeFileSync(process.env.LOOPSMITH_JUNIT, '<testsuite/>');",
      "fs.writeFileSync(process.env['LOOPSMITH_TRIPWIRE_LOG'], '');",
      "fs.writeFileSync(`/tmp/.loopsmith/result.xml`, '');",
      "const args = ['--test-reporter=junit'];",
      "console.log(JSON.stringify({ case: 'c1', pass: true }));",
    );
    expect(r.blocked).toBe(true);
    expect(tampering(r)).toEqual([
      "blocker tampering.result_file@2",
      "blocker tampering.result_file@3",
      "blocker tampering.result_file@4",
      "warning tampering.result_file@4",
      "blocker tampering.result_file@5",
      "warning tampering.result_file@6",
    ]);
  });

  it("2. exits at load block: process.exit, abort, reallyExit, kill of itself, in a called function, an IIFE or a process event", () => {
    const r = js(
      "process.exit(0);",
      "process.abort();",
      "process.reallyExit(0);",
      "process.kill(process.pid, 'SIGKILL');",
      "function boot() { process.exit(0); }",
      "boot();",
      "(() => process.exit(0))();",
      "process.on('exit', () => { process.exit(0); });",
      "setTimeout(() => process.exit(0), 10);",
    );
    expect(tampering(r)).toEqual([1, 2, 3, 4, 5, 7, 8, 9].map((l) => `blocker tampering.exit@${l}`));
    expect(r.findings.find((f) => f.line === 5)?.message).toBe(
      "`process.exit` in `boot`, which the module calls when it loads: loading the module ends the process before the tests report",
    );
  });

  it("2. a hard exit inside a function goes to review; process.exit inside a function is not flagged", () => {
    const r = js("export function main() { process.exit(1); }", "export function crash() { process.abort(); }");
    expect(r.blocked).toBe(false);
    expect(tampering(r)).toEqual(["warning tampering.exit@2"]);
  });

  it("3. node:test, assert's functions, the module loader and process.exitCode (block); another framework goes to review", () => {
    const r = run(
      "src/index.ts",
      src(
        "import assert from 'node:assert';",
        "import { strict as sa } from 'node:assert';",
        "import { test } from 'node:test';",
        "const Module = require('module');",
        "assert.strictEqual = () => {};",
        "sa.deepEqual = () => {};",
        "Object.defineProperty(assert, 'ok', { value: () => {} });",
        "Module._load = () => ({});",
        "process.exitCode = 0;",
        "Object.defineProperty(process, 'exitCode', { get: () => 0, set() {} });",
        "import { expect } from 'vitest';",
        "delete assert.equal;",
      ),
    );
    expect(tampering(r)).toEqual([
      "blocker tampering.framework@3",
      "blocker tampering.framework@5",
      "blocker tampering.framework@6",
      "blocker tampering.framework@7",
      "blocker tampering.framework@8",
      "blocker tampering.framework@9",
      "blocker tampering.framework@10",
      "warning tampering.framework@11",
      "blocker tampering.framework@12",
    ]);
  });

  it("4. branching on the runner: NODE_TEST_CONTEXT, --test in execArgv, argv at load (block); argv in a function goes to review", () => {
    const r = js(
      "if (process.env.NODE_TEST_CONTEXT) module.exports = () => 42;",
      "const underTest = process.execArgv.includes('--test');",
      "const fast = process.argv.length > 2 ? 1 : 2;",
      "export function main() {",
      "  if (process.argv.length < 3) return 1;",
      "  return 0;",
      "}",
    );
    expect(tampering(r)).toEqual([
      "blocker tampering.branch_on_runner@1",
      "blocker tampering.branch_on_runner@2",
      "blocker tampering.branch_on_runner@3",
      "warning tampering.branch_on_runner@5",
    ]);
  });

  it("4. a condition on the evaluation's file names blocks", () => {
    const r = run("src/lib.js", src("export const f = (x) => (new Error().stack.includes('bench/run.mjs') ? 1 : x);"), [
      "node",
      "bench/run.mjs",
    ]);
    expect(tampering(r)).toEqual(["blocker tampering.branch_on_runner@1"]);
  });
});

describe("gate, evaluation tampering in JavaScript/TypeScript: what is not flagged", () => {
  it("main guards: require.main === module, import.meta.main, the ESM argv comparison", () => {
    const r = run(
      "src/cli.mjs",
      src(
        "import { fileURLToPath } from 'node:url';",
        "function main() { return process.argv.length > 2 ? 0 : 1; }",
        "if (require.main === module) process.exit(main());",
        "if (import.meta.main) { process.exit(main()); }",
        "if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = main();",
        "require.main === module && process.exit(main());",
      ),
    );
    expect(tampering(r)).toEqual(["warning tampering.branch_on_runner@2"]);
  });

  it("test files and ordinary code: assert used, not patched; process.env.NODE_ENV; exitCode set in a function", () => {
    const test = run(
      "test/links.test.mjs",
      src(
        "import test from 'node:test';",
        "import assert from 'node:assert';",
        "assert.strictEqual = () => {};",
        "process.exit(0);",
      ),
    );
    expect(tampering(test)).toEqual([]);
    const lib = js(
      "import assert from 'node:assert';",
      "export function check(x) { assert.ok(x > 0); return x; }",
      "const debug = process.env.NODE_ENV !== 'production';",
      "export function fail() { process.exitCode = 1; }",
      "const cases = [{ case: 1, expected: 2 }];",
    );
    expect(tampering(lib)).toEqual([]);
  });
});

describe("gate, targeted flips in JavaScript/TypeScript", () => {
  it("6. code_swap: replacing exports of a test file or test helper, or of the importing or main module, blocks", () => {
    const r = js(
      "const helpers = require('../test/helpers.js');",
      "helpers.check = () => true;",
      "require('./add.test.js').expected = 5;",
      "Object.assign(helpers, { check: () => true });",
      "module.parent.exports.run = () => {};",
      "require.main.exports.run = () => {};",
      "delete helpers.check;",
    );
    expect(r.blocked).toBe(true);
    expect(tampering(r)).toEqual([2, 3, 4, 5, 6, 7].map((l) => `blocker tampering.code_swap@${l}`));
    expect(r.findings.find((f) => f.line === 2)?.message).toBe(
      "replaces `helpers.check`, an export of `../test/helpers.js`, a test file or test helper: the tests would call the candidate's function instead of their own",
    );
  });

  it("6. code_swap is not flagged for the module's own exports or another source module's", () => {
    const r = js(
      "const lib = require('./lib.js');",
      "lib.cache = new Map();",
      "module.exports.add = (a, b) => a + b;",
      "exports.sub = (a, b) => a - b;",
      "let helpers = null;",
      "helpers = require('../test/helpers.js');",
    );
    expect(tampering(r)).toEqual([]);
  });

  it("3. require.cache edits block wherever the chain goes: an entry, its exports, Object.assign, module.constructor._cache", () => {
    const r = js(
      "const key = require.resolve('./add.js');",
      "require.cache[key].exports.add = (a, b) => a + b;",
      "Object.assign(require.cache[key].exports, { add: () => 5 });",
      "delete require.cache[key];",
      "module.constructor._cache[key] = { exports: {} };",
    );
    expect(tampering(r)).toEqual([2, 3, 4, 5].map((l) => `blocker tampering.framework@${l}`));
  });

  it("3. reading require.cache or resolving a path is not flagged", () => {
    const r = js(
      "const loaded = Object.keys(require.cache).length;",
      "const where = require.resolve('./add.js');",
      "export const isLoaded = (k) => k in require.cache;",
    );
    expect(tampering(r)).toEqual([]);
  });
});
