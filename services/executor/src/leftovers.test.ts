import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { LABEL_SESSION, removeSessionDirs } from "./leftovers.js";
import { LABEL } from "./sandbox.js";

const log = pino({ level: "silent" });
const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** An engine that lists these containers (owner, state, session or warm-pool), whatever the filter. */
const engine = (containers: Array<[owner: string, state: string, kind?: "pool"]>): Docker =>
  ({
    listContainers: async () =>
      containers.map(([owner, state, kind], i) => ({
        Id: `c${i}`,
        State: state,
        Labels: { [LABEL]: owner, ...(kind === "pool" ? {} : { [LABEL_SESSION]: `s-${i}` }) },
      })),
  }) as unknown as Docker;

/** A sessions directory with one session copy under each of `owners`, changed `ageS` seconds ago. */
function sessionsDir(owners: string[], ageS = 600): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-session-dirs-"));
  made.push(root);
  const then = Date.now() / 1000 - ageS;
  for (const owner of owners) {
    mkdirSync(join(root, owner, "t-1-abc", "x", "workspace"), { recursive: true });
    writeFileSync(join(root, owner, "t-1-abc", "x", "workspace", "a.py"), "x = 1\n");
    utimesSync(join(root, owner), then, then);
  }
  return root;
}

describe("removeSessionDirs", () => {
  it("removes the directories of executors the bus does not list and that hold no live container", async () => {
    const root = sessionsDir(["me", "alive", "dead", "stoppedonly", "otherbus", "poolonly"]);
    const removed = await removeSessionDirs(
      engine([
        ["stoppedonly", "exited"],
        ["otherbus", "running"],
        // A killed executor's pre-created warm container: no session, so it keeps nothing.
        ["poolonly", "created", "pool"],
      ]),
      root,
      "me",
      log,
      { live: new Set(["alive"]) },
    );
    expect(removed.sort()).toEqual(["dead", "poolonly", "stoppedonly"]);
    expect(readdirSync(root).sort()).toEqual(["alive", "me", "otherbus"]);
  });

  it("without the bus's answer, leaves a directory changed within the grace", async () => {
    const old = sessionsDir(["dead"]);
    expect(await removeSessionDirs(engine([]), old, "me", log)).toEqual(["dead"]);
    const fresh = sessionsDir(["opening"], 1);
    expect(await removeSessionDirs(engine([]), fresh, "me", log)).toEqual([]);
    expect(readdirSync(fresh)).toEqual(["opening"]);
  });

  it("is a no-op when no session was ever opened (no directory)", async () => {
    expect(await removeSessionDirs(engine([]), join(tmpdir(), "loopsmith-no-such-dir-xyz"), "me", log)).toEqual([]);
  });
});
