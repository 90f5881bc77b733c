/**
 * Ctrl-C on `loopsmith solve`: the first SIGINT cancels the running task, the result says
 * so, the command exits 130, and every process and container it started is gone.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { describe, expect, it } from "vitest";
import { REPO } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-interrupt-"));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("interrupting loopsmith solve", () => {
  it("cancels the task on SIGINT, exits 130 and leaves nothing running", async () => {
    const task = JSON.parse(readFileSync(join(REPO, "examples", "roman", "task.json"), "utf8")) as {
      acceptanceTests: Array<{ content: string }>;
    };
    (task.acceptanceTests[0] as { content: string }).content +=
      "\n\ndef test_slow():\n    import time\n    time.sleep(6)\n";
    const taskFile = join(dataDir, "slow.json");
    writeFileSync(taskFile, JSON.stringify(task));
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        join(REPO, "cli", "bin", "loopsmith.js"),
        "solve",
        "--file",
        taskFile,
        "--provider",
        "scripted",
        "--script",
        join(REPO, "examples", "roman", "script.json"),
      ],
      {
        cwd: REPO,
        env: { ...process.env, LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    await new Promise<void>((resolve) =>
      child.stdout.on("data", (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes("gate:")) resolve();
      }),
    );
    child.kill("SIGINT");
    const code = await exited;
    expect(code, stderr).toBe(130);
    expect(stderr).toContain("cancelling the task");
    expect(stdout).toContain("CANCELLED");

    const pids = readdirSync(join(dataDir, "logs")).map(
      (f) =>
        (JSON.parse(readFileSync(join(dataDir, "logs", f), "utf8").split("\n")[0] as string) as { pid: number }).pid,
    );
    expect(pids).toHaveLength(5);
    expect(pids.filter(alive)).toEqual([]);
    const docker = new Docker();
    const cli = await docker.listContainers({ all: true, filters: { label: [`org.loopsmith.cli=${child.pid}`] } });
    const sandboxes = await docker.listContainers({ all: true, filters: { label: ["org.loopsmith.executor"] } });
    expect(cli).toEqual([]);
    expect(sandboxes.filter((c) => pids.includes(Number(c.Labels["org.loopsmith.executor.pid"])))).toEqual([]);
  });
});
