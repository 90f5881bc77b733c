/**
 * A stack that stays up: `loopsmith up` starts NATS and the five services in the background
 * and records them; `status` reads each service's $SRV info; `solve` and `history` use the
 * running stack and start nothing of their own; `down` stops every process and the NATS
 * container and removes the record. Real Docker, NATS, PGlite and sandbox; scripted provider.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { afterAll, describe, expect, it } from "vitest";
import { REPO, jsonLines, loopsmith } from "../fixtures/cli.js";
import { currentBuild } from "../../cli/bin/build-stamp.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-up-"));
const env = { LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "info" };
const recordPath = join(dataDir, "run", "stack.json");
const task = join(REPO, "examples", "roman", "task.json");
const script = join(REPO, "examples", "roman", "script.json");

interface Record {
  natsUrl: string;
  natsContainerId: string;
  pids: { [name: string]: number };
}
const record = (): Record => JSON.parse(readFileSync(recordPath, "utf8")) as Record;
/** True while `pid` runs (a zombie waiting for its reaper counts as gone). */
const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};
/** The pids that wrote each service's log (a service started twice shows two). */
const logPids = (): Set<number> =>
  new Set(
    readdirSync(join(dataDir, "logs")).flatMap((f) =>
      readFileSync(join(dataDir, "logs", f), "utf8")
        .split("\n")
        .filter(Boolean)
        .flatMap((l) => {
          try {
            return [(JSON.parse(l) as { pid: number }).pid];
          } catch {
            return [];
          }
        }),
    ),
  );

afterAll(async () => {
  if (existsSync(recordPath)) await loopsmith(["down"], env, 60_000);
});

describe("loopsmith up, status, solve on the running stack, down", () => {
  it("up starts and records the stack; a second up leaves it as it is", async () => {
    const up = await loopsmith(["up", "--provider", "scripted", "--script", script, "--json"], env, 120_000);
    expect(up.code, up.stderr).toBe(0);
    const said = jsonLines(up.stdout).at(-1) as { started: string[]; scripted: boolean; readyMs: number; from: string };
    expect([...said.started].sort()).toEqual(["architect", "builder", "executor", "memory", "reviewer"]);
    expect(said.scripted).toBe(true);
    const r = record();
    expect(Object.values(r.pids).every(alive)).toBe(true);
    // The build when it is current with the sources (npm test builds it first), else the sources.
    const code = currentBuild(REPO) ? "build" : "source";
    expect(said.from).toBe(code);
    for (const [name, pid] of Object.entries(r.pids)) {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const main = code === "build" ? `dist/app/dist/${name}.js` : `services/${name}/src/main.ts`;
      expect(
        argv.some((a) => a.endsWith(main)),
        `${name}: ${argv.join(" ")}`,
      ).toBe(true);
    }
    expect((await new Docker().getContainer(r.natsContainerId).inspect()).State.Running).toBe(true);
    const again = await loopsmith(["up", "--json"], env, 60_000);
    expect(again.code, again.stderr).toBe(0);
    expect(jsonLines(again.stdout).at(-1)).toMatchObject({ already: true, natsUrl: r.natsUrl });
    expect(record().pids).toEqual(r.pids);
  });

  it("status shows all five services with their metadata", async () => {
    const status = await loopsmith(["status", "--json"], env, 30_000);
    expect(status.code, status.stderr).toBe(0);
    const s = jsonLines(status.stdout).at(-1) as {
      up: boolean;
      services: Array<{ service: string; instances: number; metadata?: { [k: string]: string } }>;
    };
    expect(s.up).toBe(true);
    expect(s.services.map((x) => [x.service, x.instances])).toEqual([
      ["architect", 1],
      ["builder", 1],
      ["reviewer", 1],
      ["executor", 1],
      ["memory", 1],
    ]);
    expect(s.services.find((x) => x.service === "architect")?.metadata).toMatchObject({
      provider: "scripted",
      scripted: "true",
    });
  });

  it("solve and history use the running stack and start nothing", async () => {
    const before = logPids();
    for (let i = 0; i < 2; i++) {
      const solve = await loopsmith(["solve", "--file", task, "--json"], env, 180_000);
      expect(solve.code, solve.stderr).toBe(0);
      expect(jsonLines(solve.stdout).at(-1)).toMatchObject({ status: "passed" });
    }
    const history = await loopsmith(["history", "--json"], env, 60_000);
    expect(history.code, history.stderr).toBe(0);
    expect((JSON.parse(history.stdout) as { tasks: unknown[] }).tasks).toHaveLength(2);
    // Every log line came from the processes up started: no service was started again.
    expect(logPids()).toEqual(before);
    expect(Object.values(record().pids).every(alive)).toBe(true);
  });

  it("down stops the services and NATS and removes the record; status then says no stack is up", async () => {
    const r = record();
    const down = await loopsmith(["down", "--json"], env, 60_000);
    expect(down.code, down.stderr).toBe(0);
    expect(Object.values(r.pids).some(alive)).toBe(false);
    expect(existsSync(recordPath)).toBe(false);
    await expect(new Docker().getContainer(r.natsContainerId).inspect()).rejects.toThrow();
    const status = await loopsmith(["status"], env, 30_000);
    expect(status.code).toBe(3);
    expect(status.stdout).toContain("no stack is up");
  });
});
