/**
 * Conductor + bus overhead per iteration: what loopsmith's own machinery (JetStream intake,
 * KV checkpoints after every step, progress events, step calls over NATS request/reply)
 * adds to one build → gate → execute → remember → reflect iteration, with every step
 * answering at once so nothing else is measured.
 *
 * Three set-ups, each running tasks of 1 iteration and of `--iterations` (failing until the
 * last, which passes), interleaved:
 * 1. baseline: `runLoop` in-process, checkpoints and events to memory (no NATS);
 * 2. conductor: the real conductor on NATS (intake, KV checkpoints, events), steps in-process;
 * 3. conductor + bus: as 2, with builder, reviewer, executor and memory steps answered by
 *    stub services over NATS request/reply (the services' real framing and validation).
 * Per iteration = (median of the long tasks − median of the 1-iteration tasks) / (iterations
 * − 1): the slope, without what a task pays once (intake, result, watching its events).
 * Overhead = a set-up's slope − the baseline's. Tasks run one at a time. NATS is the locally
 * built image (testcontainers, removed at the end). Then the machine's state over the run
 * (bench/machine.ts): runs on this shared machine moved from 19 to 42 ms and back.
 *
 * Usage: npm run --silent bench:overhead -- [--tasks 20] [--iterations 5]
 */
import { Command } from "commander";
import pino from "pino";
import { median } from "simple-statistics";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import {
  DEFAULT_OWNER,
  Endpoints,
  ensureStreams,
  followEvents,
  handle,
  startService,
  submitTask,
} from "@loopsmith/shared/bus";
import { Task, emptyUsage, type ExecutionResult, type TaskEvent, type TaskInput } from "@loopsmith/shared/contracts";
import { loadConfig } from "@loopsmith/shared/runtime";
import {
  busSteps,
  initialState,
  runLoop,
  startConductor,
  type Planner,
  type Steps,
  type TaskState,
} from "@loopsmith/architect";
import { startNats } from "../tests/fixtures/containers.js";
import { cpuTimes, machineLine, referenceMs } from "./machine.js";

const program = new Command()
  .option("--tasks <n>", "tasks per run (one at a time)", (v) => Number(v), 20)
  .option("--iterations <n>", "iterations of the long tasks (the last passes), at least 2", (v) => Number(v), 6)
  .parse(process.argv);
const opts = program.opts<{ tasks: number; iterations: number }>();
const log = pino({ level: "silent" });
const provider = { name: "bench", model: "instant", scripted: true };
const usage = { ...emptyUsage(), calls: 1, inputTokens: 10, outputTokens: 10 };

const failed: ExecutionResult = {
  status: "failed",
  exitCode: 1,
  durationMs: 1,
  stdout: "",
  stderr: "",
  truncated: false,
  tests: [
    {
      name: "test_add",
      classname: "test_add",
      status: "failed",
      message: "AssertionError: assert -1 == 5",
      durationMs: 1,
    },
  ],
};
const passed: ExecutionResult = {
  ...failed,
  status: "passed",
  exitCode: 0,
  tests: [{ name: "test_add", classname: "test_add", status: "passed", durationMs: 1 }],
};

let seq = 0;
/** Iterations of each task by id (the stub executor passes a task's last one). */
const lengths = new Map<string, number>();
function task(iterations: number): TaskInput {
  seq += 1;
  const taskId = `ovh-${process.pid}-${seq}`;
  lengths.set(taskId, iterations);
  return {
    v: 1,
    taskId,
    goal: "write add(a, b)",
    language: "python",
    files: [],
    acceptanceTests: [
      { path: "test_add.py", content: "from solution import add\ndef test_add():\n    assert add(2, 3) == 5\n" },
    ],
    limits: { maxIterations: iterations, stuckAfter: 20 },
    submittedAt: new Date().toISOString(),
  };
}

/** Answers every step at once; execution fails until the task's last iteration. */
const instant = {
  plan: async () => ({
    value: { summary: "add", acceptanceCriteria: [], steps: [], files: ["solution.py"] },
    usage,
    provider,
  }),
  reflect: async () => ({ value: { rootCause: "subtracts", hypothesis: "add", fixPlan: "use +" }, usage, provider }),
  build: async (req: { iteration: number }) => ({
    value: {
      files: [{ path: "solution.py", content: `def add(a, b):\n    return a - b  # ${req.iteration}\n` }],
      tests: [],
      notes: "",
    },
    usage,
    provider,
  }),
  gate: async () => ({ blocked: false, findings: [] }),
  review: async () => ({ value: { approved: true, score: 1, findings: [] }, usage, provider }),
  execute: async (req: { taskId: string; iteration: number }) =>
    req.iteration >= (lengths.get(req.taskId) ?? 1) ? passed : failed,
  recall: async () => ({ failures: [], successes: [], embedder: "bench" }),
  rememberFailure: async (req: { iteration: number }) => ({
    id: `f-${req.iteration}`,
    signature: "AssertionError: assert <num> == <num>",
  }),
  attachFix: async (req: { failureId: string }) => ({ id: req.failureId }),
  rememberSuccess: async () => ({ id: "s-1" }),
  recordTask: async (req: { taskId: string }) => ({ id: req.taskId }),
};
const inProcess = { ...instant, tree: async () => "/nonexistent" } as unknown as Steps;

/** One task through `runLoop` with in-memory I/O; wall time in ms. */
async function baselineTask(iterations: number): Promise<number> {
  const t0 = performance.now();
  let state: TaskState = initialState(Task.parse(task(iterations)));
  const events: TaskEvent[] = [];
  state = await runLoop(state, inProcess, {
    checkpoint: async (s) => void (state = s),
    emit: async (e) => void events.push(e),
    heartbeat: () => undefined,
    cancelled: () => false,
    stopping: () => false,
    log,
  });
  if (state.result?.status !== "passed" || state.iteration !== iterations)
    throw new Error(`baseline task ended ${state.result?.status} after ${state.iteration}`);
  return performance.now() - t0;
}

/** One task submitted to the conductor, to its result event; wall time in ms. */
async function conductorTask(nc: NatsConnection, iterations: number): Promise<number> {
  const input = task(iterations);
  const t0 = performance.now();
  await submitTask(nc, input);
  // An ordered consumer on the task's events, as the services follow them. (A client's
  // watchEvents first asks the architect's `events` endpoint, which this bench does not
  // serve: each task waited out that call, ~250 ms, and every task timed the same.)
  const abort = new AbortController();
  try {
    for await (const e of followEvents(nc, DEFAULT_OWNER, input.taskId, abort.signal)) {
      if (e.kind !== "result") continue;
      if (e.result?.status !== "passed" || e.result.iterations !== iterations)
        throw new Error(`task ended ${e.result?.status} after ${e.result?.iterations}`);
      break;
    }
  } finally {
    abort.abort();
  }
  return performance.now() - t0;
}

/** Stub builder, reviewer, executor and memory services answering over NATS. */
async function stubServices(nc: NatsConnection): Promise<void> {
  const m = Endpoints.memory;
  const defs = [
    { name: "builder", regs: [handle(Endpoints.builder.build, instant.build)] },
    {
      name: "reviewer",
      regs: [handle(Endpoints.reviewer.gate, instant.gate), handle(Endpoints.reviewer.review, instant.review)],
    },
    { name: "executor", regs: [handle(Endpoints.executor.run, instant.execute)] },
    {
      name: "memory",
      regs: [
        handle(m.recall, instant.recall),
        handle(m.rememberFailure, instant.rememberFailure),
        handle(m.attachFix, instant.attachFix),
        handle(m.rememberSuccess, instant.rememberSuccess),
        handle(m.recordTask, instant.recordTask),
      ],
    },
  ];
  for (const d of defs)
    await startService(nc, {
      name: d.name,
      version: "0.0.0",
      description: `bench stub ${d.name}`,
      log,
      registrations: d.regs,
    });
}

/** Runs short and long tasks interleaved; prints and returns the per-iteration slope in ms. */
async function runs(what: string, one: (iterations: number) => Promise<number>): Promise<number> {
  await one(1); // warm-up (JIT, streams, consumers)
  await one(opts.iterations);
  const short: number[] = [];
  const long: number[] = [];
  for (let i = 0; i < opts.tasks; i++) {
    short.push(await one(1));
    long.push(await one(opts.iterations));
  }
  const slope = (median(long) - median(short)) / (opts.iterations - 1);
  process.stdout.write(
    `${what.padEnd(16)} median ${median(short).toFixed(1).padStart(7)} ms (1 iteration), ${median(long).toFixed(1).padStart(7)} ms (${opts.iterations}): ${slope.toFixed(1).padStart(5)} ms an iteration\n`,
  );
  return slope;
}

const refMs = referenceMs();
const cpuAtStart = cpuTimes();
const nats = await startNats();
try {
  process.stdout.write(
    `${opts.tasks} tasks of 1 and ${opts.tasks} of ${opts.iterations} iterations, one at a time; steps answer at once\n`,
  );
  const base = await runs("baseline", baselineTask);
  const config = loadConfig({ env: { NATS_URL: nats.url, DATABASE_URL: "" } });
  const ncA = await connect({ servers: nats.url });
  await ensureStreams(ncA);
  const c1 = await startConductor({ nc: ncA, steps: inProcess, log, concurrency: 1 });
  const conductor = await runs("conductor", (n) => conductorTask(ncA, n));
  await c1.stop();
  const ncS = await connect({ servers: nats.url });
  await stubServices(ncS);
  const planner = { plan: instant.plan, reflect: instant.reflect } as unknown as Planner;
  const c2 = await startConductor({ nc: ncA, steps: busSteps(ncA, config, planner), log, concurrency: 1 });
  const bus = await runs("conductor + bus", (n) => conductorTask(ncA, n));
  await c2.stop();
  await ncS.close();
  await ncA.close();
  const per = (t: number): string => (t - base).toFixed(1);
  process.stdout.write(
    `overhead per iteration over the baseline: conductor ${per(conductor)} ms, conductor + bus ${per(bus)} ms (target ≤ 20 ms)\n`,
  );
  process.stdout.write(`${machineLine(refMs, cpuAtStart, cpuTimes())}\n`);
} finally {
  await nats.stop();
}
