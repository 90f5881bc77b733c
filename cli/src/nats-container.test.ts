import { existsSync, mkdtempSync, statSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HEARTBEAT_EVERY_MS, ORPHAN_AFTER_MS, startHeartbeat } from "./nats-container.js";

describe("the owner's heartbeat file", () => {
  it("is touched while it runs and deleted when it stops", async () => {
    expect(HEARTBEAT_EVERY_MS * 3).toBeLessThanOrEqual(ORPHAN_AFTER_MS);
    const dir = join(mkdtempSync(join(tmpdir(), "loopsmith-heartbeat-")), "run");
    const beat = startHeartbeat(dir, "00000000-0000-4000-8000-000000000000", 50);
    expect(beat.path).toBe(join(dir, "nats-00000000-0000-4000-8000-000000000000.heartbeat"));
    const old = new Date(Date.now() - 60_000);
    utimesSync(beat.path, old, old);
    await new Promise((r) => setTimeout(r, 200));
    expect(Date.now() - statSync(beat.path).mtimeMs).toBeLessThan(1_000);
    beat.stop();
    beat.stop();
    expect(existsSync(beat.path)).toBe(false);
  });
});
