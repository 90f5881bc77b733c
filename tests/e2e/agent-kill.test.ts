/**
 * A killed executor mid-attempt loses no task and leaves no session container, end to end: real NATS, the real executor process (`services/executor/src/main.ts`) on the
 * Docker engine, and the conductor with its bus steps (sessions and the verdict over the bus
 * with the production timeouts); only the model's turns are scripted (no model), with memory
 * and the gate in-process. The executor is killed with SIGKILL once the agent's first step's
 * observation has arrived, while the session is open, and a new executor process is started
 * on the same data directory. The task goes on: the next session call finds the replica gone,
 * the loop hands back and resumes from its checkpoint, opens the session again on the new
 * executor, and the agent's fix passes the verdict. After it, no session container and no
 * session directory is left.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { afterAll, describe, expect } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_OWNER, followEvents, ServiceNames, pingService, putSnapshot, submitTask } from "@loopsmith/shared/bus";
import { loadConfig } from "@loopsmith/shared/runtime";
import {
  snapshotName,
  type AgentTurnReply,
  type TaskEvent,
  type TaskInput,
  type ToolCall,
} from "@loopsmith/shared/contracts";
import { busSteps, startConductor, type Steps } from "@loopsmith/architect";
import { LABEL, LABEL_SESSION } from "@loopsmith/executor";
import { transcriptSteps } from "../../cli/src/transcript-record.js";
import { it } from "../fixtures/index.js";
import { REPO } from "../fixtures/cli.js";
import { snapshotTar, newCommit } from "../executor/repo-helpers.js";
import { eventsOf, log, steps as stubSteps, task, usage } from "../architect/helpers.js";

const docker = new Docker();
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-agent-kill-"));
const sessionsDir = join(dataDir, "sessions");
const commit = newCommit();
const BASE: Record<string, string> = {
  "pkg/__init__.py": "",
  "pkg/mod.py": "def answer():\n    return 41\n",
  "tests/test_mod.py": "from pkg.mod import answer\n\n\ndef test_answer():\n    assert answer() == 42\n",
};
const provider = { name: "scripted", model: "transcript", scripted: true };
const tc = (name: string, args: Record<string, unknown>): ToolCall => ({ id: `call_${name}`, name, args });
const say = (calls: ToolCall[]): AgentTurnReply => ({ content: "", toolCalls: calls, usage: usage(0.01), provider });
const SCRIPT = [
  say([tc("read", { path: "pkg/mod.py" })]),
  say([tc("run", { command: "python3 -m pytest -q -p no:cacheprovider" })]),
  say([tc("edit", { edits: [{ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" }] })]),
  say([tc("run", { command: "python3 -m pytest -q -p no:cacheprovider" })]),
  say([tc("submit", { summary: "answer() returns 42" })]),
];

/** The executor process, on this test's data directory. */
function startExecutor(natsUrl: string): { child: ChildProcess; exited: Promise<number | null>; stderr: () => string } {
  const child = spawn(process.execPath, ["--import", "tsx", join(REPO, "services", "executor", "src", "main.ts")], {
    cwd: REPO,
    env: {
      ...process.env,
      NATS_URL: natsUrl,
      LOOPSMITH_DATA_DIR: dataDir,
      LOOPSMITH_CONFIG: "",
      LOOPSMITH_CONFIG_JSON: "",
      LOOPSMITH_WARM_POOL_SIZE: "0",
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, exited, stderr: () => stderr };
}

/** Waits until an executor other than those in `not` answers the bus's `$SRV` PING; returns its instance id. */
async function executorUp(nc: NatsConnection, not: ReadonlySet<string>, exited: Promise<unknown>): Promise<string> {
  let dead = false;
  void exited.then(() => (dead = true));
  for (;;) {
    if (dead) throw new Error("the executor process exited while starting");
    const answers = await pingService(nc, ServiceNames.executor, { maxWaitMs: 200 });
    const id = answers.map((a) => a.metadata.instance).find((i) => i && !not.has(i));
    if (id) return id;
  }
}

/** Whether `e` is an agent step's event (it carries the messages of one tool call). */
const isStep = (e: TaskEvent): boolean => e.data?.agentMessages !== undefined;

/** Containers of either executor instance. */
async function containersOf(instances: ReadonlySet<string>) {
  const all = await docker.listContainers({ all: true, filters: { label: [LABEL] } });
  return all.filter((c) => instances.has(c.Labels[LABEL] ?? ""));
}

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

describe("an executor killed mid-attempt (agent mode)", () => {
  it("loses no task: the session is opened again on the restarted executor, and nothing of the dead one is left", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await putSnapshot(nc, snapshotName(commit), await snapshotTar(BASE));
    const config = loadConfig({
      env: {
        ...process.env,
        NATS_URL: nats.url,
        LOOPSMITH_DATA_DIR: dataDir,
        LOOPSMITH_CONFIG: "",
        LOOPSMITH_CONFIG_JSON: "",
      },
    });
    const first = startExecutor(nats.url);
    children.push(first.child);
    let second: ReturnType<typeof startExecutor> | undefined;
    const instances = new Set<string>();

    // The scripted turns; the second one is asked only once the executor has been killed.
    let killed!: () => void;
    const afterKill = new Promise<void>((resolve) => (killed = resolve));
    const stub = stubSteps([]).steps;
    const bus = busSteps(nc, config, {
      plan: stub.plan,
      reflect: stub.reflect,
      decompose: stub.decompose,
      reflectIntegration: stub.reflectIntegration,
    });
    const turns: number[] = [];
    const s: Steps = {
      ...bus,
      recall: stub.recall,
      gate: stub.gate,
      review: stub.review,
      rememberFailure: stub.rememberFailure,
      attachFix: stub.attachFix,
      rememberSuccess: stub.rememberSuccess,
      recordTask: stub.recordTask,
      turn: async (req) => {
        const n = req.callsBefore ?? 0;
        turns.push(n);
        if (n >= 1) await afterKill;
        return SCRIPT[n] ?? say([tc("submit", { summary: "out of script" })]);
      },
    };
    const firstId = await executorUp(nc, new Set(), first.exited);
    const conductor = await startConductor({ nc, steps: s, log });
    const input: TaskInput = task({
      goal: "make test_answer pass",
      acceptanceTests: [],
      repo: {
        baseCommit: commit,
        snapshot: snapshotName(commit),
        testCommand: "python3 -m pytest -q -p no:cacheprovider",
        setupCommand: "",
        mode: "agent",
      },
      limits: { runTimeoutMs: 60_000 },
    });
    try {
      const events: Promise<TaskEvent[]> = eventsOf(nc, input.taskId);
      await submitTask(nc, input);
      // Kill the executor once the first step's observation (a read in its session) has arrived.
      let opened: string | undefined;
      for await (const e of followEvents(nc, DEFAULT_OWNER, input.taskId)) {
        const session = (e.data as { session?: { executorId: string } } | undefined)?.session;
        if (session) opened ??= session.executorId;
        if (isStep(e)) break;
        if (e.result) throw new Error(`the task ended before its first step: ${e.result.message}`);
      }
      expect(opened).toBe(firstId);
      instances.add(firstId);
      const [held] = await docker.listContainers({
        all: true,
        filters: { label: [`${LABEL}=${firstId}`, LABEL_SESSION] },
      });
      expect(held?.State).toBe("running");
      expect(readdirSync(join(sessionsDir, firstId))).toHaveLength(1);
      first.child.kill("SIGKILL");
      await first.exited;
      second = startExecutor(nats.url);
      children.push(second.child);
      // The agent's next call goes to the dead replica once its replacement answers.
      await executorUp(nc, instances, second.exited);
      killed();

      const all = await events;
      const result = all.at(-1)?.result;
      expect(result?.status, JSON.stringify(result)).toBe("passed");
      expect(result?.repo?.patch).toContain("+    return 42");
      // The replica was lost, the loop went on, and the session was opened again on another executor.
      const reopened = all
        .map((e) => (e.data as { session?: { executorId: string } } | undefined)?.session?.executorId)
        .filter((id): id is string => id !== undefined);
      const secondId = reopened.at(-1) as string;
      expect(reopened[0]).toBe(firstId);
      expect(secondId).not.toBe(firstId);
      instances.add(secondId);
      const steps = transcriptSteps(all);
      expect(steps.map((t) => t.tool)).toEqual(["read", "run", "edit", "run", "submit"]);
      expect(steps[3]?.isError).toBe(false);
      // The call that found the replica gone opened the session again and went on: no turn was asked twice.
      expect(all.some((e) => e.kind === "warning" && e.message.includes(`executor ${firstId} is gone`))).toBe(true);
      expect(turns).toEqual([0, 1, 2, 3, 4]);

      // Nothing of either executor's sessions is left: containers and host copies.
      const deadline = Date.now() + 15_000;
      const left = async () =>
        (await containersOf(instances)).filter((c) => c.Labels[LABEL_SESSION] !== undefined).length +
        (existsSync(sessionsDir)
          ? readdirSync(sessionsDir).flatMap((d) => readdirSync(join(sessionsDir, d))).length
          : 0);
      while ((await left()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect((await containersOf(instances)).filter((c) => c.Labels[LABEL_SESSION] !== undefined)).toEqual([]);
      expect(existsSync(join(sessionsDir, firstId))).toBe(false);
      expect(
        existsSync(sessionsDir) ? readdirSync(join(sessionsDir)).flatMap((d) => readdirSync(join(sessionsDir, d))) : [],
      ).toEqual([]);
    } finally {
      await conductor.stop();
      if (second) {
        second.child.kill("SIGTERM");
        expect(await second.exited, second.stderr()).toBe(143);
      }
      await nc.close();
    }
    // The restarted executor stopped in order: none of either executor's containers is left.
    expect(instances.size).toBe(2);
    expect(await containersOf(instances)).toEqual([]);
  }, 60_000);
});
