/**
 * `loopsmith mcp` through the MCP SDKs' own clients over stdio, end to end, in both protocol
 * eras: a 2025-11-25 client (`@modelcontextprotocol/sdk` 1.x, which opens with `initialize`)
 * and a 2026-07-28 one (`@modelcontextprotocol/client` 2.x pinned to the stateless revision:
 * `server/discover`, the `_meta` envelope on every request, no session). In each, the server
 * starts its own stack (a NATS container and the five services, scripted provider), a
 * `solve` call reports progress and returns a passing result under the task id it minted, a
 * second `solve` whose request is cancelled ends `cancelled` (read back through `status` with
 * the id from its first progress notification), and closing the client stops everything the
 * server started.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as LegacyStdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LATEST_PROTOCOL_VERSION as LEGACY_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { REPO } from "../fixtures/cli.js";

const TEST_CALC = {
  path: "test_calc.py",
  content: "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
};
/**
 * A test no candidate passes (it wants 6 from add(2, 3)), slow enough that the task is still
 * executing when its request is cancelled: without the cancel the task would fail after its
 * iterations (the architect reads a cancel at its next checkpoint, after the sandbox run).
 */
const TEST_WRONG = {
  path: "test_wrong.py",
  content:
    "import time\nfrom calc import add\n\n\ndef test_add_wrong():\n    time.sleep(3)\n    assert add(2, 3) == 6\n",
};

type Structured = Record<string, unknown>;

/** The child's environment: the test's, with a data directory of its own and the scripted provider. */
function env(): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) vars[k] = v;
  return {
    ...vars,
    NATS_URL: "",
    DATABASE_URL: "",
    LOOPSMITH_DATA_DIR: mkdtempSync(join(tmpdir(), "loopsmith-mcp-")),
    LOOPSMITH_PROVIDER: "scripted",
    LOOPSMITH_SCRIPT: join(REPO, "tests", "fixtures", "mcp-script.json"),
  };
}

/** How `loopsmith mcp` is started: from the sources, as `npx loopsmith mcp` in a checkout. */
const SERVER = {
  command: process.execPath,
  args: ["--import", "tsx", join(REPO, "cli", "src", "main.ts"), "mcp"],
  cwd: REPO,
  stderr: "pipe" as const,
};

/** A tool call's options, in the terms both SDKs share. */
interface CallOptions {
  onprogress?: (p: { progress: number; message?: string }) => void;
  signal?: AbortSignal;
  timeout?: number;
  resetTimeoutOnProgress?: boolean;
}

/** A tool call's result, as the test reads it. */
interface CallResult {
  isError?: boolean;
  content: unknown;
  structuredContent?: unknown;
}

/** What the test does with a client, whichever SDK it comes from. */
interface EraClient {
  /** The revision the connection speaks. */
  protocolVersion(): string | undefined;
  pid(): number | null;
  stderr(): string;
  listTools(): Promise<{ tools: Array<{ name: string; inputSchema: { required?: string[] } }> }>;
  callTool(params: { name: string; arguments: Record<string, unknown> }, options?: CallOptions): Promise<CallResult>;
  close(): Promise<void>;
}

/** A 2025-11-25 client: the 1.x SDK, which knows nothing of 2026-07-28 (`initialize` first). */
async function legacyClient(): Promise<EraClient> {
  const transport = new LegacyStdioClientTransport({ ...SERVER, env: env() });
  let stderr = "";
  transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  // The revision the server's `initialize` result names, read off the wire (the 1.x client keeps it private).
  let negotiated: string | undefined;
  const start = transport.start.bind(transport);
  transport.start = async () => {
    const deliver = transport.onmessage;
    transport.onmessage = (message) => {
      const version = (message as { result?: { protocolVersion?: unknown } }).result?.protocolVersion;
      if (typeof version === "string") negotiated ??= version;
      deliver?.(message);
    };
    return start();
  };
  const client = new LegacyClient({ name: "loopsmith-mcp-test", version: "1.0.0" });
  await client.connect(transport);
  expect(LEGACY_PROTOCOL_VERSION).toBe("2025-11-25");
  return {
    protocolVersion: () => negotiated,
    pid: () => transport.pid,
    stderr: () => stderr,
    listTools: () => client.listTools(),
    // 1.x's result type also admits the tasks extension's shape, which this server never returns.
    callTool: (params, options) => client.callTool(params, undefined, options) as Promise<CallResult>,
    close: () => client.close(),
  };
}

/** A 2026-07-28 client: the 2.x SDK pinned to the stateless revision (no `initialize`, no fallback). */
async function modernClient(): Promise<EraClient> {
  const transport = new StdioClientTransport({ ...SERVER, env: env() });
  let stderr = "";
  transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const client = new Client(
    { name: "loopsmith-mcp-test", version: "1.0.0" },
    { versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  await client.connect(transport);
  expect(client.getProtocolEra()).toBe("modern");
  return {
    protocolVersion: () => client.getNegotiatedProtocolVersion(),
    pid: () => transport.pid,
    stderr: () => stderr,
    listTools: () => client.listTools(),
    callTool: (params, options) => client.callTool(params, options),
    close: () => client.close(),
  };
}

const ERAS = [
  { era: "2025-11-25", connect: legacyClient },
  { era: "2026-07-28", connect: modernClient },
];

let client: EraClient | undefined;
afterEach(async () => {
  await client?.close().catch(() => undefined);
  client = undefined;
});

/** The task id a `solve` call's first progress notification names (`task <id> submitted`). */
function submittedId(messages: string[]): string | undefined {
  for (const m of messages) {
    const id = /^task (\S+) submitted/.exec(m)?.[1];
    if (id) return id;
  }
  return undefined;
}

describe.each(ERAS)("loopsmith mcp, a $era client", ({ era, connect }) => {
  it("lists its tools, solves with progress, cancels a task, and stops its stack on close", async () => {
    const c = await connect();
    client = c;
    expect(c.protocolVersion()).toBe(era);
    const serverPid = c.pid();
    expect(serverPid).toBeTypeOf("number");

    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["history", "improve_status", "show", "solve", "status"]);
    const solveTool = tools.find((t) => t.name === "solve");
    expect(solveTool?.inputSchema.required).toEqual(["goal"]);

    // A task that passes: progress notifications come before the result, the first naming the
    // id the server minted (no taskId given), which the result carries.
    const progress: string[] = [];
    const passed = await c.callTool(
      {
        name: "solve",
        arguments: {
          goal: "Write add(a, b) in calc.py: return the sum of a and b.",
          language: "python",
          tests: [TEST_CALC],
          maxIterations: 2,
        },
      },
      { onprogress: (p) => progress.push(p.message ?? ""), timeout: 50_000, resetTimeoutOnProgress: true },
    );
    const result = passed.structuredContent as Structured;
    expect(passed.isError, JSON.stringify(passed.content) + c.stderr()).toBeFalsy();
    expect(result.status).toBe("passed");
    expect(result.scripted).toBe(true);
    expect((passed.content as Array<{ text: string }>)[0]?.text).toMatch(/^SCRIPTED RUN/);
    expect(submittedId(progress), progress.join("\n")).toBe(result.taskId);
    expect(
      progress.some((m) => /iteration 1 · execute/.test(m)),
      progress.join("\n"),
    ).toBe(true);

    // A second task, cancelled by aborting its request while its tests run; the handle is the
    // id from its first progress notification (a cancelled request gets no result).
    const abort = new AbortController();
    const cancelling: string[] = [];
    const call = c.callTool(
      {
        name: "solve",
        arguments: {
          goal: "Write add(a, b) in calc.py: return the sum of a and b.",
          language: "python",
          tests: [TEST_WRONG],
          maxIterations: 3,
        },
      },
      {
        signal: abort.signal,
        timeout: 50_000,
        onprogress: (p) => {
          cancelling.push(p.message ?? "");
          if (/· execute/.test(p.message ?? "")) abort.abort("the test cancels it");
        },
      },
    );
    await expect(call).rejects.toThrow();
    expect(abort.signal.aborted).toBe(true);
    const cancelledId = submittedId(cancelling);
    expect(cancelledId, cancelling.join("\n")).toBeTypeOf("string");
    // The architect's checkpoint turns final at its first checkpoint after the cancel.
    let status: Structured = {};
    for (const deadline = Date.now() + 25_000; Date.now() < deadline;) {
      const answer = await c.callTool({ name: "status", arguments: { taskId: cancelledId as string } });
      status = answer.structuredContent as Structured;
      if (status.status !== "running") break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(status.status, JSON.stringify(status)).toBe("cancelled");
    expect(status.stopReason).toBe("cancelled");

    // Closing the client ends the server, which stops the NATS container and services it started.
    await c.close();
    client = undefined;
    await new Promise<void>((resolve) => {
      const check = (): void => {
        try {
          process.kill(serverPid as number, 0);
          setTimeout(check, 100);
        } catch {
          resolve();
        }
      };
      check();
    });
    // A removal the server asked for before the client's kill may still be under way in the engine.
    const docker = new Docker();
    const label = { label: [`org.loopsmith.cli=${serverPid}`] };
    let left = await docker.listContainers({ all: true, filters: label });
    for (const deadline = Date.now() + 15_000; left.length > 0 && Date.now() < deadline;) {
      expect(left.map((x) => x.State)).toEqual(left.map(() => "removing"));
      await new Promise((r) => setTimeout(r, 250));
      left = await docker.listContainers({ all: true, filters: label });
    }
    expect(left).toEqual([]);
  }, 90_000);
});
