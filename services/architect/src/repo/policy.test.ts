import { describe, expect, it } from "vitest";
import { decide, policyFindings, type PolicyFinding } from "./policy.js";

/** Findings of changing one file from `before` (undefined: new) to `after` (undefined: deleted). */
function findings(path: string, before: string | undefined, after: string | undefined): PolicyFinding[] {
  return policyFindings(
    after === undefined ? [] : [{ path, content: after }],
    after === undefined ? [path] : [],
    (p) => (p === path ? before : undefined),
  );
}
const kinds = (f: PolicyFinding[]): string[] => f.map((x) => x.kind);

const PYPROJECT = `[project]
name = "demo"
version = "1.0"
dependencies = [
  "requests>=2",
]

[tool.pytest.ini_options]
addopts = "-q"

[tool.black]
line-length = 88
`;

describe("policyFindings on pyproject.toml (parsed TOML, compared by table)", () => {
  it("blocks a change to pytest's or coverage's table, however it is written", () => {
    expect(
      findings("pyproject.toml", PYPROJECT, PYPROJECT.replace('addopts = "-q"', 'addopts = "-q --collect-only"')),
    ).toEqual([
      {
        path: "pyproject.toml",
        kind: "runner",
        message: "pyproject.toml: changes [tool.pytest.ini_options], which configure the test runner",
      },
    ]);
    // The same table as dotted keys under [tool], and as an inline table: the same name.
    expect(kinds(findings("pyproject.toml", PYPROJECT, `${PYPROJECT}\n[tool.coverage]\nrun.omit = ["*"]\n`))).toEqual([
      "runner",
    ]);
    expect(
      findings(
        "pyproject.toml",
        "[tool]\nblack = { line-length = 88 }\n",
        '[tool]\nblack = { line-length = 88 }\npytest.ini_options.addopts = "-p no:cacheprovider"\n',
      )[0]?.message,
    ).toContain("[tool.pytest.ini_options]");
    expect(kinds(findings("a/pyproject.toml", "", '[tool.tox]\nenv_list = ["py"]\n'))).toEqual(["runner"]);
  });

  it("tells a change of [project] dependencies from other [project] keys, and finds other dependency tables", () => {
    expect(
      findings("pyproject.toml", PYPROJECT, PYPROJECT.replace('"requests>=2",', '"requests>=2",\n  "numpy",')),
    ).toEqual([
      { path: "pyproject.toml", kind: "dependencies", message: "pyproject.toml: changes project.dependencies" },
    ]);
    expect(findings("pyproject.toml", PYPROJECT, PYPROJECT.replace('version = "1.0"', 'version = "1.1"'))).toEqual([]);
    // Layout and comments are not changes: the parsed values are compared, not the text.
    expect(
      findings(
        "pyproject.toml",
        PYPROJECT,
        PYPROJECT.replace('  "requests>=2",\n', ' "requests>=2" # pinned below 3 later\n').replace(
          "line-length = 88",
          "line-length=88   ",
        ),
      ),
    ).toEqual([]);
    expect(
      findings("pyproject.toml", PYPROJECT, `${PYPROJECT}\n[project.optional-dependencies]\ndev = ["pytest"]\n`)[0]
        ?.message,
    ).toBe("pyproject.toml: changes project.optional-dependencies");
    expect(
      findings("pyproject.toml", PYPROJECT, `${PYPROJECT}\n[build-system]\nrequires = ["hatchling"]\n`)[0]?.message,
    ).toBe("pyproject.toml: changes build-system");
    expect(
      findings(
        "pyproject.toml",
        "",
        '[[tool.poetry.source]]\nname = "private"\nurl = "https://pypi.example/simple"\n',
      )[0]?.message,
    ).toBe("pyproject.toml: changes tool.poetry.source");
    expect(
      findings("pyproject.toml", PYPROJECT, `${PYPROJECT}\n[dependency-groups]\ntest = ["pytest"]\n`)[0]?.kind,
    ).toBe("dependencies");
  });

  it("reports runner and dependency changes of one edit together, and a deleted file as all its tables", () => {
    const both = PYPROJECT.replace('addopts = "-q"', 'addopts = ""').replace('"requests>=2",', '"requests>=3",');
    expect(kinds(findings("pyproject.toml", PYPROJECT, both))).toEqual(["runner", "dependencies"]);
    expect(kinds(findings("pyproject.toml", PYPROJECT, undefined))).toEqual(["runner", "dependencies"]);
    expect(findings("pyproject.toml", PYPROJECT, PYPROJECT)).toEqual([]);
  });

  it("blocks new text that is not TOML with a finding that says where, and never throws", () => {
    const broken = findings("pyproject.toml", PYPROJECT, `${PYPROJECT}\n[tool.pytest.ini_options\naddopts = "-x"\n`);
    expect(broken).toHaveLength(1);
    expect(broken[0]).toMatchObject({ path: "pyproject.toml", kind: "runner" });
    expect(broken[0]?.message).toMatch(
      /^pyproject\.toml: is not valid TOML after the change \(line 14, column 25: .+\), so which of its sections change cannot be told/,
    );
    for (const text of ["a = ", "[a]\n[a]\n", 'x = "unclosed', "= 1", "\u0000", "[[a]]\n[a]\n"])
      expect(() => findings("pyproject.toml", PYPROJECT, text), text).not.toThrow();
    expect(decide(broken, "allow")).toMatchObject({ action: "block" });
  });

  it("reads base text that is not TOML as empty: every table of the new text is new", () => {
    expect(kinds(findings("pyproject.toml", "[tool.pytest\n", '[tool.pytest.ini_options]\naddopts = "-q"\n'))).toEqual([
      "runner",
    ]);
    expect(findings("pyproject.toml", "[oops\n", "[tool.black]\nline-length = 90\n")).toEqual([]);
  });
});

describe("policyFindings on setup.cfg and tox.ini (ini sections)", () => {
  it("finds runner and dependency sections", () => {
    expect(
      findings(
        "setup.cfg",
        "[metadata]\nname = a\n[tool:pytest]\naddopts = -q\n",
        "[metadata]\nname = a\n[tool:pytest]\naddopts = -q -x\n",
      )[0]?.message,
    ).toBe("setup.cfg: changes [tool:pytest], which configure the test runner");
    expect(
      findings("setup.cfg", "[options]\ninstall_requires = a\n", "[options]\ninstall_requires = a\n  b\n")[0],
    ).toMatchObject({ kind: "dependencies", message: "setup.cfg: changes options" });
    expect(
      kinds(findings("tox.ini", "[tox]\nenvlist = py3\n", "[tox]\nenvlist = py3\n[testenv]\ncommands = true\n")),
    ).toEqual(["runner"]);
    expect(findings("setup.cfg", "[metadata]\nname = a\n", "[metadata]\nname = b\n")).toEqual([]);
  });
});

describe("policyFindings on other files, and decide", () => {
  it("blocks runner files whatever the policy, and follows the policy for dependencies", () => {
    const runner = findings("tests/conftest.py", undefined, "import pytest\n");
    expect(runner).toEqual([
      {
        path: "tests/conftest.py",
        kind: "runner",
        message: "adds tests/conftest.py, which configures the test runner",
      },
    ]);
    expect(decide(runner, "allow")).toMatchObject({ action: "block", paths: ["tests/conftest.py"] });
    const deps = findings("requirements.txt", "a\n", "a\nb\n");
    expect(deps).toEqual([{ path: "requirements.txt", kind: "dependencies", message: "changes requirements.txt" }]);
    expect(decide(deps, "reject")).toMatchObject({ action: "block" });
    expect(decide(deps, "ask")).toMatchObject({ action: "ask", paths: ["requirements.txt"] });
    expect(decide(deps, "allow")).toEqual({ action: "run" });
    expect(
      findings(
        "package.json",
        '{"scripts":{"test":"vitest"},"dependencies":{}}',
        '{"scripts":{"test":"true"},"dependencies":{"a":"1"}}',
      ).map((f) => f.message),
    ).toEqual(["package.json: changes scripts, which decide how the tests run", "package.json: changes dependencies"]);
  });
});
