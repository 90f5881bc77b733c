import type Docker from "dockerode";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { hasCode } from "@loopsmith/shared/runtime";
import { describeEngine, engineEndpoint, EngineWatch, type EngineHealth } from "./engine.js";

const log = pino({ level: "silent" });

describe("engineEndpoint", () => {
  it("names DOCKER_HOST with its password masked, and says whether TLS client files are used", () => {
    expect(engineEndpoint({})).toEqual({ endpoint: "local socket", tls: false });
    expect(engineEndpoint({ DOCKER_HOST: "tcp://engine-2:2376", DOCKER_TLS_VERIFY: "1" })).toEqual({
      endpoint: "tcp://engine-2:2376",
      tls: true,
    });
    expect(engineEndpoint({ DOCKER_HOST: "ssh://ops:secret@builder", DOCKER_TLS_VERIFY: "0" }).endpoint).not.toContain(
      "secret",
    );
    expect(engineEndpoint({ DOCKER_HOST: "tcp://e:2376", DOCKER_CERT_PATH: "/certs" }).tls).toBe(true);
  });
});

describe("describeEngine", () => {
  it("fails with sandbox_error naming the address when the engine does not answer in time", async () => {
    const silent = { info: () => new Promise(() => undefined) } as unknown as Docker;
    const err = await describeEngine(silent, { env: { DOCKER_HOST: "tcp://engine-3:2376" }, timeoutMs: 50 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(hasCode(err, "sandbox_error")).toBe(true);
    expect((err as Error).message).toContain("tcp://engine-3:2376");
    expect((err as Error).message).toContain("did not answer within 50 ms");
  });
});

describe("EngineWatch", () => {
  it("turns unhealthy when a ping fails or hangs, healthy again at the first answer, and reports each change once", async () => {
    let mode: "up" | "down" | "hang" = "up";
    const docker = {
      ping: () =>
        mode === "up"
          ? Promise.resolve("OK")
          : mode === "down"
            ? Promise.reject(new Error("connect ECONNREFUSED"))
            : new Promise(() => undefined),
    } as unknown as Docker;
    const changes: EngineHealth[] = [];
    const watch = new EngineWatch(docker, log, (h) => changes.push(h), 50);
    expect(await watch.check()).toBe(true);
    mode = "down";
    expect(await watch.check()).toBe(false);
    expect(watch.health).toMatchObject({ healthy: false, error: "connect ECONNREFUSED" });
    mode = "hang";
    expect(await watch.check()).toBe(false);
    expect(watch.health.error).toMatch(/did not answer within 50 ms/);
    mode = "up";
    expect(await watch.check()).toBe(true);
    expect(changes.map((c) => c.healthy)).toEqual([false, true]);
  });
});
