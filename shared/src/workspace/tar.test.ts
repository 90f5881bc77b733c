import { describe, expect, it } from "vitest";
import { PassThrough } from "node:stream";
import { pack } from "tar-stream";
import { forEachTarEntry, readTar, safeTarPath } from "./tar.js";

type Member = {
  name: string;
  body?: string | Buffer;
  type?: "file" | "directory" | "symlink";
  mode?: number;
  linkname?: string;
};

/** A tar of `members`, written by tar-stream's packer. */
async function tarOf(members: Member[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const c of p) chunks.push(c as Buffer);
  })();
  for (const m of members) {
    p.entry(
      { name: m.name, type: m.type ?? "file", mode: m.mode, linkname: m.linkname },
      m.body === undefined ? "" : Buffer.from(m.body),
    );
  }
  p.finalize();
  await done;
  return Buffer.concat(chunks);
}

describe("safeTarPath", () => {
  it("normalises relative paths and refuses ones that leave the root", () => {
    expect(safeTarPath("./a//b/./c.py")).toBe("a/b/c.py");
    expect(safeTarPath("dir/")).toBe("dir");
    expect(safeTarPath("a/../b")).toBe("b");
    for (const bad of ["/etc/passwd", "../x", "..", "a/../../x", ".", "./", "a\0b"])
      expect(safeTarPath(bad)).toBeUndefined();
  });
});

describe("readTar", () => {
  it("hands over each member's path, type, mode, bytes and link target in archive order", async () => {
    const tar = await tarOf([
      { name: "src", type: "directory", mode: 0o755 },
      { name: "src/run.sh", body: "#!/bin/sh\n", mode: 0o755 },
      { name: "src/ünï 字.txt", body: "héllo" },
      { name: "link", type: "symlink", linkname: "src/run.sh" },
    ]);
    const entries = await readTar(tar);
    expect(entries.map((e) => [e.path, e.type, e.mode & 0o777])).toEqual([
      ["src", "directory", 0o755],
      ["src/run.sh", "file", 0o755],
      ["src/ünï 字.txt", "file", 0o644],
      ["link", "symlink", 0o644],
    ]);
    expect(entries[2]?.content.toString("utf8")).toBe("héllo");
    expect(entries[3]?.linkname).toBe("src/run.sh");
  });

  it("skips members whose path escapes the root and, with select, ones not chosen", async () => {
    const tar = await tarOf([
      { name: "../evil", body: "x" },
      { name: "/abs", body: "x" },
      { name: "keep.py", body: "ok" },
      { name: "skip.txt", body: "no" },
    ]);
    expect((await readTar(tar)).map((e) => e.path)).toEqual(["keep.py", "skip.txt"]);
    const seen: string[] = [];
    const picked = await readTar(tar, { select: (m) => (seen.push(m.path), m.path.endsWith(".py")) });
    expect(picked.map((e) => e.path)).toEqual(["keep.py"]);
    expect(seen).toEqual(["keep.py", "skip.txt"]);
  });

  it("throws bad_request naming the cap when a member or the whole passes it", async () => {
    const tar = await tarOf([
      { name: "a", body: "x".repeat(600) },
      { name: "b", body: "y".repeat(600) },
    ]);
    await expect(readTar(tar, { maxEntryBytes: 599 })).rejects.toMatchObject({
      code: "bad_request",
      message: expect.stringContaining("a holds more than 599 bytes"),
    });
    await expect(readTar(tar, { maxEntryBytes: 600, maxTotalBytes: 1000 })).rejects.toMatchObject({
      code: "bad_request",
      message: expect.stringContaining("more than 1000 bytes"),
    });
    expect((await readTar(tar, { maxEntryBytes: 600, maxTotalBytes: 1200 })).length).toBe(2);
    // An unselected member counts against no cap.
    expect((await readTar(tar, { maxTotalBytes: 600, select: (m) => m.path === "b" })).map((e) => e.path)).toEqual([
      "b",
    ]);
  });

  it("throws bad_request for bytes that are not a tar archive", async () => {
    await expect(readTar(Buffer.from("this is not a tar archive, just some text ".repeat(20)))).rejects.toMatchObject({
      code: "bad_request",
    });
    const tar = await tarOf([{ name: "a", body: "x".repeat(2000) }]);
    await expect(readTar(tar.subarray(0, 1024))).rejects.toMatchObject({ code: "bad_request" });
  });

  it("reads a stream, passes the stream's own error through and destroys it when a cap stops the read", async () => {
    const tar = await tarOf([
      { name: "a", body: "x".repeat(5000) },
      { name: "b", body: "y" },
    ]);
    const ok = new PassThrough();
    ok.end(tar);
    expect((await readTar(ok)).map((e) => e.content.byteLength)).toEqual([5000, 1]);

    const failing = new PassThrough();
    failing.write(tar.subarray(0, 512));
    const boom = new Error("engine went away");
    setTimeout(() => failing.destroy(boom), 10);
    await expect(readTar(failing)).rejects.toBe(boom);

    const capped = new PassThrough();
    capped.write(tar.subarray(0, 2048));
    await expect(readTar(capped, { maxEntryBytes: 1000 })).rejects.toMatchObject({ code: "bad_request" });
    expect(capped.destroyed).toBe(true);
  });

  it("passes the callback's error through unchanged and stops reading", async () => {
    const tar = await tarOf([
      { name: "a", body: "1" },
      { name: "b", body: "2" },
    ]);
    const mine = new Error("disk full");
    const seen: string[] = [];
    await expect(
      forEachTarEntry(tar, (e) => {
        seen.push(e.path);
        throw mine;
      }),
    ).rejects.toBe(mine);
    expect(seen).toEqual(["a"]);
  });
});
