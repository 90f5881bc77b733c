import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listTree, MAX_LINE_CHARS, readLines, searchTree } from "./session-tools.js";

let root: string;
let outside: string;

beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), "session-tools-")));
  outside = realpathSync(mkdtempSync(join(tmpdir(), "session-outside-")));
  writeFileSync(join(outside, "secret.txt"), "secret\n");
  mkdirSync(join(root, "src", "deep"), { recursive: true });
  writeFileSync(join(root, "src", "a.py"), "x = 1\ny = 2\nz = 3");
  writeFileSync(join(root, "src", "deep", "b.py"), `${"a".repeat(30)}b\n${"q".repeat(MAX_LINE_CHARS + 50)}\n`);
  writeFileSync(join(root, "empty.txt"), "");
  symlinkSync(outside, join(root, "out_dir"));
  symlinkSync(join(outside, "secret.txt"), join(root, "out_file"));
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

describe("session tools on a host tree", () => {
  it("refuses links that point outside the tree, for read, list and search alike", async () => {
    expect(await readLines(root, "out_file")).toMatchObject({
      ok: false,
      output: expect.stringMatching(/outside the workspace/),
    });
    expect(await listTree(root, "out_dir", 1)).toMatchObject({ ok: false, output: expect.stringMatching(/outside/) });
    expect((await searchTree(root, "secret", undefined, 10)).total).toBe(0);
  });

  it("counts a last line without a newline, and an empty file has no lines", async () => {
    expect(await readLines(root, "src/a.py", 3)).toMatchObject({ ok: true, total: 3, output: "3: z = 3" });
    expect(await readLines(root, "empty.txt")).toMatchObject({ ok: true, total: 0, output: "" });
    expect(await readLines(root, "src/a.py", 3, 2)).toMatchObject({ ok: false });
  });

  it("cuts a long matching line, and a glob without / matches names at any depth", async () => {
    const r = await searchTree(root, "^q+$", "*.py", 10);
    expect(r.total).toBe(1);
    expect(r.output).toBe(`src/deep/b.py:2: ${"q".repeat(MAX_LINE_CHARS)}…`);
    expect((await searchTree(root, "=", "src/*.py", 10)).total).toBe(3);
    expect((await searchTree(root, "=", "*.txt", 10)).output).toBe("no matches");
  });

  it("stops a pattern that backtracks without end, within its time limit", async () => {
    const started = performance.now();
    const r = await searchTree(root, "^(a+)+$", undefined, 10, 300);
    expect(r.ok).toBe(false);
    expect(r.output).toMatch(/backtracks/);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
