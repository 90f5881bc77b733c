import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import type { Edit } from "../contracts/repo.js";
import { applyEdits, checkEditPath, renderEditFailures, unifiedPatch, type ReadBase } from "./edits.js";

const edit = (path: string, search: string, replace = "", del = false): Edit => ({
  path,
  search,
  replace,
  delete: del,
});
const reader =
  (files: Record<string, string>): ReadBase =>
  (p) =>
    Object.hasOwn(files, p) ? files[p] : undefined;

const PY = [
  "def price(qty, unit):",
  "    total = qty * unit",
  "    if qty >= 10:",
  "        total = total * 0.9",
  "    return round(total, 2)",
  "",
  "",
  "def label(name):",
  "    return name.title()",
  "",
].join("\n");
const base = reader({ "shop/price.py": PY, "README.md": "# shop\n", "twice.txt": "x = 1\ny = 2\nx = 1\n" });

const temps: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-edits-"));
  temps.push(dir);
  return dir;
}
afterAll(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

describe("applyEdits", () => {
  it("applies an edit and normalises ./ paths", () => {
    const r = applyEdits([edit("./shop/price.py", "qty >= 10", "qty >= 20")], base);
    expect(r).toEqual({
      ok: true,
      changed: [{ path: "shop/price.py", content: PY.replace("qty >= 10", "qty >= 20") }],
      deleted: [],
    });
  });

  it("applies several edits to one file in order, each seeing the previous result", () => {
    const r = applyEdits(
      [
        edit("shop/price.py", "0.9", "0.85"),
        edit("shop/price.py", "total * 0.85", "total * 0.8"),
        edit("README.md", "# shop\n", "# shop\n\nPrices.\n"),
      ],
      base,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.changed.map((f) => f.path)).toEqual(["README.md", "shop/price.py"]);
    expect(r.changed[1]?.content).toContain("total = total * 0.8\n");
  });

  it("is all or nothing, and reports every failure it finds", () => {
    const r = applyEdits(
      [
        edit("README.md", "# shop", "# store"),
        edit("shop/price.py", "qty > 10", "x"),
        edit("nope.py", "a", "b"),
        edit("twice.txt", "x = 1", "x = 3"),
      ],
      base,
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.failures.map((f) => [f.index, f.path, f.reason])).toEqual([
      [1, "shop/price.py", "not_found"],
      [2, "nope.py", "missing_file"],
      [3, "twice.txt", "ambiguous"],
    ]);
    expect(r.failures[2]?.message).toContain("occurs 2 times");
    expect(r.failures[2]?.message).toContain("lines 1, 3");
  });

  it("quotes the most similar window of the file, numbered, with two lines of context", () => {
    const r = applyEdits([edit("shop/price.py", "    if qty > 10:\n        total = total * 0.95\n", "")], base);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const f = r.failures[0];
    expect(f?.reason).toBe("not_found");
    expect(f?.message).toContain("lines 3–4");
    expect(f?.nearest).toBe(
      [
        "1 | def price(qty, unit):",
        "2 |     total = qty * unit",
        "3 |     if qty >= 10:",
        "4 |         total = total * 0.9",
        "5 |     return round(total, 2)",
        "6 | ",
      ].join("\n"),
    );
  });

  it("says so when only whitespace differs, and does not apply the edit", () => {
    const indent = applyEdits([edit("shop/price.py", "if qty >= 10:\n    total = total * 0.9\n", "")], base);
    expect(indent.ok).toBe(false);
    if (indent.ok) return;
    expect(indent.failures[0]?.message).toMatch(/only in indentation or other whitespace/);
    expect(indent.failures[0]?.nearest).toContain("3 |     if qty >= 10:");

    const trailing = applyEdits([edit("shop/price.py", "def label(name):   \n    return name.title()\n", "")], base);
    expect(!trailing.ok && trailing.failures[0]?.message).toMatch(/differs from lines 8–9 only in trailing whitespace/);

    const crlf = applyEdits([edit("w.txt", "a\nb\n", "")], reader({ "w.txt": "a\r\nb\r\n" }));
    expect(!crlf.ok && crlf.failures[0]?.message).toMatch(/only in line endings/);
  });

  it("creates a file, which must not exist yet", () => {
    const r = applyEdits([edit("shop/new.py", "", "X = 1\n"), edit("shop/new.py", "X = 1", "X = 2")], base);
    expect(r).toEqual({ ok: true, changed: [{ path: "shop/new.py", content: "X = 2\n" }], deleted: [] });
    const again = applyEdits(
      [edit("README.md", "", "x"), edit("a.txt", "", "1"), edit("a.txt", "", "2"), edit("README.md/x", "", "")],
      base,
    );
    expect(!again.ok && again.failures.map((f) => [f.index, f.reason])).toEqual([
      [0, "file_exists"],
      [2, "file_exists"],
      [3, "file_exists"],
    ]);
  });

  it("deletes a file, which must exist; edited then deleted is only deleted", () => {
    const r = applyEdits([edit("README.md", "shop", "store"), edit("README.md", "", "", true)], base);
    expect(r).toEqual({ ok: true, changed: [], deleted: ["README.md"] });
    const missing = applyEdits([edit("gone.md", "", "", true)], base);
    expect(!missing.ok && missing.failures[0]?.reason).toBe("missing_file");
    const twice = applyEdits([edit("README.md", "", "", true), edit("README.md", "", "", true)], base);
    expect(!twice.ok && twice.failures.map((f) => f.index)).toEqual([1]);
  });

  it("leaves out a file whose final text equals its base, and a file created then deleted", () => {
    const r = applyEdits(
      [
        edit("README.md", "shop", "store"),
        edit("README.md", "store", "shop"),
        edit("t.txt", "", "t"),
        edit("t.txt", "", "", true),
      ],
      base,
    );
    expect(r).toEqual({ ok: true, changed: [], deleted: [] });
  });

  it("refuses paths that leave the repository or enter .git", () => {
    const bad = ["/etc/passwd", "../x", "a/../../x", "a\\b", "a\0b", ".git", ".git/config", "sub/.GIT/HEAD", "", "./"];
    const r = applyEdits(
      bad.map((p) => edit(p, "", "x")),
      base,
    );
    expect(!r.ok && r.failures.map((f) => f.reason)).toEqual(bad.map(() => "path_escape"));
    expect(checkEditPath("./a//b/./c.txt")).toEqual({ ok: true, path: "a/b/c.txt" });
    expect(checkEditPath(".gitignore")).toEqual({ ok: true, path: ".gitignore" });
  });

  it("refuses a path through a symbolic link under root", () => {
    const root = tempDir();
    const outside = tempDir();
    writeFileSync(join(outside, "secret.txt"), "s\n");
    mkdirSync(join(root, "src"));
    writeFileSync(join(root, "src", "ok.py"), "a = 1\n");
    symlinkSync(outside, join(root, "src", "out"));
    symlinkSync(join(root, "src", "ok.py"), join(root, "alias.py"));
    const read: ReadBase = (p) => {
      try {
        return readFileSync(join(root, p), "utf8");
      } catch {
        return undefined;
      }
    };
    const r = applyEdits(
      [edit("src/out/secret.txt", "s", "t"), edit("src/out/new.txt", "", "n"), edit("alias.py", "a = 1", "a = 2")],
      read,
      { root },
    );
    expect(!r.ok && r.failures.map((f) => [f.index, f.reason])).toEqual([
      [0, "path_escape"],
      [1, "path_escape"],
      [2, "path_escape"],
    ]);
    expect(!r.ok && r.failures[0]?.message).toContain("src/out is a symbolic link");
    expect(applyEdits([edit("src/ok.py", "a = 1", "a = 2"), edit("src/fresh/x.py", "", "x")], read, { root }).ok).toBe(
      true,
    );
    expect(applyEdits([edit("src", "", "x")], read, { root }).ok).toBe(false);
  });
});

describe("renderEditFailures", () => {
  it("says nothing was applied and quotes the nearest lines in a fence", () => {
    const r = applyEdits([edit("shop/price.py", "return name.upper()", "")], base);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const text = renderEditFailures(r.failures);
    expect(text).toContain("none of the edits was applied");
    expect(text).toContain("Edit 1 (shop/price.py), not_found:");
    expect(text).toContain("```\n7 | \n8 | def label(name):\n9 |     return name.title()\n```");
    expect(renderEditFailures([])).toBe("");
  });

  it("uses a fence longer than any backtick run in the quoted lines", () => {
    const text = renderEditFailures([
      { index: 0, path: "a.md", reason: "not_found", message: "m", nearest: "1 | ```js" },
    ]);
    expect(text).toContain("````\n1 | ```js\n````");
  });
});

/** Files of a directory tree (not .git), relative paths to content. */
function treeOf(dir: string, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.name === ".git") continue;
    if (e.isDirectory()) Object.assign(out, treeOf(dir, rel));
    else out[rel] = readFileSync(join(dir, rel), "utf8");
  }
  return out;
}

const git = (cwd: string, ...args: string[]): string =>
  execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"] });

/** A temp directory holding `files`; with `repo`, a git repository with them committed. */
function dirOf(files: Record<string, string>, repo: boolean): string {
  const dir = tempDir();
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), text);
  }
  if (repo) {
    git(dir, "init", "-q");
    git(dir, "add", "-A");
    git(dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base");
  }
  return dir;
}

/**
 * Applies `patch` with `git apply --check`, then `git apply` (`--index` in a repository) over
 * `files`; returns the resulting tree. Outside a repository git apply works as a patch tool.
 */
function gitApplied(files: Record<string, string>, patch: string, repo = true): Record<string, string> {
  const dir = dirOf(files, repo);
  const file = join(tempDir(), "change.patch");
  writeFileSync(file, patch);
  git(dir, "apply", "--check", file);
  git(dir, "apply", ...(repo ? ["--index"] : []), file);
  return treeOf(dir);
}

/** The tree after a successful apply. */
function expected(
  files: Record<string, string>,
  r: { changed: { path: string; content: string }[]; deleted: string[] },
): Record<string, string> {
  const out = { ...files };
  for (const f of r.changed) out[f.path] = f.content;
  for (const p of r.deleted) delete out[p];
  return out;
}

describe("unifiedPatch", () => {
  it("is applied by git apply to exactly the changed tree (new, deleted, no final newline, odd names)", () => {
    const files: Record<string, string> = {
      "shop/price.py": PY,
      "gone.txt": "bye\n",
      "noeol.txt": "one\ntwo",
      "to-noeol.txt": "a\nb\n",
      "with space.txt": "s p a c e\n",
      "z/deep/keep.txt": "keep\n",
    };
    const r = applyEdits(
      [
        edit("shop/price.py", "qty >= 10", "qty > 10"),
        edit("shop/price.py", "name.title()", "name.title().strip()"),
        edit("gone.txt", "", "", true),
        edit("noeol.txt", "two", "three"),
        edit("to-noeol.txt", "b\n", "b"),
        edit("with space.txt", "s p a c e", "space"),
        edit("new/dir/fresh.py", "", "print('hi')\n"),
        edit("new/empty.txt", "", ""),
        edit('new/ünïcode "q".txt', "", "u"),
      ],
      reader(files),
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const patch = unifiedPatch(reader(files), r.changed, r.deleted);
    expect(patch).toMatch(/^diff --git a\/gone\.txt b\/gone\.txt\ndeleted file mode 100644\n/);
    expect(patch).toContain(
      "diff --git a/new/dir/fresh.py b/new/dir/fresh.py\nnew file mode 100644\n--- /dev/null\n+++ b/new/dir/fresh.py\n",
    );
    expect(patch).toContain("\\ No newline at end of file");
    const headers = [...patch.matchAll(/^diff --git a\/(.*) b\//gm)].map((m) => m[1]);
    expect(headers).toEqual([...headers].sort());
    expect(gitApplied(files, patch)).toEqual(expected(files, r));
  });

  it("is empty when nothing changes, and refuses a deleted path that is not in the base", () => {
    expect(unifiedPatch(base, [{ path: "README.md", content: "# shop\n" }], [])).toBe("");
    expect(() => unifiedPatch(base, [], ["nope"])).toThrow(/not in the base/);
  });

  it("round-trips through git apply for random files and edits (property)", () => {
    const line = fc.constantFrom("a", "b", "c", "", "  d", "e e");
    const text = fc
      .tuple(fc.array(line, { maxLength: 12 }), fc.boolean())
      .map(([ls, eol]) => ls.join("\n") + (eol && ls.length ? "\n" : ""));
    fc.assert(
      fc.property(text, text, text, (a, b, c) => {
        const files = { "a.txt": a, "b.txt": b };
        // a.txt rewritten as c (deleted, then created again), b.txt deleted, c.txt created as b.
        const edits = [
          edit("a.txt", "", "", true),
          edit("a.txt", "", c),
          edit("b.txt", "", "", true),
          edit("c.txt", "", b),
        ];
        const r = applyEdits(edits, reader(files));
        if (!r.ok) return;
        expect(gitApplied(files, unifiedPatch(reader(files), r.changed, r.deleted), false)).toEqual(expected(files, r));
      }),
      { numRuns: 12 },
    );
  }, 60_000);

  it("replaces exactly the one occurrence of a unique search (property)", () => {
    fc.assert(
      fc.property(
        fc.string(),
        fc.string({ minLength: 1 }),
        fc.string(),
        fc.string(),
        (before, search, after, replace) => {
          const textOf = before + search + after;
          const r = applyEdits([edit("f", search, replace)], reader({ f: textOf }));
          let count = 0;
          for (let i = textOf.indexOf(search); i !== -1; i = textOf.indexOf(search, i + 1)) count++;
          if (count === 1 && r.ok) expect(r.changed[0]?.content ?? textOf).toBe(before + replace + after);
          if (count !== 1) expect(r.ok).toBe(false);
          if (count === 1) expect(r.ok).toBe(true);
        },
      ),
    );
  });
});
