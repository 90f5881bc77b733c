/**
 * `npm run build` (deploy/build-app.ts) into a temporary folder: the bundles run, and the
 * stamp beside them covers the sources they were made from, so `currentBuild` (which the
 * `loopsmith` command and `loopsmith up` use to choose the build over the sources) is right.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUILD_STAMP, currentBuild, type BuildStamp } from "../cli/bin/build-stamp.js";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const run = promisify(execFile);

describe("the build and its stamp", () => {
  let out: string;
  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), "loopsmith-build-"));
    await run(process.execPath, ["--import", "tsx", "deploy/build-app.ts", "--out", out], { cwd: REPO });
  });
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("stamps the sources of every entry point, the prompts, the migrations and the lock file, and is current for this tree", () => {
    const stamp = JSON.parse(readFileSync(join(out, BUILD_STAMP), "utf8")) as BuildStamp;
    for (const f of [
      "shared/src/contracts/index.ts",
      "shared/src/runtime/index.ts",
      "cli/src/main.ts",
      "package-lock.json",
      "deploy/build-app.ts",
      "deploy/seccomp/sandbox.json",
    ])
      expect(stamp.files).toContain(f);
    for (const s of ["architect", "builder", "reviewer", "executor", "memory"])
      expect(stamp.files).toContain(`services/${s}/src/main.ts`);
    expect(stamp.files.some((f) => f.startsWith("shared/prompts/"))).toBe(true);
    expect(stamp.files.some((f) => f.startsWith("services/memory/migrations/"))).toBe(true);
    expect(stamp.files.some((f) => f.includes("node_modules"))).toBe(false);
    expect(currentBuild(REPO, {}, out)).toBe(out);
  });

  it("runs the CLI from the bundle", async () => {
    const { stdout } = await run(process.execPath, [join(out, "dist", "cli.js"), "--version"], { cwd: tmpdir() });
    const version = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version;
    expect(stdout.trim()).toBe(version);
  });
});
