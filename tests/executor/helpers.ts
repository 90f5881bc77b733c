/**
 * Helpers of the executor's integration tests: a real executor on the real Docker engine,
 * request builders, and checks that the host is left as it was.
 */
import { readdirSync, readFileSync } from "node:fs";
import Docker from "dockerode";
import pino from "pino";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { loadConfig, type Config } from "@loopsmith/shared/runtime";
import { type ExecutionRequest, type FileChange, type Language } from "@loopsmith/shared/contracts";
import { createExecutor, LABEL, PYTEST_RUNNER, type Executor } from "@loopsmith/executor";

export const docker = new Docker();
/** The label every executor container carries. */
export const LABEL_FILTER = LABEL;
export const log = pino({ level: process.env.LOG_LEVEL ?? "silent" });

/** Configuration for tests: defaults plus executor overrides. */
export function testConfig(executor: Partial<Config["executor"]> = {}): Config {
  return loadConfig({
    env: { ...process.env, NATS_URL: "", LOOPSMITH_CONFIG: "", LOOPSMITH_CONFIG_JSON: "" },
    flags: { executor },
  });
}

/** A started executor with the given overrides. */
export async function startExecutor(executor: Partial<Config["executor"]> = {}): Promise<Executor> {
  const ex = createExecutor({ docker, config: testConfig(executor), log });
  await ex.start();
  return ex;
}

let seq = 0;

/** A request with a fresh idempotency key. */
export function request(
  language: Language,
  files: FileChange[],
  extra: Partial<Pick<ExecutionRequest, "command" | "timeoutMs" | "memoryMb">> = {},
): ExecutionRequest {
  seq += 1;
  return {
    v: 1,
    taskId: "t-executor",
    iteration: seq,
    idempotencyKey: `t-executor/${seq}/execute`,
    language,
    files,
    timeoutMs: extra.timeoutMs ?? 20_000,
    memoryMb: extra.memoryMb ?? 512,
    ...(extra.command ? { command: extra.command } : {}),
  };
}

/** A python request running `code` as a script (`python3 main.py`). */
export function py(
  code: string,
  extra: Partial<Pick<ExecutionRequest, "timeoutMs" | "memoryMb">> = {},
): ExecutionRequest {
  return request("python", [{ path: "main.py", content: code }], { command: ["python3", "main.py"], ...extra });
}

/** A shell command in the python image. */
export function sh(
  script: string,
  extra: Partial<Pick<ExecutionRequest, "timeoutMs" | "memoryMb">> = {},
): ExecutionRequest {
  return request("python", [{ path: "run.sh", content: script }], { command: ["sh", "run.sh"], ...extra });
}

/** Containers of an executor instance (any state). */
export async function containersOf(instanceId: string): Promise<Docker.ContainerInfo[]> {
  return docker.listContainers({ all: true, filters: { label: [`${LABEL}=${instanceId}`] } });
}

/** A host process of the sandbox user (uid 10001) and the container whose cgroup holds it. */
export interface SandboxProcess {
  pid: number;
  args: string;
  /** Full container id from /proc/<pid>/cgroup, or "" when none is named. */
  containerId: string;
}

/** Host processes running as the sandbox user: container processes show on the host (no user namespace). */
export function sandboxProcesses(): SandboxProcess[] {
  const out: SandboxProcess[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, "utf8");
      if (!/^Uid:\s+10001\b/m.test(status)) continue;
      const args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").trim();
      const cgroup = readFileSync(`/proc/${name}/cgroup`, "utf8");
      const containerId = /([0-9a-f]{64})/.exec(cgroup)?.[1] ?? "";
      out.push({ pid: Number(name), args, containerId });
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

/** Docker volumes on the engine (a run must not create any). */
export async function volumeNames(): Promise<string[]> {
  const { Volumes } = await docker.listVolumes();
  return (Volumes ?? []).map((v) => v.Name).sort();
}

/** True for the pre-started pytest runner of a warm Python container, as its supervisor starts it (prestart.ts). */
function isRunner(p: SandboxProcess): boolean {
  return p.args.startsWith(`python3 -I -B -u -c ${PYTEST_RUNNER}`);
}

/**
 * What the host looks like when an executor is idle: only its warm containers exist, all
 * running, and no sandbox process lives outside a container that still exists; in this
 * executor's containers only docker-init, the supervisor and at most one pre-started pytest
 * runner run.
 * @throws Error describing what was left behind
 */
export async function expectIdleHost(ex: Executor, poolContainers: number): Promise<void> {
  await ex.settled();
  const mine = await containersOf(ex.instanceId);
  const notRunning = mine.filter((c) => c.State !== "running");
  if (notRunning.length) throw new Error(`containers not running: ${JSON.stringify(notRunning.map((c) => c.State))}`);
  if (mine.length !== poolContainers)
    throw new Error(`expected ${poolContainers} warm containers, found ${mine.length}`);
  const all = new Set((await docker.listContainers({ all: true })).map((c) => c.Id));
  const mineIds = new Set(mine.map((c) => c.Id));
  const processes = sandboxProcesses();
  const runners = (id: string) => processes.filter((p) => p.containerId === id && isRunner(p)).length;
  const stray = processes.filter(
    (p) =>
      !all.has(p.containerId) ||
      (mineIds.has(p.containerId) &&
        !/docker-init|python3 -I -S -c|node -e/.test(p.args) &&
        !(isRunner(p) && runners(p.containerId) === 1)),
  );
  if (stray.length)
    throw new Error(
      `sandbox processes left on the host: ${stray.map((p) => `${p.pid} ${p.args.slice(0, 80)}`).join(" | ")}`,
    );
}

/**
 * The hooks of a hostile suite, registered for the calling test file: one executor for the
 * file (warm pool of `pool` per image), and after every case the host as it was — only the
 * warm containers exist, no sandbox process lives outside them, no volume appeared.
 * @returns the suite, whose `ex` is the executor once `beforeAll` has run
 */
export function hostileSuite(executor: Partial<Config["executor"]> & { warmPoolSize: number }): {
  readonly ex: Executor;
} {
  let ex: Executor | undefined;
  let volumesBefore: string[] = [];
  beforeAll(async () => {
    volumesBefore = await volumeNames();
    ex = await startExecutor({ concurrency: 2, queueLimit: 32, pidsLimit: 128, ...executor });
  });
  afterEach(async () => {
    await expectIdleHost(ex as Executor, 2 * executor.warmPoolSize);
    expect(await volumeNames()).toEqual(volumesBefore);
  });
  afterAll(async () => {
    await ex?.stop();
  });
  return {
    get ex(): Executor {
      if (!ex) throw new Error("the hostile suite's executor is not started");
      return ex;
    },
  };
}
