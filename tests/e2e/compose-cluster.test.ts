/**
 * The stack on a three-node JetStream cluster and three Docker engines, as the
 * docs/OPERATIONS.md's "Running on several machines" section starts it: `bash deploy/compose-env.sh
 * --local-images --engines`, then `bash deploy/cluster-up.sh --build` (the NATS nodes first,
 * a node left out of the JetStream meta group restarted, then `docker compose -f
 * docker-compose.yml -f deploy/compose.cluster.yml up -d --build --wait`), offline, keyless. Checks that every
 * stream, KV bucket and object store reports 3 replicas, that the three executors report
 * three engines, that scripted tasks pass while one NATS node is killed with SIGKILL with
 * their sandbox runs spread over the engines, that the node catches up when it is back, and
 * that no sandbox is left on any engine once the executors stop.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import pRetry from "p-retry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Svcm } from "@nats-io/services";
import { ServiceNames, Streams, snapshotBucket } from "@loopsmith/shared/bus";
import { REPO, runBash, type CliRun } from "../fixtures/cli.js";

const run = promisify(execFile);
const PROJECT = "loopsmith-e2e-cluster";
const FILES = ["-f", "docker-compose.yml", "-f", "deploy/compose.cluster.yml"];
const env: NodeJS.ProcessEnv = {
  ...process.env,
  COMPOSE_PROJECT_NAME: PROJECT,
  ANTHROPIC_API_KEY: "",
  NATS_URL: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "",
  LOOPSMITH_CLIENTS: "",
};
const STREAMS = [
  Streams.tasks,
  Streams.events,
  Streams.improve,
  `KV_${Streams.taskStateBucket}`,
  `KV_${Streams.improveStateBucket}`,
  `KV_${Streams.recordOutboxBucket}`,
  `OBJ_${snapshotBucket()}`,
];

function shell(line: string, timeoutMs = 900_000): Promise<CliRun> {
  return runBash(line, env, timeoutMs);
}

async function containerOf(service: string): Promise<string> {
  const { stdout } = await run("docker", ["compose", "-p", PROJECT, ...FILES, "ps", "-q", service], { cwd: REPO, env });
  const id = stdout.trim().split("\n")[0];
  if (!id) throw new Error(`no container for ${service}`);
  return id;
}

/** A value of the stack's .env. */
function envValue(name: string): string {
  const line = readFileSync(join(REPO, ".env"), "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${name}=`));
  if (!line) throw new Error(`.env has no ${name}`);
  return line.slice(name.length + 1);
}

const envFileExisted = existsSync(join(REPO, ".env"));
const clientFileExisted = existsSync(join(REPO, "client.env"));
let admin: NatsConnection | undefined;

describe("the stack on a three-node JetStream cluster (compose, offline, keyless)", () => {
  beforeAll(async () => {
    const prepared = await shell("bash deploy/compose-env.sh --local-images --engines");
    if (prepared.code !== 0) throw new Error(`compose-env.sh failed: ${prepared.stderr}`);
    // As docs/OPERATIONS.md starts it: the NATS nodes first, a node left out of the meta group restarted.
    const up = await shell("bash deploy/cluster-up.sh --build");
    if (up.code !== 0)
      throw new Error(`compose up failed (exit ${up.code}):\n${up.stdout.slice(-3000)}\n${up.stderr.slice(-5000)}`);
    admin = await connect({
      servers: "nats://127.0.0.1:4222",
      user: "admin",
      pass: envValue("LOOPSMITH_NATS_ADMIN_PASSWORD"),
      inboxPrefix: "_INBOX_admin",
    });
  }, 900_000);

  afterAll(async () => {
    await admin?.close();
    await shell(`docker compose ${FILES.join(" ")} down -v --remove-orphans`, 180_000);
    if (!envFileExisted) rmSync(join(REPO, ".env"), { force: true });
    if (!clientFileExisted) rmSync(join(REPO, "client.env"), { force: true });
  }, 200_000);

  it("has every stream, KV bucket and object store at 3 replicas, one on each node", async () => {
    const jsm = await jetstreamManager(admin!);
    for (const name of STREAMS) {
      const info = await jsm.streams.info(name);
      expect(info.config.num_replicas, name).toBe(3);
      expect(new Set([info.cluster?.leader, ...(info.cluster?.replicas ?? []).map((r) => r.name)]), name).toEqual(
        new Set(["nats", "nats-2", "nats-3"]),
      );
    }
  });

  it("reports three executors on three engines, each healthy with free slots", async () => {
    const status = await shell("npx loopsmith --env-from client.env status --json", 60_000);
    expect(status.code, status.stderr).toBe(0);
    const { executors } = JSON.parse(status.stdout) as {
      executors: { engine: string; endpoint: string; healthy: boolean; freeSlots: number }[];
    };
    expect(executors).toHaveLength(3);
    expect(new Set(executors.map((e) => e.endpoint))).toEqual(
      new Set(["local socket", "tcp://engine-2:2376", "tcp://engine-3:2376"]),
    );
    for (const e of executors) expect(e).toMatchObject({ healthy: true, freeSlots: 2 });
  });

  it("passes scripted tasks while a NATS node is killed (SIGKILL), their runs spread over the engines, and the node catches up when it is back", async () => {
    const solves = ["a", "b", "c"].map((id) =>
      shell(
        `npx loopsmith --env-from client.env solve --file examples/roman/task.json --script examples/roman/script.json --task-id cluster-${id} --json`,
        300_000,
      ),
    );
    await new Promise((r) => setTimeout(r, 1_500));
    const victim = await containerOf("nats-2");
    await run("docker", ["kill", "--signal", "KILL", victim]);
    for (const solved of await Promise.all(solves)) {
      expect(solved.code, `${solved.stdout.slice(-2000)}\n${solved.stderr.slice(-2000)}`).toBe(0);
      expect(solved.stdout).toContain('"status":"passed"');
    }
    // Each executor's run endpoint counts the requests it answered ($SRV STATS).
    // An executor whose NATS node was the one killed answers once its client has reconnected:
    // asked again (up to 5 times, 1.5 s each) until all three have answered.
    const svc = new Svcm(admin! as never).client({ strategy: "timer", maxWait: 1_500 });
    const served = await pRetry(
      async () => {
        const got: number[] = [];
        for await (const s of await svc.stats(ServiceNames.executor)) got.push(s.endpoints?.[0]?.num_requests ?? 0);
        if (got.length !== 3) throw new Error(`${got.length} of 3 executors answered $SRV STATS`);
        return got;
      },
      { retries: 4, minTimeout: 1_000, factor: 1 },
    );
    expect(served).toHaveLength(3);
    expect(served.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
    await run("docker", ["start", victim]);
    const jsm = await jetstreamManager(admin!);
    await pRetry(
      async () => {
        for (const name of STREAMS) {
          const peers = (await jsm.streams.info(name)).cluster?.replicas ?? [];
          if (peers.length !== 2 || peers.some((p) => !p.current || p.offline))
            throw new Error(`${name} has not caught up`);
        }
      },
      { retries: 60, minTimeout: 500, factor: 1 },
    );
  }, 400_000);

  it("leaves no sandbox on any engine once the executors stop", async () => {
    // The host engine's sandboxes of this stack carry its executor container's host name.
    const mainHost = (
      await run("docker", ["inspect", "-f", "{{.Config.Hostname}}", await containerOf("executor")], { env })
    ).stdout.trim();
    const stopped = await shell(`docker compose ${FILES.join(" ")} stop executor executor-2 executor-3`, 120_000);
    expect(stopped.code, stopped.stderr).toBe(0);
    for (const engine of ["engine-2", "engine-3"]) {
      const { stdout } = await run(
        "docker",
        ["exec", await containerOf(engine), "docker", "ps", "-aq", "--filter", "label=org.loopsmith.executor"],
        { env },
      );
      expect(stdout.trim(), engine).toBe("");
    }
    const { stdout } = await run("docker", ["ps", "-aq", "--filter", `label=org.loopsmith.executor.host=${mainHost}`], {
      env,
    });
    expect(stdout.trim(), "the host's engine").toBe("");
  }, 200_000);
});
