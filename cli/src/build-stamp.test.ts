import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BUILD_DIR, BUILD_STAMP, currentBuild, makeStamp } from "../bin/build-stamp.js";
import { serviceCode } from "./stack.js";

describe("build stamp: a build runs only while it matches the sources", () => {
  let root: string;
  const files = ["src/a.ts", "src/b.ts", "package-lock.json"];
  const stamp = (): void => {
    mkdirSync(join(root, BUILD_DIR), { recursive: true });
    writeFileSync(join(root, BUILD_DIR, BUILD_STAMP), JSON.stringify(makeStamp(root, files)));
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "loopsmith-stamp-"));
    mkdirSync(join(root, "src"));
    writeFileSync(join(root, "src", "a.ts"), "export const a = 1;\n");
    writeFileSync(join(root, "src", "b.ts"), "export const b = 2;\n");
    writeFileSync(join(root, "package-lock.json"), "{}\n");
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("is current right after the build, also when a file's timestamp changes but not its bytes", () => {
    stamp();
    expect(currentBuild(root, {})).toBe(join(root, BUILD_DIR));
    utimesSync(join(root, "src", "a.ts"), new Date(2030, 0, 1), new Date(2030, 0, 1));
    expect(currentBuild(root, {})).toBe(join(root, BUILD_DIR));
  });

  it("is stale when a source changes, is deleted, or the lock file changes", () => {
    stamp();
    writeFileSync(join(root, "src", "b.ts"), "export const b = 3;\n");
    expect(currentBuild(root, {})).toBeNull();
    stamp();
    rmSync(join(root, "src", "a.ts"));
    expect(currentBuild(root, {})).toBeNull();
    writeFileSync(join(root, "src", "a.ts"), "export const a = 1;\n");
    expect(currentBuild(root, {})).toBe(join(root, BUILD_DIR));
    writeFileSync(join(root, "package-lock.json"), '{"lockfileVersion":3}\n');
    expect(currentBuild(root, {})).toBeNull();
  });

  it("is not current without a build, with a malformed or older-format stamp, or with LOOPSMITH_FROM_SOURCE=1", () => {
    expect(currentBuild(root, {})).toBeNull();
    stamp();
    expect(currentBuild(root, { LOOPSMITH_FROM_SOURCE: "1" })).toBeNull();
    writeFileSync(join(root, BUILD_DIR, BUILD_STAMP), "{not json");
    expect(currentBuild(root, {})).toBeNull();
    writeFileSync(join(root, BUILD_DIR, BUILD_STAMP), JSON.stringify({ ...makeStamp(root, files), v: 0 }));
    expect(currentBuild(root, {})).toBeNull();
  });

  it("lists each file once, sorted, so the same sources give the same fingerprint in any order", () => {
    const one = makeStamp(root, files);
    const two = makeStamp(root, [...files].reverse().concat("src/a.ts"));
    expect(two.files).toEqual(["package-lock.json", "src/a.ts", "src/b.ts"]);
    expect(two.fingerprint).toBe(one.fingerprint);
  });
});

describe("serviceCode", () => {
  it("runs each service's TypeScript main module through tsx when told to run the sources", () => {
    const code = serviceCode({ LOOPSMITH_FROM_SOURCE: "1" });
    expect(code.from).toBe("source");
    for (const name of ["memory", "architect"] as const) {
      const args = code.args(name);
      expect(args[0]).toBe("--import");
      expect(args.at(-1)).toMatch(new RegExp(`services/${name}/src/main\\.ts$`));
    }
  });
});
