import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { metaMembership, settleMembership } from "./meta-group.js";

const servers: Server[] = [];

/**
 * A fake nats-server monitoring endpoint: /varz with its name, /jsz with its meta view (a
 * function: what it reports may change between reads).
 */
async function node(name: string, meta: Record<string, unknown> | (() => Record<string, unknown>)): Promise<string> {
  const srv = createServer((req, res) => {
    const view = typeof meta === "function" ? meta() : meta;
    const body =
      req.url === "/varz"
        ? { server_name: name }
        : req.url === "/jsz"
          ? { server_id: "x", meta_cluster: view }
          : undefined;
    res.writeHead(body ? 200 : 404, { "content-type": "application/json" }).end(JSON.stringify(body ?? {}));
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  servers.push(srv);
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

describe("metaMembership", () => {
  it("finds every node in the group when the leader lists the other two", async () => {
    const urls = [
      await node("nats", { leader: "nats-2", cluster_size: 3 }),
      await node("nats-2", { leader: "nats-2", cluster_size: 3, replicas: [{ name: "nats" }, { name: "nats-3" }] }),
      await node("nats-3", { leader: "nats-2", cluster_size: 3 }),
    ];
    const m = await metaMembership(urls);
    expect(m).toMatchObject({ leader: "nats-2", members: ["nats-2", "nats", "nats-3"], leftOut: [] });
  });

  it("names a node that answers but that the leader does not list (the left-out state seen on 2.10)", async () => {
    const urls = [
      await node("nats", { leader: "nats-2", cluster_size: 2 }),
      await node("nats-2", { leader: "nats-2", cluster_size: 2, replicas: [{ name: "nats" }] }),
      await node("nats-3", { leader: "nats-2", cluster_size: 3 }),
    ];
    expect(await metaMembership(urls)).toMatchObject({
      leader: "nats-2",
      members: ["nats-2", "nats"],
      leftOut: ["nats-3"],
    });
  });

  it("counts a node that does not answer as neither member nor left out, and reports no group without a leader", async () => {
    const down = "http://127.0.0.1:1";
    const m = await metaMembership(
      [await node("nats", { leader: "nats", cluster_size: 3, replicas: [{ name: "nats-2" }] }), down],
      500,
    );
    expect(m.leftOut).toEqual([]);
    expect(m.nodes[1]).toMatchObject({ url: down, error: expect.any(String) });
    const leaderless = await metaMembership([await node("nats-2", { cluster_size: 3 }), await node("nats-3", {})]);
    expect(leaderless).toMatchObject({ members: [], leftOut: [] });
    expect(leaderless.leader).toBeUndefined();
  });

  it("settles: complete at once; a node that joins late is not called left out; one that stays out is, after settleMs", async () => {
    const full = { leader: "nats", cluster_size: 3, replicas: [{ name: "nats-2" }, { name: "nats-3" }] };
    const complete = await settleMembership(
      [await node("nats", full), await node("nats-2", { leader: "nats" }), await node("nats-3", { leader: "nats" })],
      { waitMs: 5_000, settleMs: 2_000, pollMs: 50 },
    );
    expect(complete.outcome).toBe("complete");

    // nats-3 is added 300 ms in: within the settle time, so the group completes.
    const joinAt = Date.now() + 300;
    const late = () =>
      Date.now() < joinAt ? { leader: "nats", cluster_size: 2, replicas: [{ name: "nats-2" }] } : full;
    const joined = await settleMembership(
      [await node("nats", late), await node("nats-2", { leader: "nats" }), await node("nats-3", { leader: "nats" })],
      { waitMs: 5_000, settleMs: 1_000, pollMs: 50 },
    );
    expect(joined).toMatchObject({ outcome: "complete", membership: { leftOut: [] } });

    // nats-3 never is: left out once it has stayed out for settleMs, long before waitMs.
    const started = Date.now();
    const stuck = await settleMembership(
      [
        await node("nats", { leader: "nats", cluster_size: 2, replicas: [{ name: "nats-2" }] }),
        await node("nats-2", { leader: "nats" }),
        await node("nats-3", { leader: "nats", cluster_size: 3 }),
      ],
      { waitMs: 10_000, settleMs: 400, pollMs: 50 },
    );
    expect(stuck).toMatchObject({ outcome: "left_out", membership: { leftOut: ["nats-3"] } });
    expect(Date.now() - started).toBeLessThan(3_000);

    // No leader among the nodes: no_leader once waitMs has passed.
    const none = await settleMembership([await node("nats", { cluster_size: 3 })], {
      waitMs: 300,
      settleMs: 100,
      pollMs: 50,
    });
    expect(none.outcome).toBe("no_leader");
  });
});
