import { describe, expect, it } from "vitest";
import { BUILTIN_ENV, mergeEnv, resolveEnv, setupCommandOf } from "./env.js";
import { filesOfPatch, parseInstances, testDirectives } from "./instances.js";

const line = {
  instance_id: "o__r-1",
  repo: "o/r",
  base_commit: "a".repeat(40),
  problem_statement: "it breaks",
  patch: "",
  test_patch: "diff --git a/tests/test_x.py b/tests/test_x.py\n",
  FAIL_TO_PASS: '["tests/test_x.py::test_a"]',
  PASS_TO_PASS: ["tests/test_x.py::test_b"],
  version: 1.2,
};

describe("parseInstances", () => {
  it("decodes JSON-encoded test lists and plain arrays alike, and a numeric version", () => {
    const [inst] = parseInstances(JSON.stringify(line));
    expect(inst?.FAIL_TO_PASS).toEqual(["tests/test_x.py::test_a"]);
    expect(inst?.PASS_TO_PASS).toEqual(["tests/test_x.py::test_b"]);
    expect(inst?.version).toBe("1.2");
    expect(inst?.hints_text).toBe("");
  });
  it("names the line and the field of a bad instance", () => {
    const bad = { ...line, instance_id: "o__r-2", base_commit: "main" };
    expect(() => parseInstances(`${JSON.stringify(line)}\n\n${JSON.stringify(bad)}`, "d.jsonl")).toThrow(
      /d\.jsonl line 3: base_commit/,
    );
    expect(() => parseInstances(`${JSON.stringify({ ...line, FAIL_TO_PASS: "[1" })}`, "d.jsonl")).toThrow(
      /line 1: FAIL_TO_PASS/,
    );
    expect(() => parseInstances(`${JSON.stringify(line)}\n${JSON.stringify(line)}`, "d.jsonl")).toThrow(
      /line 2: instance_id o__r-1 is already on line 1/,
    );
  });
});

describe("test directives", () => {
  const patch = [
    "diff --git a/tests/utils_tests/test_text.py b/tests/utils_tests/test_text.py",
    "diff --git a/tests/utils_tests/files/data.json b/tests/utils_tests/files/data.json",
  ].join("\n");
  it("are the touched files less data files, and django's test labels for django", () => {
    expect(filesOfPatch(patch)).toHaveLength(2);
    expect(testDirectives({ repo: "o/r", test_patch: patch })).toEqual(["tests/utils_tests/test_text.py"]);
    expect(testDirectives({ repo: "django/django", test_patch: patch })).toEqual(["utils_tests.test_text"]);
  });
});

describe("environment spec", () => {
  it("ships the official commands and parsers, and an override merges per repo and version", () => {
    expect(resolveEnv(BUILTIN_ENV, "django/django", "4.0")).toMatchObject({
      testCmd: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
      logParser: "django",
    });
    expect(resolveEnv(BUILTIN_ENV, "sympy/sympy", "1.12").logParser).toBe("sympy");
    const env = mergeEnv(BUILTIN_ENV, {
      "django/django": { "4.0": { install: "pip install -e .", pre_install: ["true"] } },
      "o/r": { "*": { test_cmd: "pytest -rA" } },
    });
    const django = resolveEnv(env, "django/django", "4.0");
    expect(django.testCmd).toContain("runtests.py");
    expect(setupCommandOf(django)).toBe("true && pip install -e .");
    expect(resolveEnv(env, "o/r", "9").logParser).toBe("pytest");
    expect(() => resolveEnv(env, "x/y", "1")).toThrow(/no test_cmd for x\/y version 1/);
  });
});
