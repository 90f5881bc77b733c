/**
 * Helpers of the conductor tests: tasks, execution results, step functions that answer
 * from a list and count their calls, and reading a task's events to its result.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import pino from "pino";
import { DEFAULT_OWNER, followEvents, submitTask } from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  emptyUsage,
  type ExecutionResult,
  type TaskEvent,
  type TaskInput,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { startConductor, type Steps } from "@loopsmith/architect";

export const log = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
export const provider = { name: "test", model: "fake", scripted: true };
export const usage = (costUsd = 0.01, tokens = 100) => ({
  ...emptyUsage(),
  calls: 1,
  inputTokens: tokens,
  outputTokens: tokens,
  costUsd,
});
let n = 0;

export function task(over: Partial<TaskInput> = {}): TaskInput {
  n += 1;
  return {
    v: 1,
    taskId: `t-${Date.now().toString(36)}-${n}`,
    goal: "write add(a, b)",
    language: "python",
    files: [],
    acceptanceTests: [
      { path: "test_add.py", content: "from solution import add\ndef test_add():\n    assert add(2, 3) == 5\n" },
    ],
    submittedAt: new Date().toISOString(),
    ...over,
  };
}

export const failed = (msg = "AssertionError: assert -1 == 5"): ExecutionResult => ({
  status: "failed",
  exitCode: 1,
  durationMs: 5,
  stdout: "",
  stderr: "",
  truncated: false,
  tests: [{ name: "test_add", classname: "test_add", status: "failed", message: msg, durationMs: 1 }],
});
export const passed: ExecutionResult = {
  status: "passed",
  exitCode: 0,
  durationMs: 5,
  stdout: "",
  stderr: "",
  truncated: false,
  tests: [{ name: "test_add", classname: "test_add", status: "passed", durationMs: 1 }],
};

/** Steps whose executor answers from a list (last repeats) and which count calls. */
export function steps(executions: Array<ExecutionResult | "sandbox_error">, over: Partial<Steps> = {}) {
  const calls: Record<string, number> = {};
  const count = (k: string) => (calls[k] = (calls[k] ?? 0) + 1);
  let exec = 0;
  const s: Steps = {
    recall: async () => (count("recall"), { failures: [], successes: [], embedder: "test" }),
    plan: async () => (
      count("plan"),
      { value: { summary: "add", acceptanceCriteria: [], steps: [], files: ["solution.py"] }, usage: usage(), provider }
    ),
    build: async (req) => (
      count("build"),
      {
        value: {
          files: [{ path: "solution.py", content: `def add(a, b):\n    return a - b  # ${req.iteration}\n` }],
          tests: [],
          notes: "",
        },
        usage: usage(),
        provider,
      }
    ),
    gate: async () => (count("gate"), { blocked: false, findings: [] }),
    review: async () => (
      count("review"),
      { value: { approved: true, score: 1, findings: [] }, usage: usage(), provider }
    ),
    execute: async () => {
      count("execute");
      const r = executions[Math.min(exec++, executions.length - 1)] as ExecutionResult | "sandbox_error";
      return r === "sandbox_error" ? { ...failed(), status: "sandbox_error", tests: [], reason: "container died" } : r;
    },
    rememberFailure: async (req) => (
      count("rememberFailure"),
      { id: `f-${req.iteration}`, signature: "AssertionError: assert <num> == <num>" }
    ),
    attachFix: async (req) => (count("attachFix"), { id: req.failureId }),
    rememberSuccess: async () => (count("rememberSuccess"), { id: "s-1" }),
    recordTask: async () => (count("recordTask"), { id: "r-1" }),
    reflect: async () => (
      count("reflect"),
      { value: { rootCause: "subtracts", hypothesis: "add", fixPlan: "use +" }, usage: usage(), provider }
    ),
    tree: async (snapshot) => {
      throw new LoopsmithError("not_found", `no snapshot ${snapshot} in these tests`);
    },
    decompose: async () => {
      throw new LoopsmithError("internal", "no plan of subtasks in these tests");
    },
    reflectIntegration: async () => {
      throw new LoopsmithError("internal", "no integration reflection in these tests");
    },
    ...over,
  };
  return { steps: s, calls };
}

/** Every event of a task up to and including its result. */
export async function eventsOf(nc: NatsConnection, taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  for await (const e of followEvents(nc, DEFAULT_OWNER, taskId)) events.push(e);
  return events;
}

export async function runTask(
  nc: NatsConnection,
  input: TaskInput,
): Promise<{ result: TaskResult; events: TaskEvent[] }> {
  await submitTask(nc, input);
  const events = await eventsOf(nc, input.taskId);
  const last = events[events.length - 1];
  if (!last?.result) throw new Error("no result");
  return { result: last.result, events };
}

/** Runs `fn` with a conductor over `s` on its own connection to `url`; stops both after. */
export async function withConductor<T>(url: string, s: Steps, fn: (nc: NatsConnection) => Promise<T>): Promise<T> {
  const nc = await connect({ servers: url });
  const conductor = await startConductor({ nc, steps: s, log });
  try {
    return await fn(nc);
  } finally {
    await conductor.stop();
    await nc.close();
  }
}

/** Polls `done` every `everyMs` until it holds or `timeoutMs` passes (the caller asserts after). */
export async function until(done: () => boolean | Promise<boolean>, timeoutMs = 15_000, everyMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, everyMs));
}
