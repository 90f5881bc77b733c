/**
 * bench/suite: the pytest controller's cost on a real suite: more-itertools'
 * `tests/test_more.py` at the newest base commit of examples/swe-bench (a git bundle, checked
 * out in a temp folder; its tracked files only, no .git). Three ways, interleaved round by
 * round so drift hits every way alike, all in `loopsmith/sandbox-python:local` with the
 * executor's CPU limit:
 *   bare-image  `docker run --rm --network none` of the image, the files copied from a
 *               read-only mount into the tmpfs workspace, then the image's own
 *               `python3 -m pytest -q tests/test_more.py` with plugin autoloading off (the
 *               suite needs no plugin), timed inside the container by a small Python harness
 *               ({@link HARNESS}) around the pytest process, so container start is not counted
 *   controller  the same container and harness, pytest with `-p loopsmith_verdict` and a
 *               verdict channel made as the supervisor makes it (a pipe in
 *               `LOOPSMITH_VERDICT_FD`, the key in a read-only memfd in
 *               `LOOPSMITH_VERDICT_KEY_FD`); every record's HMAC is checked here and the `end`
 *               record must count the suite's tests, so a broken controller cannot be timed
 *   executor    the real executor (`createExecutor`, warm pool) running the line as repo mode
 *               does (`base` = the checkout, `shell` = the command): its `durationMs` (the
 *               command's wall time in the container, the supervisor's clock) and the host
 *               wall time of `executor.run`
 * Prints p50/p95 (ms) of each way, controller/bare-image and executor/bare-image against the
 * 1.2× target, the test counts each way reported, and the machine's state (bench/machine.ts).
 * `--deselect <node id>` (repeatable) adds pytest's `--deselect` to every way, e.g. for
 * `tests/test_more.py::TestConcurrentTee::test_concurrent_consumers`, 100 threads on one lock,
 * whose time under the CPU limit ranges from 1 s to a minute from run to run in any way.
 * Usage: node --import tsx bench/suite.ts [--rounds N] [--deselect <node id>]...   (default 5 rounds)
 */
import { execFileSync, spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import pino from "pino";
import { quantile } from "simple-statistics";
import { loadConfig, type Config } from "@loopsmith/shared/runtime";
import { testSummary, type ExecutionRequest } from "@loopsmith/shared/contracts";
import { createExecutor, type Executor } from "@loopsmith/executor";
import { formatTable } from "@loopsmith/cli/ui";
import { dockerRunLimits } from "./docker-run.js";
import { cpuTimes, machineLine, referenceMs } from "./machine.js";

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const ROUNDS = arg("--rounds", 5);
const DESELECT = process.argv.flatMap((a, i) =>
  a === "--deselect" && process.argv[i + 1] ? [process.argv[i + 1] as string] : [],
);
const REPO = new URL("../", import.meta.url).pathname;
const SWE = join(REPO, "examples", "swe-bench");
const BUNDLE = join(SWE, "repos", "more-itertools__more-itertools.bundle");
const DESELECT_ARGS = DESELECT.flatMap((id) => ["--deselect", id]);
const COMMAND = ["python3 -m pytest -q tests/test_more.py", ...DESELECT.map((id) => `--deselect '${id}'`)].join(" ");
const TARGET = 1.2;
const RUN_TIMEOUT_MS = 300_000;

/**
 * Runs inside the container: copies /src into the workspace, then times one pytest process
 * (`argv[1:]`) with the monotonic clock. With `BENCH_VERDICT_KEY` set it opens the verdict
 * channel as the supervisor does (services/executor/src/bootstrap.ts: a pipe, the key in a
 * read-only memfd) and collects what the controller writes on it. Prints one line:
 * `BENCH-RESULT {"ms", "exit", "summary", "channel"}` (channel base64).
 */
const HARNESS = `
import base64, json, os, shutil, subprocess, sys, threading, time
shutil.copytree("/src", "/workspace", dirs_exist_ok=True)
env = dict(os.environ)
key = env.pop("BENCH_VERDICT_KEY", "").encode()
fds, chunks = (), []
if key:
    vr, vw = os.pipe()
    w = os.memfd_create("loopsmith-verdict-key", os.MFD_CLOEXEC)
    os.write(w, key)
    kr = os.open("/proc/self/fd/%d" % w, os.O_RDONLY | os.O_CLOEXEC)
    os.close(w)
    fds = (vw, kr)
    env.update(LOOPSMITH_VERDICT_FD=str(vw), LOOPSMITH_VERDICT_KEY_FD=str(kr))
    def read():
        while True:
            b = os.read(vr, 65536)
            if not b:
                break
            chunks.append(b)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
start = time.monotonic_ns()
p = subprocess.Popen(sys.argv[1:], cwd="/workspace", env=env, stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, close_fds=True, pass_fds=fds)
for fd in fds:
    os.close(fd)
out = p.communicate()[0]
ms = (time.monotonic_ns() - start) / 1e6
if key:
    reader.join(10)
lines = out.decode("utf-8", "replace").strip().splitlines()
print("BENCH-RESULT " + json.dumps({"ms": ms, "exit": p.returncode, "summary": lines[-1] if lines else "",
      "tail": "\\n".join(lines[-15:]), "channel": base64.b64encode(b"".join(chunks)).decode()}))
`;

/** What one containerised run reported. */
interface HarnessResult {
  ms: number;
  exit: number;
  summary: string;
  tail: string;
  channel: string;
}

/** One timed run of a way: the time measured and the number of tests it reported. */
interface Sample {
  ms: number;
  tests: number;
  /** The executor's host wall time (executor way only). */
  wallMs?: number;
}

/** The p-th percentile (0..100) of `xs` (simple-statistics' quantile), NaN when there are none. */
const pct = (xs: number[], p: number): number => (xs.length ? quantile(xs, p / 100) : NaN);

/** Runs a process to its end; resolves with its exit code and stdout. */
function run(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, out: out + err }));
  });
}

/** The tests a pytest summary line counts (`586 passed, 2 skipped in 3.77s`). */
function countSummary(line: string): number {
  let n = 0;
  for (const m of line.matchAll(/(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)\b/g)) n += Number(m[1]);
  return n;
}

/** The newest instance's base commit (by `created_at`) from instances.jsonl. */
function newestBase(): { id: string; commit: string } {
  const rows = readFileSync(join(SWE, "instances.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as { instance_id: string; base_commit: string; created_at: string });
  rows.sort((a, b) => a.created_at.localeCompare(b.created_at));
  const last = rows[rows.length - 1];
  if (!last) throw new Error("examples/swe-bench/instances.jsonl has no instance");
  return { id: last.instance_id, commit: last.base_commit };
}

/** Clones the bundle, checks out `commit` and exports its tracked files to a new folder. */
function checkout(commit: string): string {
  const clone = mkdtempSync(join(tmpdir(), "loopsmith-bench-suite-git-"));
  const tree = mkdtempSync(join(tmpdir(), "loopsmith-bench-suite-"));
  try {
    execFileSync("git", ["clone", "-q", BUNDLE, clone]);
    execFileSync("git", ["-C", clone, "checkout", "-q", commit]);
    execFileSync("sh", ["-c", `git -C '${clone}' archive HEAD | tar -x -C '${tree}'`]);
  } finally {
    rmSync(clone, { recursive: true, force: true });
  }
  // Readable by the sandbox user (uid 10001) through the bind mount; mkdtemp makes 0700.
  execFileSync("chmod", ["-R", "a+rX", tree]);
  return tree;
}

/** The channel's records, each signature checked with `key`; throws on a bad one. */
function records(channel: string, key: string): Array<Record<string, unknown>> {
  const lines = Buffer.from(channel, "base64").toString("utf8").split("\n").filter(Boolean);
  return lines.map((line) => {
    const sp = line.indexOf(" ");
    const sig = line.slice(0, sp);
    const payload = line.slice(sp + 1);
    if (createHmac("sha256", key).update(payload).digest("hex") !== sig)
      throw new Error(`verdict record with a bad signature: ${line.slice(0, 200)}`);
    return JSON.parse(payload) as Record<string, unknown>;
  });
}

/** One containerised pytest run through {@link HARNESS}; `controller` adds the plugin and the channel. */
async function containerRun(
  tree: string,
  image: string,
  cfg: Config["executor"],
  controller: boolean,
): Promise<Sample> {
  const key = controller ? randomBytes(32).toString("hex") : "";
  const pytest = [
    "python3",
    "-m",
    "pytest",
    "-q",
    ...(controller ? ["-p", "loopsmith_verdict"] : []),
    "tests/test_more.py",
    ...DESELECT_ARGS,
  ];
  const { code, out } = await run("docker", [
    "run",
    "--rm",
    "-v",
    `${tree}:/src:ro`,
    "-e",
    "HOME=/tmp",
    "-e",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
    ...(controller ? ["-e", `BENCH_VERDICT_KEY=${key}`] : []),
    ...dockerRunLimits(cfg, { tmpNoexec: false }),
    image,
    "python3",
    "-c",
    HARNESS,
    ...pytest,
  ]);
  const line = out.split("\n").find((l) => l.startsWith("BENCH-RESULT "));
  if (code !== 0 || !line) throw new Error(`docker run exited ${code}: ${out.slice(-1500)}`);
  const r = JSON.parse(line.slice("BENCH-RESULT ".length)) as HarnessResult;
  const tests = countSummary(r.summary);
  if (r.exit !== 0 || tests === 0) throw new Error(`pytest exited ${r.exit} (${r.summary}):\n${r.tail}`);
  if (controller) {
    const recs = records(r.channel, key);
    const end = recs.find((x) => x.t === "end");
    if (!recs.some((x) => x.t === "start") || !end) throw new Error(`the controller sent no start or no end record`);
    const ended = Array.isArray(end.tests) ? end.tests.length : -1;
    const collected = Array.isArray(end.collected) ? end.collected.length : -1;
    if (ended !== tests || collected !== tests || end.exitstatus !== 0)
      throw new Error(
        `the end record counts ${ended} tests (${collected} collected, exit ${String(end.exitstatus)}), pytest said ${r.summary}`,
      );
  }
  return { ms: r.ms, tests };
}

/** The executor way: one repo-mode run of {@link COMMAND} over the checkout (`base`, no overlay). */
function executorWay(executor: Executor, commit: string): () => Promise<Sample> {
  let seq = 0;
  return async () => {
    seq++;
    const req: ExecutionRequest = {
      v: 1,
      taskId: "bench",
      iteration: seq,
      idempotencyKey: `bench/${seq}/execute`,
      language: "python",
      files: [],
      base: { snapshot: "more-itertools", commit, deleted: [] },
      shell: COMMAND,
      timeoutMs: RUN_TIMEOUT_MS,
      memoryMb: 512,
    };
    const t = performance.now();
    const r = await executor.run(req);
    const wallMs = performance.now() - t;
    if (r.status !== "passed")
      throw new Error(`executor run ${r.status}: ${r.reason ?? ""} ${r.stdout.slice(-1500)} ${r.stderr.slice(-500)}`);
    return { ms: r.durationMs, tests: testSummary(r).total, wallMs };
  };
}

/** Prints the table (p50, p95, ratio to bare-image, test counts), the ratios and every round's times. */
function report(samples: Record<string, Sample[]>): void {
  const ms = (name: string): number[] => (samples[name] ?? []).map((s) => s.ms);
  const counts = (name: string): string => [...new Set((samples[name] ?? []).map((s) => s.tests))].join(", ");
  const bare50 = pct(ms("bare-image"), 50);
  const wall = (samples.executor ?? []).map((s) => s.wallMs ?? NaN);
  const rows = [
    ["way", "p50 ms", "p95 ms", "p50 / bare-image", "tests"],
    ...[
      ["bare-image (pytest, timed in the container)", ms("bare-image"), counts("bare-image")] as const,
      ["controller (-p loopsmith_verdict, channel)", ms("controller"), counts("controller")] as const,
      ["executor: result.durationMs", ms("executor"), counts("executor")] as const,
      ["executor: host wall time of run()", wall, counts("executor")] as const,
    ].map(([name, xs, n]) => [
      name,
      pct(xs, 50).toFixed(0),
      pct(xs, 95).toFixed(0),
      `${(pct(xs, 50) / bare50).toFixed(2)}×`,
      n,
    ]),
  ];
  for (const line of formatTable(rows, { align: ["left", "right", "right", "right", "right"] })) console.log(line);
  const verdict = (r: number): string => `${r.toFixed(2)}× (target ≤ ${TARGET}×: ${r <= TARGET ? "met" : "NOT met"})`;
  console.log(`controller p50 / bare-image p50 = ${verdict(pct(ms("controller"), 50) / bare50)}`);
  console.log(`executor durationMs p50 / bare-image p50 = ${verdict(pct(ms("executor"), 50) / bare50)}`);
  for (const name of Object.keys(samples))
    console.log(
      `  ${name} each round, ms: ${ms(name)
        .map((x) => x.toFixed(0))
        .join(", ")}`,
    );
}

async function main(): Promise<void> {
  const refMs = referenceMs();
  const before = cpuTimes();
  const config = loadConfig({ env: { ...process.env, NATS_URL: "", LOG_LEVEL: "warn" } });
  const cfg = config.executor;
  const image = config.images.python;
  const base = newestBase();
  const tree = checkout(base.commit);
  const docker = new Docker();
  const executor = createExecutor({ docker, config, log: pino({ level: "warn" }), loadBase: async () => tree });
  await executor.start();
  await executor.settled();
  const ways: Record<string, () => Promise<Sample>> = {
    "bare-image": () => containerRun(tree, image, cfg, false),
    controller: () => containerRun(tree, image, cfg, true),
    executor: executorWay(executor, base.commit),
  };
  const samples: Record<string, Sample[]> = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  const started = Date.now();
  try {
    for (const fn of Object.values(ways)) await fn(); // warm-up: page cache, image layers, pool
    await executor.settled();
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, fn] of Object.entries(ways)) {
        samples[name]?.push(await fn());
        // Let the pool refill between rounds, as it would between a task's iterations.
        if (name === "executor") await executor.settled();
      }
    }
  } finally {
    await executor.stop();
    rmSync(tree, { recursive: true, force: true });
  }
  const after = cpuTimes();
  console.log(
    `bench/suite: ${COMMAND} of more-itertools at ${base.commit.slice(0, 7)} (${base.id}), ${ROUNDS} rounds, image ${image}, ${cfg.cpus} CPU per container, host has ${(await docker.info()).NCPU} CPUs`,
  );
  report(samples);
  console.log(`${machineLine(refMs, before, after)}; ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

await main();
