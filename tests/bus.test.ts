import { createServer, type AddressInfo } from "node:net";
import { describe, expect, it as plainIt } from "vitest";
import { GenericContainer, Wait } from "testcontainers";
import { z } from "zod";
import { connect } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";
import pino from "pino";
import {
  Endpoints,
  NATS_ROLES,
  ServiceNames,
  call,
  handle,
  inboxPrefixOf,
  natsConnectOptions,
  passwordVariable,
  renderNatsServerConfig,
  startService,
  type EndpointDef,
} from "@loopsmith/shared/bus";
import { LoopsmithError, loadConfig } from "@loopsmith/shared/runtime";
import { it } from "./fixtures/index.js";

const log = pino({ level: "silent" });

const echo: EndpointDef = {
  name: "echo",
  subject: "loopsmith.test.echo",
  request: z.object({ v: z.literal(1), text: z.string() }),
  response: z.object({ text: z.string() }),
};

describe("typed bus on @nats-io/services", () => {
  it("answers a valid request, rejects garbage with typed errors, and keeps serving", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const service = await startService(nc, {
      name: "loopsmith-test",
      version: "0.0.1",
      description: "test",
      log,
      registrations: [
        handle(echo, async (req) => ({ text: (req as { text: string }).text.toUpperCase() })),
        handle(Endpoints.memory.stats, async () => {
          throw new LoopsmithError("db_error", "database is down");
        }),
      ],
    });
    try {
      await expect(call(nc, echo, { v: 1, text: "hi" })).resolves.toEqual({ text: "HI" });

      // Not JSON at all.
      const raw = await nc.request(echo.subject, "{not json", { timeout: 2000 });
      const rawReply = JSON.parse(raw.string());
      expect(rawReply.ok).toBe(false);
      expect(rawReply.error.code).toBe("bad_request");

      // JSON that fails the schema.
      const bad = await nc.request(echo.subject, JSON.stringify({ v: 1, text: 42 }), { timeout: 2000 });
      expect(JSON.parse(bad.string()).error.code).toBe("bad_request");

      // A handler's typed error crosses the bus as data (retryable db_error: retried, then thrown).
      const err = (await call(nc, Endpoints.memory.stats, { v: 1 }, { retries: 1, backoffMs: 10 }).then(
        () => null,
        (e: unknown) => e,
      )) as LoopsmithError;
      expect(err).toBeInstanceOf(LoopsmithError);
      expect(err.code).toBe("db_error");
      expect(err.retryable).toBe(true);

      // Still serving after the garbage.
      await expect(call(nc, echo, { v: 1, text: "again" })).resolves.toEqual({ text: "AGAIN" });

      // $SRV discovery and stats come from the framework.
      const client = new Svcm(nc as never).client();
      const pings = [];
      for await (const p of await client.ping("loopsmith-test")) pings.push(p);
      expect(pings).toHaveLength(1);
      const stats = [];
      for await (const s of await client.stats("loopsmith-test")) stats.push(s);
      const echoStats = stats[0]?.endpoints?.find((e) => e.name === "echo");
      expect(echoStats?.num_requests).toBe(4);
      const infos = [];
      for await (const i of await client.info("loopsmith-test")) infos.push(i);
      expect(infos[0]?.endpoints.map((e) => e.subject).sort()).toEqual(
        [echo.subject, `${Endpoints.memory.stats.subject}.*`].sort(),
      );
    } finally {
      await service.stop();
      await nc.close();
    }
  });

  it("maps a missing responder to a retryable unavailable error", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    try {
      const err = (await call(nc, echo, { v: 1, text: "x" }, { retries: 0, timeoutMs: 1000 }).then(
        () => null,
        (e: unknown) => e,
      )) as LoopsmithError;
      expect(err).toBeInstanceOf(LoopsmithError);
      expect(err.code).toBe("unavailable");
      expect(err.retryable).toBe(true);
    } finally {
      await nc.close();
    }
  });

  it("sends a step again when its service dies mid-request, within the liveness limit; a slow live one is not sent twice", async ({
    nats,
  }) => {
    const caller = await connect({ servers: nats.url });
    const dying = await connect({ servers: nats.url });
    const healthy = await connect({ servers: nats.url });
    let received!: () => void;
    const gotIt = new Promise<void>((r) => (received = r));
    const serve = (nc: typeof caller, answer: (text: string) => Promise<{ text: string }>) =>
      startService(nc, {
        name: "loopsmith-liveness",
        version: "0.0.1",
        description: "test",
        log,
        registrations: [handle(echo, (req) => answer((req as { text: string }).text))],
      });
    await serve(dying, async () => {
      received();
      return new Promise(() => undefined); // works forever, then its process dies
    });
    try {
      const started = Date.now();
      const reply = call(caller, echo, { v: 1, text: "hi" }, { timeoutMs: 120_000, retries: 2, livenessMs: 3_000 });
      await gotIt;
      await dying.close(); // the replica that took the request is gone
      await serve(healthy, async (text) => ({ text: `healthy ${text}` }));
      await expect(reply).resolves.toEqual({ text: "healthy hi" });
      expect(Date.now() - started).toBeLessThan(10_000);

      // A handler slower than the liveness limit, but alive: heartbeats keep the one attempt.
      let calls = 0;
      const slowNc = await connect({ servers: nats.url });
      const slow: EndpointDef = { ...echo, name: "slow", subject: "loopsmith.test.slow" };
      await startService(slowNc, {
        name: "loopsmith-slow",
        version: "0.0.1",
        description: "test",
        log,
        registrations: [
          handle(slow, async () => {
            calls += 1;
            await new Promise((r) => setTimeout(r, 7_000));
            return { text: "done" };
          }),
        ],
      });
      await expect(
        call(caller, slow, { v: 1, text: "x" }, { timeoutMs: 60_000, retries: 2, livenessMs: 3_000 }),
      ).resolves.toEqual({ text: "done" });
      expect(calls).toBe(1);
      await slowNc.close();
    } finally {
      await healthy.close();
      await caller.close();
    }
  });

  plainIt(
    "a step in flight when NATS restarts is answered within seconds of NATS coming back, not at its timeout",
    async () => {
      // A NATS server on a fixed port that can be killed and started again (a fresh server).
      const port = await freePort();
      const start = () =>
        new GenericContainer(natsImage())
          .withCommand(["-js", "-sd", "/tmp/js"])
          .withExposedPorts({ container: 4222, host: port })
          .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
          .start();
      let server = await start();
      const url = `nats://127.0.0.1:${port}`;
      const opts = { servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 250 };
      const caller = await connect(opts);
      const worker = await connect(opts);
      // Idempotent by request, as every step handler is by its key: a repeat joins the work.
      const work = new Map<string, Promise<{ text: string }>>();
      let handled = 0;
      let received!: () => void;
      const gotIt = new Promise<void>((r) => (received = r));
      await startService(worker, {
        name: "loopsmith-restart",
        version: "0.0.1",
        description: "test",
        log,
        registrations: [
          handle(echo, async (req) => {
            const text = (req as { text: string }).text;
            handled += 1;
            received();
            if (!work.has(text))
              work.set(text, new Promise((r) => setTimeout(() => r({ text: `done ${text}` }), 3_000)));
            return work.get(text) as Promise<{ text: string }>;
          }),
        ],
      });
      try {
        const reply = call(
          caller,
          echo,
          { v: 1, text: "build" },
          { timeoutMs: 120_000, retries: 3, livenessMs: 3_000 },
        );
        await gotIt;
        await server.stop({ timeout: 0 }); // NATS is killed while the step works; it finishes during the outage
        await new Promise((r) => setTimeout(r, 5_000));
        const back = Date.now();
        server = await start();
        await expect(reply).resolves.toEqual({ text: "done build" });
        expect(Date.now() - back).toBeLessThan(12_000);
        expect(handled).toBeGreaterThanOrEqual(1);
      } finally {
        await caller.close();
        await worker.close();
        await server.stop({ timeout: 0 });
      }
    },
    120_000,
  );
});

describe("replies across a reconnect, with the permission matrix on", () => {
  plainIt(
    "a step whose service lost its connection while working is answered on the heartbeat subject at once, not sent again after the liveness limit",
    async () => {
      // nats-server lets a user answer a request only on the connection that received it
      // (`allow_responses`): after the service reconnects, the reply subject is refused.
      const port = await freePort();
      const password = (role: string): string => `pw-${role}-reconnect`;
      const start = () =>
        new GenericContainer(natsImage())
          .withCopyContentToContainer([
            {
              content: renderNatsServerConfig({ storeDir: "/tmp/js", httpPort: 0 }),
              target: "/etc/loopsmith-nats.conf",
            },
          ])
          .withEnvironment(Object.fromEntries(NATS_ROLES.map((r) => [passwordVariable(r), password(r)])))
          .withCommand(["-c", "/etc/loopsmith-nats.conf"])
          .withExposedPorts({ container: 4222, host: port })
          .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
          .start();
      let server = await start();
      const url = `nats://127.0.0.1:${port}`;
      const as = (role: "architect" | "builder") =>
        connect({
          ...natsConnectOptions(
            loadConfig({
              env: {
                NATS_URL: url,
                NATS_USER: role,
                NATS_PASSWORD: password(role),
                NATS_INBOX_PREFIX: inboxPrefixOf(role),
              },
            }),
          ),
          servers: url,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 250,
        });
      const caller = await as("architect");
      const worker = await as("builder");
      const reconnected = (nc: typeof caller) =>
        new Promise<void>((resolve) => {
          void (async () => {
            for await (const st of nc.status()) if (st.type === "reconnect") return resolve();
          })();
        });
      // A builder endpoint (the architect may call it; the builder may serve it), echo's schemas.
      const step: EndpointDef = { ...Endpoints.builder.build, request: echo.request, response: echo.response };
      let handled = 0;
      let received!: () => void;
      const gotIt = new Promise<void>((r) => (received = r));
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const work = new Map<string, Promise<{ text: string }>>();
      await startService(worker, {
        name: ServiceNames.builder,
        version: "0.0.1",
        description: "test",
        log,
        registrations: [
          handle(step, async (req) => {
            const text = (req as { text: string }).text;
            handled += 1;
            received();
            if (!work.has(text))
              work.set(
                text,
                released.then(() => ({ text: `done ${text}` })),
              );
            return work.get(text) as Promise<{ text: string }>;
          }),
        ],
      });
      try {
        const livenessMs = 8_000;
        const reply = call(caller, step, { v: 1, text: "build" }, { timeoutMs: 120_000, retries: 3, livenessMs });
        await gotIt;
        const back = Promise.all([reconnected(caller), reconnected(worker)]);
        await server.stop({ timeout: 0 });
        server = await start();
        await back;
        await caller.flush();
        const answered = Date.now();
        release(); // the step ends after both sides are connected again
        await expect(reply).resolves.toEqual({ text: "done build" });
        expect(Date.now() - answered).toBeLessThan(livenessMs / 2);
        expect(handled).toBe(1);
      } finally {
        await caller.close();
        await worker.close();
        await server.stop({ timeout: 0 });
      }
    },
    120_000,
  );
});

/** A TCP port nothing listens on now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

const natsImage = () => loadConfig({ env: { ...process.env, NATS_URL: "" } }).images.nats;
