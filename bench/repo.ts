/**
 * bench/repo: repo mode's figures on the two examples (examples/repo-bugfix, -ts).
 *
 * 1. Per-run overhead over the bare test command, interleaved round by round:
 *      docker-run  `docker run --rm` of the sandbox image with the executor's limits, the
 *                  repository copied into its tmpfs workspace from a read-only bind mount,
 *                  then the test command: the least a sandboxed run of that command costs
 *      executor    the executor's repo-mode run: base tree from the cache, overlay, archive,
 *                  warm pool container, the command through `sh -c`, JUnit read back
 *    Prints p50/p95 (ms), executor/docker-run (goal: ≤ 1.3×), and the executor's wall time over
 *    the command's own time in the sandbox (what a run adds around the command).
 * 2. Time to first sandbox run: `loopsmith solve --repo` from the command's start to the
 *    baseline run's event, cold (the CLI starts NATS and the five services) and warm (a stack
 *    already up, `NATS_URL` set).
 * Usage: node --import tsx bench/repo.ts [--rounds N] [--cold K]
 */
import { execFileSync, spawn } from "node:child_process";
import { cpSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import pino from "pino";
import { quantile } from "simple-statistics";
import { loadConfig, type Config } from "@loopsmith/shared/runtime";
import { type ExecutionRequest, type Language } from "@loopsmith/shared/contracts";
import { createExecutor } from "@loopsmith/executor";
import { startLocalStack } from "../cli/src/stack.js";
import { formatTable } from "@loopsmith/cli/ui";
import { dockerRunLimits } from "./docker-run.js";

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const ROUNDS = arg("--rounds", 15);
const COLD = arg("--cold", 2);
const REPO = new URL("../", import.meta.url).pathname;
const EXAMPLES: Array<{ name: string; language: Language; command: string; goal: string }> = [
  {
    name: "repo-bugfix",
    language: "python",
    command: "python3 -m pytest -q",
    goal: "Fix the failing test tests/test_pricing.py::test_bulk_discount_starts_at_threshold",
  },
  { name: "repo-bugfix-ts", language: "javascript", command: "npm test", goal: "Fix the failing pager test" },
];

/** The p-th percentile (0..100) of `xs` (simple-statistics' quantile), NaN when there are none. */
const pct = (xs: number[], p: number): number => (xs.length ? quantile(xs, p / 100) : NaN);

/** Runs a process to its end; resolves with its exit code (any). */
function run(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  onLine?: (line: string) => void,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let buf = "";
    child.stdout.on("data", (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split("\n");
      buf = lines.pop() ?? "";
      for (const l of lines) onLine?.(l);
    });
    child.stderr.resume();
    child.on("error", reject);
    child.on("close", (code) => resolve(code ?? -1));
  });
}

function git(dir: string, ...args: string[]): Promise<number> {
  return run("git", ["-C", dir, ...args], {
    ...process.env,
    GIT_AUTHOR_NAME: "b",
    GIT_AUTHOR_EMAIL: "b@b",
    GIT_COMMITTER_NAME: "b",
    GIT_COMMITTER_EMAIL: "b@b",
  });
}

async function overhead(config: Config): Promise<void> {
  const docker = new Docker();
  const cfg = config.executor;
  const trees = new Map<string, string>();
  for (const ex of EXAMPLES) {
    const dir = mkdtempSync(join(tmpdir(), `loopsmith-bench-${ex.name}-`));
    cpSync(join(REPO, "examples", ex.name, "repo"), dir, { recursive: true });
    // Readable by the sandbox user (uid 10001) through the bind mount; mkdtemp makes 0700.
    execFileSync("chmod", ["-R", "a+rX", dir]);
    trees.set(ex.name, dir);
  }
  const executor = createExecutor({
    docker,
    config,
    log: pino({ level: "warn" }),
    loadBase: async (snapshot) => trees.get(snapshot) ?? "",
  });
  await executor.start();
  await executor.settled();
  let seq = 0;
  try {
    for (const ex of EXAMPLES) {
      const dir = trees.get(ex.name) as string;
      const image = ex.language === "python" ? config.images.python : config.images.node;
      const ways: Record<string, () => Promise<unknown>> = {
        "docker-run": async () => {
          // The examples fail one test on purpose: exit 1 is the command's; anything else is the bench's.
          const code = await run("docker", [
            "run",
            "--rm",
            "-v",
            `${dir}:/src:ro`,
            "-e",
            "HOME=/tmp",
            ...dockerRunLimits(cfg, { tmpNoexec: false }),
            image,
            "sh",
            "-c",
            `cp -r /src/. /workspace/ && ${ex.command}`,
          ]);
          if (code !== 1) throw new Error(`docker run on ${ex.name} exited ${code}, not 1 (one failing test)`);
        },
        executor: async () => {
          seq++;
          const req: ExecutionRequest = {
            v: 1,
            taskId: "bench",
            iteration: seq,
            idempotencyKey: `bench/${seq}/execute`,
            language: ex.language,
            files: [],
            base: { snapshot: ex.name, commit: "0".repeat(40), deleted: [] },
            shell: ex.command,
            timeoutMs: 60_000,
            memoryMb: 512,
          };
          const r = await executor.run(req);
          if (r.status !== "failed")
            throw new Error(`executor run on ${ex.name}: ${r.status} ${r.reason ?? r.stdout.slice(0, 300)}`);
          inside.push(r.durationMs);
        },
      };
      const times: Record<string, number[]> = { "docker-run": [], executor: [] };
      const inside: number[] = [];
      for (const fn of Object.values(ways)) await fn(); // warm-up
      await executor.settled();
      for (let r = 0; r < ROUNDS; r++) {
        for (const [name, fn] of Object.entries(ways)) {
          const t = performance.now();
          await fn();
          times[name]?.push(performance.now() - t);
          if (name === "executor") await executor.settled();
        }
      }
      const base = pct(times["docker-run"] ?? [], 50);
      console.log(`\n${ex.name} (${ex.command}), ${ROUNDS} rounds, ms:`);
      const rows = [
        ["", "p50", "p95", "ratio"],
        ...Object.entries(times).map(([name, xs]) => [
          name,
          pct(xs, 50).toFixed(0),
          pct(xs, 95).toFixed(0),
          `${(pct(xs, 50) / base).toFixed(2)}×`,
        ]),
      ];
      for (const line of formatTable(rows, { align: ["left", "right", "right", "right"], indent: "  " }))
        console.log(line);
      // The command's own time in the sandbox (the supervisor's clock): what the executor adds around it.
      const own = pct(inside, 50);
      console.log(
        `  command alone in the sandbox p50 ${own.toFixed(0)} ms; executor wall time / command time ${(pct(times.executor ?? [], 50) / own).toFixed(2)}× (+${(pct(times.executor ?? [], 50) - own).toFixed(0)} ms a run)`,
      );
    }
  } finally {
    await executor.stop();
  }
}

/** ms from the start of `solve --repo` to the baseline event, for one example. */
async function firstRun(ex: (typeof EXAMPLES)[number], env: NodeJS.ProcessEnv): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), `loopsmith-first-${ex.name}-`));
  cpSync(join(REPO, "examples", ex.name, "repo"), dir, { recursive: true });
  await git(dir, "init", "-q");
  await git(dir, "add", "-A");
  await git(dir, "commit", "-qm", "initial");
  const t = performance.now();
  let at = NaN;
  await run(
    process.execPath,
    [
      join(REPO, "cli", "bin", "loopsmith.js"),
      "solve",
      "--repo",
      dir,
      ex.goal,
      "--provider",
      "scripted",
      "--script",
      join(REPO, "examples", ex.name, "script.json"),
      "--json",
    ],
    env,
    (line) => {
      if (Number.isNaN(at) && line.includes('"phase":"prepare"') && line.includes("baseline at"))
        at = performance.now() - t;
    },
  );
  return at;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-bench-repo-"));
  const env = { ...process.env, LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "warn" };
  const config = loadConfig({ env });
  await overhead(config);
  console.log("\ntime to the first sandbox run (solve --repo → baseline event), ms:");
  for (const ex of EXAMPLES) {
    const cold: number[] = [];
    for (let i = 0; i < COLD; i++) cold.push(await firstRun(ex, env));
    if (!cold.length) continue;
    console.log(
      `  ${ex.name.padEnd(15)} cold stack (NATS + 5 services started by the CLI): ${cold.map((x) => x.toFixed(0)).join(", ")}`,
    );
  }
  // A stack that stays up, on the scripted provider (the replies do not matter before the baseline).
  const scriptedEnv = {
    LOOPSMITH_DATA_DIR: dataDir,
    LOOPSMITH_PROVIDER: "scripted",
    LOOPSMITH_SCRIPT: join(REPO, "examples", "repo-bugfix", "script.json"),
  };
  const scripted = loadConfig({ env: { ...env, ...scriptedEnv } });
  const stack = await startLocalStack({ config: scripted, log: pino({ level: "warn" }), env: scriptedEnv });
  try {
    for (const ex of EXAMPLES) {
      const warm: number[] = [];
      for (let i = 0; i < 3; i++) warm.push(await firstRun(ex, { ...env, NATS_URL: stack.natsUrl }));
      console.log(
        `  ${ex.name.padEnd(15)} warm stack (NATS_URL set, services up): ${warm.map((x) => x.toFixed(0)).join(", ")}`,
      );
    }
  } finally {
    await stack.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
