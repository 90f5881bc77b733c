import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { hasCode } from "@loopsmith/shared/runtime";
import { checkFiles, readWorkspaceDir } from "./workspace.js";

const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
};

describe("checkFiles", () => {
  it("accepts nested relative paths", () => {
    expect(() =>
      checkFiles(
        [
          { path: "a/b/c.py", content: "x" },
          { path: "a/d.py", content: "" },
        ],
        1024,
      ),
    ).not.toThrow();
  });

  it("refuses escapes, duplicates, file/directory clashes and oversize", () => {
    for (const path of ["../x", "/etc/passwd", "a/../../x", "a//b", "./a", "a\\b", ""]) {
      expect(
        codeOf(() => checkFiles([{ path, content: "" }], 1024)),
        path,
      ).toBe("workspace_invalid");
    }
    expect(
      codeOf(() =>
        checkFiles(
          [
            { path: "a", content: "" },
            { path: "a", content: "" },
          ],
          1024,
        ),
      ),
    ).toBe("workspace_invalid");
    expect(
      codeOf(() =>
        checkFiles(
          [
            { path: "a", content: "" },
            { path: "a/b", content: "" },
          ],
          1024,
        ),
      ),
    ).toBe("workspace_invalid");
    expect(
      codeOf(() =>
        checkFiles(
          [
            { path: "a/b", content: "" },
            { path: "a", content: "" },
          ],
          1024,
        ),
      ),
    ).toBe("workspace_invalid");
    expect(codeOf(() => checkFiles([{ path: "a", content: "x".repeat(2000) }], 1024))).toBe("workspace_invalid");
  });
});

describe("readWorkspaceDir", () => {
  let dir = "";
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const make = (): string => (dir = mkdtempSync(join(tmpdir(), "ws-")));

  it("reads files, skips .git and __pycache__, follows links that stay inside", async () => {
    const d = make();
    mkdirSync(join(d, "pkg"));
    mkdirSync(join(d, ".git"));
    mkdirSync(join(d, "__pycache__"));
    writeFileSync(join(d, "pkg", "m.py"), "X = 1\n");
    writeFileSync(join(d, ".git", "HEAD"), "ref");
    writeFileSync(join(d, "__pycache__", "m.pyc"), Buffer.from([0, 255]));
    symlinkSync("pkg/m.py", join(d, "alias.py"));
    const files = await readWorkspaceDir(d);
    expect(files).toEqual([
      { path: "alias.py", content: "X = 1\n" },
      { path: "pkg/m.py", content: "X = 1\n" },
    ]);
  });

  it("refuses links out of the directory, binary files, and a missing directory", async () => {
    const d = make();
    symlinkSync("/etc", join(d, "etc"));
    expect(hasCode(await readWorkspaceDir(d).catch((e: unknown) => e), "workspace_invalid")).toBe(true);
    rmSync(join(d, "etc"));
    symlinkSync("../../../../../etc/hostname", join(d, "h"));
    expect(hasCode(await readWorkspaceDir(d).catch((e: unknown) => e), "workspace_invalid")).toBe(true);
    rmSync(join(d, "h"));
    writeFileSync(join(d, "bin"), Buffer.from([0xff, 0xfe, 0x00, 0xc3]));
    expect(hasCode(await readWorkspaceDir(d).catch((e: unknown) => e), "workspace_invalid")).toBe(true);
    expect(hasCode(await readWorkspaceDir(join(d, "nope")).catch((e: unknown) => e), "not_found")).toBe(true);
  });
});
