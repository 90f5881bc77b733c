/**
 * The CLI never removes a NATS container it did not start unless that container's owner
 * stopped beating: "another CLI" (another pid namespace or host: its pid means nothing
 * here) has started NATS containers; a real `loopsmith history`, which starts its own NATS
 * and clears orphans first, must keep the one with a fresh heartbeat and the one whose
 * heartbeat it cannot see, and remove the one whose heartbeat is stale.
 */
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "@loopsmith/shared/runtime";
import { loopsmith } from "../fixtures/cli.js";

const docker = new Docker();
const otherDataDir = mkdtempSync(join(tmpdir(), "loopsmith-other-cli-"));
const ownDataDir = mkdtempSync(join(tmpdir(), "loopsmith-orphans-"));
const created: string[] = [];

/** A NATS container as another CLI starts it (see cli/src/nats-container.ts), with its heartbeat file. */
async function otherCli(
  heartbeatAgeMs: number | null,
  dir = join(otherDataDir, "run"),
): Promise<{ id: string; heartbeat: string }> {
  const instance = randomUUID();
  const heartbeat = join(dir, `nats-${instance}.heartbeat`);
  if (heartbeatAgeMs !== null) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(heartbeat, "{}\n");
    const at = new Date(Date.now() - heartbeatAgeMs);
    utimesSync(heartbeat, at, at);
  }
  const container = await docker.createContainer({
    Image: loadConfig({ env: { ...process.env, NATS_URL: "", DATABASE_URL: "" } }).images.nats,
    Cmd: ["-js", "-sd", "/tmp/js"],
    // A pid no process here has: the owner lives in another pid namespace or on another host.
    Labels: {
      "org.loopsmith.cli": "4194304",
      "org.loopsmith.cli.instance": instance,
      "org.loopsmith.cli.heartbeat": heartbeat,
    },
  });
  created.push(container.id);
  await container.start();
  return { id: container.id, heartbeat };
}

async function exists(id: string): Promise<boolean> {
  return docker
    .getContainer(id)
    .inspect()
    .then(() => true)
    .catch(() => false);
}

afterAll(async () => {
  await Promise.all(
    created.map((id) =>
      docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
});

describe("orphaned NATS containers", () => {
  it("keeps a container whose owner beats (or whose heartbeat it cannot see); removes one whose heartbeat is stale", async () => {
    const fresh = await otherCli(2_000);
    const unseen = await otherCli(null, join(otherDataDir, "elsewhere"));
    const stale = await otherCli(120_000);

    const run = await loopsmith(["history", "--json"], {
      LOOPSMITH_DATA_DIR: ownDataDir,
      NATS_URL: "",
      DATABASE_URL: "",
    });
    expect(run.code, run.stderr).toBe(0);

    expect(await exists(fresh.id)).toBe(true);
    expect(await exists(unseen.id)).toBe(true);
    expect(await exists(stale.id)).toBe(false);
    expect(existsSync(fresh.heartbeat)).toBe(true);
    expect(existsSync(stale.heartbeat)).toBe(false);
    // The CLI removed its own container and heartbeat when it stopped.
    const own = await docker.listContainers({ all: true, filters: { label: [`org.loopsmith.cli.heartbeat`] } });
    expect(own.filter((c) => c.Labels["org.loopsmith.cli.heartbeat"]?.startsWith(ownDataDir))).toEqual([]);
    expect(readdirSync(join(ownDataDir, "run"))).toEqual([]);
  });
});
