/**
 * The MCP tools' handlers through the SDK's own client (`@modelcontextprotocol/client` 2.x)
 * over an in-memory transport, served as `loopsmith mcp` serves stdio (`serveStdio`), on a
 * stand-in backend (no NATS): input checks, result shaping, progress notifications and
 * cancellation reaching the task, each in both protocol eras (a 2025-11-25 `initialize`
 * client and a 2026-07-28 one pinned to the stateless revision).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, InMemoryTransport, type JSONRPCMessage } from "@modelcontextprotocol/client";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { LoopsmithError, loadConfig } from "@loopsmith/shared/runtime";
import {
  emptyUsage,
  type GenerationReport,
  type TaskEvent,
  type TaskInput,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { ObservedTransport, createMcpServer, type McpBackend } from "./server.js";
import type { TaskHooks } from "./session.js";
import { SCRIPTED_BANNER, inlineTask, progressMessage, taskStatus } from "./tools.js";

const log = pino({ level: "silent" });
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-mcp-unit-"));

function result(taskId: string, status: TaskResult["status"], scripted = true): TaskResult {
  return {
    v: 1,
    taskId,
    status,
    stopReason: status === "passed" ? "passed" : status === "cancelled" ? "cancelled" : "max_iterations",
    iterations: 1,
    files: [{ path: "calc.py", content: "def add(a, b):\n    return a + b\n" }],
    tests: [],
    lastExecution: null,
    hidden: null,
    failureIds: [],
    usage: { total: emptyUsage(), byRole: {}, byIteration: [] },
    scripted,
    providers: ["scripted:script:x.json"],
    durationMs: 1200,
    message: `${status} after 1 iteration`,
  };
}

function event(taskId: string, seq: number, kind: TaskEvent["kind"], phase?: TaskEvent["phase"]): TaskEvent {
  return {
    v: 1,
    taskId,
    seq,
    at: new Date().toISOString(),
    iteration: 1,
    kind,
    ...(phase ? { phase } : {}),
    message: `${kind} ${phase ?? ""}`.trim(),
  };
}

/** A backend whose answers each test sets; records what the tools asked of it. */
function backend(over: Partial<McpBackend> = {}): McpBackend & { submitted: TaskInput[] } {
  const submitted: TaskInput[] = [];
  return {
    submitted,
    config: () => loadConfig({ env: { LOOPSMITH_DATA_DIR: dataDir } }),
    solve: async (task) => {
      submitted.push(task);
      return { result: result(task.taskId, "passed") };
    },
    taskState: async () => null,
    run: async (taskId) => {
      throw new LoopsmithError("not_found", `no run of ${taskId} is recorded`);
    },
    history: async () => ({ tasks: [] }),
    improveStatus: async () => ({ state: null, reports: [] as GenerationReport[] }),
    ...over,
  };
}

/** The protocol revision each era's client speaks. */
const ERAS = [
  { era: "legacy", version: "2025-11-25" },
  { era: "modern", version: "2026-07-28" },
] as const;
type Era = (typeof ERAS)[number]["era"];

let client: Client | undefined;
let served: { close(): Promise<void> } | undefined;
afterEach(async () => {
  await client?.close();
  await served?.close();
  client = undefined;
  served = undefined;
});

/**
 * A client of `era` connected to the tools on `b` as `serveStdio` serves them: the legacy
 * client opens with `initialize`, the modern one is pinned to 2026-07-28 (no handshake).
 * `wire` sees every message the client sends.
 */
async function connected(b: McpBackend, era: Era = "legacy", wire: JSONRPCMessage[] = []): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  served = serveStdio(() => createMcpServer(b, log), { transport: serverSide });
  const send = clientSide.send.bind(clientSide);
  clientSide.send = (message, options) => {
    wire.push(message);
    return send(message, options);
  };
  client = new Client(
    { name: "unit", version: "1.0.0" },
    era === "modern" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {},
  );
  await client.connect(clientSide);
  return client;
}

const text = (r: unknown): string => (r as { content: Array<{ text: string }> }).content[0]?.text ?? "";

describe.each(ERAS)("a $era client ($version)", ({ era, version }) => {
  it("negotiates its revision and lists the same five tools", async () => {
    const wire: JSONRPCMessage[] = [];
    const c = await connected(backend(), era, wire);
    expect(c.getProtocolEra()).toBe(era);
    expect(c.getNegotiatedProtocolVersion()).toBe(version);
    expect(c.getServerVersion()?.name).toBe("loopsmith");
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["history", "improve_status", "show", "solve", "status"]);
    const methods = wire.flatMap((m) => ("method" in m ? [m.method] : []));
    const list = wire.find((m) => "method" in m && m.method === "tools/list");
    const meta = (list as { params?: { _meta?: Record<string, unknown> } } | undefined)?.params?._meta;
    if (era === "legacy") {
      // The 2025 handshake, and requests without the envelope.
      expect(methods.slice(0, 2)).toEqual(["initialize", "notifications/initialized"]);
      expect(meta?.["io.modelcontextprotocol/protocolVersion"]).toBeUndefined();
    } else {
      // No handshake: every request says who it is and what it speaks.
      expect(methods).not.toContain("initialize");
      expect(methods[0]).toBe("server/discover");
      expect(meta).toMatchObject({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { name: "unit" },
      });
    }
  });
});

describe("negotiation", () => {
  it("gives a 2.x client in auto mode the 2026-07-28 era after its server/discover probe", async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    served = serveStdio(() => createMcpServer(backend(), log), { transport: serverSide });
    client = new Client({ name: "unit", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(clientSide);
    expect(client.getProtocolEra()).toBe("modern");
    expect(client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
  });

  it("refuses a request that claims a revision it does not speak, naming the ones it does", async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    served = serveStdio(() => createMcpServer(backend(), log), { transport: serverSide });
    const answers: JSONRPCMessage[] = [];
    clientSide.onmessage = (m) => answers.push(m);
    await clientSide.start();
    await clientSide.send({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/list",
      params: {
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2099-01-01",
          "io.modelcontextprotocol/clientInfo": { name: "unit", version: "1.0.0" },
          "io.modelcontextprotocol/clientCapabilities": {},
        },
      },
    });
    for (let i = 0; i < 50 && answers.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(answers).toHaveLength(1);
    const error = (answers[0] as { error?: { message: string; data?: { supported?: string[] } } }).error;
    expect(error?.data?.supported).toEqual(["2026-07-28"]);
    await clientSide.close();
  });
});

describe.each(ERAS)("the solve tool, $era era", ({ era }) => {
  it("rejects arguments outside the schema, and repo-mode fields without repo, before submitting anything", async () => {
    const b = backend();
    const c = await connected(b, era);
    const zero = await c.callTool({ name: "solve", arguments: { goal: "x", maxIterations: 0 } });
    expect(zero.isError).toBe(true);
    expect(text(zero)).toMatch(/maxIterations/);
    const mixed = await c.callTool({ name: "solve", arguments: { goal: "x", testCmd: "pytest" } });
    expect(mixed.isError).toBe(true);
    expect(text(mixed)).toBe("bad_request: testCmd applies to repo mode only (give repo: <path of a git repository>)");
    const both = await c.callTool({ name: "solve", arguments: { goal: "x", repo: "/tmp", tests: [] } });
    expect(text(both)).toMatch(/^bad_request: tests applies to an inline task only/);
    const relative = await c.callTool({ name: "solve", arguments: { goal: "x", repo: "src" } });
    expect(text(relative)).toBe('bad_request: repo must be an absolute path, not "src"');
    expect(b.submitted).toEqual([]);
  });

  it("refuses an unknown argument, naming it and the nearest known one, instead of dropping it", async () => {
    const b = backend();
    const c = await connected(b, era);
    // The task file's field name: dropped silently, the task would run against no tests.
    const r = await c.callTool({
      name: "solve",
      arguments: { goal: "add", acceptanceTests: [{ path: "test_add.py", content: "x" }] },
    });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain("unknown key acceptanceTests; did you mean tests?");
    const nested = await c.callTool({
      name: "solve",
      arguments: { goal: "add", tests: [{ path: "test_add.py", contents: "x" }] },
    });
    expect(nested.isError).toBe(true);
    expect(text(nested)).toContain("unknown key tests.0.contents; did you mean tests.0.content?");
    const status = await c.callTool({ name: "status", arguments: { taskId: "t-1", verbose: true } });
    expect(text(status)).toContain("unknown key verbose");
    expect(b.submitted).toEqual([]);
    // The schema the client sees says so too.
    const solve = (await c.listTools()).tools.find((t) => t.name === "solve");
    expect(solve?.inputSchema).toMatchObject({ additionalProperties: false });
  });

  it("submits an inline task with its tests and reports each event as progress, then the result", async () => {
    const tasks: TaskInput[] = [];
    const b = backend({
      solve: async (task, _prepared, hooks: TaskHooks) => {
        tasks.push(task);
        hooks.onSubmitted?.(task.taskId, false);
        hooks.onEvent?.(event(task.taskId, 1, "phase", "build"));
        hooks.onEvent?.(event(task.taskId, 2, "usage"));
        hooks.onEvent?.(event(task.taskId, 3, "step", "execute"));
        return { result: result(task.taskId, "passed") };
      },
    });
    const c = await connected(b, era);
    const progress: Array<{ progress: number; message?: string }> = [];
    const r = await c.callTool(
      {
        name: "solve",
        arguments: {
          goal: "add",
          language: "javascript",
          tests: [{ path: "t.test.js", content: "x" }],
          taskId: "t-1",
          budgetUsd: 0.5,
        },
      },
      { onprogress: (p) => progress.push({ progress: p.progress, ...(p.message ? { message: p.message } : {}) }) },
    );
    expect(r.isError).toBeFalsy();
    expect(progress).toEqual([
      { progress: 1, message: "task t-1 submitted" },
      { progress: 2, message: "iteration 1 · build: phase build" },
      { progress: 3, message: "iteration 1 · execute: step execute" },
    ]);
    expect(text(r).split("\n")[0]).toBe(SCRIPTED_BANNER);
    expect(r.structuredContent).toMatchObject({
      taskId: "t-1",
      status: "passed",
      stopReason: "passed",
      scripted: true,
    });
    expect(tasks[0]).toMatchObject({
      taskId: "t-1",
      language: "javascript",
      acceptanceTests: [{ path: "t.test.js", content: "x" }],
      limits: { maxCostUsd: 0.5 },
    });
  });

  it("aborts the task's signal when the client cancels the request", async () => {
    let sawAbort: (reason: unknown) => void = () => undefined;
    const aborted = new Promise((resolve) => (sawAbort = resolve));
    const b = backend({
      solve: (task, _prepared, hooks) =>
        new Promise((resolve) => {
          hooks.signal.addEventListener("abort", () => {
            sawAbort(task.taskId);
            resolve({ result: result(task.taskId, "cancelled") });
          });
          hooks.onSubmitted?.(task.taskId, false);
        }),
    });
    const c = await connected(b, era);
    const abort = new AbortController();
    const call = c.callTool(
      { name: "solve", arguments: { goal: "add", taskId: "t-2" } },
      {
        signal: abort.signal,
        onprogress: () => abort.abort(),
      },
    );
    await expect(call).rejects.toThrow();
    await expect(aborted).resolves.toBe("t-2");
  });
});

describe.each(ERAS)("the status tool, $era era", ({ era }) => {
  it("reads a running task's phase and iteration from the checkpoint", async () => {
    const c = await connected(
      backend({ taskState: async () => ({ status: "running", phase: "execute", iteration: 2 }) }),
      era,
    );
    const r = await c.callTool({ name: "status", arguments: { taskId: "t-3" } });
    expect(text(r)).toBe("task t-3: running (iteration 2, phase execute)");
    expect(r.structuredContent).toMatchObject({
      status: "running",
      phase: "execute",
      iteration: 2,
      source: "architect",
    });
  });

  it("falls back to memory's record, and says not_found when neither knows the task", async () => {
    const c = await connected(backend(), era);
    const r = await c.callTool({ name: "status", arguments: { taskId: "t-4" } });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/^not_found: no task t-4 is known/);
    const bad = await c.callTool({ name: "status", arguments: { taskId: "no spaces" } });
    expect(bad.isError).toBe(true);
  });
});

describe("the improve_status tool", () => {
  it("says not_found for a run neither the architect nor the data directory holds", async () => {
    const c = await connected(backend());
    const r = await c.callTool({ name: "improve_status", arguments: { runId: "nothing-here" } });
    expect(r.isError).toBe(true);
    expect(text(r)).toBe("not_found: no improvement run nothing-here is known");
  });

  it("reports a running run's generation from its state", async () => {
    const c = await connected(
      backend({ improveStatus: async () => ({ state: { status: "running", generation: 3 }, reports: [] }) }),
    );
    const r = await c.callTool({ name: "improve_status", arguments: { runId: "r1" } });
    expect(text(r).split("\n")[0]).toBe("run r1: running, generation 3");
    expect(r.structuredContent).toMatchObject({ runId: "r1", status: "running", generation: 3, generations: [] });
  });
});

describe("ObservedTransport", () => {
  it("reports the first message after the opening exchange once, and the end of the connection", async () => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    let uses = 0;
    let ends = 0;
    const seen: string[] = [];
    const observed = new ObservedTransport(
      serverSide,
      () => (uses += 1),
      () => (ends += 1),
    );
    observed.onmessage = (m) => seen.push("method" in m ? m.method : "response");
    await observed.start();
    await clientSide.start();
    const request = (id: number, method: string): JSONRPCMessage => ({ jsonrpc: "2.0", id, method, params: {} });
    await clientSide.send(request(1, "server/discover"));
    await clientSide.send(request(2, "initialize"));
    expect(uses).toBe(0);
    await clientSide.send(request(3, "tools/list"));
    await clientSide.send(request(4, "tools/call"));
    expect(uses).toBe(1);
    expect(seen).toEqual(["server/discover", "initialize", "tools/list", "tools/call"]);
    await clientSide.close();
    expect(ends).toBe(1);
  });
});

describe("tools.ts", () => {
  it("inlineTask names the invalid field", () => {
    expect(() => inlineTask({ goal: "x", files: [{ path: "", content: "" }] })).toThrow(/files\.0\.path/);
  });

  it("progressMessage leaves out usage and result events", () => {
    expect(progressMessage(event("t", 1, "usage"))).toBeUndefined();
    expect(progressMessage(event("t", 2, "result"))).toBeUndefined();
    expect(progressMessage({ ...event("t", 3, "warning"), iteration: 0 })).toBe("start: warning: warning");
  });

  it("taskStatus takes a final checkpoint's result, and memory's when there is no checkpoint", () => {
    const done = result("t", "failed");
    expect(taskStatus("t", { status: "final", phase: "done", iteration: 1, result: done })).toMatchObject({
      status: "failed",
      stopReason: "max_iterations",
      source: "architect",
    });
    expect(taskStatus("t", null)).toBeUndefined();
    expect(() => taskStatus("t", { status: "odd" })).toThrow(/not a task state/);
  });
});
