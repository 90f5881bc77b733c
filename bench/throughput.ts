/**
 * Throughput of scripted HumanEval tasks on a stack that stays up (issue #11 item 3): starts
 * a stack with `loopsmith up --provider scripted` (no script file: every task carries its
 * own replies) in a temporary data dir, then runs `loopsmith bench --provider scripted
 * --memory off` over the same cases at concurrency 1 (the baseline) and at each `--concurrency`
 * value, and prints tasks/min of each, the ratio to the baseline and to the 60 tasks/min
 * target. A scripted task is the demo's: a mutant of the canonical solution (fails), the
 * canonical solution (passes), then the hidden-test score: three sandbox runs.
 *
 * Usage: npm run --silent bench:throughput -- --dataset ../shared/datasets/humaneval.jsonl [--tasks 40] [--concurrency 4,8]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";

const program = new Command()
  .requiredOption("--dataset <path>", "HumanEval JSONL file")
  .option("--tasks <n>", "cases per run", (v) => Number(v), 40)
  .option("--concurrency <list>", "concurrency values to compare with 1", "4,8")
  .parse(process.argv);
const opts = program.opts<{ dataset: string; tasks: number; concurrency: string }>();
const REPO = fileURLToPath(new URL("../", import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-throughput-"));
const env = { ...process.env, LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "warn" };

/** Runs the CLI; resolves with its stdout, rejects on a non-zero exit. */
function cli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(REPO, "cli", "src", "main.ts"), ...args], { cwd: REPO, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`loopsmith ${args[0]} exited ${code}: ${err.slice(-2000)}`))));
  });
}

interface Row { concurrency: number; tasksPerMin: number; passAt1: number; wallS: number; errors: number }

async function run(concurrency: number): Promise<Row> {
  const out = join(dataDir, `c${concurrency}`);
  await cli(["bench", "--dataset", opts.dataset, "--limit", String(opts.tasks), "--provider", "scripted", "--memory", "off", "--concurrency", String(concurrency), "--out", out, "--json"]);
  const s = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as { tasksPerMin: number; wallMs: number; arms: { off: { passAt1: number; errors: number } } };
  return { concurrency, tasksPerMin: s.tasksPerMin, passAt1: s.arms.off.passAt1, wallS: s.wallMs / 1000, errors: s.arms.off.errors };
}

const started = Date.now();
await cli(["up", "--provider", "scripted"]);
const upS = (Date.now() - started) / 1000;
try {
  // A warm-up task: the first sandbox run of an image and the first memory writes are slower.
  await cli(["bench", "--dataset", opts.dataset, "--limit", "1", "--provider", "scripted", "--memory", "off", "--out", join(dataDir, "warmup")]);
  const rows: Row[] = [await run(1)];
  for (const c of opts.concurrency.split(",").map(Number).filter((n) => n > 1)) rows.push(await run(c));
  const base = rows[0] as Row;
  process.stdout.write(`scripted HumanEval tasks on a running stack (up took ${upS.toFixed(1)} s), ${opts.tasks} cases per run\n\n`);
  process.stdout.write("| concurrency | tasks/min | vs concurrency 1 | vs target 60 | pass@1 | wall s | errors |\n|---|---|---|---|---|---|---|\n");
  for (const r of rows) {
    process.stdout.write(`| ${r.concurrency} | ${r.tasksPerMin.toFixed(1)} | ${(r.tasksPerMin / base.tasksPerMin).toFixed(2)}x | ${(r.tasksPerMin / 60).toFixed(2)} | ${r.passAt1.toFixed(3)} | ${r.wallS.toFixed(1)} | ${r.errors} |\n`);
  }
} finally {
  await cli(["down"]).catch((err: unknown) => process.stderr.write(`${(err as Error).message}\n`));
}
