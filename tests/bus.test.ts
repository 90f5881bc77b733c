import { describe, expect } from "vitest";
import { z } from "zod";
import { connect } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";
import pino from "pino";
import { Endpoints, LoopsmithError, call, handle, startService, type EndpointDef } from "@loopsmith/shared";
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
      expect(infos[0]?.endpoints.map((e) => e.subject).sort()).toEqual([echo.subject, Endpoints.memory.stats.subject].sort());
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
});
