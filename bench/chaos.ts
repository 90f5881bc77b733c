/**
 * bench/chaos: a chaos experiment on the compose stack: does the stack lose or
 * duplicate a task when its processes are killed at random? Brings up a compose
 * project of its own (images built locally, scripted provider, 2 builder and 2 executor
 * replicas), keeps `--tasks` tasks in flight over NATS (submitted and watched the way the
 * CLI does) and meanwhile `kill -9`s a random service process (its container's host pid:
 * with `init: true` the init; NATS too) every `--kill-every` seconds for `--seconds`, each
 * service once per round in random order. Then it waits for every result and prints: tasks,
 * kills per service, lost, duplicated, the longest silence per killed service, p50/p95 time
 * to result; the sandboxes left after `docker compose down`; the same after downs during
 * the executor's start-up; and tasks/min with 1 and 2 executor replicas (no kills).
 * Exit code 1 when a task is lost or duplicated, a silence passes 30 s or a sandbox is left.
 *
 * Usage: node --import tsx bench/chaos.ts [--tasks 12] [--seconds 90] [--kill-every 6-10]
 *          [--wait 180] [--throughput-tasks 12 (0: skip)] [--no-build] [--cluster]
 * With --cluster, the stack is the cluster one (deploy/compose.cluster.yml over the main
 * file: three NATS nodes, engine-2 and engine-3 with an executor each) and `nats-2` and
 * `engine-2` (a whole Docker engine) join the kills.
 * Needs Docker with Compose v2 (deploy/ensure-compose.sh) and the locally built images.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { setMaxListeners } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Command } from "commander";
import type { NatsConnection } from "@nats-io/transport-node";
import { ensureTaskIntake, type ServiceName } from "@loopsmith/shared/bus";
import {
  docker,
  freePort,
  hostPid,
  prepareProject,
  removeContainers,
  sandboxLeftovers,
  type Project,
} from "./chaos/compose.js";
import { answering, complete, connectNats, waitAnswering } from "./chaos/ping.js";
import { auditEvents, chaosTask, percentile, silences, submitAndWatch, type Tracked } from "./chaos/tasks.js";
import { formatTable } from "@loopsmith/cli/ui";

const opts = new Command()
  .option("--tasks <n>", "tasks kept in flight", Number, 12)
  .option("--seconds <s>", "how long the kills go on", Number, 90)
  .option("--kill-every <min-max>", "seconds between kills, e.g. 6-10", "6-10")
  .option("--wait <s>", "longest wait for the results after the kills", Number, 180)
  .option("--throughput-tasks <n>", "tasks of each throughput run (0: skip)", Number, 12)
  .option("--no-build", "use the app image as it is")
  .option(
    "--cluster",
    "the cluster stack (deploy/compose.cluster.yml: three NATS nodes, two more engines with an executor each); nats-2 and engine-2 join the kills; phases 2 and 3 are skipped",
  )
  .parse(process.argv)
  .opts<{
    tasks: number;
    seconds: number;
    killEvery: string;
    wait: number;
    throughputTasks: number;
    build: boolean;
    cluster?: boolean;
  }>();
const CLUSTER = opts.cluster === true;
const TASKS = opts.tasks;
const SECONDS = opts.seconds;
const [KILL_MIN, KILL_MAX] = opts.killEvery.split("-").map(Number) as [number, number?];
const KILL_HI = KILL_MAX ?? KILL_MIN;
const WAIT_S = opts.wait;
const THROUGHPUT_TASKS = opts.throughputTasks;
const BUILD = opts.build;
const MAX_KILLS = Math.ceil(SECONDS / KILL_MIN) + 1;
const SILENCE_LIMIT_MS = 30_000;
/** Findings that do not fail the run (see the exit code above) but deserve a look, printed last. */
const warnings: string[] = [];

const REPO = fileURLToPath(new URL("../", import.meta.url));
const APP: ServiceName[] = ["memory", "executor", "builder", "reviewer", "architect"];
// On the cluster stack `nats` is one node of three, and a Docker engine is a target too.
const TARGETS = [
  "builder",
  "nats",
  "architect",
  "reviewer",
  "executor",
  "memory",
  ...(CLUSTER ? ["nats-2", "engine-2"] : []),
];
/** Targets after whose kill the whole stack must answer again (not one service's replicas). */
const WHOLE = new Set(["nats", "nats-2", "engine-2"]);
// The cluster stack adds executor-2 and executor-3 (one per extra engine) to the two replicas.
const EXPECTED: Record<ServiceName, number> = {
  memory: 1,
  executor: CLUSTER ? 4 : 2,
  builder: 2,
  reviewer: 1,
  architect: 1,
};
const APP_IMAGE = "loopsmith/app:local";
const SCALE = ["--scale", "builder=2", "--scale", "executor=2"];

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const clock = (ms = Date.now()): string => new Date(ms).toISOString().slice(11, 23);
const log = (msg: string): void => console.error(`[chaos ${clock()}] ${msg}`);
const secs = (ms: number): string => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s` : "-");
const shuffle = <T>(xs: T[]): T[] =>
  xs
    .map((x) => [Math.random(), x] as const)
    .sort((a, b) => a[0] - b[0])
    .map(([, x]) => x);

/** Prints rows as aligned columns. */
function table(rows: string[][]): void {
  for (const line of formatTable(rows, { indent: "  " })) console.log(line);
}

/** One kill, with when its service answered in full again. */
interface Kill {
  service: string;
  container: string;
  at: number;
  backAfterMs?: number;
}

/** Sandbox containers left after a `down`; found ones are listed, then removed (cleanup). */
async function countLeftovers(label: string, executors: Set<string>): Promise<number> {
  const left = await sandboxLeftovers(executors);
  console.log(
    `  ${label}: ${left.ours.length} sandbox container(s) of this project left (${left.all} labelled on the engine)`,
  );
  for (const row of left.ours) console.log(`    left: ${row}`);
  await removeContainers(left.ours);
  return left.ours.length;
}

/** Records the ids of the project's executor containers (sandboxes are traced back to them). */
async function noteExecutors(project: Project, into: Set<string>): Promise<void> {
  for (const id of await project.containers("executor").catch(() => [])) into.add(id);
}

/**
 * Starts the project and waits until every service answers with `expected` replicas. The
 * cluster stack starts as the README says, through deploy/cluster-up.sh.
 */
async function upAndReady(
  project: Project,
  args: string[],
  expected: Record<ServiceName, number>,
): Promise<NatsConnection> {
  if (CLUSTER) await project.clusterUp(args);
  else await project.compose(["up", "-d", ...args]);
  const nc = await connectNats(`nats://127.0.0.1:${project.natsPort}`, 60_000, project.client);
  await ensureTaskIntake(nc);
  // The cluster's extra executors first load the sandbox images into their empty engines.
  const ms = await waitAnswering(nc, expected, CLUSTER ? 420_000 : 180_000);
  log(`every service answers (${secs(ms)} after up)`);
  return nc;
}

/** Phase 1: tasks in flight under kills. Returns whether every criterion held. */
async function chaosPhase(project: Project, executors: Set<string>): Promise<boolean> {
  if (BUILD) {
    // The app image is built from dist/app (JavaScript), as a user's `npm run build` makes it.
    await promisify(execFile)(process.execPath, ["--import", "tsx", join(REPO, "deploy", "build-app.ts")], {
      cwd: REPO,
    });
  }
  log(`phase 1: up${BUILD ? " --build" : ""} (project ${project.name}, NATS on 127.0.0.1:${project.natsPort})`);
  const nc = await upAndReady(project, [...(BUILD ? ["--build"] : []), ...SCALE], EXPECTED);
  await noteExecutors(project, executors);
  const stop = new AbortController();
  setMaxListeners(0, stop.signal); // one listener per task watcher
  const tracked: Tracked[] = [];
  let replenish = true;
  const prefix = `chaos-${randomBytes(3).toString("hex")}`;
  const launch = (): void => {
    const t = submitAndWatch(nc, chaosTask(REPO, `${prefix}-${tracked.length + 1}`), stop.signal);
    tracked.push(t);
    void t.done.then(() => (replenish && !stop.signal.aborted ? launch() : undefined));
  };
  for (let i = 0; i < TASKS; i++) launch();
  const start = Date.now();
  const kills: Kill[] = [];
  // Per kill, when the killed service answers in full again (for NATS: every service).
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const asked = Date.now();
      const counts = await answering(nc).catch(() => null);
      for (const k of counts ? kills.filter((k) => k.backAfterMs === undefined && k.at < asked) : []) {
        const ok = WHOLE.has(k.service)
          ? complete(counts ?? new Map(), EXPECTED)
          : (counts?.get(k.service as ServiceName) ?? 0) >= EXPECTED[k.service as ServiceName];
        if (ok) k.backAfterMs = Date.now() - k.at;
      }
      await sleep(250);
    }
  })();
  log(
    `phase 1: ${TASKS} tasks in flight; a kill every ${KILL_MIN}-${KILL_HI} s for ${SECONDS} s (at most ${MAX_KILLS})`,
  );
  // Container ids survive restarts and the scale does not change here: listed once, so a
  // kill costs one `docker inspect` and the cadence is kept from kill to kill.
  const containers = new Map<string, string[]>();
  for (const s of TARGETS) containers.set(s, await project.containers(s));
  const interval = (): number => (KILL_MIN + Math.random() * (KILL_HI - KILL_MIN)) * 1000;
  let order: string[] = [];
  let next = start + interval();
  while (kills.length < MAX_KILLS) {
    await sleep(Math.max(0, Math.min(next, start + SECONDS * 1000) - Date.now()));
    if (Date.now() - start >= SECONDS * 1000) break;
    next += interval();
    if (order.length === 0) order = shuffle(TARGETS);
    const service = order.shift() as string;
    const ids = shuffle(containers.get(service) ?? []);
    let container: string | undefined;
    let pid = 0;
    for (const id of ids) {
      container = id;
      pid = await hostPid(id); // 0 while the container is restarting: try another replica
      if (pid) break;
    }
    if (!container || !pid) {
      log(`kill: ${service} has no running container right now; skipped`);
      continue;
    }
    const at = Date.now();
    process.kill(pid, "SIGKILL");
    kills.push({ service, container, at });
    log(`kill -9 ${pid} (${service} ${container.slice(0, 12)}) at +${secs(at - start)}`);
  }
  replenish = false;
  const killEnd = Date.now();
  log(
    `phase 1: kills over (${kills.length}); waiting up to ${WAIT_S} s for ${tracked.filter((t) => !t.result).length} results`,
  );
  const all = Promise.all(tracked.map((t) => t.done));
  await Promise.race([all, sleep(WAIT_S * 1000)]);
  stop.abort();
  const recovered = await waitAnswering(nc, EXPECTED, 60_000).then(
    (ms) => `every service answers again (${secs(ms)} after the results wait)`,
    (err: Error) => `NOT RECOVERED: ${err.message}`,
  );
  polling = false;
  await poller;
  await sleep(3_000); // an event published after a result would show in the audit
  // The audit reads every task's events: as the admin (a client may read only its own, live).
  const auditor = await connectNats(`nats://127.0.0.1:${project.natsPort}`, 60_000, project.admin);
  const audit = await auditEvents(auditor)
    .catch((err: Error) => (log(`audit failed: ${err.message}`), new Map()))
    .finally(() => auditor.close());
  await noteExecutors(project, executors);
  const logs = await project.saveLogs(["nats", "postgres", ...APP]);
  await nc.close();

  const lost = tracked.filter((t) => !t.result && !audit.get(t.taskId)?.results);
  const dup = tracked.filter((t) => {
    const a = audit.get(t.taskId);
    return a && (a.results > 1 || a.accepted > 1 || a.afterResult > 0 || a.repeatedSeqs > 0);
  });
  const watcherMissed = tracked.filter((t) => !t.result && audit.get(t.taskId)?.results).length;
  const times = tracked.filter((t) => t.resultAt).map((t) => (t.resultAt as number) - t.submittedAt);
  const statuses = new Map<string, number>();
  for (const t of tracked)
    if (t.result)
      statuses.set(
        `${t.result.status}/${t.result.stopReason}`,
        (statuses.get(`${t.result.status}/${t.result.stopReason}`) ?? 0) + 1,
      );
  const silence = silences(tracked, kills);

  console.log(
    `\nPhase 1 — ${TASKS} tasks in flight, kill -9 every ${KILL_MIN}-${KILL_HI} s for ${SECONDS} s (builder ×2, executor ×2${CLUSTER ? "; the cluster stack: three NATS nodes, executor-2 and executor-3 on engines of their own" : ""})`,
  );
  console.log(
    `  kill window ${secs(killEnd - start)}; last result ${secs(Math.max(0, ...tracked.map((t) => (t.resultAt ?? 0) - killEnd)))} after it; ${recovered}`,
  );
  console.log(
    "\n  kills (from the first task; UTC; back = the service answers $SRV.PING in full again, for NATS every service):",
  );
  table([
    ["  at", "UTC", "service", "container", "back after"],
    ...kills.map((k) => [
      `  +${secs(k.at - start)}`,
      clock(k.at),
      k.service,
      k.container.slice(0, 12),
      k.backAfterMs === undefined ? "NOT BACK" : secs(k.backAfterMs),
    ]),
  ]);
  console.log("\n  per killed service:");
  table([
    ["service", "kills", "longest silence of a task in flight across its kill"],
    ...TARGETS.map((s) => [
      s,
      String(kills.filter((k) => k.service === s).length),
      silence.has(s) ? secs(silence.get(s) as number) : "- (no task between events)",
    ]),
  ]);
  console.log("");
  table([
    ["tasks submitted", String(tracked.length)],
    ["results", `${tracked.length - lost.length} (${[...statuses].map(([k, v]) => `${v} ${k}`).join(", ")})`],
    ["lost (no result)", String(lost.length)],
    ["duplicated", String(dup.length)],
    [
      "time to result p50 / p95 / max",
      `${secs(percentile(times, 50))} / ${secs(percentile(times, 95))} / ${secs(Math.max(...times))}`,
    ],
    [
      "watch restarts (bench side)",
      `${tracked.reduce((n, t) => n + t.rewatches, 0)}${watcherMissed ? `; ${watcherMissed} results only in the stream audit` : ""}`,
    ],
  ]);
  for (const t of lost) {
    const last = [...t.events.values()].sort((a, b) => b.event.seq - a.event.seq)[0]?.event;
    console.log(
      `  LOST ${t.taskId}: submitted ${new Date(t.submittedAt).toISOString()}, last event ${last ? `${last.at} ${last.kind} ${last.phase ?? ""} ${last.message}` : "none"}`,
    );
  }
  for (const t of dup) console.log(`  DUPLICATED ${t.taskId}: ${JSON.stringify(audit.get(t.taskId))}`);
  for (const t of tracked.filter((t) => t.result && t.result.status !== "passed")) {
    console.log(`  not passed ${t.taskId}: ${t.result?.status} ${t.result?.stopReason}: ${t.result?.message}`);
    warnings.push(
      `${t.taskId} ended ${t.result?.status} (${t.result?.message}) although the script passes every task on its first build`,
    );
  }
  console.log(`  service logs: ${logs}`);

  log("phase 1: docker compose down");
  await project.compose(["down", "-v"]);
  const left = await countLeftovers("after down", executors);
  const worst = Math.max(0, ...silence.values());
  return (
    lost.length === 0 && dup.length === 0 && worst <= SILENCE_LIMIT_MS && left === 0 && !recovered.startsWith("NOT")
  );
}

/** Phase 2: `down` during the executor's start-up, three moments. Returns the sandboxes left. */
async function startupPhase(project: Project, executors: Set<string>): Promise<number> {
  console.log("\nPhase 2 — docker compose down during the executor's start-up (executor ×2)");
  const moments: Array<[string, (ids: Set<string>) => Promise<void>]> = [
    ["right after up (node loading)", async () => {}],
    ["at its first sandbox (self-test)", (ids) => firstSandbox(ids, 0)],
    ["1.5 s after its first sandbox (pool fill)", (ids) => firstSandbox(ids, 1_500)],
  ];
  let total = 0;
  for (const [i, [label, trigger]] of moments.entries()) {
    const ids = new Set<string>();
    await project.compose(["up", "-d", ...SCALE]);
    const file = `startup-${i + 1}-executor.log`;
    const following = project.followLogs("executor", file);
    await noteExecutors(project, ids);
    await trigger(ids);
    const at = Date.now();
    await project.compose(["down", "-v"]);
    const took = Date.now() - at;
    await Promise.race([following, sleep(5_000)]);
    const lines = readFileSync(join(project.dir, "logs", file), "utf8");
    const count = (msg: string): number => lines.split("\n").filter((l) => l.includes(`"msg":"${msg}"`)).length;
    const logged = `"stopping" ×${count("stopping")}, "executor stopped" ×${count("executor stopped")}, "service stopped" ×${count("service stopped")}`;
    total += await countLeftovers(`down ${label}, took ${secs(took)}; executor logs: ${logged}`, ids);
    for (const id of ids) executors.add(id);
  }
  console.log(`  executor logs: ${join(project.dir, "logs")}/startup-*-executor.log`);
  return total;
}

/** Waits (at most 60 s) until a sandbox of one of `executors` exists, then `delayMs` more. */
async function firstSandbox(executors: Set<string>, delayMs: number): Promise<void> {
  const start = Date.now();
  while (Date.now() - start < 60_000 && (await sandboxLeftovers(executors)).ours.length === 0) await sleep(100);
  await sleep(delayMs);
}

/** Phase 3: tasks/min with 1 and with 2 executor replicas, no kills. Returns the sandboxes left. */
async function throughputPhase(project: Project, executors: Set<string>): Promise<number> {
  console.log(`\nPhase 3 — throughput, ${THROUGHPUT_TASKS} tasks submitted at once, no kills (builder ×2)`);
  const rows = [["executors", "tasks", "wall", "tasks/min", "passed"]];
  let nc: NatsConnection | undefined;
  for (const replicas of [1, 2]) {
    const expected = { ...EXPECTED, executor: replicas };
    await nc?.close();
    nc = await upAndReady(project, ["--scale", "builder=2", "--scale", `executor=${replicas}`], expected);
    await noteExecutors(project, executors);
    const stop = new AbortController();
    setMaxListeners(0, stop.signal); // one listener per task watcher
    const prefix = `tput${replicas}-${randomBytes(3).toString("hex")}`;
    const start = Date.now();
    const tasks = Array.from({ length: THROUGHPUT_TASKS }, (_, i) =>
      submitAndWatch(nc as NatsConnection, chaosTask(REPO, `${prefix}-${i + 1}`), stop.signal),
    );
    await Promise.race([Promise.all(tasks.map((t) => t.done)), sleep(WAIT_S * 1000)]);
    stop.abort();
    const wall = Math.max(...tasks.map((t) => t.resultAt ?? Date.now())) - start;
    const passed = tasks.filter((t) => t.result?.status === "passed").length;
    rows.push([
      String(replicas),
      String(THROUGHPUT_TASKS),
      secs(wall),
      ((passed / wall) * 60_000).toFixed(1),
      `${passed}/${THROUGHPUT_TASKS}`,
    ]);
  }
  await nc?.close();
  table(rows);
  await project.compose(["down", "-v"]);
  return countLeftovers("after down", executors);
}

async function main(): Promise<number> {
  try {
    await docker(["compose", "version"]);
  } catch {
    console.error("chaos: `docker compose` (v2) is missing; install it with: bash deploy/ensure-compose.sh");
    return 2;
  }
  const name = `loopsmith-chaos-${randomBytes(3).toString("hex")}`;
  if (CLUSTER && !existsSync(join(REPO, "sandbox-images.tar"))) {
    console.error(
      "chaos: --cluster needs sandbox-images.tar for the extra engines: run bash deploy/compose-env.sh --engines",
    );
    return 2;
  }
  const project = prepareProject({
    repo: REPO,
    name,
    natsPort: await freePort(),
    scriptDir: join(REPO, "bench", "chaos"),
    dir: join(tmpdir(), name),
    ...(CLUSTER ? { files: ["deploy/compose.cluster.yml"] } : {}),
  });
  const executors = new Set<string>();
  // `--build` retags the application image; the one it replaces is removed at the end.
  const appImage = (): Promise<string> =>
    docker(["image", "inspect", "-f", "{{.Id}}", APP_IMAGE]).then(
      (s) => s.trim(),
      () => "",
    );
  const imageBefore = await appImage();
  let interrupted = false;
  process.once("SIGINT", () => {
    interrupted = true;
    log("interrupted: taking the project down");
    void project.compose(["down", "-v", "--timeout", "5"]).finally(() => process.exit(130));
  });
  let ok = false;
  try {
    ok = await chaosPhase(project, executors);
    const left2 = CLUSTER ? 0 : await startupPhase(project, executors);
    const left3 = THROUGHPUT_TASKS > 0 && !CLUSTER ? await throughputPhase(project, executors) : 0;
    ok = ok && left2 === 0 && left3 === 0;
  } catch (err) {
    console.error(`chaos: ${(err as Error).message}`);
    await project.saveLogs(["nats", "postgres", ...APP]).then(
      (dir) => console.error(`chaos: service logs in ${dir}`),
      () => undefined,
    );
  } finally {
    if (!interrupted)
      await project.compose(["down", "-v", "--timeout", "10"]).catch((err: Error) => console.error(err.message));
    await removeContainers((await sandboxLeftovers(executors)).ours);
    if (imageBefore && imageBefore !== (await appImage())) await docker(["rmi", imageBefore]).catch(() => "");
  }
  for (const w of warnings) console.log(`\nWARNING: ${w}`);
  console.log(
    `\n${ok ? "PASS" : "FAIL"}: lost/duplicated tasks, silences over ${SILENCE_LIMIT_MS / 1000} s and sandboxes left are ${ok ? "none" : "listed above"} (compose output: ${join(project.dir, "compose.log")})`,
  );
  return ok ? 0 : 1;
}

process.exit(await main());
