import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readInstructions } from "./instructions.js";

/** A tree with `files` (path → text) under a fresh temporary directory. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-instructions-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe("readInstructions", () => {
  it("reads AGENTS.md at the root, before CONVENTIONS.md", () => {
    const root = tree({ "AGENTS.md": "Use pytest fixtures.\n", "CONVENTIONS.md": "Use tabs.\n" });
    expect(readInstructions(root)).toEqual({
      path: "AGENTS.md",
      text: "Use pytest fixtures.\n",
      bytes: 21,
      truncated: false,
    });
  });

  it("falls back to CONVENTIONS.md when there is no AGENTS.md, or only a blank one", () => {
    expect(readInstructions(tree({ "CONVENTIONS.md": "Use tabs.\n" }))?.path).toBe("CONVENTIONS.md");
    expect(readInstructions(tree({ "AGENTS.md": " \n\n", "CONVENTIONS.md": "Use tabs.\n" }))?.text).toBe("Use tabs.\n");
  });

  it("finds nothing when neither is at the root (nested files, other names and directories do not count)", () => {
    expect(readInstructions(tree({ "docs/AGENTS.md": "x\n", "agents.md": "x\n", "README.md": "x\n" }))).toBeUndefined();
    const root = tree({});
    mkdirSync(join(root, "AGENTS.md"));
    expect(readInstructions(root)).toBeUndefined();
  });

  it("follows a link to a file inside the tree, never one that leaves it", () => {
    const root = tree({ "CLAUDE.md": "Prefer small functions.\n" });
    symlinkSync("CLAUDE.md", join(root, "AGENTS.md"));
    expect(readInstructions(root)).toMatchObject({ path: "AGENTS.md", text: "Prefer small functions.\n" });
    const outside = tree({ "secret.txt": "do not read\n" });
    const leaking = tree({});
    symlinkSync(join(outside, "secret.txt"), join(leaking, "AGENTS.md"));
    expect(readInstructions(leaking)).toBeUndefined();
  });

  it("cuts a large file to the bound at a line end and keeps the whole file's size", () => {
    const line = `${"r".repeat(99)}\n`;
    const root = tree({ "AGENTS.md": line.repeat(1_000) }); // 100 000 bytes
    const read = readInstructions(root, 1_050);
    expect(read).toMatchObject({ path: "AGENTS.md", bytes: 100_000, truncated: true });
    expect(read?.text).toBe(line.repeat(10));
    // Exactly at the bound: whole.
    expect(readInstructions(tree({ "AGENTS.md": line.repeat(10) }), 1_000)).toMatchObject({ truncated: false });
  });
});
