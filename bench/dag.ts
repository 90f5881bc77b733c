/**
 * bench/dag: wall time of the DAG example (examples/rest-api: five subtasks, one of which
 * fails its first attempt) with `--parallel 1` against `--parallel 2`, on one running local
 * stack (NATS, the five services, the Docker sandbox), scripted, through the `loopsmith`
 * command as a user runs it. Rounds alternate the two settings so drift hits both alike.
 * Prints each run, the medians and their ratio, and the subtasks' spans of the last run of
 * each setting (from the result event's `data.dag`).
 * Usage: npm run bench:dag [-- --rounds N]
 */
import { execFileSync, spawn } from "node:child_process";
import { cpSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { median as ssMedian } from "simple-statistics";
import type { DagProgress, TaskEvent } from "@loopsmith/shared/contracts";
import { formatTable } from "@loopsmith/cli/ui";

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const ROUNDS = arg("--rounds", 2);
const REPO = new URL("../", import.meta.url).pathname;
const EXAMPLE = join(REPO, "examples", "rest-api");
const BIN = join(REPO, "cli", "bin", "loopsmith.js");
const GOAL = "Build the REST API for todo items that README.md describes: Python, standard library only, with tests";

/** The median (simple-statistics), NaN when there are none. */
const median = (xs: number[]): number => (xs.length ? ssMedian(xs) : NaN);

/** A fresh git repository made from the example's `repo/`. */
function userRepo(): string {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-bench-dag-"));
  cpSync(join(EXAMPLE, "repo"), dir, { recursive: true });
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: "b",
    GIT_AUTHOR_EMAIL: "b@b",
    GIT_COMMITTER_NAME: "b",
    GIT_COMMITTER_EMAIL: "b@b",
  };
  for (const args of [
    ["init", "-q"],
    ["add", "-A"],
    ["commit", "-qm", "the specification"],
  ])
    execFileSync("git", ["-C", dir, ...args], { env });
  return dir;
}

/** One solve of the example; resolves with its wall time (ms), its status and its last DAG progress. */
function solve(
  parallel: number,
  taskId: string,
  env: NodeJS.ProcessEnv,
): Promise<{ ms: number; status: string | undefined; dag: DagProgress | undefined; code: number }> {
  const dir = userRepo();
  const args = [
    BIN,
    "solve",
    "--repo",
    dir,
    GOAL,
    "--decompose",
    "--parallel",
    String(parallel),
    "--provider",
    "scripted",
    "--script",
    join(EXAMPLE, "script.json"),
    "--task-id",
    taskId,
    "--json",
  ];
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let buf = "";
    let status: string | undefined;
    let dag: DagProgress | undefined;
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split("\n");
      buf = lines.pop() ?? "";
      for (const l of lines) {
        try {
          // --json: the task's events, then the result object.
          const o = JSON.parse(l) as TaskEvent & { status?: string; stopReason?: string };
          if (o.taskId !== taskId) continue;
          if (o.data?.dag) dag = o.data.dag as DagProgress;
          if (typeof o.stopReason === "string") status = o.status;
        } catch {
          // not an event line
        }
      }
    });
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) console.error(`solve --parallel ${parallel} exited ${code}:\n${err.slice(-2_000)}`);
      resolve({ ms: performance.now() - t, status, dag, code: code ?? -1 });
    });
  });
}

/** ms from the first subtask's start to the last subtask's end. */
function spanMs(dag: DagProgress | undefined): number {
  const starts = (dag?.subtasks ?? []).map((s) => Date.parse(s.startedAt ?? "")).filter(Number.isFinite);
  const ends = (dag?.subtasks ?? []).map((s) => Date.parse(s.finishedAt ?? "")).filter(Number.isFinite);
  return starts.length && ends.length ? Math.max(...ends) - Math.min(...starts) : NaN;
}

/** The subtasks' spans (s from the first subtask's start). */
function spans(dag: DagProgress | undefined): string {
  if (!dag) return "  (no DAG progress in the events)";
  const t0 = Math.min(...dag.subtasks.map((s) => Date.parse(s.startedAt ?? "") || Infinity));
  const at = (iso: string | undefined): string => `${((Date.parse(iso ?? "") - t0) / 1000).toFixed(1)} s`;
  const rows = dag.subtasks.map((s) => [
    s.id,
    s.status,
    `attempt ${s.attempt}`,
    at(s.startedAt),
    "→",
    at(s.finishedAt),
  ]);
  return formatTable(rows, { align: ["left", "left", "left", "right", "left", "right"], gap: " ", indent: "  " }).join(
    "\n",
  );
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-bench-dag-data-"));
  // One stack for every run: `up` records it in the data dir, and `solve` there uses it.
  const runEnv = { ...process.env, LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "warn" };
  execFileSync(process.execPath, [BIN, "up", "--provider", "scripted"], {
    env: runEnv,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const times: Record<number, number[]> = { 1: [], 2: [] };
  const dagSpans: Record<number, number[]> = { 1: [], 2: [] };
  const lastOf: Record<number, DagProgress | undefined> = {};
  try {
    // One warm-up run: the sandbox image's first container and the pools are not the DAG's cost.
    await solve(2, `dagwarm${process.pid}`, runEnv);
    for (let r = 0; r < ROUNDS; r++) {
      for (const parallel of r % 2 ? [2, 1] : [1, 2]) {
        const run = await solve(parallel, `dagp${parallel}r${r}x${process.pid}`, runEnv);
        const status = run.status ?? `exit ${run.code}`;
        console.log(`round ${r + 1}  --parallel ${parallel}: ${(run.ms / 1000).toFixed(1)} s (${status})`);
        if (status !== "passed") throw new Error(`the example did not pass with --parallel ${parallel}`);
        times[parallel]?.push(run.ms);
        dagSpans[parallel]?.push(spanMs(run.dag));
        lastOf[parallel] = run.dag;
      }
    }
  } finally {
    execFileSync(process.execPath, [BIN, "down"], { env: runEnv, stdio: ["ignore", "ignore", "inherit"] });
  }
  const p1 = median(times[1] ?? []);
  const p2 = median(times[2] ?? []);
  console.log(
    `\nexamples/rest-api (5 subtasks, storage fails its first attempt), ${ROUNDS} rounds, median wall time of \`loopsmith solve\` on a running stack:`,
  );
  console.log(`  --parallel 1  ${(p1 / 1000).toFixed(1)} s  (baseline)`);
  console.log(`  --parallel 2  ${(p2 / 1000).toFixed(1)} s  ${(p2 / p1).toFixed(2)}× of --parallel 1`);
  const s1 = median(dagSpans[1] ?? []);
  const s2 = median(dagSpans[2] ?? []);
  console.log(
    "median span of the subtasks (first subtask's start to the last one's end), the part --parallel can shorten:",
  );
  console.log(`  --parallel 1  ${(s1 / 1000).toFixed(1)} s  (baseline)`);
  console.log(`  --parallel 2  ${(s2 / 1000).toFixed(1)} s  ${(s2 / s1).toFixed(2)}× of --parallel 1`);
  for (const p of [1, 2]) console.log(`\nsubtasks, last run with --parallel ${p}:\n${spans(lastOf[p])}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
