/**
 * Stopping the executor process while it is still starting (a `docker compose down` during
 * its self-test and warm-pool fill): it must stop in order, exit 143, and leave no sandbox
 * container on the engine. The process is the real service (`services/executor/src/main.ts`)
 * against real NATS and the real engine.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { expect } from "vitest";
import { it } from "../fixtures/index.js";
import { REPO } from "../fixtures/cli.js";
import { docker } from "./helpers.js";
import { LABEL_PID } from "@loopsmith/executor";

const byPid = (pid: number) => docker.listContainers({ all: true, filters: { label: [`${LABEL_PID}=${pid}`] } });

it("SIGTERM during start-up: exits 143 and removes every sandbox container it made", async ({ nats }) => {
  const child = spawn(process.execPath, ["--import", "tsx", join(REPO, "services", "executor", "src", "main.ts")], {
    cwd: REPO,
    env: { ...process.env, NATS_URL: nats.url, LOOPSMITH_WARM_POOL_SIZE: "2", LOG_LEVEL: "warn" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const pid = child.pid as number;
  // Wait until start-up has made its first container (the self-test's), then stop it.
  const deadline = Date.now() + 60_000;
  while ((await byPid(pid)).length === 0) {
    if (Date.now() > deadline) throw new Error(`the executor made no container within 60 s: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGTERM");
  const { code, signal } = await exited;
  expect({ code, signal }, stderr).toEqual({ code: 143, signal: null });
  expect(await byPid(pid)).toEqual([]);
});
