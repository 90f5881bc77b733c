/**
 * Executors on several Docker engines, and a stopped engine under its executor, on
 * real engines: two Docker engines in containers (deploy/build-images.sh's engine image,
 * reached over TCP with mutual TLS), an executor service on each, on a real NATS server.
 */
import { afterAll, beforeAll, describe, expect } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";
import { Endpoints, ServiceNames, call } from "@loopsmith/shared/bus";
import { busyReason, hasCode, runService, type RunningService } from "@loopsmith/shared/runtime";
import { type ExecutionRequest } from "@loopsmith/shared/contracts";
import { createExecutor, executorService, LABEL, type Executor } from "@loopsmith/executor";
import { it } from "../fixtures/index.js";
import { loopsmith } from "../fixtures/cli.js";
import { saveImage, startEngine, until, type StartedEngine } from "../fixtures/engines.js";
import { log, request, testConfig } from "./helpers.js";

const PY_IMAGE = testConfig().images.python;
const TESTS = "def test_ok():\n    assert 1 + 1 == 2\n\ndef test_wrong():\n    assert 1 + 1 == 3\n";

/** A python run whose one test sleeps `s` seconds, then passes. */
function sleeping(s: number): ExecutionRequest {
  return request(
    "python",
    [{ path: "test_sleep.py", content: `import time\n\ndef test_sleep():\n    time.sleep(${s})\n` }],
    { timeoutMs: 60_000 },
  );
}

let engines: StartedEngine[] = [];
let archive = "";

beforeAll(async () => {
  [engines, archive] = await Promise.all([
    Promise.all([startEngine("loopsmith-test-engine-a"), startEngine("loopsmith-test-engine-b")]),
    saveImage(PY_IMAGE),
  ]);
}, 240_000);

afterAll(async () => {
  await Promise.all(engines.map((e) => e.remove()));
});

/** An executor (python only) on `engine`, pinging it every 500 ms. */
function executorOn(engine: StartedEngine, over: Parameters<typeof testConfig>[0] = {}): Executor {
  return createExecutor({
    docker: engine.docker,
    config: testConfig({ warmPoolSize: 1, concurrency: 1, queueLimit: 0, imageArchive: archive, ...over }),
    log,
    kinds: ["python"],
    env: engine.env,
    enginePingEveryMs: 500,
  });
}

/** Sandboxes of any executor left on `engine` (any state). */
async function leftOn(engine: StartedEngine): Promise<number> {
  return (await engine.docker.listContainers({ all: true, filters: { label: [LABEL] } })).length;
}

describe("an executor on a remote engine", () => {
  it("fails at start naming the image and the engine when the engine lacks it, and loads it from LOOPSMITH_SANDBOX_IMAGES", async () => {
    const [a] = engines as [StartedEngine];
    const bare = createExecutor({
      docker: a.docker,
      config: testConfig({ warmPoolSize: 0 }),
      log,
      kinds: ["python"],
      env: a.env,
    });
    const err = await bare.start().then(
      () => null,
      (e: unknown) => e,
    );
    expect(hasCode(err, "sandbox_error")).toBe(true);
    expect((err as Error).message).toContain(PY_IMAGE);
    expect((err as Error).message).toContain(`tcp://127.0.0.1:${a.port}`);
    expect((err as Error).message).toContain("LOOPSMITH_SANDBOX_IMAGES");
    await bare.stop();

    const ex = executorOn(a);
    await ex.start();
    try {
      expect(ex.engine?.endpoint).toBe(`tcp://127.0.0.1:${a.port}`);
      expect(ex.engine?.tls).toBe(true);
      const result = await ex.run(request("python", [{ path: "test_math.py", content: TESTS }]));
      expect(result.status).toBe("failed");
      expect(result.tests.map((t) => `${t.name}:${t.status}`).sort()).toEqual(["test_ok:passed", "test_wrong:failed"]);
    } finally {
      await ex.stop();
    }
    expect(await leftOn(a)).toBe(0);
  });

  it("reaches the engine named by DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH (loopsmith sandbox run)", async () => {
    const [a] = engines as [StartedEngine];
    const { mkdtempSync, writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(join(tmpdir(), "engine-ws-"));
    writeFileSync(join(dir, "test_a.py"), "def test_a():\n    assert 2 * 2 == 4\n");
    const since = Math.floor(Date.now() / 1000) - 1;
    const run = await loopsmith(["sandbox", "run", "--language", "python", "-d", dir, "--json"], {
      ...a.env,
      LOOPSMITH_WARM_POOL_SIZE: "0",
      NATS_URL: "",
    });
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ status: "passed" });
    // It ran there, not on the host's engine (which has the image too): the remote engine's
    // own event log shows sandbox containers created since, and none is left.
    const events = await a.docker.getEvents({
      since,
      until: Math.floor(Date.now() / 1000) + 1,
      filters: { type: ["container"], event: ["create"], label: [LABEL] },
    });
    let created = 0;
    for await (const chunk of events as AsyncIterable<Buffer>)
      created += chunk
        .toString()
        .split("\n")
        .filter((l) => l.includes('"create"')).length;
    expect(created).toBeGreaterThan(0);
    expect(await leftOn(a)).toBe(0);
  });
});

describe("executors on two engines over NATS", () => {
  let nc: NatsConnection;
  let services: RunningService[] = [];
  let executors: Executor[] = [];

  const start = async (natsUrl: string): Promise<void> => {
    executors = engines.map((e) => executorOn(e));
    services = await Promise.all(
      executors.map((ex) =>
        runService("executor", (deps) => executorService({ ...deps, executor: ex }), {
          config: { ...testConfig(), natsUrl },
          log,
        }),
      ),
    );
    nc = await connect({ servers: natsUrl });
  };

  afterAll(async () => {
    await nc?.close();
    await Promise.all(services.map((s) => s.stop()));
    for (const e of engines) expect(await leftOn(e)).toBe(0);
  });

  it("names each engine in $SRV INFO, reports free slots in STATS, and gives the same verdicts on both", async ({
    nats,
  }) => {
    await start(nats.url);
    const client = new Svcm(nc as never).client({ strategy: "timer", maxWait: 1_000 });
    const infos = [];
    for await (const info of await client.info(ServiceNames.executor)) infos.push(info);
    expect(infos).toHaveLength(2);
    const ids = new Set(infos.map((i) => i.metadata?.engine));
    expect(ids.size).toBe(2);
    expect(new Set(infos.map((i) => i.metadata?.engineEndpoint))).toEqual(
      new Set(engines.map((e) => `tcp://127.0.0.1:${e.port}`)),
    );
    const stats = [];
    for await (const s of await client.stats(ServiceNames.executor)) stats.push(s.endpoints?.[0]?.data);
    expect(stats).toHaveLength(2);
    for (const d of stats)
      expect(d).toMatchObject({ freeSlots: 1, concurrency: 1, queueLimit: 0, running: 0, healthy: true });

    const verdicts = await Promise.all(
      executors.map((ex) => ex.run(request("python", [{ path: "test_math.py", content: TESTS }]))),
    );
    const shape = verdicts.map((r) => ({
      status: r.status,
      exitCode: r.exitCode,
      tests: r.tests.map((t) => `${t.name}:${t.status}`).sort(),
    }));
    expect(shape[0]).toEqual(shape[1]);
    expect(shape[0]?.status).toBe("failed");
  });

  it("sends work only to a free slot: with both busy a run waits for one instead of queueing behind a busy engine", async () => {
    const most = executors.map(() => ({ running: 0, queued: 0, ran: false }));
    const sampler = setInterval(() => {
      executors.forEach((ex, i) => {
        const l = ex.load();
        const m = most[i] as (typeof most)[number];
        m.running = Math.max(m.running, l.running);
        m.queued = Math.max(m.queued, l.queued);
        if (l.running > 0) m.ran = true;
      });
    }, 25);
    try {
      const runs = Array.from({ length: 4 }, () =>
        call(nc, Endpoints.executor.run, sleeping(2), { timeoutMs: 90_000, retries: 0, busyWaitMs: 90_000 }),
      );
      // While both slots are held, a caller that does not wait is refused as busy at once.
      await until(
        "both executors to be running",
        () => Promise.resolve(executors.every((ex) => ex.load().running === 1)),
        30_000,
        20,
      );
      const refused = await call(nc, Endpoints.executor.run, sleeping(0), { timeoutMs: 10_000, retries: 0 }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(busyReason(refused)).toBe("full");
      const results = await Promise.all(runs);
      expect(results.map((r) => r.status)).toEqual(["passed", "passed", "passed", "passed"]);
    } finally {
      clearInterval(sampler);
    }
    for (const m of most) expect(m).toEqual({ running: 1, queued: 0, ran: true });
  });

  it("a stopped engine: its run is retried on the other engine within 30 s, its executor is unhealthy until the engine answers, then serves again", async ({
    nats,
  }) => {
    const pending = call(nc, Endpoints.executor.run, sleeping(6), {
      timeoutMs: 90_000,
      retries: 0,
      busyWaitMs: 90_000,
    });
    await until("the run to start", () => Promise.resolve(executors.some((ex) => ex.load().running === 1)), 30_000, 20);
    const victim = executors.findIndex((ex) => ex.load().running === 1);
    const engine = engines[victim] as StartedEngine;
    const ex = executors[victim] as Executor;
    const killedAt = Date.now();
    await engine.container.kill();
    const result = await pending;
    const retriedWithinMs = Date.now() - killedAt;
    expect(result.status).toBe("passed");
    // 6 s of the test itself on the other engine, plus the retry.
    expect(retriedWithinMs).toBeLessThan(30_000);
    expect(ex.load()).toMatchObject({ healthy: false, freeSlots: 0 });

    // Health as compose's check sees it: the instance answers its ping but reports itself unhealthy.
    const health = await loopsmith(["health", "executor", "--json"], { NATS_URL: nats.url });
    const answer = JSON.parse(health.stdout.trim()) as { services: { ids: string[]; unhealthy?: { id: string }[] }[] };
    expect(answer.services[0]?.ids).toHaveLength(1);
    expect(answer.services[0]?.unhealthy).toHaveLength(1);

    // Meanwhile runs go to the healthy engine.
    expect(
      (await call(nc, Endpoints.executor.run, sleeping(0), { timeoutMs: 30_000, retries: 0, busyWaitMs: 30_000 }))
        .status,
    ).toBe("passed");

    await engine.container.start();
    await until("the executor to see its engine again", () => Promise.resolve(ex.load().healthy), 60_000);
    const again = await ex.run(request("python", [{ path: "test_math.py", content: TESTS }]));
    expect(again.status).toBe("failed");
    expect(again.tests.filter((t) => t.status === "passed").map((t) => t.name)).toEqual(["test_ok"]);
  });
});
