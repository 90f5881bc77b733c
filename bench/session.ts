/**
 * bench/session: agent mode's session tools end to end over the bus, against a
 * real NATS server and the real executor service on the local Docker engine. A session is
 * opened over a small repository snapshot (a Python package of `--files` modules), then the
 * session's calls interleaved round by round (so drift hits them alike), then the fresh runs:
 *   read     `read` of 40 lines of one module            (target p50 ≤ 30 ms)
 *   search   `search` for a regular expression, glob *.py (target p50 ≤ 30 ms)
 *   run      `run` of `true` in the session container     (target p50 ≤ 150 ms)
 *   fresh    `executor.run` of `true` (shell) over the same base: a fresh container from the
 *            warm pool, the workspace packed and extracted: the baseline a session saves
 * Each is one `call()` over NATS from this process, timed from the request to the parsed
 * reply. Prints p50/p95 (ms) beside the targets, and the machine's state (bench/machine.ts).
 * Usage: node --import tsx bench/session.ts [--rounds N] [--files M]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { connect } from "@nats-io/transport-node";
import pino from "pino";
import { pack } from "tar-stream";
import { quantile } from "simple-statistics";
import { Endpoints, call, onReplica, putSnapshot } from "@loopsmith/shared/bus";
import { loadConfig, runService } from "@loopsmith/shared/runtime";
import { snapshotName, type SessionCall } from "@loopsmith/shared/contracts";
import { executorService } from "@loopsmith/executor";
import { formatTable } from "@loopsmith/cli/ui";
import { startNats } from "../tests/fixtures/containers.js";
import { cpuTimes, machineLine, referenceMs } from "./machine.js";

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const ROUNDS = arg("--rounds", 60);
const FILES = arg("--files", 200);

/** A module of ~80 lines with a few functions, so search has matches to find in every file. */
function moduleText(i: number): string {
  const lines = [`"""Module ${i}."""`, "import math", ""];
  for (let f = 0; f < 10; f++) {
    lines.push(`def func_${i}_${f}(x, y):`, `    """Adds with a twist ${f}."""`, `    z = x + y * ${f}`);
    lines.push(`    return math.floor(z)`, "", "");
  }
  lines.push(`class Thing${i}:`, "    def __init__(self):", "        self.value = 0", "");
  return `${lines.join("\n")}\n`;
}

async function snapshot(): Promise<Buffer> {
  const tar = pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const c of tar) chunks.push(c as Buffer);
  })();
  tar.entry({ name: "pkg/__init__.py" }, "");
  for (let i = 0; i < FILES; i++) tar.entry({ name: `pkg/mod_${i}.py` }, moduleText(i));
  tar.entry({ name: "README.md" }, "# bench\n");
  tar.finalize();
  await done;
  return Buffer.concat(chunks);
}

const log = pino({ level: process.env.LOG_LEVEL ?? "warn" });
const refMs = referenceMs();
const nats = await startNats();
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-bench-session-"));
const nc = await connect({ servers: nats.url });
const config = {
  ...loadConfig({ env: { ...process.env, NATS_URL: nats.url, LOOPSMITH_CONFIG: "", LOOPSMITH_CONFIG_JSON: "" } }),
  natsUrl: nats.url,
  dataDir,
};
const running = await runService("executor", (deps) => executorService(deps), { config, log });
try {
  const commit = randomBytes(20).toString("hex");
  await putSnapshot(nc, snapshotName(commit), await snapshot());
  const base = { snapshot: snapshotName(commit), commit };
  const opened = await call(
    nc,
    Endpoints.executor.sessionOpen,
    {
      v: 1,
      taskId: "bench-session",
      iteration: 1,
      idempotencyKey: "bench-session/1/session_open",
      sessionId: "bench-session-1",
      language: "python",
      base,
      files: [],
      deleted: [],
      memoryMb: 512,
      timeoutMs: 30_000,
    },
    { timeoutMs: 120_000 },
  );
  console.log(
    `session opened on executor ${opened.executorId}: ${opened.files} files in ${Math.round(opened.durationMs)} ms`,
  );
  const callDef = onReplica(Endpoints.executor.sessionCall, opened.executorId);
  const tool = (c: SessionCall["call"]) =>
    call(nc, callDef, { v: 1, sessionId: opened.sessionId, call: c } as SessionCall, { timeoutMs: 60_000 });
  let seq = 0;
  const fresh = () =>
    call(
      nc,
      Endpoints.executor.run,
      {
        v: 1,
        taskId: "bench-session",
        iteration: ++seq,
        idempotencyKey: `bench-session/${seq}/execute`,
        language: "python",
        files: [],
        base: { ...base, deleted: [] },
        shell: "true",
        timeoutMs: 30_000,
        memoryMb: 512,
      },
      { timeoutMs: 120_000 },
    );
  const ways: Record<string, () => Promise<{ ok?: boolean; status?: string }>> = {
    read: () => tool({ tool: "read", path: `pkg/mod_${seq % FILES}.py`, startLine: 1, endLine: 40 }),
    search: () => tool({ tool: "search", pattern: "def func_\\d+_7\\(", glob: "*.py", maxResults: 100 }),
    run: () => tool({ tool: "run", command: "true" }),
    fresh: () => fresh(),
  };
  const times: Record<string, number[]> = { read: [], search: [], run: [], fresh: [] };
  // Warm-up: the first of each way pays one-off costs (JIT, the base tree's extraction).
  for (const way of Object.values(ways)) await way();
  const before = cpuTimes();
  // The session's calls interleaved round by round; the fresh runs after them, in a block: a
  // fresh run's container is removed and the warm pool refilled in the background, engine
  // work that would otherwise land on the next session call and not on the run that caused it.
  const session = Object.entries(ways).filter(([name]) => name !== "fresh");
  const measure = async (name: string, way: () => Promise<{ ok?: boolean; status?: string }>): Promise<void> => {
    const t = performance.now();
    const out = await way();
    times[name]?.push(performance.now() - t);
    if (out.ok === false || (out.status !== undefined && out.status !== "passed" && out.status !== "error"))
      throw new Error(`${name} failed: ${JSON.stringify(out).slice(0, 300)}`);
  };
  for (let r = 0; r < ROUNDS; r++) for (const [name, way] of session) await measure(name, way);
  for (let r = 0; r < ROUNDS; r++) await measure("fresh", ways.fresh as () => Promise<{ status?: string }>);
  const after = cpuTimes();
  const target: Record<string, string> = { read: "≤ 30", search: "≤ 30", run: "≤ 150", fresh: "baseline" };
  const rows = [["way", "p50 ms", "p95 ms", "target p50 ms"]];
  for (const [name, xs] of Object.entries(times))
    rows.push([name, quantile(xs, 0.5).toFixed(1), quantile(xs, 0.95).toFixed(1), target[name] ?? ""]);
  console.log(`\n${ROUNDS} rounds, ${FILES + 2} files in the tree, each call over NATS (request to parsed reply):`);
  for (const line of formatTable(rows, { align: ["left", "right", "right", "right"], indent: "  " })) console.log(line);
  const run50 = quantile(times.run as number[], 0.5);
  const fresh50 = quantile(times.fresh as number[], 0.5);
  console.log(`  a session run of true takes ${((100 * run50) / fresh50).toFixed(0)}% of a fresh-container run's time`);
  console.log(machineLine(refMs, before, after));
  await call(
    nc,
    onReplica(Endpoints.executor.sessionClose, opened.executorId),
    { v: 1, sessionId: opened.sessionId },
    { timeoutMs: 30_000 },
  );
} finally {
  await running.stop();
  await nc.close();
  await nats.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
