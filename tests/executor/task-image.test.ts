/**
 * A task's own image (`SandboxImage`) over real NATS and the real Docker engine: verdict runs
 * and a session container in an image that is not loopsmith's, with its workdir (`/testbed`,
 * whose `.git` in the image stays hidden under the workspace tmpfs), its prologue, and
 * loopsmith's pytest plugin brought in; a missing image named with how to get it.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Endpoints, call, onReplica, putSnapshot } from "@loopsmith/shared/bus";
import { runService, type RunningService } from "@loopsmith/shared/runtime";
import {
  snapshotName,
  type ExecutionRequest,
  type ExecutionResult,
  type SandboxImage,
  type SessionCall,
  type SessionObservation,
  type SessionOpened,
} from "@loopsmith/shared/contracts";
import { executorService } from "@loopsmith/executor";
import { startNats, type Started } from "../fixtures/containers.js";
import { log, testConfig } from "./helpers.js";
import { newCommit, snapshotTar } from "./repo-helpers.js";

/** An image of our own making with a repository's history at /testbed, as SWE-bench's images have. */
const OWN = `loopsmith-test/own-image:${process.pid}`;
const IMAGE: SandboxImage = { name: OWN, workdir: "/testbed", prologue: "export LOOPSMITH_TEST_PROLOGUE=ran" };

const TESTS = [
  "import os, pathlib",
  "from pkg.calc import add",
  "",
  "def test_add():",
  "    assert add(2, 3) == 5",
  "",
  "def test_where():",
  "    assert os.getcwd() == '/testbed'",
  "    assert os.environ.get('LOOPSMITH_TEST_PROLOGUE') == 'ran'",
  "    assert not pathlib.Path('/testbed/.git').exists()",
  "    assert not pathlib.Path('/testbed/FUTURE').exists()",
  "",
].join("\n");

let nats: Started;
let nc: NatsConnection;
let running: RunningService | undefined;
let dataDir: string;
const commit = newCommit();
let seq = 0;

function runRequest(extra: Partial<ExecutionRequest>): ExecutionRequest {
  seq += 1;
  return {
    v: 1,
    taskId: "t-task-image",
    iteration: seq,
    idempotencyKey: `t-task-image/${seq}/execute`,
    language: "python",
    files: [],
    base: { snapshot: snapshotName(commit), commit, deleted: [], setupCommand: "" },
    shell: "python3 -m pytest -q tests",
    timeoutMs: 30_000,
    memoryMb: 512,
    image: IMAGE,
    ...extra,
  };
}

const run = (req: ExecutionRequest): Promise<ExecutionResult> =>
  call(nc, Endpoints.executor.run, req, { timeoutMs: 120_000, retries: 0 });

beforeAll(async () => {
  // The image: loopsmith's Python image with a repository at /testbed whose .git holds a
  // "future" commit, committed from a container (no registry, no build).
  const name = `loopsmith-test-own-${process.pid}`;
  execFileSync("docker", [
    "run",
    "--name",
    name,
    "--user",
    "0",
    "--entrypoint",
    "sh",
    "loopsmith/sandbox-python:local",
    "-c",
    "mkdir -p /testbed/.git/refs && echo 'the fix' > /testbed/.git/refs/FUTURE && echo gold > /testbed/FUTURE",
  ]);
  execFileSync("docker", ["commit", name, OWN]);
  execFileSync("docker", ["rm", "-f", name]);
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  dataDir = mkdtempSync(join(tmpdir(), "loopsmith-task-image-"));
  await putSnapshot(
    nc,
    snapshotName(commit),
    await snapshotTar({
      "pkg/__init__.py": "",
      "pkg/calc.py": "def add(a, b):\n    return a - b\n",
      "tests/test_calc.py": TESTS,
    }),
  );
  const config = { ...testConfig({ warmPoolSize: 1 }), natsUrl: nats.url, dataDir };
  running = await runService("executor", (deps) => executorService(deps), { config, log });
}, 180_000);

afterAll(async () => {
  await running?.stop();
  await nc?.close();
  await nats?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  execFileSync("docker", ["rmi", "-f", OWN]);
});

describe("a task's own image", () => {
  it("runs the verdict there: the workspace at the image's workdir, the image's files there hidden, the prologue first, the controller's verdict", async () => {
    const wrong = await run(runRequest({}));
    expect(wrong.status, wrong.reason).toBe("failed");
    expect(wrong.verdict).toBe("controller");
    expect(wrong.tests.find((t) => t.name === "test_where")?.status).toBe("passed");
    expect(wrong.tests.find((t) => t.name === "test_add")?.status).toBe("failed");
    const right = await run(
      runRequest({ files: [{ path: "pkg/calc.py", content: "def add(a, b):\n    return a + b\n" }] }),
    );
    expect(right.status, right.reason).toBe("passed");
    expect(right.verdict).toBe("controller");
    expect(right.summary?.total).toBe(2);
  });

  it("stops the line when the prologue fails, saying so", async () => {
    const r = await run(runRequest({ image: { ...IMAGE, prologue: "false" } }));
    expect(r.status).not.toBe("passed");
    expect(r.exitCode).toBe(126);
    expect(r.stderr).toContain("the image's prologue failed");
  });

  it("names a missing image and how to get it, and runs nothing", async () => {
    const r = await run(runRequest({ image: { name: "loopsmith-test/no-such-image:1", workdir: "/testbed" } }));
    expect(r.status).toBe("sandbox_error");
    expect(r.reason).toContain("has no image loopsmith-test/no-such-image:1");
    expect(r.reason).toContain("docker pull loopsmith-test/no-such-image:1");
  });

  it("opens a session container there: runs start at the workdir after the prologue, and see none of the image's history", async () => {
    const opened = await call(
      nc,
      Endpoints.executor.sessionOpen,
      {
        v: 1,
        taskId: "t-task-image",
        iteration: 99,
        idempotencyKey: "t-task-image/99/session_open",
        sessionId: "t-task-image-session",
        language: "python",
        base: { snapshot: snapshotName(commit), commit },
        files: [],
        deleted: [],
        memoryMb: 256,
        timeoutMs: 20_000,
        image: IMAGE,
      },
      { timeoutMs: 60_000, retries: 0 },
    );
    const tool = (c: SessionCall["call"]): Promise<SessionObservation> =>
      call(
        nc,
        onReplica(Endpoints.executor.sessionCall, (opened as SessionOpened).executorId),
        { v: 1, sessionId: opened.sessionId, call: c } as SessionCall,
        { timeoutMs: 60_000, retries: 0 },
      );
    const r = await tool({
      tool: "run",
      command:
        "pwd; echo prologue=$LOOPSMITH_TEST_PROLOGUE; ls -a; cat .git/refs/FUTURE FUTURE 2>&1; git log --all 2>&1 | head -3",
    });
    expect(r.ok).toBe(true);
    expect(r.output).toContain("/testbed\nprologue=ran\n");
    expect(r.output).toContain("pkg");
    expect(r.output).not.toContain("the fix");
    expect(r.output).not.toContain("gold");
    const wrote = await tool({ tool: "write", files: [{ path: "pkg/extra.py", content: "X = 1\n" }], deleted: [] });
    expect(wrote.ok).toBe(true);
    expect((await tool({ tool: "run", command: "cat pkg/extra.py" })).output).toContain("X = 1");
    await call(
      nc,
      onReplica(Endpoints.executor.sessionClose, opened.executorId),
      { v: 1, sessionId: opened.sessionId },
      { timeoutMs: 30_000, retries: 0 },
    );
  });
});
