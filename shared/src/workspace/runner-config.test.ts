import { describe, expect, it } from "vitest";
import { isRunnerConfig } from "./runner-config.js";

describe("isRunnerConfig", () => {
  it("names pytest's configuration and Python's start-up files, in any folder", () => {
    for (const p of [
      "conftest.py",
      "tests/conftest.py",
      "pytest.ini",
      ".pytest.ini",
      "pyproject.toml",
      "tox.ini",
      "setup.cfg",
      "sitecustomize.py",
      "pkg/usercustomize.py",
      "evil.pth",
    ]) {
      expect(isRunnerConfig(p, "python"), p).toBe(true);
    }
  });

  it("names Node's package scopes and installed modules", () => {
    for (const lang of ["javascript", "typescript"] as const) {
      for (const p of [
        "package.json",
        "lib/package.json",
        "node_modules/chai/index.js",
        "a/node_modules/x.js",
        ".npmrc",
      ]) {
        expect(isRunnerConfig(p, lang), `${lang} ${p}`).toBe(true);
      }
    }
  });

  it("leaves ordinary source and test files alone", () => {
    for (const p of ["solution.py", "test_solution.py", "my_conftest.py", "conftest.py.txt", "pkg/setup.py"])
      expect(isRunnerConfig(p, "python"), p).toBe(false);
    for (const p of ["solution.js", "test/solution.test.js", "package.json.bak", "node_modules_notes.md"])
      expect(isRunnerConfig(p, "javascript"), p).toBe(false);
    // A Python task's package.json is not Python's runner configuration, and the reverse.
    expect(isRunnerConfig("package.json", "python")).toBe(false);
    expect(isRunnerConfig("conftest.py", "javascript")).toBe(false);
  });
});
