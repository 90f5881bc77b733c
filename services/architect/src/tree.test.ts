import { describe, expect, it } from "vitest";
import { pack } from "tar-stream";
import { readTar } from "@loopsmith/shared/workspace";
import { candidateSnapshot } from "./tree.js";

async function tarOf(
  entries: { name: string; type?: "directory" | "symlink"; body?: string; mode?: number; linkname?: string }[],
): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on("data", (c: unknown) => chunks.push(c as Buffer));
  const ended = new Promise<void>((resolve) => p.on("end", () => resolve()));
  for (const e of entries) {
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error | null): void => (err ? reject(err) : resolve());
      if (e.type) p.entry({ name: e.name, type: e.type, mode: e.mode, linkname: e.linkname }, done);
      else p.entry({ name: e.name, mode: e.mode, size: Buffer.byteLength(e.body ?? "") }, e.body ?? "", done);
    });
  }
  p.finalize();
  await ended;
  return Buffer.concat(chunks);
}

describe("candidateSnapshot", () => {
  it("replaces, adds and deletes files, keeps modes, directories and symlinks, and is deterministic", async () => {
    const parent = await tarOf([
      { name: "src/", type: "directory", mode: 0o755 },
      { name: "src/a.py", body: "a = 1\n" },
      { name: "run.sh", body: "#!/bin/sh\n", mode: 0o755 },
      { name: "old.py", body: "gone\n" },
      { name: "link", type: "symlink", linkname: "src/a.py" },
    ]);
    const files = [
      { path: "src/a.py", content: "a = 2\n" },
      { path: "src/new.py", content: "b = 3\n" },
    ];
    const first = await candidateSnapshot(parent, files, ["old.py"]);
    const again = await candidateSnapshot(parent, files, ["old.py"]);
    expect(again.id).toBe(first.id);
    const entries = await readTar(first.tar);
    expect(entries.map((e) => [e.path, e.type])).toEqual([
      ["src", "directory"],
      ["src/a.py", "file"],
      ["run.sh", "file"],
      ["link", "symlink"],
      ["src/new.py", "file"],
    ]);
    const byPath = new Map(entries.map((e) => [e.path, e]));
    expect(byPath.get("src/a.py")?.content.toString()).toBe("a = 2\n");
    expect(byPath.get("src/new.py")?.content.toString()).toBe("b = 3\n");
    expect(byPath.get("run.sh")?.mode).toBe(0o755);
    expect(byPath.get("link")?.linkname).toBe("src/a.py");
    const other = await candidateSnapshot(parent, [{ path: "src/a.py", content: "a = 3\n" }], []);
    expect(other.id).not.toBe(first.id);
  });
});
