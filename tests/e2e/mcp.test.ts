/**
 * `loopsmith mcp` through the MCP SDK's own client over stdio, end to end: the server starts
 * its own stack (a NATS container and the five services, scripted provider), a `solve` call
 * reports progress and returns a passing result, a second `solve` whose request is cancelled
 * ends `cancelled` (read back through `status`), and closing the client stops everything
 * the server started.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import Docker from "dockerode";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, describe, expect, it } from "vitest";
import { REPO } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-mcp-"));
const suffix = randomBytes(3).toString("hex");
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

function env(): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) vars[k] = v;
  return {
    ...vars,
    NATS_URL: "",
    DATABASE_URL: "",
    LOOPSMITH_DATA_DIR: dataDir,
    LOOPSMITH_PROVIDER: "scripted",
    LOOPSMITH_SCRIPT: join(REPO, "tests", "fixtures", "mcp-script.json"),
  };
}

const transport = new StdioClientTransport({
  command: process.execPath,
  args: ["--import", "tsx", join(REPO, "cli", "src", "main.ts"), "mcp"],
  cwd: REPO,
  env: env(),
  stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
const client = new Client({ name: "loopsmith-mcp-test", version: "1.0.0" });

afterAll(async () => {
  await client.close().catch(() => undefined);
});

describe("loopsmith mcp", () => {
  it("lists its tools, solves with progress, cancels a task, and stops its stack on close", async () => {
    await client.connect(transport);
    const serverPid = transport.pid;
    expect(serverPid).toBeTypeOf("number");

    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["history", "improve_status", "show", "solve", "status"]);
    const solveTool = tools.find((t) => t.name === "solve");
    expect(solveTool?.inputSchema.required).toEqual(["goal"]);

    // A task that passes: progress notifications come before the result.
    const progress: string[] = [];
    const passed = await client.callTool(
      {
        name: "solve",
        arguments: {
          goal: "Write add(a, b) in calc.py: return the sum of a and b.",
          language: "python",
          tests: [TEST_CALC],
          taskId: `mcp-pass-${suffix}`,
          maxIterations: 2,
        },
      },
      undefined,
      { onprogress: (p) => progress.push(p.message ?? ""), timeout: 50_000, resetTimeoutOnProgress: true },
    );
    const result = passed.structuredContent as Structured;
    expect(passed.isError, JSON.stringify(passed.content) + stderr).toBeFalsy();
    expect(result.status).toBe("passed");
    expect(result.scripted).toBe(true);
    expect((passed.content as Array<{ text: string }>)[0]?.text).toMatch(/^SCRIPTED RUN/);
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(
      progress.some((m) => /iteration 1 · execute/.test(m)),
      progress.join("\n"),
    ).toBe(true);

    // A second task, cancelled by aborting its request while its tests run.
    const abort = new AbortController();
    const cancelledId = `mcp-cancel-${suffix}`;
    const call = client.callTool(
      {
        name: "solve",
        arguments: {
          goal: "Write add(a, b) in calc.py: return the sum of a and b.",
          language: "python",
          tests: [TEST_WRONG],
          taskId: cancelledId,
          maxIterations: 3,
        },
      },
      undefined,
      {
        signal: abort.signal,
        timeout: 50_000,
        onprogress: (p) => {
          if (/· execute/.test(p.message ?? "")) abort.abort("the test cancels it");
        },
      },
    );
    await expect(call).rejects.toThrow();
    expect(abort.signal.aborted).toBe(true);
    // The architect's checkpoint turns final at its first checkpoint after the cancel.
    let status: Structured = {};
    for (const deadline = Date.now() + 25_000; Date.now() < deadline;) {
      const answer = await client.callTool({ name: "status", arguments: { taskId: cancelledId } });
      status = answer.structuredContent as Structured;
      if (status.status !== "running") break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(status.status, JSON.stringify(status)).toBe("cancelled");
    expect(status.stopReason).toBe("cancelled");

    // Closing the client ends the server, which stops the NATS container and services it started.
    await client.close();
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
    const left = await new Docker().listContainers({
      all: true,
      filters: { label: [`org.loopsmith.cli=${serverPid}`] },
    });
    expect(left).toEqual([]);
  }, 60_000);
});
