import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { hasCode } from "@loopsmith/shared/runtime";
import { isManifest, repoArchive, type TreeOverlay } from "./repo.js";

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
}, 60_000); // 10,000 files take a while to remove on a loaded machine

/** A tree on disk from `{path: content}`; `->target` makes a symbolic link. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "repo-test-"));
  roots.push(root);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    if (content.startsWith("->")) symlinkSync(content.slice(2), join(root, path));
    else writeFileSync(join(root, path), content, { mode: path.endsWith(".sh") ? 0o755 : 0o644 });
  }
  return root;
}

const LIMITS = { maxBytes: 128 * 1024 * 1024, maxEntries: 16384 };

/** `tar -tv` of an archive: name → type letter and mode string. */
function listing(archive: Buffer): Map<string, string> {
  const out = execFileSync("tar", ["-tvf", "-"], { input: archive }).toString("utf8");
  const m = new Map<string, string>();
  for (const line of out.trim().split("\n")) {
    const parts = line.split(/\s+/);
    const mode = parts[0] ?? "";
    const name = parts[5] ?? "";
    m.set(name, mode + (parts[6] === "->" ? ` -> ${parts[7]}` : ""));
  }
  return m;
}

async function pack(src: TreeOverlay, limits = LIMITS) {
  return repoArchive(src, { resultDir: "/tmp/.loopsmith", limits });
}

describe("repoArchive", () => {
  it("packs the tree minus .git, node_modules and deleted paths, with the overlay on top", async () => {
    const root = tree({
      "src/app.py": "x = 1\n",
      "src/old.py": "gone\n",
      "run.sh": "#!/bin/sh\n",
      "docs/a.md": "a\n",
      "docs/b.md": "b\n",
      ".git/HEAD": "ref: refs/heads/main\n",
      "sub/.git": "gitdir: ../.git/modules/sub\n",
      "node_modules/x/index.js": "shim\n",
      "pkg/node_modules/y.js": "shim\n",
      "requirements.txt": "pytest\n",
    });
    const a = await pack({
      treeDir: root,
      deleted: ["src/old.py", "docs"],
      files: [
        { path: "src/app.py", content: "x = 2\n" },
        { path: "run.sh", content: "#!/bin/sh\necho hi\n" },
        { path: "new/mod.py", content: "y = 1\n" },
        { path: "node_modules/evil.js", content: "no\n" },
      ],
    });
    const names = [...listing(a.archive).keys()].sort();
    expect(names).toEqual([
      "tmp/.loopsmith/",
      "workspace/new/mod.py",
      "workspace/requirements.txt",
      "workspace/run.sh",
      "workspace/src/app.py",
    ]);
    expect(listing(a.archive).get("workspace/run.sh")).toMatch(/^-rwxr-xr-x/); // the overlay keeps the tree file's execute bit
    const content = execFileSync("tar", ["-xOf", "-", "workspace/src/app.py"], { input: a.archive }).toString();
    expect(content).toBe("x = 2\n");
    expect(a.files).toBe(4);
    expect(a.droppedFiles).toEqual(["node_modules/evil.js"]);
    expect(a.manifests.map((m) => m.path)).toEqual(["requirements.txt"]);
  });

  it("keeps links that stay inside the tree and drops the others", async () => {
    const root = tree({
      "lib/real.py": "r\n",
      "inside.py": "->lib/real.py",
      "lib/up.py": "->../lib/real.py",
      dir: "->lib",
      abs: "->/etc/passwd",
      escape: "->../../outside",
      dangling: "->missing/file",
      "into-git": "->.git/config",
    });
    const a = await pack({ treeDir: root, deleted: [], files: [] });
    const l = listing(a.archive);
    expect(l.get("workspace/inside.py")).toContain("-> lib/real.py");
    expect(l.get("workspace/lib/up.py")).toContain("-> ../lib/real.py");
    expect(l.get("workspace/dir")).toContain("-> lib");
    expect(l.get("workspace/dangling")).toContain("-> missing/file");
    expect(a.droppedLinks.sort()).toEqual(["abs", "escape", "into-git"]);
    expect(a.links).toBe(4);
  });

  it("refuses a changed file where the tree has a directory, a file or a link on its path", async () => {
    const root = tree({ "pkg/a.py": "a\n", "mod.py": "m\n", ln: "->pkg" });
    const fail = async (src: TreeOverlay): Promise<string> => {
      try {
        await pack(src);
      } catch (err) {
        if (hasCode(err, "workspace_invalid")) return err.message;
        throw err;
      }
      return "no error";
    };
    expect(await fail({ treeDir: root, deleted: [], files: [{ path: "pkg", content: "" }] })).toContain(
      '"pkg" is a directory',
    );
    expect(await fail({ treeDir: root, deleted: [], files: [{ path: "mod.py/x.py", content: "" }] })).toContain(
      '"mod.py", which is a file',
    );
    expect(await fail({ treeDir: root, deleted: [], files: [{ path: "ln/b.py", content: "" }] })).toContain(
      '"ln", which is a link',
    );
    // Deleting what is in the way makes it fine.
    const ok = await pack({
      treeDir: root,
      deleted: ["pkg/a.py", "mod.py"],
      files: [
        { path: "pkg", content: "" },
        { path: "mod.py/x.py", content: "" },
      ],
    });
    expect(ok.files).toBe(2);
  });

  it("refuses a workspace over the tmpfs, counting 4 KiB pages and inodes", async () => {
    const root = tree(Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${i}.txt`, "x"])));
    const pages = pack({ treeDir: root, deleted: [], files: [] }, { maxBytes: 100 * 1024, maxEntries: 1000 });
    await expect(pages).rejects.toThrow(/more than 0.1 MiB of tmpfs.*raise executor.tmpfsMb/);
    const inodes = pack({ treeDir: root, deleted: [], files: [] }, { maxBytes: 1 << 30, maxEntries: 20 });
    await expect(inodes).rejects.toThrow(/more than 20 files and directories/);
  });

  it("names the dependency manifests", () => {
    for (const p of [
      "requirements.txt",
      "requirements-dev.txt",
      "a/pyproject.toml",
      "setup.py",
      "setup.cfg",
      "package.json",
      "web/package-lock.json",
      "npm-shrinkwrap.json",
      "yarn.lock",
      "pnpm-lock.yaml",
      "poetry.lock",
      "Pipfile.lock",
      "constraints.txt",
    ])
      expect(isManifest(p), p).toBe(true);
    for (const p of ["src/requirements.py", "package.jsonx", "setup.pyc", "README.md"])
      expect(isManifest(p), p).toBe(false);
  });

  it("packs a 10,000-file tree from disk (timed)", async () => {
    const root = mkdtempSync(join(tmpdir(), "repo-bench-"));
    roots.push(root);
    for (let d = 0; d < 100; d++) {
      mkdirSync(join(root, `pkg${d}`, "sub"), { recursive: true });
      for (let f = 0; f < 100; f++)
        writeFileSync(
          join(root, `pkg${d}`, f % 2 ? "sub" : "", `mod_${f}.py`),
          `# module ${d}/${f}\n${"x = 1\n".repeat(40)}`,
        );
    }
    const times: number[] = [];
    let last;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      last = await pack({
        treeDir: root,
        deleted: ["pkg0/mod_0.py"],
        files: [{ path: "pkg1/mod_0.py", content: "changed\n" }],
      });
      times.push(performance.now() - t0);
    }
    expect(last?.files).toBe(9_999);
    console.log(
      `repoArchive, 10,000 files (${Math.round((last?.bytes ?? 0) / 1024)} KiB, archive ${Math.round((last?.archive.length ?? 0) / 1024)} KiB): ${times.map((t) => `${Math.round(t)} ms`).join(", ")}`,
    );
    expect(Math.min(...times)).toBeLessThan(15_000);
  }, 60_000);
});
