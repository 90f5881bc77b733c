/**
 * Throughput of scripted HumanEval tasks on a stack that stays up: starts
 * a stack with `loopsmith up --provider scripted` (no script file: every task carries its
 * own replies) in a temporary data dir, then runs `loopsmith bench --provider scripted
 * --memory off` over the same cases at concurrency 1 (the baseline) and at each `--concurrency`
 * value, and prints tasks/min of each, the ratio to the baseline and to the 60 tasks/min
 * target. A scripted task is the demo's: a mutant of the canonical solution (fails), the
 * canonical solution (passes), then the hidden-test score: three sandbox runs.
 *
 * Beside each run it prints where the machine's CPU went, in CPU seconds per task: each
 * service process (from /proc/<pid>/stat), the `loopsmith bench` client, and the rest of the
 * machine (sandbox containers, dockerd, NATS; from /proc/stat, steal left out), so the bottleneck
 * is named; and the machine's state (bench/machine.ts: a reference workload's time and the CPU
 * steal over the run), since the same code measured 2x apart on different days.
 *
 * Usage: npm run --silent bench:throughput -- --dataset ../shared/datasets/humaneval.jsonl [--tasks 40] [--concurrency 4,8]
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { loopsmithCli } from "./loopsmith-cli.js";
import { TICK_S, cpuTimes, machineLine, referenceMs } from "./machine.js";
import { readStackRecord } from "../cli/src/stack-record.js";

const program = new Command()
  .requiredOption("--dataset <path>", "HumanEval JSONL file")
  .option("--tasks <n>", "cases per run", (v) => Number(v), 40)
  .option("--concurrency <list>", "concurrency values to compare with 1", "4,8")
  .parse(process.argv);
const opts = program.opts<{ dataset: string; tasks: number; concurrency: string }>();
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-throughput-"));
const env = { ...process.env, LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "warn" };

/** Runs the CLI; resolves with its stdout, rejects on a non-zero exit. */
const cli = (args: string[]): Promise<string> => loopsmithCli(args, env);

interface Row {
  concurrency: number;
  tasksPerMin: number;
  passAt1: number;
  wallS: number;
  errors: number;
  cpu: Record<string, number>;
}

/** CPU seconds used so far by `pid` (user + system, its own threads). */
function processCpu(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8")
      .replace(/^.*\) /, "")
      .split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_S;
  } catch {
    return 0;
  }
}
const DOCKER_CGROUP = "/sys/fs/cgroup/cpuacct/docker"; // cgroup v1 with the cgroupfs driver, as here
/** CPU seconds of a cgroup v1 cpuacct folder (0 when there is none: another cgroup layout). */
function cgroupCpu(dir: string): number {
  try {
    return Number(readFileSync(join(dir, "cpuacct.usage"), "utf8")) / 1e9;
  } catch {
    return 0;
  }
}
/** The pids of processes whose command name is `comm` (dockerd, containerd). */
function pidsOf(comm: string): number[] {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === comm;
      } catch {
        return false;
      }
    });
}
/**
 * CPU seconds so far: each service of the running stack, dockerd and containerd, every
 * container (the docker cgroup) and each container alive now (to take those that outlive a
 * run, such as NATS, out of the sandboxes' share), and the whole machine.
 */
function cpuNow(): { values: Record<string, number>; containers: Record<string, number> } {
  const pids = readStackRecord(dataDir)?.pids ?? {};
  const containers = existsSync(DOCKER_CGROUP)
    ? Object.fromEntries(
        readdirSync(DOCKER_CGROUP)
          .filter((d) => /^[0-9a-f]{64}$/.test(d))
          .map((id) => [id, cgroupCpu(join(DOCKER_CGROUP, id))]),
      )
    : {};
  return {
    values: {
      ...Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, processCpu(pid as number)])),
      dockerd: pidsOf("dockerd").reduce((a, pid) => a + processCpu(pid), 0),
      containerd: pidsOf("containerd").reduce((a, pid) => a + processCpu(pid), 0),
      docker: cgroupCpu(DOCKER_CGROUP),
      machine: cpuTimes().busy,
    },
    containers,
  };
}
/** CPU seconds per task between two readings: services, dockerd, containerd, sandboxes, the rest. */
function cpuPerTask(
  before: ReturnType<typeof cpuNow>,
  after: ReturnType<typeof cpuNow>,
  tasks: number,
): Record<string, number> {
  const d = (k: string): number => ((after.values[k] ?? 0) - (before.values[k] ?? 0)) / tasks;
  const lasting =
    Object.keys(after.containers)
      .filter((id) => id in before.containers)
      .reduce((a, id) => a + ((after.containers[id] ?? 0) - (before.containers[id] ?? 0)), 0) / tasks;
  const out: Record<string, number> = {};
  for (const k of Object.keys(after.values)) if (k !== "docker") out[k] = d(k);
  out.sandboxes = d("docker") - lasting;
  const named = Object.entries(out)
    .filter(([k]) => k !== "machine")
    .reduce((a, [, v]) => a + v, 0);
  out.other = (out.machine ?? 0) - named;
  return out;
}

async function run(concurrency: number): Promise<Row> {
  const out = join(dataDir, `c${concurrency}`);
  const before = cpuNow();
  await cli([
    "bench",
    "--dataset",
    opts.dataset,
    "--limit",
    String(opts.tasks),
    "--provider",
    "scripted",
    "--memory",
    "off",
    "--concurrency",
    String(concurrency),
    "--out",
    out,
    "--json",
  ]);
  const s = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as {
    tasksPerMin: number;
    wallMs: number;
    arms: { off: { passAt1: number; errors: number } };
  };
  const cpu = cpuPerTask(before, cpuNow(), opts.tasks);
  return {
    concurrency,
    tasksPerMin: s.tasksPerMin,
    passAt1: s.arms.off.passAt1,
    wallS: s.wallMs / 1000,
    errors: s.arms.off.errors,
    cpu,
  };
}

const refMs = referenceMs();
const cpuAtStart = cpuTimes();
const started = Date.now();
await cli(["up", "--provider", "scripted"]);
const upS = (Date.now() - started) / 1000;
try {
  // A warm-up task: the first sandbox run of an image and the first memory writes are slower.
  await cli([
    "bench",
    "--dataset",
    opts.dataset,
    "--limit",
    "1",
    "--provider",
    "scripted",
    "--memory",
    "off",
    "--out",
    join(dataDir, "warmup"),
  ]);
  const rows: Row[] = [await run(1)];
  for (const c of opts.concurrency
    .split(",")
    .map(Number)
    .filter((n) => n > 1))
    rows.push(await run(c));
  const base = rows[0] as Row;
  process.stdout.write(
    `scripted HumanEval tasks on a running stack (up took ${upS.toFixed(1)} s), ${opts.tasks} cases per run\n${machineLine(refMs, cpuAtStart, cpuTimes())}\n\n`,
  );
  process.stdout.write(
    "| concurrency | tasks/min | vs concurrency 1 | vs target 60 | pass@1 | wall s | errors |\n|---|---|---|---|---|---|---|\n",
  );
  for (const r of rows) {
    process.stdout.write(
      `| ${r.concurrency} | ${r.tasksPerMin.toFixed(1)} | ${(r.tasksPerMin / base.tasksPerMin).toFixed(2)}x | ${(r.tasksPerMin / 60).toFixed(2)} | ${r.passAt1.toFixed(3)} | ${r.wallS.toFixed(1)} | ${r.errors} |\n`,
    );
  }
  const names = Object.keys(base.cpu).filter((k) => k !== "machine" && k !== "other");
  process.stdout.write(
    `\nCPU seconds per task (2 cores give 2 CPU-s each second; 60 tasks/min needs at most 2.0 CPU-s a task in all)\n\n| concurrency | ${names.join(" | ")} | rest (shims, runc, NATS, the bench client, anything else running) | all |\n|---|${names.map(() => "---|").join("")}---|---|\n`,
  );
  for (const r of rows)
    process.stdout.write(
      `| ${r.concurrency} | ${names.map((n) => (r.cpu[n] ?? 0).toFixed(2)).join(" | ")} | ${(r.cpu.other ?? 0).toFixed(2)} | ${(r.cpu.machine ?? 0).toFixed(2)} |\n`,
    );
} finally {
  await cli(["down"]).catch((err: unknown) => process.stderr.write(`${(err as Error).message}\n`));
}
