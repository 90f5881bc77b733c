import { describe, expect, it } from "vitest";
import { mkdtemp, readFile, readlink, rm, stat } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pack } from "tar-stream";
import { extractTar } from "./snapshot.js";

/** A tar of `members` (name, body or link target, mode, type). */
async function tarOf(
  members: { name: string; body?: string; mode?: number; type?: "file" | "directory" | "symlink"; linkname?: string }[],
): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const c of p) chunks.push(c as Buffer);
  })();
  for (const m of members)
    p.entry({ name: m.name, type: m.type ?? "file", mode: m.mode, linkname: m.linkname }, m.body ?? "");
  p.finalize();
  await done;
  return Buffer.concat(chunks);
}

describe("extractTar", () => {
  it("writes files with their execute bit and links as links; skips .git and members outside the tree", async () => {
    const root = await mkdtemp(join(tmpdir(), "snapshot-test-"));
    const dir = join(root, "tree");
    try {
      const tar = await tarOf([
        { name: "src/", type: "directory" },
        { name: "src/app.py", body: "print(1)\n" },
        { name: "run.sh", body: "#!/bin/sh\n", mode: 0o775 },
        { name: "current", type: "symlink", linkname: "src/app.py" },
        { name: ".git/config", body: "[core]\n" },
        { name: "../escape.txt", body: "no" },
      ]);
      const out = await extractTar(tar, dir);
      expect(out).toEqual({ files: ["run.sh", "src/app.py"], symlinks: ["current"], bytes: 19 });
      expect(await readFile(join(dir, "src/app.py"), "utf8")).toBe("print(1)\n");
      expect((await stat(join(dir, "run.sh"))).mode & 0o777).toBe(0o755);
      expect((await stat(join(dir, "src/app.py"))).mode & 0o777).toBe(0o644);
      expect(await readlink(join(dir, "current"))).toBe("src/app.py");
      expect(existsSync(join(dir, ".git"))).toBe(false);
      expect(existsSync(join(root, "escape.txt"))).toBe(false);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("throws bad_request for bytes that are not a tar archive", async () => {
    const root = await mkdtemp(join(tmpdir(), "snapshot-test-"));
    try {
      await expect(extractTar(Buffer.from("not a tar ".repeat(100)), join(root, "t"))).rejects.toMatchObject({
        code: "bad_request",
        message: expect.stringContaining("not a readable tar archive"),
      });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
