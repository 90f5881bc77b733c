/**
 * `loopsmith images` against the local engine (the images a stack needs are brought on first
 * use, saying so and how long). A tiny image (an empty root, `docker import`)
 * stands in for a sandbox image: saved to an archive, removed from the engine, then
 * `images --check` names it, `images` loads it from `LOOPSMITH_SANDBOX_IMAGES` and says how
 * long it took, and `--check` passes. Building from Debian packages (minutes, root) is what
 * deploy/prepare.sh does on every CI run; its wiring is unit-tested in cli/src/images.test.ts.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loopsmith } from "../fixtures/cli.js";

const tmp = mkdtempSync(join(tmpdir(), "loopsmith-images-"));
const image = `loopsmith-test/first-use:${Date.now().toString(36)}`;
const archive = join(tmp, "images.tar");
const docker = (...args: string[]): string => execFileSync("docker", args, { encoding: "utf8" }).trim();

afterAll(() => {
  try {
    docker("rmi", "-f", image);
  } catch {
    // already gone
  }
  rmSync(tmp, { recursive: true, force: true });
});

describe("loopsmith images", () => {
  it("names a missing image, loads it from the configured archive with the time taken, then finds it", async () => {
    execFileSync("bash", ["-c", `tar -cf - -T /dev/null | docker import - ${image} >/dev/null`]);
    docker("save", "-o", archive, image);
    docker("rmi", image);
    const env = { LOOPSMITH_SANDBOX_PYTHON_IMAGE: image, NATS_URL: "", LOOPSMITH_DATA_DIR: join(tmp, "data") };

    const before = await loopsmith(["images", "--check"], env, 60_000);
    expect(before.code, before.stderr).toBe(1);
    expect(before.stdout).toContain(`missing: ${image} (build them: sudo loopsmith images)`);

    const load = await loopsmith(["images"], { ...env, LOOPSMITH_SANDBOX_IMAGES: archive }, 60_000);
    expect(load.code, load.stderr).toBe(0);
    expect(load.stderr).toContain(`loading ${image} from ${archive} (first use)`);
    expect(load.stderr).toMatch(/loopsmith: loaded 1 image\(s\) in \d+\.\d s/);
    expect(docker("image", "inspect", "--format", "{{.Id}}", image)).toMatch(/^sha256:/);

    const after = await loopsmith(["images", "--check"], env, 60_000);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).toContain("all present");
  }, 120_000);
});
