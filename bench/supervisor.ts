/**
 * bench/supervisor: the CPU a sandbox run costs with the lean Python supervisor
 * (services/executor/src/bootstrap-python.ts) against the one it replaced
 * (bench/supervisor-legacy.ts reads it from git history: JSON, subprocess, threads), in one process, interleaved
 * (lean, legacy, legacy, lean, …), one run at a time.
 *
 * runs    N runs of each through the executor library's `Sandbox`: a container of the
 *         configured Python image with the pre-started pytest runner, then a HumanEval-like
 *         default pytest run (four tests, the verdict channel, the controller). Each container
 *         is created in a cgroup of its own (`CgroupParent`; cgroup v1 cpuacct, the cgroupfs
 *         driver), read once the container is removed: all the CPU it used from start to end.
 *         The legacy supervisor gets its old wire format (the same spec, as JSON).
 * starts  M starts of each supervisor alone, up to its first read of stdin (its program without
 *         the closing `main()`): the interpreter, the supervisor's imports and its set-up, beside
 *         `python3 -I -S -c pass`. Run in one container of each image by a driver that sums its
 *         children's rusage.
 * Prints means with 95% intervals (normal approximation) and the machine's load.
 * Usage: node --import tsx bench/supervisor.ts [--runs N] [--starts M]
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import Docker from "dockerode";
import { mean, sampleStandardDeviation } from "simple-statistics";
import { loadConfig } from "@loopsmith/shared/runtime";
import {
  loadSeccompProfile,
  prestartSpec,
  PYTEST_CONTROLLER,
  PYTEST_ISOLATED,
  RESULT_PATH,
  Sandbox,
  type SandboxSpec,
} from "@loopsmith/executor";
import { PYTHON_BOOTSTRAP } from "../services/executor/src/bootstrap.js";
import { legacyPythonBootstrap } from "./supervisor-legacy.js";
import { cpuTimes, machineLine, referenceMs } from "./machine.js";

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const RUNS = arg("--runs", 30);
const STARTS = arg("--starts", 30);
const VARIANTS = ["lean", "legacy"] as const;
type Variant = (typeof VARIANTS)[number];
const CGROUP = "/sys/fs/cgroup";
const LEGACY_PYTHON_BOOTSTRAP = legacyPythonBootstrap();

const SOLUTION = "def add(a, b):\n    return a + b\n";
const TESTS = `from solution import add

def test_small():
    assert add(1, 2) == 3

def test_negative():
    assert add(-1, -2) == -3

def test_zero():
    assert add(0, 0) == 0

def test_strings():
    assert add("a", "b") == "ab"
`;

/** The fields of a length-prefixed frame (bootstrap.ts `encodeFields`). */
function fieldsOf(b: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < b.length;) {
    const j = b.indexOf(0x3a, i);
    const n = Number(b.subarray(i, j).toString("ascii"));
    out.push(b.subarray(j + 1, j + 1 + n));
    i = j + 1 + n;
  }
  return out;
}

/** A run's frame for the lean supervisor, rewritten as the legacy one reads it (`<json length>\n<json><archive>`). */
function toLegacy(frame: Buffer): Buffer {
  const nl = frame.indexOf(0x0a);
  const n = Number(frame.subarray(0, nl).toString("ascii"));
  const f = fieldsOf(frame.subarray(nl + 1, nl + 1 + n));
  const wire: Record<string, unknown> = {};
  for (let i = 0; i < f.length; i += 2) {
    const key = (f[i] as Buffer).toString("utf8");
    const value = f[i + 1] as Buffer;
    const strings = (b: Buffer): string[] => fieldsOf(b).map((x) => x.toString("utf8"));
    if (["argv", "extract", "read", "drop"].includes(key)) wire[key] = strings(value);
    else if (key === "env") {
      const kv = strings(value);
      wire[key] = Object.fromEntries(kv.flatMap((k, j) => (j % 2 ? [] : [[k, kv[j + 1]]])));
    } else if (["resultLimitBytes", "uid", "deadlineMs", "archiveBytes"].includes(key)) wire[key] = Number(value);
    else wire[key] = value.toString("utf8");
  }
  const body = Buffer.from(JSON.stringify(wire), "utf8");
  return Buffer.concat([Buffer.from(`${body.length}\n`, "ascii"), body, frame.subarray(nl + 1 + n)]);
}

/** Docker, but every container is created in cgroup `parent`, and, for legacy, with the legacy supervisor and wire. */
function dockerFor(docker: Docker, variant: Variant, parent: string): Docker {
  const create = async (opts: Docker.ContainerCreateOptions): Promise<Docker.Container> => {
    const o: Docker.ContainerCreateOptions = { ...opts, HostConfig: { ...opts.HostConfig, CgroupParent: parent } };
    if (variant === "legacy") {
      const cmd = opts.Cmd as string[];
      o.Cmd = [...cmd.slice(0, 4), LEGACY_PYTHON_BOOTSTRAP];
      if (cmd.length > 5) o.Cmd.push(JSON.stringify(prestartSpec(opts.WorkingDir ?? "/workspace")));
    }
    const c = await docker.createContainer(o);
    if (variant === "legacy") {
      const attach = c.attach.bind(c) as (a: object) => Promise<Duplex>;
      (c as unknown as { attach: (a: object) => Promise<Duplex> }).attach = async (a) => {
        const s = await attach(a);
        const write = s.write.bind(s) as (chunk: Buffer) => boolean;
        (s as unknown as { write: (chunk: Buffer) => boolean }).write = (chunk) => write(toLegacy(chunk));
        return s;
      };
    }
    return c;
  };
  return new Proxy(docker, {
    get: (target, prop) =>
      prop === "createContainer"
        ? create
        : (Reflect.get(target, prop) as unknown) instanceof Function
          ? (Reflect.get(target, prop) as (...a: unknown[]) => unknown).bind(target)
          : Reflect.get(target, prop),
  });
}

/** CPU seconds charged to cgroup `parent` (cpuacct), then its folders removed. */
function drainCgroup(parent: string): number {
  const usage = Number(readFileSync(join(CGROUP, "cpuacct", parent, "cpuacct.usage"), "utf8")) / 1e9;
  for (const ctrl of readdirSync(CGROUP)) {
    try {
      rmdirSync(join(CGROUP, ctrl, parent));
    } catch {
      // a controller without the folder, or one of a joint mount already removed
    }
  }
  return usage;
}

/** One sandbox run with `variant`'s supervisor: the container's CPU seconds. */
async function oneRun(docker: Docker, spec: SandboxSpec, variant: Variant, n: number): Promise<number> {
  const parent = `loopsmith-bench-supervisor-${process.pid}-${variant}-${n}`;
  const sandbox = await Sandbox.create(dockerFor(docker, variant, parent), spec);
  try {
    const raw = await sandbox.run(
      {
        files: [
          { path: "solution.py", content: SOLUTION },
          { path: "test_solution.py", content: TESTS },
        ],
        argv: [...PYTEST_ISOLATED, ...PYTEST_CONTROLLER],
        env: { ...prestartSpec("/workspace").env, PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1" },
        resultPath: RESULT_PATH,
        resultLimitBytes: 1 << 20,
        verdictKey: randomBytes(32).toString("hex"),
      },
      { timeoutMs: 60_000, outputLimitBytes: 1 << 20, memoryBytes: spec.memoryBytes },
    );
    if (raw.trailer?.exitCode !== 0 || !raw.trailer.verdict)
      throw new Error(`${variant} run ${n} did not pass: ${JSON.stringify(raw.trailer)} ${raw.stderr.toString()}`);
  } finally {
    await sandbox.destroy();
  }
  return drainCgroup(parent);
}

const DRIVER = String.raw`
import resource, subprocess, sys
n = int(sys.argv[1])
progs = {k: open("/b/%s.py" % k).read() for k in ("lean", "legacy")}
progs = {k: v[: v.rindex("main()")] for k, v in progs.items()}
progs["bare"] = "pass"
cpu = {k: [] for k in progs}
for i in range(n):
    for k in (("lean", "legacy", "bare") if i % 2 == 0 else ("bare", "legacy", "lean")):
        b = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["python3", "-I", "-S", "-c", progs[k]], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        a = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[k].append(a.ru_utime - b.ru_utime + a.ru_stime - b.ru_stime)
print(sys.version.split()[0])
for k, v in cpu.items():
    print(k, " ".join("%.6f" % x for x in v))
`;

/** M starts of each supervisor in `image`: its python3's version and CPU seconds per start. */
function starts(image: string, m: number): { version: string; cpu: Record<Variant | "bare", number[]> } {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-bench-supervisor-"));
  chmodSync(dir, 0o755); // the image may run as another user
  try {
    writeFileSync(join(dir, "lean.py"), PYTHON_BOOTSTRAP);
    writeFileSync(join(dir, "legacy.py"), LEGACY_PYTHON_BOOTSTRAP);
    writeFileSync(join(dir, "driver.py"), DRIVER);
    const out = execFileSync(
      "docker",
      [
        "run",
        "--rm",
        "--network",
        "none",
        "-e",
        "LANG=C.UTF-8",
        "-v",
        `${dir}:/b:ro`,
        "--entrypoint",
        "python3",
        image,
        "/b/driver.py",
        String(m),
      ],
      { encoding: "utf8" },
    )
      .trim()
      .split("\n");
    const row = (k: Variant | "bare"): number[] =>
      (out.find((l) => l.startsWith(`${k} `)) ?? "").split(" ").slice(1).map(Number);
    return { version: out[0] ?? "?", cpu: { lean: row("lean"), legacy: row("legacy"), bare: row("bare") } };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `mean ± half-width` of a 95% interval (normal approximation), in ms. */
function interval(xs: number[]): string {
  const m = mean(xs) * 1000;
  const h = xs.length > 1 ? (1.96 * sampleStandardDeviation(xs) * 1000) / Math.sqrt(xs.length) : 0;
  return `${m.toFixed(1)} ± ${h.toFixed(1)} ms (n=${xs.length})`;
}

async function main(): Promise<void> {
  const config = loadConfig();
  const docker = new Docker();
  const cfg = config.executor;
  const spec: SandboxSpec = {
    image: config.images.python,
    kind: "python",
    memoryBytes: 512 * 1024 * 1024,
    cpus: cfg.cpus,
    pidsLimit: cfg.pidsLimit,
    tmpfsMb: cfg.tmpfsMb,
    labels: { "org.loopsmith.bench": "supervisor" },
    seccomp: loadSeccompProfile(cfg.seccompProfile),
    prestart: true,
    ...(cfg.runtime ? { runtime: cfg.runtime } : {}),
  };
  const refMs = referenceMs();
  const before = cpuTimes();
  const cpu: Record<Variant, number[]> = { lean: [], legacy: [] };
  await oneRun(docker, spec, "lean", -1); // warm-up: image pages and the engine's caches
  for (let i = 0; i < RUNS; i++) {
    for (const v of i % 2 === 0 ? VARIANTS : ([...VARIANTS].reverse() as Variant[]))
      cpu[v].push(await oneRun(docker, spec, v, i));
  }
  const swe = lookalike();
  const startRows = [config.images.python, ...(swe ? [swe] : [])].map((image) => ({ image, ...starts(image, STARTS) }));
  const after = cpuTimes();
  console.log(
    `bench/supervisor: ${RUNS} runs of each supervisor, interleaved, image ${config.images.python}, ${cfg.cpus} CPU per container`,
  );
  console.log("container CPU per run (cgroup cpuacct.usage, start to end):");
  for (const v of VARIANTS) console.log(`  ${v.padEnd(7)} ${interval(cpu[v])}`);
  const diff = cpu.legacy.map((x, i) => x - (cpu.lean[i] ?? 0));
  console.log(`  legacy - lean, paired: ${interval(diff)}`);
  for (const row of startRows) {
    console.log(`supervisor start to its first read (rusage), ${row.image} (python ${row.version}):`);
    for (const v of [...VARIANTS, "bare"] as const) console.log(`  ${v.padEnd(7)} ${interval(row.cpu[v])}`);
  }
  console.log(machineLine(refMs, before, after));
}

/** A SWE-bench look-alike instance image (Debian bookworm's python3), when one is built. */
function lookalike(): string | undefined {
  const images = execFileSync("docker", ["images", "--format", "{{.Repository}}:{{.Tag}}"], { encoding: "utf8" });
  return images.split("\n").find((l) => l.startsWith("swebench/sweb.eval.x86_64."));
}

await main();
