import { describe, expect, it } from "vitest";
import {
  HYPOTHESIS_PLUGIN,
  NODE_VERDICT_REPORTER,
  PYTEST_CONTROLLER,
  PYTEST_ISOLATED,
  commandEnv,
  defaultCommand,
} from "./commands.js";

const file = (path: string, content: string) => ({ path, content });

describe("defaultCommand for python", () => {
  it("turns pytest's plugin autoloading off for a whole workspace and loads no plugin when no file uses hypothesis", () => {
    const c = defaultCommand("python", [
      file("solution.py", "def f():\n    return 1\n"),
      file("test_solution.py", "from solution import f\n\ndef test_f():\n    assert f() == 1\n"),
    ]);
    expect(c.env).toEqual({ ...commandEnv("python"), PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1" });
    expect(c.argv).toEqual([...PYTEST_ISOLATED, ...PYTEST_CONTROLLER]);
    expect(c.runner).toBe("pytest");
  });

  it("loads hypothesis's plugin by name when a Python file imports hypothesis (either import form)", () => {
    for (const line of [
      "import hypothesis",
      "from hypothesis import given, strategies as st",
      "    from hypothesis import given",
    ]) {
      const c = defaultCommand("python", [file("test_p.py", `${line}\n`)], ["test_p.py"]);
      expect(c.argv, line).toEqual([
        ...PYTEST_ISOLATED,
        ...PYTEST_CONTROLLER,
        "-p",
        HYPOTHESIS_PLUGIN,
        "--",
        "test_p.py",
      ]);
    }
    // A mention that is not an import, or an import in a non-Python file, loads nothing.
    expect(
      defaultCommand("python", [
        file("test_p.py", "# we do not use hypothesis here\n"),
        file("notes.md", "import hypothesis\n"),
      ]).argv,
    ).not.toContain(HYPOTHESIS_PLUGIN);
  });

  it("keeps pytest's own plugin loading over a repository's base tree (its files are not all known)", () => {
    const c = defaultCommand("python", [file("a.py", "x = 1\n")], undefined, { wholeWorkspace: false });
    expect(c.env).toEqual(commandEnv("python"));
    expect(c.argv).not.toContain(HYPOTHESIS_PLUGIN);
  });
});

describe("defaultCommand for node", () => {
  it("runs node's test runner with the language's environment", () => {
    const c = defaultCommand("javascript", [file("a.test.js", "")]);
    expect(c.env).toEqual(commandEnv("javascript"));
    expect(c.argv.slice(0, 2)).toEqual(["node", "--test"]);
    // The verdict comes from loopsmith's reporter in the runner's own process (integrity.ts).
    expect(c.argv).toContain(`--test-reporter=${NODE_VERDICT_REPORTER}`);
  });
});
