/**
 * Tasks/min of a sandbox-bound workload on 1, 2 and 3 Docker engines: how throughput scales
 * when executors drive several engines.
 *
 * The workload: the first `--tasks` HumanEval problems, each prompt starting with a module-level
 * `time.sleep(--sleep)`, so every sandbox run of a task (the scripted mutant, the canonical
 * solution, the hidden-test score: three runs) waits that long without using a CPU. The 2
 * cores here are then not what limits throughput; the sandbox slots are.
 *
 * The stack: `loopsmith up --provider scripted` on this host (its executor drives the host's
 * engine), every executor with `--slots` slots and no queue (`LOOPSMITH_EXECUTOR_QUEUE_LIMIT=0`:
 * a full executor answers busy and the conductor asks again). For 2 and 3 engines, Docker
 * engines in containers (deploy/build-images.sh's engine image, mutual TLS) each get an
 * executor started in this process, on the stack's NATS as the `executor` user. The architect
 * runs `--concurrency` tasks at once (`LOOPSMITH_CONDUCTOR_CONCURRENCY`, which the environment
 * may override: 4, its default, shows the conductor as the bottleneck).
 *
 * Each configuration runs `loopsmith bench --provider scripted --memory off --concurrency
 * --concurrency` over the same cases; the table gives tasks/min, the ratio to 1 engine, the
 * p50/p95 time from submit to result (the bench's per-task wall time) and pass@1. The 1-engine
 * run is repeated at the end, so drift over the run shows.
 *
 * Usage: npm run --silent bench:engines -- --dataset ../shared/datasets/humaneval.jsonl [--tasks 24] [--sleep 3] [--slots 2] [--concurrency 12]
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { loopsmithCli } from "./loopsmith-cli.js";
import pino from "pino";
import { quantile } from "simple-statistics";
import { loadConfig, runService, type RunningService } from "@loopsmith/shared/runtime";
import { createExecutor, executorService } from "@loopsmith/executor";
import { readStackRecord } from "../cli/src/stack-record.js";
import { readStackUsers, roleEnv } from "../cli/src/stack-auth.js";
import { saveImage, startEngine, type StartedEngine } from "../tests/fixtures/engines.js";

const program = new Command()
  .requiredOption("--dataset <path>", "HumanEval JSONL file")
  .option("--tasks <n>", "cases per run", (v) => Number(v), 24)
  .option("--sleep <s>", "seconds each sandbox run sleeps", (v) => Number(v), 3)
  .option("--slots <n>", "sandbox slots per executor (executor.concurrency)", (v) => Number(v), 2)
  .option("--concurrency <n>", "tasks in flight (loopsmith bench --concurrency)", (v) => Number(v), 12)
  .parse(process.argv);
const opts = program.opts<{ dataset: string; tasks: number; sleep: number; slots: number; concurrency: number }>();
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-engines-"));
const env = {
  ...process.env,
  LOOPSMITH_DATA_DIR: dataDir,
  NATS_URL: "",
  DATABASE_URL: "",
  LOG_LEVEL: "warn",
  LOOPSMITH_EXECUTOR_CONCURRENCY: String(opts.slots),
  LOOPSMITH_EXECUTOR_QUEUE_LIMIT: "0",
  // The architect runs as many tasks at once as the bench keeps in flight (its default, 4,
  // would cap the runs in flight below the slots of 3 engines).
  LOOPSMITH_CONDUCTOR_CONCURRENCY: process.env.LOOPSMITH_CONDUCTOR_CONCURRENCY ?? String(opts.concurrency),
};
const log = pino({ level: "warn" });

/** Runs the CLI; resolves with its stdout, rejects on a non-zero exit. */
const cli = (args: string[]): Promise<string> => loopsmithCli(args, env);

/** The sandbox-bound dataset: the first `n` problems, each prompt opening with a sleep. */
function sleepingDataset(n: number, sleepS: number): string {
  const lines = readFileSync(opts.dataset, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .slice(0, n);
  const out = lines.map((l) => {
    const p = JSON.parse(l) as { prompt: string };
    return JSON.stringify({ ...p, prompt: `import time as _bench_time\n_bench_time.sleep(${sleepS})\n${p.prompt}` });
  });
  const file = join(dataDir, "sleeping.jsonl");
  writeFileSync(file, `${out.join("\n")}\n`);
  return file;
}

interface Row {
  engines: number;
  label: string;
  tasksPerMin: number;
  p50S: number;
  p95S: number;
  passAt1: number;
  errors: number;
  wallS: number;
}

async function measure(engines: number, label: string, dataset: string): Promise<Row> {
  const out = join(dataDir, `run-${label}`);
  mkdirSync(out, { recursive: true });
  await cli([
    "bench",
    "--dataset",
    dataset,
    "--limit",
    String(opts.tasks),
    "--provider",
    "scripted",
    "--memory",
    "off",
    "--concurrency",
    String(opts.concurrency),
    "--out",
    out,
    "--json",
  ]);
  const s = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as {
    tasksPerMin: number;
    wallMs: number;
    arms: { off: { passAt1: number; errors: number } };
  };
  const walls = readFileSync(join(out, "results.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => (JSON.parse(l) as { wallMs: number }).wallMs / 1000);
  return {
    engines,
    label,
    tasksPerMin: s.tasksPerMin,
    p50S: quantile(walls, 0.5),
    p95S: quantile(walls, 0.95),
    passAt1: s.arms.off.passAt1,
    errors: s.arms.off.errors,
    wallS: s.wallMs / 1000,
  };
}

const dataset = sleepingDataset(opts.tasks, opts.sleep);
const engines: StartedEngine[] = [];
const extra: RunningService[] = [];
await cli(["up", "--provider", "scripted"]);
try {
  const record = readStackRecord(dataDir);
  if (!record) throw new Error("loopsmith up left no stack record");
  const users = record.usersFile ? readStackUsers(record.usersFile) : undefined;
  const cfg = loadConfig({
    env: {
      ...process.env,
      NATS_URL: record.natsUrl,
      ...(users ? roleEnv(users, "executor") : {}),
      LOOPSMITH_EXECUTOR_CONCURRENCY: String(opts.slots),
      LOOPSMITH_EXECUTOR_QUEUE_LIMIT: "0",
      LOOPSMITH_DATA_DIR: dataDir,
    },
  });
  const python = cfg.images.python;
  // The engines and the image archive are made before any measurement, so starting them costs no run.
  const [started, archive] = await Promise.all([
    Promise.all([startEngine("loopsmith-bench-engine-2"), startEngine("loopsmith-bench-engine-3")]),
    saveImage(python),
  ]);
  engines.push(...started);
  const addExecutor = async (engine: StartedEngine): Promise<void> => {
    const executor = createExecutor({
      docker: engine.docker,
      config: { ...cfg, executor: { ...cfg.executor, imageArchive: archive } },
      log,
      kinds: ["python"],
      env: engine.env,
    });
    extra.push(await runService("executor", (deps) => executorService({ ...deps, executor }), { config: cfg, log }));
  };
  // A warm-up task: the first run of an image and the first memory writes are slower.
  await cli([
    "bench",
    "--dataset",
    dataset,
    "--limit",
    "1",
    "--provider",
    "scripted",
    "--memory",
    "off",
    "--out",
    join(dataDir, "warmup"),
  ]);
  const rows: Row[] = [await measure(1, "1 engine", dataset)];
  await addExecutor(engines[0] as StartedEngine);
  rows.push(await measure(2, "2 engines", dataset));
  await addExecutor(engines[1] as StartedEngine);
  rows.push(await measure(3, "3 engines", dataset));
  await Promise.all(extra.splice(0).map((s) => s.stop()));
  rows.push(await measure(1, "1 engine again", dataset));

  const base = rows[0] as Row;
  const ideal = (n: number): number => (n * opts.slots * 60) / (3 * opts.sleep);
  process.stdout.write(
    `sandbox-bound scripted HumanEval tasks: ${opts.tasks} per run, every sandbox run sleeps ${opts.sleep} s (3 runs a task), ` +
      `${opts.slots} slots per executor, ${opts.concurrency} tasks in flight, the architect running ${env.LOOPSMITH_CONDUCTOR_CONCURRENCY} at once, executors queue nothing\n\n`,
  );
  process.stdout.write(
    "| engines | tasks/min | vs 1 engine | slot bound (tasks/min) | p50 submit→result s | p95 s | pass@1 | errors | wall s |\n|---|---|---|---|---|---|---|---|---|\n",
  );
  for (const r of rows) {
    process.stdout.write(
      `| ${r.label} | ${r.tasksPerMin.toFixed(1)} | ${(r.tasksPerMin / base.tasksPerMin).toFixed(2)}x | ${ideal(r.engines).toFixed(1)} | ${r.p50S.toFixed(1)} | ${r.p95S.toFixed(1)} | ${r.passAt1.toFixed(3)} | ${r.errors} | ${r.wallS.toFixed(1)} |\n`,
    );
  }
  process.stdout.write(
    `\nslot bound = engines × slots × 60 s / (3 runs × ${opts.sleep} s): what the sandboxes alone would allow.\n`,
  );
} finally {
  await Promise.all(extra.map((s) => s.stop()));
  await Promise.all(engines.map((e) => e.remove()));
  await cli(["down"]).catch((err: unknown) => process.stderr.write(`${(err as Error).message}\n`));
}
