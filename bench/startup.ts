/**
 * `npm run bench:startup`: where `loopsmith up` spends its time, and how fast `solve` on a
 * running stack starts its first step (issue 11 item 2: cold `up` ≤ 5 s on 2 cores, first
 * step ≤ 300 ms). Each figure is printed beside what it is compared with, measured in this
 * same run (the machine is shared, so absolute times move from run to run):
 *
 * 1. module load per service, in a fresh process (wall and CPU), against `node -e 1` and
 *    `node --import tsx -e 1`, and all five in one process;
 * 2. the NATS container, from create to a NATS handshake;
 * 3. each service alone on that NATS, from spawn to answering `$SRV.PING`;
 * 4. a cold `loopsmith up` (the CLI, fresh data directory), against the 5 s target;
 * 5. on that stack: submission → first `phase`/`step` event (in process), and CLI process
 *    start → first `phase`/`step` line of `solve --json`, against the 300 ms target;
 * then `loopsmith down`.
 *
 * Options: `--runs N` (solve repetitions, default 3), `--skip-up` (only 1–3).
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { createLogger, ensureStreams, loadConfig, submitTask, watchEvents, type ServiceName, type TaskInput } from "@loopsmith/shared";
import { startNatsContainer } from "../cli/src/nats-container.js";
import { answeringServices } from "../cli/src/stack.js";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const TSX = import.meta.resolve("tsx");
const NAMES: ServiceName[] = ["memory", "executor", "builder", "reviewer", "architect"];
const UP_TARGET_MS = 5_000;
const FIRST_STEP_TARGET_MS = 300;
const args = process.argv.slice(2);
const runs = Number(args[args.indexOf("--runs") + 1]) || 3;
const skipUp = args.includes("--skip-up");
const script = join(REPO, "examples", "roman", "script.json");
const taskFile = join(REPO, "examples", "roman", "task.json");
const log = createLogger({ service: "bench", level: "warn" });

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const ms = (x: number): string => `${Math.round(x)} ms`.padStart(8);

/** Wall and CPU (all threads) of a fresh node process importing `specs`. */
function importCost(specs: string[], tsx = true): { wall: number; cpu: number; total: number } {
  const code = `const t=performance.now();const c=process.cpuUsage();for(const s of ${JSON.stringify(specs)})await import(s);const u=process.cpuUsage(c);const a=process.cpuUsage();console.log(JSON.stringify({wall:performance.now()-t,cpu:(u.user+u.system)/1e3,total:(a.user+a.system)/1e3}))`;
  const r = spawnSync(process.execPath, [...(tsx ? ["--import", TSX] : []), "--input-type=module", "-e", code], { cwd: REPO, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`import of ${specs.join(", ")} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1) as string) as { wall: number; cpu: number; total: number };
}

/** Wall time of a whole process `node <argv>`, in ms. */
function processWall(argv: string[]): number {
  const t = performance.now();
  spawnSync(process.execPath, argv, { cwd: REPO });
  return performance.now() - t;
}

async function main(): Promise<void> {
  console.log(`bench:startup on ${(await import("node:os")).cpus().length} cores, load average ${(await import("node:os")).loadavg().map((x) => x.toFixed(1)).join(" ")}\n`);

  // 1. Module load.
  console.log("1. module load in a fresh process (wall, CPU of the import, CPU of the whole process)");
  console.log(`   node -e 1 (whole process)                 ${ms(median([0, 1, 2].map(() => processWall(["-e", "1"]))))}`);
  console.log(`   node --import tsx -e 1 (whole process)    ${ms(median([0, 1, 2].map(() => processWall(["--import", TSX, "-e", "1"]))))}`);
  const shared = importCost(["@loopsmith/shared"]);
  console.log(`   @loopsmith/shared                         ${ms(shared.wall)} wall ${ms(shared.cpu)} CPU ${ms(shared.total)} process CPU`);
  for (const sdk of ["@anthropic-ai/sdk", "@anthropic-ai/bedrock-sdk", "openai"]) {
    const c = importCost([sdk]);
    console.log(`   (${sdk}: now loaded only on a first model call)`.padEnd(46) + `${ms(c.wall)} wall ${ms(c.cpu)} CPU`);
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
  // memory twice: on a fresh data directory (PGlite's initdb), then on the one it made.
  for (const [label, name] of [["memory, fresh data dir", "memory"], ["memory, existing data dir", "memory"], ...NAMES.slice(1).map((n) => [n, n])] as Array<[string, ServiceName]>) {
    const t = performance.now();
    const child = spawn(process.execPath, ["--import", TSX, join(REPO, "services", name, "src", "main.ts")], { env, stdio: "ignore" });
    while (!(await answeringServices(nc, [name], 100)).has(name)) {
      if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode})`);
      if (performance.now() - t > 120_000) throw new Error(`${name} did not answer`);
    }
    alone[label] = performance.now() - t;
    console.log(`   ${label.padEnd(42)}${ms(alone[label] as number)}`);
    await new Promise((r) => {
      child.once("exit", r);
      child.kill("SIGTERM");
    });
  }
  await nc.close();
  await nats.stop();
  const slowest = Math.max(...Object.entries(alone).filter(([k]) => !k.includes("fresh")).map(([, v]) => v));
  console.log(`   slowest alone (existing data dir) + NATS = ${ms(slowest + natsMs)} (a lower bound of up with one idle core per service)\n`);
  if (skipUp) return;

  // 4. Cold `up`: a first one on a fresh data directory (PGlite's initdb), then, after
  // `down`, a second one on the same directory (what a user's `up` usually is).
  const upDir = mkdtempSync(join(tmpdir(), "loopsmith-bench-up-"));
  const cliEnv = { ...process.env, LOOPSMITH_DATA_DIR: upDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "warn" };
  const cli = (argv: string[]) => spawnSync(process.execPath, ["--import", TSX, join(REPO, "cli", "src", "main.ts"), ...argv], { cwd: REPO, env: cliEnv, encoding: "utf8" });
  const coldUp = (): { wall: number; readyMs: number; natsUrl: string } => {
    const t = performance.now();
    const up = cli(["up", "--provider", "scripted", "--script", script, "--json"]);
    const wall = performance.now() - t;
    if (up.status !== 0) throw new Error(`up failed: ${up.stderr}`);
    return { wall, ...(JSON.parse(up.stdout.trim().split("\n").at(-1) as string) as { readyMs: number; natsUrl: string }) };
  };
  console.log("4. cold `loopsmith up` (no stack running; the NATS image is local)");
  const first = coldUp();
  console.log(`   fresh data directory: whole CLI process ${ms(first.wall)}   target ${UP_TARGET_MS} ms: ${first.wall <= UP_TARGET_MS ? "MET" : "NOT MET"}   (after the CLI's own load: ${ms(first.readyMs)})`);
  cli(["down"]);
  const said = coldUp();
  console.log(`   existing data directory: whole CLI process ${ms(said.wall)}   target ${UP_TARGET_MS} ms: ${said.wall <= UP_TARGET_MS ? "MET" : "NOT MET"}   (after the CLI's own load: ${ms(said.readyMs)})\n`);

  try {
    // 5. First step on the running stack.
    console.log(`5. first phase/step event on the running stack (median of ${runs})`);
    nc = await connect({ servers: said.natsUrl });
    await ensureStreams(nc);
    const raw = JSON.parse(readFileSync(taskFile, "utf8")) as Partial<TaskInput>;
    const inProcess: number[] = [];
    for (let i = 0; i < runs; i++) {
      const taskId = `bench-startup-${Date.now()}-${i}`;
      const abort = new AbortController();
      const t = performance.now();
      await submitTask(nc, { ...raw, v: 1, taskId, submittedAt: new Date().toISOString() } as TaskInput);
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
    console.log(`   submission → first event (in process)   ${ms(sub)}   target ${FIRST_STEP_TARGET_MS} ms: ${sub <= FIRST_STEP_TARGET_MS ? "MET" : "NOT MET"}   runs: ${inProcess.map(Math.round).join(", ")}`);
    const fromCli: number[] = [];
    const cliTotal: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t = performance.now();
      const child = spawn(process.execPath, ["--import", TSX, join(REPO, "cli", "src", "main.ts"), "solve", "--file", taskFile, "--json"], { cwd: REPO, env: cliEnv, stdio: ["ignore", "pipe", "ignore"] });
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
    const bare = median([0, 1, 2].map(() => processWall(["--import", TSX, join(REPO, "cli", "src", "main.ts"), "--help"])));
    console.log(`   CLI process start → first event line    ${ms(median(fromCli))}   (\`loopsmith --help\`, the CLI's load alone: ${ms(bare)}; whole solve ${ms(median(cliTotal))})   runs: ${fromCli.map(Math.round).join(", ")}`);
  } finally {
    const down = cli(["down"]);
    console.log(`\n${down.stdout.trim()}`);
  }
}

await main();
