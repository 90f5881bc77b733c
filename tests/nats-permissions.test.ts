/**
 * The permission matrix on a real nats-server started with the configuration loopsmith
 * generates (`renderNatsServerConfig`, the same text as deploy/nats.conf): each forbidden
 * action is refused by the server and surfaces as a typed `permission_denied` (or a permission
 * violation on the connection), and what each user needs still works: the admin sets up the
 * bus, a client submits and reads events, the architect publishes them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GenericContainer, Wait, type StartedTestContainer } from "testcontainers";
import pino from "pino";
import { Writable } from "node:stream";
import { startEventsEndpoint } from "./fixtures/architect-events.js";
import { PermissionViolationError, connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import {
  CHECKPOINT_BLOBS_BUCKET,
  DEFAULT_OWNER,
  Endpoints,
  NATS_ROLES,
  REPOS_BUCKET,
  ServiceNames,
  Streams,
  Subjects,
  call,
  clientPasswordVariable,
  ensureStreams,
  ensureTaskIntake,
  eventsSubject,
  getSnapshot,
  handle,
  inboxPrefixOf,
  natsConnectOptions,
  natsIdentity,
  openCheckpointBlobs,
  passwordVariable,
  permissionDenied,
  publishEvent,
  putSnapshot,
  renderNatsServerConfig,
  setupBus,
  snapshotBucket,
  startService,
  submitTask,
  type NatsRole,
} from "@loopsmith/shared/bus";
import { LoopsmithError, loadConfig, logConnectionStatus } from "@loopsmith/shared/runtime";
import { type TaskEvent } from "@loopsmith/shared/contracts";
import { watchEvents } from "@loopsmith/cli";

const password = (role: string): string => `pw-${role}-${role.length}x7Q`;
/** Two further client users: each owns its tasks, and neither may reach the other's. */
const CLIENTS = ["alice", "bob"] as const;
let container: StartedTestContainer;
let url: string;
const open: NatsConnection[] = [];

function configOf(role: string) {
  return loadConfig({
    env: { NATS_URL: url, NATS_USER: role, NATS_PASSWORD: password(role), NATS_INBOX_PREFIX: inboxPrefixOf(role) },
  });
}

async function as(role: NatsRole | (typeof CLIENTS)[number]): Promise<NatsConnection> {
  const config = configOf(role);
  const nc = await connect({ ...natsConnectOptions(config), servers: url, name: `test-${role}` });
  open.push(nc);
  return nc;
}

/** The permission violation NATS reports for `subject` on `nc` within 2 s of `act`, or undefined. */
async function violation(
  nc: NatsConnection,
  subject: string,
  act: () => unknown,
): Promise<PermissionViolationError | undefined> {
  const seen = new Promise<PermissionViolationError | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), 2_000);
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "error" && s.error instanceof PermissionViolationError && s.error.subject === subject) {
          clearTimeout(timer);
          resolve(s.error);
          return;
        }
      }
    })();
  });
  await act();
  await nc.flush();
  return seen;
}

/** What a rejected promise rejected with. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (err: unknown) => err,
  );
}

const event = (taskId: string, message: string): TaskEvent => ({
  v: 1,
  taskId,
  seq: 0,
  at: new Date().toISOString(),
  iteration: 0,
  kind: "step",
  message,
});
const task = (taskId: string) => ({
  v: 1 as const,
  taskId,
  goal: "a function add(a, b)",
  language: "python" as const,
  submittedAt: new Date().toISOString(),
});

beforeAll(async () => {
  const image = loadConfig({ env: { NATS_URL: "" } }).images.nats;
  container = await new GenericContainer(image)
    .withCopyContentToContainer([
      {
        content: renderNatsServerConfig({ storeDir: "/tmp/js", httpPort: 0, clients: [...CLIENTS] }),
        target: "/etc/loopsmith-nats.conf",
      },
    ])
    .withEnvironment({
      ...Object.fromEntries(NATS_ROLES.map((r) => [passwordVariable(r), password(r)])),
      ...Object.fromEntries(CLIENTS.map((c) => [clientPasswordVariable(c), password(c)])),
    })
    .withCommand(["-c", "/etc/loopsmith-nats.conf"])
    .withExposedPorts(4222)
    .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
    .start();
  url = `nats://${container.getHost()}:${container.getMappedPort(4222)}`;
});
afterAll(async () => {
  await Promise.all(open.map((nc) => nc.close().catch(() => undefined)));
  await container?.stop({ timeout: 1_000 });
});

describe("NATS least privilege (the generated server configuration)", () => {
  it("refuses a client that sets the bus up, with permission_denied naming what is missing and the command to run", async () => {
    const err = await rejection(ensureStreams(await as("client")));
    expect(err).toBeInstanceOf(LoopsmithError);
    expect((err as LoopsmithError).code).toBe("permission_denied");
    expect((err as LoopsmithError).message).toMatch(
      /the stream LOOPSMITH_TASKS is missing.*loopsmith bus setup.*\$JS\.API\.STREAM\.CREATE\.LOOPSMITH_TASKS/,
    );
  });

  it("lets the admin set the bus up, after which a client's and the architect's checks pass without management rights", async () => {
    const ensured = await setupBus(await as("admin"), { clients: [...CLIENTS] });
    expect(ensured).toContain(Streams.tasks);
    expect(ensured).toEqual(
      expect.arrayContaining([
        `obj:${REPOS_BUCKET}`,
        `obj:${snapshotBucket("alice")}`,
        `obj:${snapshotBucket("bob")}`,
        `obj:${CHECKPOINT_BLOBS_BUCKET}`,
      ]),
    );
    await expect(ensureTaskIntake(await as("client"))).resolves.toBeUndefined();
    await expect(ensureStreams(await as("architect"))).resolves.toBeUndefined();
    // The events stream's info lists every task's subject (other owners' too): not a client's to read.
    expect(((await rejection(ensureStreams(await as("client")))) as LoopsmithError).code).toBe("permission_denied");
  });

  it("lets the architect put, read, list and delete checkpoint blobs, and no other user open their store", async () => {
    const blobs = await openCheckpointBlobs(await as("architect"));
    const name = "task/perm-blob-1/0123abcd";
    await blobs.putBlob({ name }, new Uint8Array([1, 2, 3]));
    await blobs.putBlob({ name }, new Uint8Array([4, 5])); // put again: the old chunks are purged
    expect([...((await blobs.getBlob(name)) ?? [])]).toEqual([4, 5]);
    expect((await blobs.list()).filter((o) => !o.deleted).map((o) => o.name)).toContain(name);
    await blobs.delete(name);
    expect(await blobs.getBlob(name)).toBeNull();
    for (const role of ["client", "executor", "builder", "memory"] as const) {
      expect(permissionDenied(await rejection(openCheckpointBlobs(await as(role))))?.code, role).toBe(
        "permission_denied",
      );
    }
  });

  it("lets a client submit a task and follow the events the architect publishes for it (stored ones through the architect, new ones live)", async () => {
    const client = await as("client");
    const architect = await as("architect");
    const service = await startEventsEndpoint(architect);
    const submitted = await submitTask(client, task("perm-allowed-1"));
    expect(submitted.duplicate).toBe(false);
    await publishEvent(architect, event("perm-allowed-1", "planning"), DEFAULT_OWNER);
    const got: string[] = [];
    const watch = (async () => {
      for await (const e of watchEvents(client, "perm-allowed-1", { signal: AbortSignal.timeout(5_000) }))
        got.push(e.message);
    })();
    await new Promise((r) => setTimeout(r, 300));
    await publishEvent(architect, { ...event("perm-allowed-1", "done"), seq: 1, kind: "result" }, DEFAULT_OWNER);
    await watch;
    expect(got).toEqual(["planning", "done"]);
    await service.stop();
  });

  it("keeps clients apart: bob can neither submit as alice, nor follow, read, cancel or list alice's tasks, nor hear her rejected messages", async () => {
    const alice = await as("alice");
    const bob = await as("bob");
    const architect = await as("architect");
    const service = await startEventsEndpoint(architect);
    await submitTask(alice, task("perm-alice-1"), "alice");
    await publishEvent(architect, { ...event("perm-alice-1", "alice's secret plan"), kind: "result" }, "alice");
    // Alice follows her task.
    const hers: string[] = [];
    for await (const e of watchEvents(alice, "perm-alice-1", { owner: "alice", signal: AbortSignal.timeout(5_000) }))
      hers.push(e.message);
    expect(hers).toEqual(["alice's secret plan"]);
    // Bob, with his own token, reads only his own subject: the same task id shows nothing.
    const page = await call(bob, Endpoints.architect.events, { v: 1, taskId: "perm-alice-1" }, { owner: "bob" });
    expect(page.events).toEqual([]);
    // With hers, the server refuses him.
    expect(permissionDenied(await rejection(submitTask(bob, task("perm-bob-as-alice"), "alice")))?.code).toBe(
      "permission_denied",
    );
    for (const def of [
      Endpoints.architect.events,
      Endpoints.architect.status,
      Endpoints.architect.cancel,
      Endpoints.memory.history,
      Endpoints.memory.run,
    ]) {
      const err = await rejection(
        call(bob, def, { v: 1, taskId: "perm-alice-1", limit: 1 } as never, {
          owner: "alice",
          timeoutMs: 2_000,
          retries: 0,
        }),
      );
      expect((err as LoopsmithError).code, def.subject).toBe("permission_denied");
    }
    for (const subject of [
      eventsSubject("alice", "perm-alice-1"),
      "loopsmith.events.>",
      "loopsmith.rejects.tasks.alice",
    ]) {
      const sub = bob.subscribe(subject);
      expect(
        await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r("open"), 2_000))]),
        subject,
      ).toBeInstanceOf(PermissionViolationError);
    }
    // No JetStream consumer on the events stream (a push consumer's delivery subject is not
    // checked against its creator's rights), and no message reads by sequence.
    const jsm = await jetstreamManager(bob, { checkAPI: false });
    expect(
      permissionDenied(
        await rejection(
          jsm.consumers.add(Streams.events, { name: "peek", filter_subject: eventsSubject("alice", "perm-alice-1") }),
        ),
      )?.code,
    ).toBe("permission_denied");
    expect(permissionDenied(await rejection(jsm.streams.getMessage(Streams.events, { seq: 1 })))?.code).toBe(
      "permission_denied",
    );
    // Snapshots: each owner has its own store; bob can neither read alice's nor put a tree in it.
    expect(await putSnapshot(alice, "tree-alice-1.tar", new Uint8Array([7, 7]), "alice")).toBe(true);
    expect(
      permissionDenied(await rejection(jsm.streams.getMessage(`OBJ_${snapshotBucket("alice")}`, { seq: 1 })))?.code,
    ).toBe("permission_denied");
    expect(
      ((await rejection(putSnapshot(bob, "tree-alice-2.tar", new Uint8Array([6]), "alice"))) as LoopsmithError).code,
    ).toBe("permission_denied");
    expect([...(await getSnapshot(await as("executor"), "tree-alice-1.tar", "alice"))]).toEqual([7, 7]);
    expect((await rejection(getSnapshot(await as("executor"), "tree-alice-1.tar"))) as LoopsmithError).toMatchObject({
      code: "not_found",
    });
    await service.stop();
  });

  it("refuses a client that publishes events (a forged result), with permission_denied", async () => {
    const client = await as("client");
    const err = await rejection(publishEvent(client, event("perm-forge-1", "forged"), DEFAULT_OWNER));
    expect((err as LoopsmithError).code).toBe("permission_denied");
    expect((err as LoopsmithError).message).toContain(eventsSubject(DEFAULT_OWNER, "perm-forge-1"));
    // And on core NATS too.
    const forged = eventsSubject(DEFAULT_OWNER, "perm-forge-2");
    expect(await violation(client, forged, () => client.publish(forged, "{}"))).toBeInstanceOf(
      PermissionViolationError,
    );
  });

  it("refuses a client that calls the executor, builder, reviewer or a memory write endpoint directly (the gate cannot be bypassed)", async () => {
    const client = await as("client");
    for (const subject of [
      Subjects.executor.run,
      Subjects.builder.build,
      Subjects.reviewer.gate,
      Subjects.memory.rememberFailure,
      Subjects.memory.recordTask,
      Subjects.memory.recall,
    ]) {
      const err = await rejection(client.request(subject, "{}", { timeout: 2_000 }));
      const typed = permissionDenied(err);
      expect(typed?.code, subject).toBe("permission_denied");
      expect(typed?.message, subject).toContain(subject);
    }
  });

  it("refuses a client that serves an endpoint (impersonating the executor to forge a verdict) or reads another user's replies", async () => {
    const client = await as("client");
    for (const [subject, queue] of [
      [Subjects.executor.run, "q"],
      [`${inboxPrefixOf("architect")}.>`, undefined],
      ["_INBOX.>", undefined],
      [Subjects.tasksSubmit, undefined],
    ] as const) {
      const sub = client.subscribe(subject, queue ? { queue } : {});
      const closed = await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r("open"), 2_000))]);
      expect(closed, subject).toBeInstanceOf(PermissionViolationError);
    }
  });

  it("refuses the JetStream management API to everyone but the admin: deleting or purging a stream, deleting the conductor's consumer, writing task state", async () => {
    for (const role of ["client", "architect", "builder", "executor", "memory"] as const) {
      const nc = await as(role);
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      for (const [what, act] of [
        ["delete stream", () => jsm.streams.delete(Streams.tasks)],
        ["purge events", () => jsm.streams.purge(Streams.events)],
        ["delete consumer", () => jsm.consumers.delete(Streams.tasks, Streams.conductorConsumer)],
        ["create stream", () => jsm.streams.add({ name: "EVIL", subjects: ["evil.>"] })],
      ] as const) {
        const err = await rejection(act());
        expect(permissionDenied(err)?.code, `${role}: ${what}`).toBe("permission_denied");
      }
    }
    const client = await as("client");
    const states = await new Kvm(client).open(Streams.taskStateBucket);
    expect(permissionDenied(await rejection(states.put("perm-forge-1", "{}")))?.code).toBe("permission_denied");
    // The streams are all still there.
    const admin = await jetstreamManager(await as("admin"));
    expect((await admin.streams.info(Streams.tasks)).config.name).toBe(Streams.tasks);
  });

  it("refuses a service what belongs to another: a builder publishing events or calling the executor, an executor submitting tasks or serving the builder, memory publishing events", async () => {
    const builder = await as("builder");
    const b = eventsSubject(DEFAULT_OWNER, "perm-b");
    expect(await violation(builder, b, () => builder.publish(b, "{}"))).toBeInstanceOf(PermissionViolationError);
    expect(
      permissionDenied(await rejection(builder.request(Subjects.executor.run, "{}", { timeout: 2_000 })))?.code,
    ).toBe("permission_denied");
    const executor = await as("executor");
    expect(permissionDenied(await rejection(submitTask(executor, task("perm-exec-1"))))?.code).toBe(
      "permission_denied",
    );
    const sub = executor.subscribe(Subjects.builder.build, { queue: "q" });
    expect(await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r("open"), 2_000))])).toBeInstanceOf(
      PermissionViolationError,
    );
    const memory = await as("memory");
    const m = eventsSubject(DEFAULT_OWNER, "perm-m");
    expect(await violation(memory, m, () => memory.publish(m, "{}"))).toBeInstanceOf(PermissionViolationError);
  });

  it("answers only to inboxes: a request whose reply names a KV subject (to cancel someone's task through the architect) is dropped, $SRV pings included", async () => {
    const architect = await as("architect");
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const service = await startService(architect, {
      name: ServiceNames.architect,
      version: "0.0.0-test",
      description: "test",
      log: pino({ level: "info" }, sink),
      registrations: [handle(Endpoints.architect.status, async () => ({ state: null }))],
    });
    const admin = await as("admin");
    const written: string[] = [];
    const spy = admin.subscribe("$KV.>", { callback: (_e, m) => void written.push(m.subject) });
    await admin.flush();
    const client = await as("client");
    const trap = `$KV.${Streams.taskStateBucket}.cancel.perm-victim-1`;
    client.publish(`${Subjects.architect.status}.${DEFAULT_OWNER}`, JSON.stringify({ v: 1, taskId: "perm-victim-1" }), {
      reply: trap,
    });
    client.publish("$SRV.PING", "", { reply: trap });
    client.publish(`$SRV.PING.${ServiceNames.architect}`, "", { reply: trap });
    await client.flush();
    // A real request still gets its answer (to the client's own inbox).
    const answered = await client.request(
      `${Subjects.architect.status}.${DEFAULT_OWNER}`,
      JSON.stringify({ v: 1, taskId: "perm-victim-1" }),
      { timeout: 2_000 },
    );
    expect(answered.json()).toMatchObject({ ok: true });
    await new Promise((r) => setTimeout(r, 500));
    expect(written).toEqual([]);
    expect(lines.filter((l) => l.includes("reply subject is not an inbox")).length).toBe(3);
    spy.unsubscribe();
    await service.stop();
  });

  it("lets no service answer $SRV for another (the builder cannot pose as the executor to health checks)", async () => {
    const builder = await as("builder");
    for (const subject of [`$SRV.PING.${ServiceNames.executor}`, `$SRV.INFO.${ServiceNames.executor}`, "$SRV.>"]) {
      const sub = builder.subscribe(subject);
      expect(
        await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r("open"), 2_000))]),
        subject,
      ).toBeInstanceOf(PermissionViolationError);
    }
  });

  it("lets a client put a repository snapshot but not read the store through a consumer, nor create one that pushes its data into memory's endpoints", async () => {
    const client = await as("client");
    expect(await putSnapshot(client, "tree-perm-1.tar", new Uint8Array([1, 2, 3]))).toBe(true);
    const read = await rejection(getSnapshot(client, "tree-perm-1.tar"));
    expect((read as LoopsmithError).code).toBe("permission_denied");
    const jsm = await jetstreamManager(client, { checkAPI: false });
    const push = await rejection(
      jsm.consumers.add(`OBJ_${REPOS_BUCKET}`, {
        name: "evil",
        deliver_subject: Subjects.memory.rememberFailure,
        filter_subject: `$O.${REPOS_BUCKET}.C.>`,
      }),
    );
    expect(permissionDenied(push)?.code).toBe("permission_denied");
    // The executor (a service) reads it.
    expect([...(await getSnapshot(await as("executor"), "tree-perm-1.tar"))]).toEqual([1, 2, 3]);
  });

  it("logs a service's refusal as permission_denied with the subject and the user, never the password", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const config = configOf("builder");
    const nc = await as("builder");
    const log = pino({ level: "info" }, sink);
    void logConnectionStatus(nc, log.child({ natsIdentity: natsIdentity(config) }));
    nc.publish(Subjects.tasksSubmit, "{}");
    await nc.flush();
    const deadline = Date.now() + 3_000;
    while (!lines.some((l) => l.includes("permission_denied")) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const line = JSON.parse(lines.find((l) => l.includes("permission_denied")) ?? "{}") as Record<string, unknown>;
    expect(line).toMatchObject({
      level: 50,
      code: "permission_denied",
      operation: "publish",
      subject: Subjects.tasksSubmit,
      natsIdentity: "user builder",
    });
    expect(lines.join("")).not.toContain(password("builder"));
  });
});
