/**
 * Two commands at once without `loopsmith up`, on one data directory: the first runs a stack
 * of its own; the second, instead of failing on the embedded memory's lock ("in use by
 * process N", exit 3), says it waits for the first and then runs. Both tasks pass.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO, loopsmith } from "../fixtures/cli.js";

describe("two solves at once without up", () => {
  it("the second waits for the first's stack, says so, and both pass", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-two-commands-"));
    const env = { LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOOPSMITH_CONFIG: "" };
    const solve = (id: string) =>
      loopsmith(
        [
          "solve",
          "--file",
          join(REPO, "examples", "roman", "task.json"),
          "--script",
          join(REPO, "examples", "roman", "script.json"),
          "--provider",
          "scripted",
          "--task-id",
          id,
        ],
        env,
        400_000,
      );
    const first = solve("two-commands-1");
    // The second a moment later: both are starting when the other holds the data directory.
    await new Promise((r) => setTimeout(r, 1_500));
    const second = solve("two-commands-2");
    const [a, b] = await Promise.all([first, second]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    // Whichever reached the data directory second waited for the other.
    expect(`${a.stderr}${b.stderr}`).toMatch(
      /another loopsmith command \(process \d+\) runs its own stack on .*; waiting for it to finish/,
    );
    expect(`${a.stderr}${b.stderr}`).not.toMatch(/in use by process/);
    expect(a.stdout).toMatch(/passed/);
    expect(b.stdout).toMatch(/passed/);
  }, 600_000);
});
