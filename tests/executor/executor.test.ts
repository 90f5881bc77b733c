/**
 * The executor on the real Docker engine: pytest results per test, statuses, limits,
 * idempotency, the queue, leftover cleanup, and the bus endpoint over real NATS.
 */
import { afterAll, beforeAll, describe, expect, it as plainIt } from "vitest";
import { connect } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";
import { Endpoints, ServiceNames, call } from "@loopsmith/shared/bus";
import { busyReason, hasCode, runService } from "@loopsmith/shared/runtime";
import { type ExecutionResult } from "@loopsmith/shared/contracts";
import {
  createExecutor,
  executorService,
  LABEL,
  LABEL_HOST,
  LABEL_PID,
  LABEL_SETUP,
  liveExecutors,
  loadSeccompProfile,
  ORPHAN_GRACE_S,
  Sandbox,
  type Executor,
} from "@loopsmith/executor";
import { hostname } from "node:os";
import type Docker from "dockerode";
import { join } from "node:path";
import { REPO, runNode } from "../fixtures/cli.js";
import { it } from "../fixtures/index.js";
import { containersOf, docker, expectIdleHost, log, py, request, startExecutor, testConfig } from "./helpers.js";

const TESTS = `
def add(a, b):
    return a + b

def test_add():
    assert add(1, 2) == 3

def test_check():
    assert add(2, 2) == 5, "two and two"

def test_negative():
    assert add(-1, -1) == -2
`;

let ex: Executor;

beforeAll(async () => {
  ex = await startExecutor({ warmPoolSize: 1, concurrency: 2 });
});

afterAll(async () => {
  await ex?.stop();
  const left = ex ? await containersOf(ex.instanceId) : [];
  expect(left).toHaveLength(0);
});

describe("executor: python with pytest", () => {
  plainIt("passes when every test passes, naming each test", async () => {
    const passing = TESTS.replace("assert add(2, 2) == 5", "assert add(2, 2) == 4");
    const result = await ex.run(request("python", [{ path: "test_math.py", content: passing }]));
    expect(result.status).toBe("passed");
    expect(result.exitCode).toBe(0);
    expect(result.tests.map((t) => [t.name, t.status])).toEqual([
      ["test_add", "passed"],
      ["test_check", "passed"],
      ["test_negative", "passed"],
    ]);
    expect(result.tests[0]?.classname).toBe("test_math");
    expect(result.stdout).toContain("3 passed");
    // The limits it ran under, as applied: the request's memory and timeout, the executor's CPU, pids and tmpfs.
    const { executor } = testConfig();
    expect(result.limits).toEqual({
      cpus: executor.cpus,
      memoryMb: 512,
      pidsLimit: executor.pidsLimit,
      timeoutMs: 20_000,
      tmpfsMb: executor.tmpfsMb,
    });
    await expectIdleHost(ex, 2);
  });

  plainIt("fails and names the failing test with its message", async () => {
    const result = await ex.run(request("python", [{ path: "test_math.py", content: TESTS }]));
    expect(result.status).toBe("failed");
    expect(result.exitCode).toBe(1);
    const failing = result.tests.filter((t) => t.status === "failed");
    expect(failing.map((t) => t.name)).toEqual(["test_check"]);
    expect(failing[0]?.message).toContain("two and two");
    expect(result.tests.filter((t) => t.status === "passed")).toHaveLength(2);
  });

  plainIt("reports a syntax error as error, and an import error as error", async () => {
    const syntax = await ex.run(request("python", [{ path: "test_bad.py", content: "def test_x(:\n    pass\n" }]));
    expect(syntax.status).toBe("error");
    expect(syntax.exitCode).toBe(2);
    expect(syntax.stdout).toContain("SyntaxError");
    const imports = await ex.run(
      request("python", [{ path: "test_imp.py", content: "import no_such_module\n\ndef test_x():\n    pass\n" }]),
    );
    expect(imports.status).toBe("error");
    expect(imports.stdout).toContain("no_such_module");
  });

  plainIt("reports no collected tests as error", async () => {
    const result = await ex.run(request("python", [{ path: "helper.py", content: "X = 1\n" }]));
    expect(result.status).toBe("error");
    expect(result.exitCode).toBe(5);
  });

  plainIt("kills a run that passes its time limit", async () => {
    const result = await ex.run(py("import time\nprint('start', flush=True)\ntime.sleep(60)\n", { timeoutMs: 1_500 }));
    expect(result.status).toBe("timeout");
    expect(result.stdout).toContain("start");
    await expectIdleHost(ex, 2);
  });

  plainIt("runs custom commands in packages, with the workspace as the current directory", async () => {
    const result = await ex.run(
      request(
        "python",
        [
          { path: "pkg/__init__.py", content: "" },
          { path: "pkg/core.py", content: "def hello():\n    return 'hi'\n" },
          {
            path: "main.py",
            content: "import os\nfrom pkg.core import hello\nprint(hello(), os.getcwd(), os.getuid())\n",
          },
        ],
        { command: ["python3", "main.py"] },
      ),
    );
    expect(result.status).toBe("passed");
    expect(result.stdout.trim()).toBe("hi /workspace 10001");
    const missing = await ex.run(request("python", [{ path: "a.py", content: "" }], { command: ["no-such-binary"] }));
    expect(missing.status).toBe("error");
    expect(missing.exitCode).toBe(127);
    const exit3 = await ex.run(py("import sys\nsys.exit(3)\n"));
    expect(exit3.status).toBe("failed");
    expect(exit3.exitCode).toBe(3);
  });

  plainIt("applies the request's memory limit with swap equal to it", async () => {
    const result = await ex.run(
      py(
        "print(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read().strip(), open('/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes').read().strip())\n",
        { memoryMb: 256 },
      ),
    );
    expect(result.status).toBe("passed");
    expect(result.stdout.trim()).toBe(`${256 * 1024 * 1024} ${256 * 1024 * 1024}`);
  });

  plainIt("runs a request once per idempotency key", async () => {
    const req = py("import uuid\nprint(uuid.uuid4())\n");
    const [a, b] = await Promise.all([ex.run(req), ex.run(req)]);
    const c = await ex.run(req);
    expect(a.status).toBe("passed");
    expect(b.stdout).toBe(a.stdout);
    expect(c.stdout).toBe(a.stdout);
    const other = await ex.run({ ...req, idempotencyKey: `${req.taskId}/999/execute` });
    expect(other.stdout).not.toBe(a.stdout);
  });

  plainIt("blocks files that escape the workspace and rejects malformed requests", async () => {
    const base = (): ReturnType<typeof request> =>
      request("python", [{ path: "test_a.py", content: "def test_a():\n    pass\n" }]);
    for (const path of ["../evil.py", "/etc/passwd", "a/../../b.py", "a//b.py"]) {
      const result = await ex.run({ ...base(), files: [{ path, content: "x" }] });
      expect(result.status, path).toBe("blocked");
    }
    const dup = await ex.run({
      ...base(),
      files: [
        { path: "a.py", content: "" },
        { path: "a.py", content: "" },
      ],
    });
    expect(dup.status).toBe("blocked");
    const both = await ex.run({
      ...base(),
      files: [
        { path: "a", content: "" },
        { path: "a/b.py", content: "" },
      ],
    });
    expect(both.status).toBe("blocked");
    const err = await ex.run({ ...base(), language: "cobol" } as never).then(
      () => null,
      (e: unknown) => e as { code?: string },
    );
    expect(err?.code).toBe("bad_request");
  });
});

describe("executor: queue and leftovers", () => {
  plainIt(
    "refuses runs beyond the bounded queue as busy (another executor may take them), and cancels a queued run",
    async () => {
      const small = await startExecutor({ warmPoolSize: 0, concurrency: 1, queueLimit: 1 });
      try {
        const slow = small.run(py("import time\ntime.sleep(3)\n"));
        await new Promise((r) => setTimeout(r, 200));
        const controller = new AbortController();
        const queued = small.run(py("print('queued')\n"), { signal: controller.signal });
        const refused = await small.run(py("print('refused')\n")).then(
          () => null,
          (e: unknown) => e,
        );
        expect(busyReason(refused)).toBe("full");
        expect((refused as Error).message).toMatch(/busy: 1 runs running and 1 waiting/);
        controller.abort();
        expect((await queued).status).toBe("killed");
        expect((await slow).status).toBe("passed");
        await expectIdleHost(small, 0);
      } finally {
        await small.stop();
      }
      expect(await containersOf(small.instanceId)).toHaveLength(0);
    },
  );

  plainIt(
    "a dead executor's sandboxes end at once, mid-run too, and the next executor removes them; a live owner's are kept, whatever pid they name",
    async () => {
      const sinceS = Math.floor(Date.now() / 1000) - 1;
      // Owners that die in another pid namespace (their labels say pid 1, alive on every host).
      const orphan = async (mode: "idle" | "running", kind: "python" | "node" = "python"): Promise<string> => {
        const run = await runNode(join(REPO, "tests", "executor", "dead-owner.ts"), [`dead-${mode}`, mode, kind]);
        const id = run.stdout.trim();
        expect(id, run.stderr).toMatch(/^[0-9a-f]{64}$/);
        return id;
      };
      const idle = await orphan("idle");
      // Mid-run, with a run timeout and a supervisor deadline of 10 minutes: the supervisor sees
      // its executor's connection end and kills the run (both supervisors: python and node).
      const running = await orphan("running");
      const runningNode = await orphan("running", "node");
      // A live owner (this process) whose label names a pid that does not exist.
      const live = await docker.createContainer({
        Image: testConfig().images.python,
        Cmd: ["sleep", "300"],
        Labels: { [LABEL]: "a1a1a1a1a1a1", [LABEL_HOST]: hostname(), [LABEL_PID]: "999999" },
        HostConfig: { NetworkMode: "none" },
      });
      await live.start();
      try {
        // Each exits when its owner's connection drops: long before the run's 10-minute deadline.
        // Gone counts as ended: another executor's sweep (this file's `ex` sweeps every minute)
        // removes a dead owner's container once it has stopped, and never a running one.
        const deadline = Date.now() + 30_000;
        while ((await Promise.all([idle, running, runningNode].map(stateOrGone))).some((s) => s?.Running)) {
          if (Date.now() > deadline) throw new Error("a dead owner's sandbox is still running after 30 s");
          await new Promise((r) => setTimeout(r, 250));
        }
        expect(await exitCodeOf(running, sinceS)).toBe(137);
        expect(await exitCodeOf(runningNode, sinceS)).toBe(137);
        const next = await startExecutor({ warmPoolSize: 0 });
        await next.stop();
        for (const id of [idle, running, runningNode])
          await expect(docker.getContainer(id).inspect()).rejects.toMatchObject({ statusCode: 404 });
        expect((await live.inspect()).State.Running).toBe(true);
      } finally {
        await live.remove({ force: true });
        for (const id of [idle, running, runningNode])
          await docker
            .getContainer(id)
            .remove({ force: true })
            .catch(() => undefined);
      }
    },
  );
});

/** A container's state, or undefined when it is gone (404: removed, by whoever). */
async function stateOrGone(id: string): Promise<Docker.ContainerInspectInfo["State"] | undefined> {
  try {
    return (await docker.getContainer(id).inspect()).State;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return undefined;
    throw err;
  }
}

/**
 * The exit code of a container that has ended: from inspect while it exists, else from its
 * `die` event since `sinceS` (the engine keeps it after the container is removed).
 */
async function exitCodeOf(id: string, sinceS: number): Promise<number | undefined> {
  const state = await stateOrGone(id);
  if (state) return state.ExitCode;
  for (let tries = 0; tries < 20; tries++) {
    const stream = await docker.getEvents({
      since: sinceS,
      until: Math.ceil(Date.now() / 1000),
      filters: { container: [id], event: ["die"] },
    });
    let text = "";
    for await (const chunk of stream) text += chunk.toString();
    const die = text
      .split("\n")
      .filter((line) => line.trim())
      .map((line) => JSON.parse(line) as { Action?: string; Actor?: { Attributes?: Record<string, string> } })
      .find((e) => e.Action === "die");
    if (die?.Actor?.Attributes?.exitCode !== undefined) return Number(die.Actor.Attributes.exitCode);
    await new Promise((r) => setTimeout(r, 250));
  }
  return undefined;
}

describe("executor: start-up checks", () => {
  plainIt(
    "refuses to start (sandbox_error) when the sandbox cannot be confined as configured, and leaves nothing",
    async () => {
      const broken = createExecutor({
        docker,
        config: testConfig({ runtime: "no-such-runtime", warmPoolSize: 1 }),
        log,
      });
      const err = await broken.start().then(
        () => null,
        (e: unknown) => e,
      );
      expect(hasCode(err, "sandbox_error")).toBe(true);
      const result = await broken.run(py("print('never')\n"));
      expect(result.status).toBe("sandbox_error");
      await broken.stop();
      expect(await containersOf(broken.instanceId)).toHaveLength(0);
    },
  );
});

describe("executor service over NATS", () => {
  it("answers runs, rejects garbage with bad_request, and keeps serving", async ({ nats }) => {
    const config = { ...testConfig({ warmPoolSize: 1 }), natsUrl: nats.url };
    const running = await runService("executor", (deps) => executorService(deps), { config, log });
    const nc = await connect({ servers: nats.url });
    try {
      const ok: ExecutionResult = await call(
        nc,
        Endpoints.executor.run,
        request("python", [{ path: "test_math.py", content: TESTS }]),
        {
          timeoutMs: 60_000,
          retries: 0,
        },
      );
      expect(ok.status).toBe("failed");
      expect(ok.tests.find((t) => t.status === "failed")?.name).toBe("test_check");

      const notJson = JSON.parse(
        (await nc.request(Endpoints.executor.run.subject, "{nope", { timeout: 5_000 })).string(),
      );
      expect(notJson).toMatchObject({ ok: false, error: { code: "bad_request" } });
      const badSchema = JSON.parse(
        (
          await nc.request(Endpoints.executor.run.subject, JSON.stringify({ v: 1, language: "python", files: [] }), {
            timeout: 5_000,
          })
        ).string(),
      );
      expect(badSchema).toMatchObject({ ok: false, error: { code: "bad_request" } });
      const escape = JSON.parse(
        (
          await nc.request(
            Endpoints.executor.run.subject,
            JSON.stringify({
              ...request("python", [{ path: "x.py", content: "" }]),
              files: [{ path: "../x.py", content: "" }],
            }),
            { timeout: 5_000 },
          )
        ).string(),
      );
      expect(escape).toMatchObject({ ok: false, error: { code: "bad_request" } });

      // A large output still fits one NATS message (max_payload 1 MiB): head and tail kept.
      const big: ExecutionResult = await call(
        nc,
        Endpoints.executor.run,
        request(
          "python",
          [{ path: "m.py", content: "import sys\nsys.stdout.write('o' * 900_000)\nsys.stderr.write('e' * 900_000)\n" }],
          {
            command: ["python3", "m.py"],
          },
        ),
        { timeoutMs: 60_000, retries: 0 },
      );
      expect(big.status).toBe("passed");
      expect(big.truncated).toBe(true);
      expect(big.stdout.length + big.stderr.length).toBeLessThan(1024 * 1024);

      // A run with 15 000 test cases (about 1.4 MB of results) still fits: the failing case first,
      // the whole run counted in summary.
      const many = [
        "import pytest",
        "@pytest.mark.parametrize('n', range(15_000))",
        "def test_case(n):",
        "    assert n != 12_345, 'the one failing case'",
        "",
      ].join("\n");
      const huge: ExecutionResult = await call(
        nc,
        Endpoints.executor.run,
        request("python", [{ path: "test_many.py", content: many }], { timeoutMs: 180_000 }),
        {
          timeoutMs: 240_000,
          retries: 0,
        },
      );
      expect(huge.status).toBe("failed");
      expect(huge.summary).toEqual({ total: 15_000, passed: 14_999, failed: 1, error: 0, skipped: 0 });
      expect(huge.tests[0]).toMatchObject({ name: "test_case[12345]", status: "failed" });
      expect(huge.tests.length).toBeLessThan(15_000);

      const again: ExecutionResult = await call(
        nc,
        Endpoints.executor.run,
        request("python", [{ path: "test_ok.py", content: "def test_ok():\n    pass\n" }]),
        {
          timeoutMs: 60_000,
          retries: 0,
        },
      );
      expect(again.status).toBe("passed");
      expect(again.tests.map((t) => t.name)).toEqual(["test_ok"]);
    } finally {
      await nc.close();
      expect(await running.stop()).toBeNull();
    }
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`${LABEL}=${running.service.info().metadata?.instance ?? "?"}`] },
    });
    expect(left).toHaveLength(0);
  });

  it("removes a never-started sandbox of an executor that answers no ping within seconds, and keeps one whose executor answers", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    // Another executor, alive: it answers `$SRV` PING with its instance id, as executorService does.
    const alive = await new Svcm(nc as never).add({
      name: ServiceNames.executor,
      version: "0.0.0",
      metadata: { instance: "a11ce0a11ce0" },
    });
    const created = async (owner: string, extra: Record<string, string> = {}): Promise<Docker.Container> =>
      docker.createContainer({
        Image: testConfig().images.python,
        Cmd: ["sleep", "300"],
        Labels: { [LABEL]: owner, [LABEL_HOST]: hostname(), [LABEL_PID]: "1", ...extra },
        HostConfig: { NetworkMode: "none" },
      });
    const ofLiveOwner = await created("a11ce0a11ce0");
    const ofDeadOwner = await created("dead0dead0de");
    // A setup helper is never started by design: it keeps the minute whoever its owner.
    const helper = await created("dead0dead0de", { [LABEL_SETUP]: "k" });
    try {
      const live = await liveExecutors(nc, log)();
      expect([...(live ?? [])]).toEqual(["a11ce0a11ce0"]);
      // Older than the orphan grace, well within the minute a created container of a live owner gets.
      await new Promise((r) => setTimeout(r, ORPHAN_GRACE_S * 1000 + 500));
      const config = { ...testConfig({ warmPoolSize: 0 }), natsUrl: nats.url };
      const running = await runService("executor", (deps) => executorService(deps), { config, log });
      expect(await running.stop()).toBeNull();
      await expect(ofDeadOwner.inspect()).rejects.toMatchObject({ statusCode: 404 });
      expect((await ofLiveOwner.inspect()).State.Status).toBe("created");
      expect((await helper.inspect()).State.Status).toBe("created");
      // A closed connection cannot say who lives: unknown, not "nobody".
      const closed = await connect({ servers: nats.url });
      await closed.close();
      expect(await liveExecutors(closed, log)()).toBeUndefined();
    } finally {
      await alive.stop();
      await nc.close();
      await ofLiveOwner.remove({ force: true }).catch(() => undefined);
      await ofDeadOwner.remove({ force: true }).catch(() => undefined);
      await helper.remove({ force: true }).catch(() => undefined);
    }
  });
});

describe("sandbox creation", () => {
  plainIt("replaces a container that another executor's sweep removed between its create and its start", async () => {
    const config = testConfig();
    let removedFirst = "";
    // The engine as another executor's sweep leaves it: the first container is gone before its start.
    const racing = Object.create(docker, {
      createContainer: {
        value: async (opts: Docker.ContainerCreateOptions) => {
          const container = await docker.createContainer(opts);
          if (!removedFirst) {
            removedFirst = container.id;
            const start = container.start.bind(container);
            container.start = (async () => {
              await container.remove({ force: true });
              return start();
            }) as typeof container.start;
          }
          return container;
        },
      },
    }) as Docker;
    const sandbox = await Sandbox.create(racing, {
      image: config.images.python,
      kind: "python",
      memoryBytes: 512 * 1024 * 1024,
      cpus: 1,
      pidsLimit: 64,
      tmpfsMb: 16,
      labels: { [LABEL]: "race0race0ra", [LABEL_HOST]: hostname(), [LABEL_PID]: String(process.pid) },
      seccomp: loadSeccompProfile(),
    });
    try {
      expect(removedFirst).not.toBe("");
      expect(sandbox.id).not.toBe(removedFirst);
      expect((await docker.getContainer(sandbox.id).inspect()).State.Running).toBe(true);
      const run = await sandbox.run(
        {
          argv: ["sh", "-c", "echo raced"],
          env: { PATH: "/usr/bin:/bin" },
          files: [],
          resultPath: "/tmp/.loopsmith/result.xml",
          resultLimitBytes: 1024,
        },
        { timeoutMs: 20_000, outputLimitBytes: 64 * 1024, memoryBytes: 512 * 1024 * 1024 },
      );
      expect(run.stdout.toString()).toContain("raced");
    } finally {
      await sandbox.destroy();
    }
    await expect(docker.getContainer(removedFirst).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });
});
