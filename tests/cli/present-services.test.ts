/**
 * `presentServices` (cli/src/stack.ts) on a real NATS: a stack that answers in part is asked
 * again before any service is started here (while a NATS node is killed the stack's architect
 * can miss one ping, and `solve` would start its own architect with the client's
 * credentials); a stack none of whose services answers, but whose conductor fetches from the
 * intake, is asked again too (under load every service can miss the pings); with no stack at
 * all the answer comes at once.
 */
import { Svcm } from "@nats-io/services";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream } from "@nats-io/jetstream";
import { ServiceNames, Streams, setupBus, type ServiceName } from "@loopsmith/shared/bus";
import { presentServices } from "../../cli/src/stack.js";
import { startNats, type Started } from "../fixtures/containers.js";

const ALL = Object.keys(ServiceNames) as ServiceName[];
let nats: Started;
let nc: NatsConnection;
const stops: Array<() => Promise<unknown>> = [];

/** Registers a `$SRV` service under a loopsmith service's name (it answers pings only). */
async function serve(name: ServiceName): Promise<void> {
  const conn = await connect({ servers: nats.url });
  const svc = await new Svcm(conn as never).add({ name: ServiceNames[name], version: "0.0.0" });
  stops.push(async () => {
    await svc.stop();
    await conn.close();
  });
}

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
}, 120_000);

afterAll(async () => {
  await Promise.all(stops.map((s) => s()));
  await nc?.close();
  await nats?.stop();
});

describe("presentServices", () => {
  it("answers at once when no service runs", async () => {
    const t0 = Date.now();
    expect((await presentServices(nc, ALL, 5_000)).size).toBe(0);
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  it("asks a stack that answered in part again, and finds a service back 1.5 s later", async () => {
    for (const s of ALL.filter((x) => x !== "architect")) await serve(s);
    setTimeout(() => void serve("architect"), 1_500);
    const t0 = Date.now();
    const present = await presentServices(nc, ALL, 8_000);
    expect([...present].sort()).toEqual([...ALL].sort());
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_400);
    expect(Date.now() - t0).toBeLessThan(6_000);
  });

  it("gives up on a service that stays away after waitMs, keeping the ones that answer", async () => {
    await Promise.all(stops.splice(0).map((s) => s()));
    for (const s of ALL.filter((x) => x !== "memory")) await serve(s);
    const t0 = Date.now();
    const present = await presentServices(nc, ALL, 1_500);
    expect(present.has("memory")).toBe(false);
    expect(present.size).toBe(ALL.length - 1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_500);
  });
});

describe("presentServices with a conductor at work and no service answering", () => {
  it("takes a fetch waiting on the intake consumer for a running stack and asks again until its services answer", async () => {
    await Promise.all(stops.splice(0).map((s) => s()));
    await setupBus(nc);
    // Nothing answers and no conductor fetches: no stack, at once (the bus alone is no stack).
    const t0 = Date.now();
    expect((await presentServices(nc, ALL, 5_000)).size).toBe(0);
    expect(Date.now() - t0).toBeLessThan(2_000);

    // A conductor's fetch (as the architect's durable consumer makes it) waits on the intake.
    const conductor = await connect({ servers: nats.url });
    const consumer = await jetstream(conductor).consumers.get(Streams.tasks, Streams.conductorConsumer);
    const batch = await consumer.fetch({ max_messages: 1, expires: 10_000 });
    const draining = (async () => {
      for await (const m of batch) m.nak();
    })();
    stops.push(async () => {
      batch.stop();
      await draining.catch(() => undefined);
      await conductor.close();
    });
    for (const s of ALL) setTimeout(() => void serve(s), 2_000);
    const t1 = Date.now();
    const present = await presentServices(nc, ALL, 8_000);
    expect([...present].sort()).toEqual([...ALL].sort());
    expect(Date.now() - t1).toBeGreaterThanOrEqual(1_900);
  });
});
