import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  NATS_ROLES,
  checkClientNames,
  clientPermission,
  inboxPrefixOf,
  natsPermissions,
  passwordVariable,
  renderNatsServerConfig,
} from "./nats-permissions.js";
import { assetPath } from "../runtime/assets.js";
import { CHECKPOINT_BLOBS_BUCKET, differingSettings } from "./streams.js";
import { natsServers } from "./nats-options.js";
import { CLUSTER_CONF } from "./nats-permissions.js";

describe("the NATS permission matrix", () => {
  const perms = natsPermissions();

  it("is what deploy/nats.conf holds (regenerate it with `loopsmith bus config --out deploy/nats.conf`)", () => {
    expect(readFileSync(assetPath("deploy", "nats.conf"), "utf8")).toBe(renderNatsServerConfig());
  });

  it("lets only the architect publish events and call the step services; each service subscribes on its own endpoints only", () => {
    for (const role of NATS_ROLES.filter((r) => r !== "admin")) {
      const p = perms[role];
      expect(p.publish.includes("loopsmith.events.>"), role).toBe(role === "architect");
      expect(p.publish.includes("loopsmith.executor.>"), role).toBe(role === "architect");
      const endpoints = p.subscribe.filter((s) => /^loopsmith\.(architect|builder|reviewer|executor|memory)\./.test(s));
      expect(endpoints, role).toEqual(role === "client" ? [] : [`loopsmith.${role}.>`]);
      // Replies: only its own inbox, never another user's or the shared default.
      expect(
        p.subscribe.filter((s) => s.startsWith("_INBOX")),
        role,
      ).toEqual([`${inboxPrefixOf(role)}.>`]);
    }
  });

  it("gives the JetStream management API to the admin alone (but the architect's purge of its own checkpoint blobs); a client creates no consumer at all", () => {
    const management =
      /^\$JS\.API\.(STREAM\.(CREATE|UPDATE|DELETE|PURGE|MSG\.DELETE)|CONSUMER\.DURABLE\.CREATE|ACCOUNT)|^>$|^\$JS\.API\.>$/;
    for (const role of NATS_ROLES) {
      const allowed = perms[role].publish.filter((s) => management.test(s));
      if (role === "admin") expect(allowed).toEqual([">"]);
      // An object store deletes an object by purging its chunks: the architect's own blob store only.
      else if (role === "architect") expect(allowed).toEqual([`$JS.API.STREAM.PURGE.OBJ_${CHECKPOINT_BLOBS_BUCKET}`]);
      else expect(allowed, role).toEqual([]);
      // No consumer on the work queues but the architect's own durable ones (which it may not create).
      expect(
        perms[role].publish.filter((s) => /CONSUMER\.CREATE\.LOOPSMITH_(TASKS|IMPROVE)/.test(s)),
        role,
      ).toEqual([]);
    }
    // A push consumer's delivery subject is not checked against its creator's rights, and a
    // consumer or a read by sequence would show other owners' events: clients get neither.
    expect(perms.client.publish.filter((s) => s.includes("CONSUMER.CREATE") || s.includes("MSG.NEXT"))).toEqual([]);
    expect(perms.client.publish.filter((s) => s.includes("LOOPSMITH_EVENTS"))).toEqual([]);
  });

  it("gives each client its own owner token on every subject that names one, and nothing of another's", () => {
    const alice = clientPermission("alice");
    const owned = [...alice.publish, ...alice.subscribe].filter((s) => /^loopsmith\.|^_INBOX/.test(s));
    expect(owned.length).toBeGreaterThan(10);
    for (const subject of owned)
      expect(subject.split(".").includes("alice") || subject.startsWith("_INBOX_alice."), subject).toBe(true);
    expect(alice.subscribe).toEqual(["_INBOX_alice.>", "loopsmith.events.alice.>", "loopsmith.rejects.*.alice"]);
    expect(() => clientPermission("a.b")).toThrow(/owner/);
    expect(() => checkClientNames(["alice", "admin"])).toThrow(/role's name/);
    expect(() => checkClientNames(["a-b", "a_b"])).toThrow(/twice/);
    const text = renderNatsServerConfig({ clients: ["alice", "bob-2"] });
    expect(text).toContain("password: $LOOPSMITH_NATS_CLIENT_ALICE_PASSWORD");
    expect(text).toContain("password: $LOOPSMITH_NATS_CLIENT_BOB_2_PASSWORD");
  });

  it("syncs every JetStream write to disk by default; another interval only when asked, and a bad one refused", () => {
    expect(renderNatsServerConfig()).toMatch(/^jetstream \{ store_dir: "\/data", sync_interval: always \}$/m);
    const window = renderNatsServerConfig({ syncInterval: "2m" });
    expect(window).toMatch(/^jetstream \{ store_dir: "\/data", sync_interval: 2m \}$/m);
    expect(window).toMatch(/^# Forced to disk every 2m: a power loss can lose that window/m);
    expect(() => renderNatsServerConfig({ syncInterval: "2 minutes" })).toThrow(/always or a duration/);
  });

  it("reads each password from the server's environment, so the file holds no secret", () => {
    const text = renderNatsServerConfig();
    for (const role of NATS_ROLES) expect(text).toContain(`password: $${passwordVariable(role)}`);
    expect(passwordVariable("client")).toBe("LOOPSMITH_NATS_CLIENT_PASSWORD");
  });
});

describe("differingSettings", () => {
  it("names the settings whose values differ, ignoring what the server adds", () => {
    expect(
      differingSettings(
        { name: "S", subjects: ["a.>"], max_age: 5 },
        { name: "S", subjects: ["a.>"], max_age: 5, num_replicas: 1 },
      ),
    ).toEqual([]);
    expect(
      differingSettings(
        { name: "S", subjects: ["a.>", "b"], max_age: 5 },
        { name: "S", subjects: ["a.>"], max_age: 6 },
      ),
    ).toEqual(["subjects", "max_age"]);
  });

  it("raises replicas but never lowers them: more than wanted is not a difference", () => {
    expect(differingSettings({ name: "S", num_replicas: 3 }, { name: "S", num_replicas: 1 })).toEqual(["num_replicas"]);
    expect(differingSettings({ name: "S", num_replicas: 1 }, { name: "S", num_replicas: 3 })).toEqual([]);
    expect(differingSettings({ name: "S", num_replicas: 3 }, { name: "S", num_replicas: 3 })).toEqual([]);
  });
});

describe("renderNatsServerConfig for a cluster", () => {
  it("adds the node's name from its environment and the routes, and keeps the users", () => {
    const text = renderNatsServerConfig({
      cluster: { name: "loopsmith", routes: ["nats-route://nats-1:6222", "nats-route://nats-2:6222"] },
    });
    expect(text).toContain("server_name: $NATS_SERVER_NAME");
    expect(text).toMatch(
      /cluster \{\n {2}name: "loopsmith"\n {2}listen: "0\.0\.0\.0:6222"\n {2}routes: \["nats-route:\/\/nats-1:6222", "nats-route:\/\/nats-2:6222"\]\n\}/,
    );
    for (const role of NATS_ROLES) expect(text).toContain(`password: $${passwordVariable(role)}`);
    // The single-server file has neither.
    expect(renderNatsServerConfig()).not.toMatch(/server_name|cluster \{/);
  });

  it("matches deploy/nats-cluster.conf, the file the cluster compose file mounts", () => {
    expect(readFileSync(assetPath("deploy", "nats-cluster.conf"), "utf8")).toBe(renderNatsServerConfig(CLUSTER_CONF));
  });
});

describe("natsServers", () => {
  it("splits a cluster's URLs on commas, one URL stays one", () => {
    expect(natsServers("nats://a:4222, nats://b:4222,nats://c:4222")).toEqual([
      "nats://a:4222",
      "nats://b:4222",
      "nats://c:4222",
    ]);
    expect(natsServers("nats://user:pw@a:4222")).toEqual(["nats://user:pw@a:4222"]);
    expect(natsServers(" , ")).toEqual([]);
  });
});
