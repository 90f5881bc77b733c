/**
 * The chaos run of the production-stack issue, bounded for CI: `bench/chaos.ts` on its own
 * compose project (the permission matrix on, 2 builder and 2 executor replicas, scripted
 * replies) keeps 6 tasks in flight while a `kill -9` hits one service process every 8–9 s
 * for 56 s (one round: each of builder, NATS, architect, reviewer, executor and memory once,
 * in random order), then takes the stack down during the executor's start-up at
 * three moments. It passes only with 0 tasks lost, 0 duplicated, no task silent for more than
 * 30 s across a kill, and no sandbox container left behind (the script's own exit code).
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { REPO, type CliRun } from "../fixtures/cli.js";

function runScript(command: string, args: string[], timeoutMs: number): Promise<CliRun> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: REPO, env: { ...process.env, NATS_URL: "", ANTHROPIC_API_KEY: "" }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGINT"), timeoutMs);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** The value of a row of the script's summary table (`name  value`). */
function row(stdout: string, name: string): string | undefined {
  const line = stdout.split("\n").find((l) => l.trimStart().startsWith(name));
  return line?.slice(line.indexOf(name) + name.length).trim();
}

describe("chaos: kill -9 of services and NATS while tasks run (bench/chaos.ts, bounded)", () => {
  it("loses and duplicates nothing, no task is silent over 30 s, and no sandbox is left", async () => {
    const build = await runScript("npm", ["run", "build"], 300_000);
    expect(build.code, build.stderr.slice(-2000)).toBe(0);
    const r = await runScript(process.execPath, ["--import", "tsx", "bench/chaos.ts", "--tasks", "6", "--seconds", "56", "--kill-every", "8-9", "--wait", "150", "--throughput-tasks", "0"], 840_000);
    const report = `${r.stdout.slice(-6000)}\n${r.stderr.slice(-3000)}`;
    // The figures (kills, silences, lost, duplicated, sandboxes left), for the CI log.
    console.log(r.stdout.slice(Math.max(0, r.stdout.indexOf("Phase 1"))));
    expect(r.code, report).toBe(0);
    expect(r.stdout, report).toMatch(/^PASS: /m);
    expect(row(r.stdout, "lost (no result)"), report).toBe("0");
    expect(row(r.stdout, "duplicated"), report).toBe("0");
    expect(Number(row(r.stdout, "tasks submitted")), report).toBeGreaterThanOrEqual(6);
    // One kill of each service, NATS included (the "per killed service" table).
    for (const service of ["builder", "nats", "architect", "reviewer", "executor", "memory"]) expect(row(r.stdout, service)?.split(/\s+/)[0], `${service}\n${report}`).toBe("1");
  }, 900_000);
});
