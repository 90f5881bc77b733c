/**
 * `npm run bench:startup`: where `loopsmith up` spends its time, and how fast `solve` on a
 * running stack starts its first step (the targets: cold `up` ≤ 5 s on 2 cores, first
 * step ≤ 300 ms). Each figure is printed beside what it is compared with, measured in this
 * same run (the machine is shared, so absolute times move from run to run):
 *
 * 1. module load per service, in a fresh process (wall and CPU), against `node -e 1` and
 *    `node --import tsx -e 1`, and all five in one process; before them, each shared/ entry
 *    point the CLI imports, against all five concern entries at once (the old root barrel);
 * 2. the NATS container, from create to a NATS handshake;
 * 3. each service alone on that NATS, from spawn to answering `$SRV.PING`, from the
 *    TypeScript sources (tsx) and from the build (`npm run build`, dist/app);
 * 4. a cold `loopsmith up` through the `loopsmith` command (cli/bin/loopsmith.js, what a user
 *    runs), fresh data directory and then the same one again, from the sources (the
 *    baseline: `LOOPSMITH_FROM_SOURCE=1`) and from the build, against the 5 s target;
 * 5. on that stack: submission → first `phase`/`step` event (in process, as the stack's
 *    client user), and CLI process start → first `phase`/`step` line of `solve --json`,
 *    against the 300 ms target;
 * then `loopsmith down` and each service's own stop on SIGTERM (6., from its log), and the machine's state over the run (bench/machine.ts: a reference
 * workload's time, the CPU steal). The build must be current (`npm run build` first; checked).
 *
 * Options: `--runs N` (solve and `up` repetitions, default 3), `--skip-up` (only 1–3).
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { median as ssMedian } from "simple-statistics";
import { createLogger, loadConfig } from "@loopsmith/shared/runtime";
import { loadScript } from "@loopsmith/shared/llm";
import { submitTask, type ServiceName } from "@loopsmith/shared/bus";
import { type TaskInput } from "@loopsmith/shared/contracts";
import { startNatsContainer } from "../cli/src/nats-container.js";
import { answeringServices, serviceCode } from "../cli/src/stack.js";
import { roleConnectOptions } from "../cli/src/stack-auth.js";
import { liveStack } from "../cli/src/stack-record.js";
import { currentBuild } from "../cli/bin/build-stamp.js";
import { cpuTimes, machineLine, referenceMs } from "./machine.js";
import { watchEvents } from "@loopsmith/cli";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const TSX = import.meta.resolve("tsx");
const BIN = join(REPO, "cli", "bin", "loopsmith.js");
const NAMES: ServiceName[] = ["memory", "executor", "builder", "reviewer", "architect"];
const UP_TARGET_MS = 5_000;
const FIRST_STEP_TARGET_MS = 300;
const args = process.argv.slice(2);
const runs = Number(args[args.indexOf("--runs") + 1]) || 3;
const skipUp = args.includes("--skip-up");
const script = join(REPO, "examples", "roman", "script.json");
const taskFile = join(REPO, "examples", "roman", "task.json");
const log = createLogger({ service: "bench", level: "warn" });

/** The median (simple-statistics), NaN when there are none. */
const median = (xs: number[]): number => (xs.length ? ssMedian(xs) : NaN);
const ms = (x: number): string => `${Math.round(x)} ms`.padStart(8);

/** Wall and CPU (all threads) of a fresh node process importing `specs`. */
function importCost(specs: string[], tsx = true): { wall: number; cpu: number; total: number } {
  const code = `const t=performance.now();const c=process.cpuUsage();for(const s of ${JSON.stringify(specs)})await import(s);const u=process.cpuUsage(c);const a=process.cpuUsage();console.log(JSON.stringify({wall:performance.now()-t,cpu:(u.user+u.system)/1e3,total:(a.user+a.system)/1e3}))`;
  const r = spawnSync(process.execPath, [...(tsx ? ["--import", TSX] : []), "--input-type=module", "-e", code], {
    cwd: REPO,
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`import of ${specs.join(", ")} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1) as string) as { wall: number; cpu: number; total: number };
}

/** shared/'s concern entry points, together what the root barrel re-exported. */
const ALL_SHARED_ENTRIES = ["contracts", "bus", "llm", "runtime", "workspace"].map((e) => `@loopsmith/shared/${e}`);

/** The `@loopsmith/shared/*` entry points cli/src imports (static or dynamic, tests left out), sorted. */
function cliSharedEntries(): string[] {
  const found = new Set<string>();
  const dir = join(REPO, "cli", "src");
  for (const file of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    if (!file.endsWith(".ts") || file.endsWith(".test.ts")) continue;
    for (const m of readFileSync(join(dir, file), "utf8").matchAll(/["'](@loopsmith\/shared\/[\w/]+)["']/g))
      found.add(m[1] as string);
  }
  return [...found].sort();
}

/** Wall time of a whole process `node <argv>`, in ms. */
function processWall(argv: string[]): number {
  const t = performance.now();
  spawnSync(process.execPath, argv, { cwd: REPO });
  return performance.now() - t;
}

async function main(): Promise<void> {
  if (!currentBuild(REPO, {})) {
    // What it needs, in one line (no stack trace): it times the built JavaScript.
    console.error("bench:startup: no current build in dist/app (it times the built CLI): run `npm run build` first");
    process.exitCode = 1;
    return;
  }
  console.log(
    `bench:startup on ${(await import("node:os")).cpus().length} cores, load average ${(await import("node:os"))
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(" ")}\n`,
  );
  const refMs = referenceMs();
  const cpuAtStart = cpuTimes();

  // 1. Module load.
  console.log("1. module load in a fresh process (wall, CPU of the import, CPU of the whole process)");
  console.log(
    `   node -e 1 (whole process)                 ${ms(median([0, 1, 2].map(() => processWall(["-e", "1"]))))}`,
  );
  console.log(
    `   node --import tsx -e 1 (whole process)    ${ms(median([0, 1, 2].map(() => processWall(["--import", TSX, "-e", "1"]))))}`,
  );
  // What the CLI loads of shared/ (its entry points, each alone), against all five concern
  // entries in one process: what the root barrel `@loopsmith/shared` loaded.
  for (const specs of [...cliSharedEntries().map((e) => [e]), ALL_SHARED_ENTRIES]) {
    const c = importCost(specs);
    const label = specs.length > 1 ? "all five (what the root barrel loaded)" : (specs[0] as string);
    console.log(`   ${label.padEnd(42)}${ms(c.wall)} wall ${ms(c.cpu)} CPU ${ms(c.total)} process CPU`);
  }
  for (const sdk of ["@anthropic-ai/sdk", "@anthropic-ai/bedrock-sdk", "openai"]) {
    const c = importCost([sdk]);
    console.log(
      `   (${sdk}: now loaded only on a first model call)`.padEnd(46) + `${ms(c.wall)} wall ${ms(c.cpu)} CPU`,
    );
  }
  let cpuSum = 0;
  for (const name of NAMES) {
    const c = importCost([`./services/${name}/src/index.ts`]);
    cpuSum += c.total;
    console.log(`   ${name.padEnd(42)}${ms(c.wall)} wall ${ms(c.cpu)} CPU ${ms(c.total)} process CPU`);
  }
  const all = importCost(NAMES.map((n) => `./services/${n}/src/index.ts`));
  console.log(`   five separate processes: ${ms(cpuSum)} CPU in all (${ms(cpuSum / 2)} on 2 cores at best)`);
  console.log(`   all five in one process:  ${ms(all.total)} CPU\n`);

  // 2. NATS container.
  const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-bench-startup-"));
  const config = loadConfig({ flags: { dataDir } });
  const tNats = performance.now();
  const nats = await startNatsContainer(config, log);
  let nc = await (async () => {
    for (;;) {
      try {
        return await connect({ servers: nats.url, timeout: 1_000 });
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  })();
  const natsMs = performance.now() - tNats;
  console.log(`2. NATS container, create → handshake          ${ms(natsMs)}\n`);

  // 3. Each service alone.
  console.log("3. each service alone, spawn → answers $SRV.PING (nothing else starting)");
  const env = {
    ...process.env,
    NATS_URL: nats.url,
    DATABASE_URL: "",
    LOOPSMITH_DATA_DIR: dataDir,
    LOOPSMITH_CONFIG_JSON: JSON.stringify({ llm: { provider: "scripted", scriptPath: script } }),
    LOG_LEVEL: "warn",
  };
  const alone: Record<string, number> = {};
  for (const from of ["source", "build"] as const) {
    // memory twice: on a fresh data directory (PGlite's initdb or its template), then on the one it made.
    const fresh = mkdtempSync(join(tmpdir(), "loopsmith-bench-startup-"));
    for (const [label, name] of [
      ["memory, fresh data dir", "memory"],
      ["memory, existing data dir", "memory"],
      ...NAMES.slice(1).map((n) => [n, n]),
    ] as Array<[string, ServiceName]>) {
      const args = serviceCode(from === "source" ? { LOOPSMITH_FROM_SOURCE: "1" } : {}).args(name);
      const t = performance.now();
      const child = spawn(process.execPath, args, { env: { ...env, LOOPSMITH_DATA_DIR: fresh }, stdio: "ignore" });
      while (!(await answeringServices(nc, [name], 100)).has(name)) {
        if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode})`);
        if (performance.now() - t > 120_000) throw new Error(`${name} did not answer`);
      }
      const key = `${label} (${from})`;
      alone[key] = performance.now() - t;
      console.log(`   ${key.padEnd(42)}${ms(alone[key] as number)}`);
      await new Promise((r) => {
        child.once("exit", r);
        child.kill("SIGTERM");
      });
    }
  }
  await nc.close();
  await nats.stop();
  for (const from of ["source", "build"]) {
    const slowest = Math.max(
      ...Object.entries(alone)
        .filter(([k]) => !k.includes("fresh") && k.endsWith(`(${from})`))
        .map(([, v]) => v),
    );
    console.log(
      `   ${from}: slowest alone (existing data dir) + NATS = ${ms(slowest + natsMs)} (an up that waited for NATS before any service, with one idle core per service)`,
    );
  }
  console.log("");
  if (skipUp) return;

  // 4. Cold `up` through the `loopsmith` command: from the sources (the baseline) and from
  // the build; each on a fresh data directory (PGlite's template) and then, after `down`, on
  // the same directory (what a user's `up` usually is).
  const cliEnv = (dir: string, from: "source" | "build") => ({
    ...process.env,
    LOOPSMITH_DATA_DIR: dir,
    NATS_URL: "",
    DATABASE_URL: "",
    // info: each service's "stopping" and "service stopped" lines (6.) are at info.
    LOG_LEVEL: "info",
    ...(from === "source" ? { LOOPSMITH_FROM_SOURCE: "1" } : {}),
  });
  const cli = (dir: string, from: "source" | "build", argv: string[]) =>
    spawnSync(process.execPath, [BIN, ...argv], { cwd: REPO, env: cliEnv(dir, from), encoding: "utf8" });
  const coldUp = (dir: string, from: "source" | "build"): number => {
    const t = performance.now();
    const up = cli(dir, from, ["up", "--provider", "scripted", "--json"]);
    const wall = performance.now() - t;
    if (up.status !== 0) throw new Error(`up failed: ${up.stderr}`);
    return wall;
  };
  console.log(
    `4. cold \`loopsmith up\` through the loopsmith command (no stack running; the NATS image is local; median of ${runs} on an existing data dir)`,
  );
  const upMedian: Record<string, number> = {};
  let upDir = "";
  for (const from of ["source", "build"] as const) {
    upDir = mkdtempSync(join(tmpdir(), "loopsmith-bench-up-"));
    const first = coldUp(upDir, from);
    cli(upDir, from, ["down"]);
    const again: number[] = [];
    for (let i = 0; i < runs; i++) {
      again.push(coldUp(upDir, from));
      if (from === "source" || i < runs - 1) cli(upDir, from, ["down"]);
    }
    upMedian[from] = median(again);
    const target = (x: number): string => `target ${UP_TARGET_MS} ms: ${x <= UP_TARGET_MS ? "MET" : "NOT MET"}`;
    console.log(
      `   from the ${from.padEnd(6)}: fresh data dir ${ms(first)}   existing data dir ${ms(upMedian[from] as number)} (${again.map(Math.round).join(", ")})   ${target(upMedian[from] as number)}`,
    );
  }
  console.log(`   build vs source: ${((upMedian.build as number) / (upMedian.source as number)).toFixed(2)}x\n`);
  const live = await liveStack(upDir);
  const users = live?.users;
  if (!live || !users) throw new Error("the stack left by `up` is not recorded with its users");
  try {
    // 5. First step on the running stack.
    console.log(`5. first phase/step event on the running stack (median of ${runs})`);
    nc = await connect({ ...roleConnectOptions(users, "client"), servers: live.natsUrl });
    const raw = JSON.parse(readFileSync(taskFile, "utf8")) as Partial<TaskInput>;
    const inProcess: number[] = [];
    for (let i = 0; i < runs; i++) {
      const taskId = `bench-startup-${Date.now()}-${i}`;
      const abort = new AbortController();
      const t = performance.now();
      // The stack serves any scripted task; the replies travel with it (Task.script).
      await submitTask(nc, {
        ...raw,
        v: 1,
        taskId,
        submittedAt: new Date().toISOString(),
        script: loadScript(script),
      } as TaskInput);
      let first = NaN;
      for await (const e of watchEvents(nc, taskId, { signal: abort.signal })) {
        if (Number.isNaN(first) && (e.kind === "phase" || e.kind === "step")) first = performance.now() - t;
        if (e.kind === "result") break;
      }
      abort.abort();
      inProcess.push(first);
    }
    await nc.close();
    const sub = median(inProcess);
    console.log(
      `   submission → first event (in process)   ${ms(sub)}   target ${FIRST_STEP_TARGET_MS} ms: ${sub <= FIRST_STEP_TARGET_MS ? "MET" : "NOT MET"}   runs: ${inProcess.map(Math.round).join(", ")}`,
    );
    const fromCli: number[] = [];
    const cliTotal: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t = performance.now();
      const child = spawn(
        process.execPath,
        [BIN, "solve", "--file", taskFile, "--script", script, "--provider", "scripted", "--json"],
        { cwd: REPO, env: cliEnv(upDir, "build"), stdio: ["ignore", "pipe", "ignore"] },
      );
      let buf = "";
      let first = NaN;
      child.stdout.on("data", (d: Buffer) => {
        buf += d.toString();
        if (Number.isNaN(first) && /"kind":"(phase|step)"/.test(buf)) first = performance.now() - t;
      });
      await new Promise((r) => child.once("exit", r));
      fromCli.push(first);
      cliTotal.push(performance.now() - t);
    }
    const bare = median([0, 1, 2].map(() => processWall([BIN, "--help"])));
    console.log(
      `   CLI process start → first event line    ${ms(median(fromCli))}   (\`loopsmith --help\`, the CLI's load alone: ${ms(bare)}; whole solve ${ms(median(cliTotal))})   runs: ${fromCli.map(Math.round).join(", ")}`,
    );
  } finally {
    const t = performance.now();
    const down = cli(upDir, "build", ["down"]);
    const downMs = performance.now() - t;
    console.log(`\n${down.stdout.trim()}`);
    // 6. Each service's own stop, from its log: its last "stopping" to "service stopped".
    const stops = NAMES.map((name) => `${name} ${ms(stopMs(join(upDir, "logs", `${name}.log`)))}`);
    console.log(
      `6. stop on SIGTERM, per service (its log): ${stops.join(", ")}; the whole \`loopsmith down\`: ${ms(downMs)}`,
    );
    console.log(machineLine(refMs, cpuAtStart, cpuTimes()));
  }
}

/**
 * A service's last stop, in ms: from its last `stopping` log line to the `service stopped`
 * after it (pino's `time`, ms since the epoch); NaN when the log holds no such pair.
 */
function stopMs(logFile: string): number {
  let text = "";
  try {
    text = readFileSync(logFile, "utf8");
  } catch {
    return NaN;
  }
  let from = NaN;
  let took = NaN;
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    const entry = JSON.parse(line) as { time?: number; msg?: string };
    if (entry.msg === "stopping" && typeof entry.time === "number") [from, took] = [entry.time, NaN];
    else if (entry.msg === "service stopped" && typeof entry.time === "number") took = entry.time - from;
  }
  return took;
}

await main();
