import { describe, expect, it } from "vitest";
import { MAX_FINDINGS } from "./gate.js";
import { blockers, check, src } from "./testing.js";

describe("gate: files and verdict", () => {
  it("blocks when any file has a blocker and reports each file's path", () => {
    const r = check([
      { path: "solution.py", content: src("def add(a, b):", "    return a + b") },
      { path: "tests/test_add.py", content: src("import smtplib") },
      { path: "helper.js", content: src("eval(x);") },
    ]);
    expect(r.blocked).toBe(true);
    expect(r.findings.map((f) => `${f.path}:${f.line}:${f.rule}`)).toEqual([
      "tests/test_add.py:1:network",
      "helper.js:1:dynamic-eval",
    ]);
  });

  it("chooses the parser by extension, not by the task's language", () => {
    // As Python, `eval(x);` is fine syntax; as JavaScript, `def f():` is a syntax error.
    const r = check([{ path: "a.js", content: "def f():\n  pass\n" }], "python");
    expect(r.findings.map((f) => f.rule)).toEqual(["syntax"]);
    expect(r.blocked).toBe(false);
  });

  it("scans shell scripts line by line and reads shebangs of files without an extension", () => {
    const r = check([
      { path: "scripts/clean.sh", content: src("#!/bin/sh", "set -e", "rm -rf /") },
      { path: "bin/tool", content: src("#!/usr/bin/env python3", "import os", "os.system('x')") },
      { path: "README.md", content: src("Never run `rm -rf /`.") },
      { path: "data.json", content: '{"cmd": "rm -rf /"}' },
    ]);
    expect(r.findings.map((f) => `${f.path}:${f.line}:${f.rule}`)).toEqual([
      "scripts/clean.sh:3:destructive-shell",
      "bin/tool:3:os-command",
    ]);
  });

  it("is blocked only by blockers: syntax errors and warnings alone do not block", () => {
    const r = check([{ path: "a.py", content: src("import subprocess", "subprocess.run(cmd, **opts)", "def f(:") }]);
    expect(r.findings.map((f) => f.severity).sort()).toEqual(["error", "warning"]);
    expect(r.blocked).toBe(false);
  });

  it("reports each problem once, and returns the same result for the same request", () => {
    const files = [{ path: "a.py", content: src("import os", "os.system(a); os.system(a)") }];
    expect(blockers(check(files))).toEqual(["os-command@2"]);
    expect(check(files)).toEqual(check(files));
  });

  it("caps the findings, keeping the blockers, and says how many were left out", () => {
    const lines = Array.from({ length: MAX_FINDINGS + 20 }, (_, i) => `x${i} = 'rm -rf /'`);
    const r = check([{ path: "many.py", content: src(...lines) }]);
    expect(r.blocked).toBe(true);
    expect(r.findings).toHaveLength(MAX_FINDINGS);
    expect(r.findings.at(-1)).toMatchObject({
      severity: "info",
      rule: "truncated",
      message: "21 more findings were left out",
    });
  });
});
