/**
 * Agent mode in the conductor, on real NATS JetStream: the model's turns come
 * from a stand-in builder serving `loopsmith.builder.turn`, and the session from a stand-in
 * executor serving `session_open` on the queue group and `session_call` / `session_close`
 * on its own replica subject, both over the real bus with the real contracts (the real
 * builder and executor sides are built elsewhere). The verdict's sandbox is a function, as
 * in repo.test.ts.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Endpoints, ServiceNames, call, handle, onReplica, startService, submitTask } from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  type AgentTurnReply,
  type AgentTurnRequest,
  type ExecutionRequest,
  type ExecutionResult,
  type SessionCall,
  type SessionOpen,
  type TaskEvent,
  type TaskInput,
  type AgentMessage,
  type ToolCall,
} from "@loopsmith/shared/contracts";
import { startConductor, type Steps } from "@loopsmith/architect";
import { readTranscript, transcriptSteps, type RecordedStep } from "../../cli/src/transcript-record.js";
import { it } from "../fixtures/index.js";
import { eventsOf, failed, log, passed, runTask, steps, task, usage } from "./helpers.js";

const COMMIT = "b".repeat(40);
const BASE: Record<string, string> = {
  "pkg/__init__.py": "",
  "pkg/mod.py": "def answer():\n    return 41\n",
  "tests/test_mod.py": "from pkg.mod import answer\n\ndef test_answer():\n    assert answer() == 42\n",
};
const EXECUTOR_ID = "exec1";
const provider = { name: "test", model: "m", scripted: true };

function tree(files: Record<string, string> = BASE): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-agent-"));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

function agentTask(over: Partial<TaskInput> = {}): TaskInput {
  return task({
    goal: "make test_answer pass",
    acceptanceTests: [],
    repo: {
      baseCommit: COMMIT,
      snapshot: `tree-${COMMIT}.tar`,
      testCommand: "python3 -m pytest -q",
      setupCommand: "",
      mode: "agent",
    },
    ...over,
  });
}

/** An endpoint on one replica's subject. */

const tc = (name: string, args: Record<string, unknown>, n = 0): ToolCall => ({ id: `call_${name}_${n}`, name, args });
const say = (calls: ToolCall[], content = "", costUsd = 0.01): AgentTurnReply => ({
  content,
  toolCalls: calls,
  usage: usage(costUsd),
  provider,
});

/** The stand-in executor's record: sessions opened, calls, closes. */
interface ExecutorLog {
  opens: SessionOpen[];
  calls: SessionCall[];
  closes: string[];
}

/**
 * A stand-in executor over an in-memory tree per session: `run` passes when pkg/mod.py
 * returns 42. `loseSessionAtCall` (1-based) answers that call `not_found` once, as a replica
 * that restarted would.
 */
async function fakeExecutor(nc: NatsConnection, opts: { loseSessionAtCall?: number } = {}) {
  const sessions = new Map<string, Map<string, string>>();
  const rec: ExecutorLog = { opens: [], calls: [], closes: [] };
  const service = await startService(nc, {
    name: ServiceNames.executor,
    version: "0.0.0",
    description: "test executor",
    log,
    registrations: [
      handle(Endpoints.executor.sessionOpen, async (req) => {
        rec.opens.push(req);
        const files = new Map(Object.entries(BASE));
        for (const f of req.files) files.set(f.path, f.content);
        for (const p of req.deleted) files.delete(p);
        sessions.set(req.sessionId, files);
        return { sessionId: req.sessionId, executorId: EXECUTOR_ID, files: files.size, durationMs: 1 };
      }),
      handle(onReplica(Endpoints.executor.sessionCall, EXECUTOR_ID), async (req) => {
        rec.calls.push(req);
        if (rec.calls.length === opts.loseSessionAtCall) {
          sessions.delete(req.sessionId);
          throw new LoopsmithError("not_found", `no session ${req.sessionId}`);
        }
        const files = sessions.get(req.sessionId);
        if (!files) throw new LoopsmithError("not_found", `no session ${req.sessionId}`);
        const c = req.call;
        const o = (output: string, ok = true) => ({ output, ok, totalBytes: Buffer.byteLength(output), durationMs: 1 });
        switch (c.tool) {
          case "list":
            return o([...files.keys()].sort().join("\n"));
          case "read": {
            const text = files.get(c.path);
            if (text === undefined) return o(`no such file: ${c.path}`, false);
            const lines = text.split("\n");
            const from = c.startLine ?? 1;
            const to = Math.min(c.endLine ?? lines.length, lines.length);
            return {
              ...o(
                lines
                  .slice(from - 1, to)
                  .map((l, i) => `${from + i}: ${l}`)
                  .join("\n"),
              ),
              total: lines.length,
            };
          }
          case "search": {
            const re = new RegExp(c.pattern);
            const hits = [...files].flatMap(([p, t]) =>
              t.split("\n").flatMap((l, i) => (re.test(l) ? [`${p}:${i + 1}: ${l}`] : [])),
            );
            return { ...o(hits.join("\n")), total: hits.length };
          }
          case "run": {
            const ok = (files.get("pkg/mod.py") ?? "").includes("return 42");
            const out = ok ? "1 passed" : "FAILED tests/test_mod.py::test_answer - assert 41 == 42\n1 failed";
            return { ...o(out, ok), exitCode: ok ? 0 : 1 };
          }
          case "write":
            for (const f of c.files) files.set(f.path, f.content);
            for (const p of c.deleted) files.delete(p);
            return o(`wrote ${c.files.length} files`);
        }
      }),
      handle(onReplica(Endpoints.executor.sessionClose, EXECUTOR_ID), async (req) => {
        rec.closes.push(req.sessionId);
        return { closed: sessions.delete(req.sessionId) };
      }),
    ],
  });
  return { rec, stop: () => service.stop() };
}

/** A stand-in builder answering each turn with `reply(request)`. */
async function fakeBuilder(
  nc: NatsConnection,
  reply: (req: AgentTurnRequest) => Promise<AgentTurnReply> | AgentTurnReply,
) {
  const turns: AgentTurnRequest[] = [];
  const service = await startService(nc, {
    name: ServiceNames.builder,
    version: "0.0.0",
    description: "test builder",
    log,
    registrations: [
      handle(Endpoints.builder.turn, async (req) => {
        turns.push(req);
        return reply(req);
      }),
    ],
  });
  return { turns, stop: () => service.stop() };
}

/** Steps whose turns and session calls go over the bus; the verdict passes when pkg/mod.py returns 42. */
function agentSteps(nc: NatsConnection, root: string, over: Partial<Steps> = {}) {
  const base = steps([failed()]);
  const runs: ExecutionRequest[] = [];
  const s: Steps = {
    ...base.steps,
    tree: async () => root,
    execute: async (req): Promise<ExecutionResult> => {
      runs.push(req);
      const mod = req.files.find((f) => f.path === "pkg/mod.py")?.content ?? BASE["pkg/mod.py"] ?? "";
      return mod.includes("return 42") ? passed : failed("AssertionError: assert 41 == 42");
    },
    turn: (req) => call(nc, Endpoints.builder.turn, req, { timeoutMs: 20_000, retries: 0 }),
    openSession: (req) => call(nc, Endpoints.executor.sessionOpen, req, { timeoutMs: 10_000 }),
    sessionCall: (id, req) =>
      call(nc, onReplica(Endpoints.executor.sessionCall, id), req, { timeoutMs: 10_000, retries: 0 }),
    closeSession: (id, req) =>
      call(nc, onReplica(Endpoints.executor.sessionClose, id), req, { timeoutMs: 10_000, retries: 0 }),
    ...over,
  };
  return { steps: s, calls: base.calls, runs };
}

/** The run's steps as `show` reads them: from the messages its events carry. */
const transcript = (events: TaskEvent[]): RecordedStep[] => transcriptSteps(events);

/** Every message the run's events published, in order (each turn's once). */
const published = (events: TaskEvent[]): AgentMessage[] => readTranscript(events).turns.flatMap((t) => t.messages);

const fix = { path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" };

/** Runs `input` on a conductor over `s` with the stand-ins; stops everything after. */
async function withAgent<T>(
  url: string,
  reply: (req: AgentTurnRequest) => Promise<AgentTurnReply> | AgentTurnReply,
  fn: (ctx: {
    nc: NatsConnection;
    ex: ExecutorLog;
    turns: AgentTurnRequest[];
    r: ReturnType<typeof agentSteps>;
  }) => Promise<T>,
  opts: { loseSessionAtCall?: number; over?: Partial<Steps> } = {},
): Promise<T> {
  const nc = await connect({ servers: url });
  const ex = await fakeExecutor(nc, opts);
  const builder = await fakeBuilder(nc, reply);
  const r = agentSteps(nc, tree(), opts.over);
  const conductor = await startConductor({ nc, steps: r.steps, log });
  try {
    return await fn({ nc, ex: ex.rec, turns: builder.turns, r });
  } finally {
    await conductor.stop();
    await builder.stop();
    await ex.stop();
    await nc.close();
  }
}

describe("agent mode in the conductor", () => {
  it("runs a scripted transcript (search → read → run → edit → submit) to a passing verdict, reopening a lost session", async ({
    nats,
  }) => {
    const script = [
      say([tc("search", { pattern: "return 41" })], "where is the answer?"),
      say([tc("read", { path: "pkg/mod.py" })]),
      say([tc("run", { command: "python3 -m pytest -q" })]),
      say([tc("edit", { edits: [fix] })]),
      say([tc("submit", { summary: "answer 42" })]),
    ];
    await withAgent(
      nats.url,
      (req) => script[req.callsBefore ?? 0] ?? say([]),
      async ({ nc, ex, turns, r }) => {
        const { result, events } = await runTask(nc, agentTask());
        expect(result.status).toBe("passed");
        expect(result.iterations).toBe(1);
        const steps = transcript(events);
        expect(steps.map((t) => t.tool)).toEqual(["search", "read", "run", "edit", "submit"]);
        expect(steps.map((t) => t.step)).toEqual([1, 2, 3, 4, 5]);
        expect(steps[0]?.thought).toBe("where is the answer?");
        expect(steps[1]?.observation).toContain("2:     return 41");
        expect(steps[2]).toMatchObject({ isError: true });
        expect(steps[2]?.observation).toMatch(/^exit code 1\nFAILED/);
        expect(steps[3]?.observation).toContain("+    return 42");
        expect(steps[0]?.tokens).toBe(200);
        expect(steps[0]?.costUsd).toBeCloseTo(0.01);
        // The model saw its own conversation grow, one assistant message and one tool message a step.
        expect(turns.map((t) => t.messages.length)).toEqual([0, 2, 4, 6, 8]);
        // The events published exactly the conversation the model was sent, and the last turn's messages after it.
        expect(published(events).slice(0, 8)).toEqual(turns[4]?.messages);
        expect(
          published(events)
            .slice(8)
            .map((m) => m.role),
        ).toEqual(["assistant", "tool"]);
        expect(events.some((e) => e.data?.agentStep !== undefined)).toBe(false);
        expect(turns.map((t) => t.callsBefore)).toEqual([0, 1, 2, 3, 4]);
        expect(turns.map((t) => t.stepsLeft)).toEqual([40, 39, 38, 37, 36]);
        expect(turns[0]?.task.repo?.map).toContain("pkg/mod.py");
        expect(turns[0]?.task.repo?.files).toEqual([]);
        expect(new Set(turns.map((t) => t.idempotencyKey)).size).toBe(5);
        // No plan in agent mode.
        expect(r.calls.plan).toBeUndefined();
        // The read (2nd session call) found the session gone: it was opened again and the read sent again.
        expect(ex.opens).toHaveLength(2);
        expect(events.some((e) => e.kind === "warning" && e.message.includes("opening the session again"))).toBe(true);
        // The accepted edit was written to the session, and the session closed when the loop ended.
        const write = ex.calls.find((c) => c.call.tool === "write");
        expect(write?.call).toMatchObject({
          files: [{ path: "pkg/mod.py", content: "def answer():\n    return 42\n" }],
        });
        expect(ex.closes).toEqual([ex.opens[0]?.sessionId]);
        // The verdict is the fresh sandbox run of the candidate's tree.
        expect(r.runs.at(-1)?.files).toEqual([{ path: "pkg/mod.py", content: "def answer():\n    return 42\n" }]);
        expect(result.repo?.summary).toBe("answer 42");
        expect(result.repo?.patch).toContain("+    return 42");
      },
      { loseSessionAtCall: 2 },
    );
  });

  it("redirects an agent that repeats a call three times and stops it with agent_stuck when it goes on", async ({
    nats,
  }) => {
    await withAgent(
      nats.url,
      () => say([tc("read", { path: "pkg/mod.py" })]),
      async ({ nc, ex, turns }) => {
        const { result, events } = await runTask(nc, agentTask());
        expect(result.status).toBe("failed");
        expect(result.stopReason).toBe("agent_stuck");
        expect(result.message).toMatch(/repeated itself after it was redirected/);
        const steps = transcript(events);
        expect(steps.map((t) => t.stuck)).toEqual([
          undefined,
          undefined,
          { rule: "repeat_call", action: "redirect" },
          { rule: "repeat_call", action: "stop" },
        ]);
        expect(turns).toHaveLength(4);
        // The fourth turn saw the redirect after the third read's observation.
        const last = turns[3]?.messages.at(-1);
        expect(last).toMatchObject({ role: "user" });
        expect((last as { content: string }).content).toMatch(/called read with the same arguments 3 times/);
        // The redirect was published with the turn it followed, as part of the conversation.
        expect(published(events).slice(0, turns[3]?.messages.length)).toEqual(turns[3]?.messages);
        expect(ex.closes).toHaveLength(1);
      },
    );
  });

  it("stops with budget before the turn that would pass the task's budget", async ({ nats }) => {
    let n = 0;
    await withAgent(
      nats.url,
      // Each turn costs $0.01 and reads other lines (no stuck rule).
      () => say([tc("read", { path: "pkg/mod.py", startLine: 1, endLine: ++n })]),
      async ({ nc, ex, turns }) => {
        const input = agentTask();
        const { result } = await runTask(nc, { ...input, limits: { maxCostUsd: 0.035 } });
        expect(result.stopReason).toBe("budget");
        // Three turns ($0.03) were paid; the fourth would have passed $0.035, so it was never asked.
        expect(turns).toHaveLength(3);
        expect(result.usage.total.costUsd).toBeCloseTo(0.03);
        expect(result.usage.total.costUsd).toBeLessThanOrEqual(0.035);
        expect(result.message).toBe(
          "stopped: the task's USD budget would be passed ($0.0050 left): the next model turn could cost up to $0.0100 (as much as the last turn)",
        );
        expect(ex.closes).toHaveLength(1);
      },
    );
  });

  it("refuses an edit that breaks parsing with the parser's message, answers bad arguments with an error, and goes on", async ({
    nats,
  }) => {
    const script = [
      say([tc("read", {}), tc("open_file", { path: "x" }, 1), tc("list", { _unparsed: "{path: oops" }, 2)]),
      say([tc("edit", { edits: [{ path: "pkg/mod.py", search: "def answer():", replace: "def answer(:" }] })]),
      say([tc("edit", { edits: [{ path: "conftest.py", search: "", replace: "import pytest\n" }] })]),
      say([tc("edit", { edits: [fix] })]),
      say([tc("submit", { summary: "answer 42" })]),
    ];
    await withAgent(
      nats.url,
      (req) => script[req.callsBefore ?? 0] ?? say([]),
      async ({ nc, ex, turns }) => {
        const { result, events } = await runTask(nc, agentTask());
        expect(result.status).toBe("passed");
        const steps = transcript(events);
        expect(steps.map((t) => [t.tool, t.isError])).toEqual([
          ["read", true],
          ["open_file", true],
          ["list", true],
          ["edit", true],
          ["edit", true],
          ["edit", false],
          ["submit", false],
        ]);
        expect(steps[0]?.observation).toMatch(/the arguments of read are not valid/);
        expect(steps[0]?.observation).toMatch(/path/);
        expect(steps[1]?.observation).toMatch(/unknown tool "open_file"/);
        // Argument text a provider could not read as JSON is refused, not taken as a `list` of ".".
        expect(steps[2]?.observation).toMatch(/not a JSON object: \{path: oops/);
        expect(steps[3]?.observation).toMatch(/no longer parses/);
        expect(steps[3]?.observation).toMatch(/pkg\/mod\.py:1:\d+: /);
        expect(steps[4]?.observation).toMatch(/conftest\.py.*test runner/);
        // The model saw the refusal as an error tool message with the same text.
        const refused = turns[2]?.messages.at(-1);
        expect(ex.calls.some((c) => c.call.tool === "list")).toBe(false);
        expect(refused).toMatchObject({ role: "tool", isError: true });
        // Only the accepted edit reached the session.
        expect(ex.calls.filter((c) => c.call.tool === "write")).toHaveLength(1);
        expect(result.repo?.changed).toEqual(["pkg/mod.py"]);
      },
    );
  });

  it("resumes mid-loop after the conductor stops, from the checkpointed step, redoing none", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const ex = await fakeExecutor(nc);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let holding!: () => void;
    const reached = new Promise<void>((r) => (holding = r));
    const script = [
      say([tc("search", { pattern: "answer" })]),
      say([tc("read", { path: "pkg/mod.py" })]),
      say([tc("run", { command: "python3 -m pytest -q" })]),
      say([tc("edit", { edits: [fix] })]),
      say([tc("submit", { summary: "answer 42" })]),
    ];
    const builder = await fakeBuilder(nc, async (req) => {
      if (req.callsBefore === 2) {
        holding();
        await held;
      }
      return script[req.callsBefore ?? 0] ?? say([]);
    });
    const root = tree();
    const first = agentSteps(nc, root);
    const input = agentTask();
    try {
      const c1 = await startConductor({ nc, steps: first.steps, log });
      await submitTask(nc, input);
      await reached; // the third turn is under way
      const stopped = c1.stop();
      release();
      await stopped;
      const second = agentSteps(nc, root);
      const c2 = await startConductor({ nc, steps: second.steps, log });
      try {
        const events = await eventsOf(nc, input.taskId);
        const result = events.at(-1)?.result;
        expect(result?.status).toBe("passed");
        // Each turn was asked once: the third finished on the first conductor and was checkpointed.
        expect(builder.turns.map((t) => t.callsBefore)).toEqual([0, 1, 2, 3, 4]);
        const steps = transcript(events);
        expect(steps.map((t) => t.step)).toEqual([1, 2, 3, 4, 5]);
        // The session opened by the first conductor was used on by the second.
        expect(ex.rec.opens).toHaveLength(1);
        expect(ex.rec.calls.map((c) => c.call.tool)).toEqual(["search", "read", "run", "write"]);
        // The first conductor ran only the baseline; the verdict ran on the second.
        expect(first.runs).toHaveLength(1);
        expect(second.runs).toHaveLength(1);
        expect(second.calls.recall ?? 0).toBe(0);
      } finally {
        await c2.stop();
      }
    } finally {
      await builder.stop();
      await ex.stop();
      await nc.close();
    }
  }, 90_000);
  it("carries the previous failure, the reflection and the recall into the next loop; a loop without an edit fails its iteration", async ({
    nats,
  }) => {
    const wrong = { path: "pkg/mod.py", search: "    return 41\n", replace: "    return 43\n" };
    const right = { path: "pkg/mod.py", search: "    return 43\n", replace: "    return 42\n" };
    const script = [
      // Iteration 1: looks the name up, then submits without an edit.
      say([tc("symbol", { name: "answer" })]),
      say([tc("submit", { summary: "nothing to do" })]),
      // Iteration 2: a wrong edit; the verdict fails.
      say([tc("edit", { edits: [wrong] })]),
      say([tc("submit", { summary: "answer 43" })]),
      // Iteration 3: starts from iteration 2's tree and fixes it.
      say([tc("edit", { edits: [right] })]),
      say([tc("submit", { summary: "answer 42" })]),
    ];
    await withAgent(
      nats.url,
      (req) => script[req.callsBefore ?? 0] ?? say([]),
      async ({ nc, turns, r }) => {
        const { result, events } = await runTask(nc, agentTask());
        expect(result.status).toBe("passed");
        expect(result.iterations).toBe(3);
        const steps = transcript(events);
        expect(steps[0]?.observation).toMatch(
          /^definitions of answer \(1\):\npkg\/mod\.py:1: def answer\(\): \[function\]/,
        );
        expect(steps[0]?.observation).toMatch(
          /references \(2\):\ntests\/test_mod\.py:1: from pkg\.mod import answer\ntests\/test_mod\.py:4: assert answer\(\) == 42$/,
        );
        expect(events.some((e) => e.message.includes("the agent changed no file (it submitted without an edit)"))).toBe(
          true,
        );
        // Recall went with every turn; the first loop had no previous iteration.
        expect(turns.every((t) => t.recall !== undefined)).toBe(true);
        expect(turns[0]?.previous).toBeUndefined();
        expect(turns[2]?.previous).toMatch(/Iteration 1 failed \(no_change\)/);
        // Iteration 3 was told the failing test, the reflection, and that its change is still in the tree.
        expect(turns[4]?.previous).toMatch(/Iteration 2 failed \(failed\); failing tests: test_add/);
        expect(turns[4]?.previous).toMatch(/root cause: subtracts/);
        expect(turns[4]?.previous).toMatch(/still in the tree \(changed: pkg\/mod\.py\)/);
        expect(turns[4]?.messages).toEqual([]);
        expect(r.calls.reflect).toBe(1);
        expect(r.runs.at(-1)?.files).toEqual([{ path: "pkg/mod.py", content: "def answer():\n    return 42\n" }]);
      },
    );
  });

  it("sends the candidate to the verdict when the step budget runs out after an edit", async ({ nats }) => {
    let n = 0;
    await withAgent(
      nats.url,
      (req) =>
        req.callsBefore === 0
          ? say([tc("edit", { edits: [fix] })])
          : say([tc("read", { path: "pkg/mod.py", endLine: ++n })]),
      async ({ nc, turns, ex }) => {
        const input = agentTask();
        const { result, events } = await runTask(nc, { ...input, limits: { maxAgentSteps: 3 } });
        expect(result.status).toBe("passed");
        expect(turns).toHaveLength(3);
        expect(turns.map((t) => t.stepsLeft)).toEqual([3, 2, 1]);
        expect(events.some((e) => e.kind === "warning" && e.message.includes("step budget (3 steps) ran out"))).toBe(
          true,
        );
        expect(ex.closes).toHaveLength(1);
      },
    );
  });
  it("starts the loop after a blocked candidate from the tree before it, and tells the model why", async ({ nats }) => {
    const script = [
      say([tc("edit", { edits: [{ ...fix, replace: "    import os; return 42\n" }] })]),
      say([tc("submit", { summary: "sneaky" })]),
      say([tc("read", { path: "pkg/mod.py" })]),
      say([tc("edit", { edits: [fix] })]),
      say([tc("submit", { summary: "answer 42" })]),
    ];
    let gates = 0;
    await withAgent(
      nats.url,
      (req) => script[req.callsBefore ?? 0] ?? say([]),
      async ({ nc, ex, turns }) => {
        const { result, events } = await runTask(nc, agentTask());
        expect(result.status).toBe("passed");
        expect(result.iterations).toBe(2);
        // Iteration 2's session holds none of the blocked change, and the model read the base's line.
        expect(ex.opens[1]?.files).toEqual([]);
        expect(transcript(events)[2]?.observation).toContain("2:     return 41");
        expect(turns[2]?.previous).toMatch(/Iteration 1 failed \(blocked\)/);
        expect(turns[2]?.previous).toMatch(/That change was blocked and is NOT in the tree: blocker: imports os/);
      },
      {
        over: {
          gate: async () =>
            ++gates === 1
              ? { blocked: true, findings: [{ severity: "blocker" as const, message: "imports os", rule: "test" }] }
              : { blocked: false, findings: [] },
        },
      },
    );
  });
});
