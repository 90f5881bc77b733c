/**
 * A three-node JetStream cluster, on real nats-server containers that
 * read the configuration `loopsmith bus config --cluster-routes` renders: the permission
 * matrix holds across the nodes, `bus setup` with 3 replicas makes every stream, KV bucket
 * and object store R3 (raising what was R1; a process configured for fewer never lowers
 * them), and a `kill -9` of one node loses no task: the intake, the conductor's consumer and
 * the state bucket go on, and the node catches up when it comes back.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import pRetry from "p-retry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Svcm } from "@nats-io/services";
import {
  ServiceNames,
  Streams,
  ensureStreams,
  ensureTaskIntake,
  natsServers,
  openTaskStates,
  setupBus,
  snapshotBucket,
  submitTask,
  type ServiceName,
} from "@loopsmith/shared/bus";
import { presentServices } from "../cli/src/stack.js";
import { startNatsCluster, type StartedCluster } from "./fixtures/containers.js";

const docker = promisify(execFile);
const ALL_SERVICES = Object.keys(ServiceNames) as ServiceName[];

let cluster: StartedCluster;
const open: NatsConnection[] = [];

/** A connection to every node as `role` (what a service with NATS_URL set to the three URLs does). */
async function as(role: string): Promise<NatsConnection> {
  const nc = await connect({
    servers: natsServers(cluster.url),
    user: role,
    pass: cluster.passwords[role],
    inboxPrefix: role === "client" ? "_INBOX_client" : `_INBOX_${role}`,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
  });
  open.push(nc);
  return nc;
}

/** Every stream loopsmith keeps, as JetStream names them. */
const STREAMS = [
  Streams.tasks,
  Streams.events,
  Streams.improve,
  `KV_${Streams.taskStateBucket}`,
  `KV_${Streams.improveStateBucket}`,
  `KV_${Streams.recordOutboxBucket}`,
  `OBJ_${snapshotBucket()}`,
];

async function replicas(jsm: JetStreamManager): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const name of STREAMS) out[name] = (await jsm.streams.info(name)).config.num_replicas;
  return out;
}

beforeAll(async () => {
  cluster = await startNatsCluster(3);
}, 120_000);

afterAll(async () => {
  await Promise.allSettled(open.map((nc) => nc.close()));
  await cluster?.stop();
});

describe("a three-node JetStream cluster", () => {
  it("bus setup with 3 replicas raises every stream, bucket and store to R3; a process configured for 1 leaves them there", async () => {
    const admin = await as("admin");
    // JetStream elects its meta leader once the routes are up: the first setup may have to wait.
    // First as a single-server setup (R1), as a stack that grew into a cluster has them.
    await setupBus(admin, { replicas: 1, waitMs: 60_000 });
    const jsm = await jetstreamManager(admin);
    expect(Object.values(await replicas(jsm))).toEqual(STREAMS.map(() => 1));
    // A service configured for 3 that finds them at 1 may not raise them: it stops, naming the setting.
    const architect = await as("architect");
    await expect(ensureStreams(architect, { replicas: 3 })).rejects.toMatchObject({
      code: "permission_denied",
      message: expect.stringMatching(/LOOPSMITH_TASKS has other settings \(num_replicas\).*loopsmith bus setup/),
    });
    const ensured = await setupBus(admin, { replicas: 3, waitMs: 30_000 }).catch(async (err: unknown) => {
      for (const n of cluster.nodes) {
        const { stdout, stderr } = await docker("docker", ["logs", n.container.getId()]);
        process.stderr.write(
          `==== ${n.name}\n${(stdout + stderr)
            .split("\n")
            .filter((l) => !/Publish Violation/.test(l))
            .slice(-60)
            .join("\n")}\n`,
        );
      }
      throw err;
    });
    expect(ensured).toContain(Streams.events);
    expect(await replicas(jsm)).toEqual(Object.fromEntries(STREAMS.map((s) => [s, 3])));
    // Each stream settles on a leader and two current followers, one on each node.
    const placed = await pRetry(
      async () => {
        const c = (await jsm.streams.info(Streams.events)).cluster;
        const peers = c?.replicas ?? [];
        if (!c?.leader || peers.length !== 2 || peers.some((p) => !p.current))
          throw new Error(`not settled: ${JSON.stringify(c)}`);
        return [c.leader, ...peers.map((p) => p.name)];
      },
      { retries: 40, minTimeout: 250, factor: 1 },
    );
    expect(new Set(placed)).toEqual(new Set(cluster.nodes.map((n) => n.name)));
    // More replicas than nodes cannot be placed: bus setup says so, and where to look.
    await expect(setupBus(admin, { replicas: 5, waitMs: 2_000 })).rejects.toMatchObject({
      code: "unavailable",
      message: expect.stringMatching(
        /could not place 5 replicas in 2000 ms \(.+\): fewer than 5 nodes .*meta_cluster\.replicas/,
      ),
    });
    // A process left at the default never lowers them.
    await ensureStreams(admin, { replicas: 1 });
    expect(Object.values(await replicas(jsm))).toEqual(STREAMS.map(() => 3));
  }, 120_000);

  it("keeps the permission matrix across the nodes: services and clients check, only the admin manages", async () => {
    const architect = await as("architect");
    const client = await as("client");
    // Nothing differs, so neither needs the management API.
    await ensureStreams(architect, { replicas: 3 });
    await ensureTaskIntake(client, { replicas: 3 });
    // A client may not read the task states, nor create a stream.
    await expect(openTaskStates(client, { replicas: 3 })).rejects.toMatchObject({ code: "permission_denied" });
    await expect(
      jetstreamManager(client).then((jsm) => jsm.streams.add({ name: "MINE", subjects: ["mine.>"] })),
    ).rejects.toThrow();
  }, 60_000);

  it("loses no task when one node is killed (kill -9): submit, take and checkpoint go on, and the node catches up when it comes back", async () => {
    const admin = await as("admin");
    const client = await as("client");
    const architect = await as("architect");
    // On its own too: the setup is idempotent (and waits for a cluster still forming).
    await setupBus(admin, { replicas: 3, waitMs: 60_000 });
    const retry = { retries: 20, minTimeout: 250, factor: 1.5, maxTimeout: 2_000 };
    const jsm = await pRetry(() => jetstreamManager(admin), retry);
    // Kill the node that leads the task intake: the harder case (a new leader must be elected).
    const leader = (await jsm.streams.info(Streams.tasks)).cluster?.leader;
    const victim = cluster.nodes.find((n) => n.name === leader) ?? cluster.nodes[0]!;
    const submitted: string[] = [];
    const submit = async (i: number): Promise<void> => {
      const taskId = `cluster-${Date.now().toString(36)}-${i}`;
      await pRetry(
        () =>
          submitTask(client, {
            v: 1,
            taskId,
            goal: "write add(a, b)",
            language: "python",
            submittedAt: new Date().toISOString(),
          }),
        retry,
      );
      submitted.push(taskId);
    };
    for (let i = 0; i < 5; i++) await submit(i);
    await docker("docker", ["kill", "--signal", "KILL", victim.container.getId()]);
    const killedAt = Date.now();
    for (let i = 5; i < 10; i++) await submit(i);
    // The conductor's consumer hands out every task once; its checkpoint bucket takes writes.
    const states = await pRetry(() => openTaskStates(architect, { replicas: 3 }), retry);
    const consumer = await pRetry(
      () => jetstream(architect).consumers.get(Streams.tasks, Streams.conductorConsumer),
      retry,
    );
    const taken: string[] = [];
    while (taken.length < submitted.length && Date.now() - killedAt < 60_000) {
      const batch = await consumer.fetch({ max_messages: 10, expires: 2_000 }).catch(() => undefined);
      for await (const m of batch ?? []) {
        const id = (m.json() as { taskId: string }).taskId;
        await pRetry(() => states.put(id, JSON.stringify({ taken: true })), retry);
        taken.push(id);
        m.ack();
      }
    }
    expect(taken.sort()).toEqual([...submitted].sort());
    for (const id of submitted) expect((await pRetry(() => states.get(id), retry))?.string()).toBe('{"taken":true}');
    // A new leader serves the intake; the killed node is offline for now.
    const during = await pRetry(() => jsm.streams.info(Streams.tasks), retry);
    expect(during.cluster?.leader).not.toBe(victim.name);

    // The node comes back and catches up: every replica of every stream current again.
    await docker("docker", ["start", victim.container.getId()]);
    await pRetry(
      async () => {
        for (const name of STREAMS) {
          const info = await jsm.streams.info(name);
          const peers = info.cluster?.replicas ?? [];
          if (peers.length !== 2 || peers.some((p) => !p.current || p.offline))
            throw new Error(`${name} is not healed yet: ${JSON.stringify(info.cluster)}`);
        }
      },
      { retries: 120, minTimeout: 500, factor: 1 },
    );
  }, 180_000);
});

describe("finding a running stack on a cluster (presentServices)", () => {
  it("asks a cluster where no service answered again before it says no stack runs, and finds one that answers a second later", async () => {
    const client = await as("client");
    const t0 = Date.now();
    expect((await presentServices(client, ALL_SERVICES, 2_000, 1_500)).size).toBe(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_500);

    // A stack whose services all missed the first ping (its node was killed): found, not restarted.
    const architect = await as("architect");
    setTimeout(() => void new Svcm(architect as never).add({ name: ServiceNames.architect, version: "0.0.0" }), 1_000);
    const t1 = Date.now();
    const present = await presentServices(client, ["architect"], 2_000, 5_000);
    expect([...present]).toEqual(["architect"]);
    expect(Date.now() - t1).toBeGreaterThanOrEqual(900);
    expect(Date.now() - t1).toBeLessThan(4_500);
  });
});
