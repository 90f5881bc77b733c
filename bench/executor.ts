/**
 * bench/executor: wall time of one pytest run (a file with a few tests) several ways, side by
 * side in one process, interleaved round by round so drift hits every way alike:
 *   bare        `python3 -m pytest` on the host, in a temp folder (the interpreter, not a shim)
 *   bare-noplug the same with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 (the host may have many
 *               pytest plugins installed that the sandbox image does not; shown for honesty)
 *   bare-image  the sandbox image's own python3 and pytest (same versions, same plugins) as a
 *               plain host process: the image's files exported to a folder and run with
 *               chroot, no namespaces, no cgroups, no container. The like-for-like baseline
 *               (needs root; left out otherwise)
 *   docker-run  `docker run --rm` with the executor's limits, the file fed on stdin
 *   docker-exec `docker exec` into one long-lived container with the same limits
 *   executor-fresh the executor with its warm containers' pytest runner off: every command
 *               started afresh in its container (the baseline of the pre-started runner)
 *   executor    the executor (warm pool, a fresh container per run, pytest pre-started)
 * Prints p50/p95 (ms) and the ratio to bare, then executor runs per second at concurrency
 * 1, 2 and 4. Usage: node --import tsx bench/executor.ts [--rounds N] [--throughput-runs M]
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import pino from "pino";
import { quantile } from "simple-statistics";
import { loadConfig, type Config } from "@loopsmith/shared/runtime";
import { type ExecutionRequest } from "@loopsmith/shared/contracts";
import { createExecutor, PYTEST_ISOLATED } from "@loopsmith/executor";
import { formatTable } from "@loopsmith/cli/ui";
import { dockerRunLimits } from "./docker-run.js";

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const ROUNDS = arg("--rounds", 20);
const THROUGHPUT_RUNS = arg("--throughput-runs", 16);

const TEST_FILE = `
import math

def test_add():
    assert 1 + 1 == 2

def test_sqrt():
    assert math.isclose(math.sqrt(2) ** 2, 2)

def test_sorted():
    assert sorted([3, 1, 2]) == [1, 2, 3]

def test_strings():
    assert "loop" + "smith" == "loopsmith"
`;
// The executor's own pytest invocation (PYTEST_ISOLATED) without `--rootdir=/workspace`,
// which names a folder only the sandbox has: every way runs the same pytest work.
// Plugin autoloading off, as the executor runs a workspace whose files use no hypothesis
// (`defaultCommand`), so every way loads the same plugins.
const PYTEST = [
  "env",
  "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
  ...PYTEST_ISOLATED.filter((a) => !a.startsWith("--rootdir")),
];

const config: Config = loadConfig({ env: { ...process.env, NATS_URL: "" } });
const cfg = config.executor;
const image = config.images.python;
const LIMITS = dockerRunLimits(cfg, { tmpNoexec: true });

/** Runs a process to its end; resolves with its exit code. */
function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; input?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: [opts.input === undefined ? "ignore" : "pipe", "ignore", "pipe"],
    });
    let err = "";
    child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(code) : reject(new Error(`${cmd} exited ${code}: ${err.slice(0, 500)}`)),
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** The p-th percentile (0..100) of `xs` (simple-statistics' quantile), NaN when there are none. */
function pct(xs: number[], p: number): number {
  return xs.length ? quantile(xs, p / 100) : NaN;
}

let seq = 0;
function request(): ExecutionRequest {
  seq++;
  return {
    v: 1,
    taskId: "bench",
    iteration: seq,
    idempotencyKey: `bench/${seq}/execute`,
    language: "python",
    files: [{ path: "test_bench.py", content: TEST_FILE }],
    timeoutMs: 60_000,
    memoryMb: 512,
  };
}

async function main(): Promise<void> {
  const docker = new Docker();
  const log = pino({ level: "warn" });
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-bench-"));
  writeFileSync(join(dir, "test_bench.py"), TEST_FILE);
  const bareArgs = [...PYTEST.slice(3), `--junitxml=${join(dir, "junit.xml")}`];
  const rootfs = process.getuid?.() === 0 ? await exportImage(image) : null;
  const feed = `cat > /workspace/test_bench.py && exec ${PYTEST.join(" ")} --junitxml=/tmp/junit.xml`;

  // The long-lived container for docker exec.
  const longName = `loopsmith-bench-exec-${process.pid}`;
  await run("docker", [
    "run",
    "-d",
    "--name",
    longName,
    "--label",
    "org.loopsmith.bench=1",
    ...LIMITS,
    image,
    "sleep",
    "infinity",
  ]);
  const executor = createExecutor({ docker, config, log, kinds: ["python"] });
  const freshExecutor = createExecutor({ docker, config, log, kinds: ["python"], prestart: false });
  await Promise.all([executor.start(), freshExecutor.start()]);
  await Promise.all([executor.settled(), freshExecutor.settled()]);

  // The interpreter itself, not a version manager's shim script in front of it.
  const python = execFileSync("python3", ["-c", "import sys; print(sys.executable)"], { encoding: "utf8" }).trim();
  const ways: Record<string, () => Promise<unknown>> = {
    bare: () => run(python, bareArgs, { cwd: dir }),
    "bare-noplug": () =>
      run(python, bareArgs, { cwd: dir, env: { ...process.env, PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1" } }),
    ...(rootfs
      ? {
          "bare-image": () =>
            run("chroot", [
              rootfs,
              "/bin/sh",
              "-c",
              `cd /bench && exec ${PYTEST.join(" ")} --junitxml=/bench/junit.xml`,
            ]),
        }
      : {}),
    "docker-run": () => run("docker", ["run", "--rm", "-i", ...LIMITS, image, "sh", "-c", feed], { input: TEST_FILE }),
    "docker-exec": () =>
      run("docker", ["exec", "-i", "-w", "/workspace", longName, "sh", "-c", `rm -rf /workspace/* && ${feed}`], {
        input: TEST_FILE,
      }),
    "executor-fresh": async () => {
      const r = await freshExecutor.run(request());
      if (r.status !== "passed") throw new Error(`executor run ${r.status}: ${r.reason ?? r.stdout.slice(0, 300)}`);
    },
    executor: async () => {
      const r = await executor.run(request());
      if (r.status !== "passed") throw new Error(`executor run ${r.status}: ${r.reason ?? r.stdout.slice(0, 300)}`);
    },
  };
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  try {
    for (const fn of Object.values(ways)) await fn(); // warm-up: page cache, imports
    await Promise.all([executor.settled(), freshExecutor.settled()]);
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, fn] of Object.entries(ways)) {
        times[name]?.push(await timed(fn));
        // Let the pool refill between rounds, as it would between a task's iterations.
        if (name === "executor") await executor.settled();
        if (name === "executor-fresh") await freshExecutor.settled();
      }
    }
  } finally {
    await run("docker", ["rm", "-f", longName]).catch(() => undefined);
    await Promise.all([executor.stop(), freshExecutor.stop()]);
  }

  const bare50 = pct(times.bare ?? [], 50);
  const bare95 = pct(times.bare ?? [], 95);
  console.log(
    `bench/executor: ${ROUNDS} rounds, image ${image}, ${cfg.cpus} CPU per container, host has ${(await docker.info()).NCPU} CPUs`,
  );
  const rows = Object.entries(times).map(([name, xs]) => {
    const p50 = pct(xs, 50);
    const p95 = pct(xs, 95);
    return [name, p50.toFixed(0), p95.toFixed(0), (p50 / bare50).toFixed(2), (p95 / bare95).toFixed(2)];
  });
  for (const line of formatTable([["way", "p50 ms", "p95 ms", "p50/bare", "p95/bare"], ...rows], {
    align: ["left", "right", "right", "right", "right"],
  }))
    console.log(line);
  const ex50 = pct(times.executor ?? [], 50);
  const run50 = pct(times["docker-run"] ?? [], 50);
  console.log(`executor p50 / bare p50 = ${(ex50 / bare50).toFixed(2)} (target <= 1.3)`);
  console.log(`docker-run p50 / executor p50 = ${(run50 / ex50).toFixed(2)} (target >= 1.5)`);
  console.log(
    `executor-fresh p50 / executor p50 = ${(pct(times["executor-fresh"] ?? [], 50) / ex50).toFixed(2)} (what the pre-started pytest runner saves)`,
  );
  console.log(
    `executor p50 / bare-noplug p50 = ${(ex50 / pct(times["bare-noplug"] ?? [], 50)).toFixed(2)} (host pytest without plugins)`,
  );
  if (rootfs) {
    console.log(
      `executor p50 / bare-image p50 = ${(ex50 / pct(times["bare-image"] ?? [], 50)).toFixed(2)} (like for like: the image's python and pytest without a sandbox)`,
    );
  } else {
    console.log("bare-image left out: exporting the image and chroot need root");
  }

  for (const concurrency of [1, 2, 4]) {
    const ex = createExecutor({
      docker,
      config: { ...config, executor: { ...cfg, concurrency, warmPoolSize: concurrency, queueLimit: THROUGHPUT_RUNS } },
      log,
      kinds: ["python"],
    });
    await ex.start();
    await ex.settled();
    try {
      const t = performance.now();
      const results = await Promise.all(Array.from({ length: THROUGHPUT_RUNS }, () => ex.run(request())));
      const s = (performance.now() - t) / 1000;
      const bad = results.filter((r) => r.status !== "passed").length;
      console.log(
        `concurrency ${concurrency}: ${(THROUGHPUT_RUNS / s).toFixed(2)} runs/s (${THROUGHPUT_RUNS} runs in ${s.toFixed(1)} s${bad ? `, ${bad} not passed` : ""})`,
      );
    } finally {
      await ex.stop();
    }
  }
  rmSync(dir, { recursive: true, force: true });
  if (rootfs) rmSync(rootfs, { recursive: true, force: true });
}

/** Exports `image`'s files to a new folder with the bench test file in `/bench`; returns the folder. */
async function exportImage(image: string): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-bench-rootfs-"));
  const name = `loopsmith-bench-export-${process.pid}`;
  await run("docker", ["create", "--name", name, "--label", "org.loopsmith.bench=1", image, "true"]);
  try {
    await run("sh", ["-c", `docker export ${name} | tar -x -C ${root}`]);
  } finally {
    await run("docker", ["rm", "-f", name]).catch(() => undefined);
  }
  mkdirSync(join(root, "bench"), { recursive: true });
  writeFileSync(join(root, "bench", "test_bench.py"), TEST_FILE);
  return root;
}

await main();
