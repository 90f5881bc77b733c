/**
 * `solve --timeout` and `reset` end to end, with the real `loopsmith` command: one stack of
 * its own (NATS, the five services, embedded memory, the Docker sandbox), the scripted
 * provider. The repository's test command takes longer than the task's time limit, so the
 * task stops with `time_limit` after its baseline run, before any model call; then `reset`
 * refuses without a terminal and without `--yes`, and with `--yes` deletes that task from
 * the history the memory service recorded it in.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { loadConfig } from "@loopsmith/shared/runtime";
import { openMemoryStore } from "@loopsmith/memory";
import { REPO, jsonLines, loopsmith } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-time-limit-e2e-"));
const env = {
  LOOPSMITH_DATA_DIR: dataDir,
  NATS_URL: "",
  DATABASE_URL: "",
  LOOPSMITH_CONFIG: "",
  ANTHROPIC_API_KEY: "",
  LOOPSMITH_PROVIDER: "",
};

/** A copy of the bundled bug-fix repository, committed. */
function repository(): string {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-time-limit-repo-"));
  cpSync(join(REPO, "examples", "repo-bugfix", "repo"), dir, { recursive: true });
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", dir, "-c", "user.name=u", "-c", "user.email=u@example.com", ...args]);
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  return dir;
}

/** The task ids memory's history holds, read from the data directory's embedded memory. */
async function historyIds(): Promise<string[]> {
  const store = await openMemoryStore({
    config: loadConfig({ env: { LOOPSMITH_DATA_DIR: dataDir } }),
    log: pino({ level: "silent" }),
  });
  try {
    return (await store.history({ v: 1, limit: 10 })).tasks.map((t) => t.taskId);
  } finally {
    await store.close();
  }
}

describe("solve --timeout, then reset", () => {
  it("stops the task with time_limit; reset refuses without --yes off a terminal, and with it deletes the task", async () => {
    const repo = repository();
    const taskId = "slow-tests";
    const solve = await loopsmith(
      [
        "solve",
        "--repo",
        repo,
        "Fix the failing test tests/test_pricing.py::test_bulk_discount_starts_at_threshold",
        "--provider",
        "scripted",
        "--script",
        join(REPO, "examples", "repo-bugfix", "script.json"),
        // The baseline run alone takes 4 s: past the 2 s limit before any model call.
        "--test-cmd",
        "sleep 4; python3 -m pytest -q",
        "--setup-cmd",
        "",
        "--timeout",
        "2s",
        "--task-id",
        taskId,
        "--json",
      ],
      env,
    );
    expect(solve.code, solve.stderr).toBe(1);
    // The result object is the last line with a stop reason of its own (events carry theirs inside).
    const result = jsonLines(solve.stdout)
      .filter((l) => "stopReason" in l)
      .at(-1) as
      { stopReason: string; status: string; iterations: number; message: string; durationMs: number } | undefined;
    expect(result).toMatchObject({ status: "failed", stopReason: "time_limit", iterations: 0 });
    expect(result?.message).toMatch(
      /^stopped: the task's time limit of 2 s passed \(ran \d+(\.\d)? s, 0 iterations\)$/,
    );
    expect(result?.durationMs).toBeGreaterThanOrEqual(2_000);
    // Nothing passed, so no branch.
    expect(execFileSync("git", ["-C", repo, "branch", "--list", `loopsmith/${taskId}`], { encoding: "utf8" })).toBe("");
    expect(await historyIds()).toEqual([taskId]);

    // No terminal (stdin is not one) and no --yes: refused, nothing deleted.
    const refused = await loopsmith(["reset", "--history"], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("there is no terminal to ask on; pass --yes to delete without asking");
    expect(await historyIds()).toEqual([taskId]);

    const reset = await loopsmith(["reset", "--yes", "--json"], env);
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout.trim())).toEqual({
      kind: "reset",
      store: join(dataDir, "memory"),
      memory: true,
      history: true,
      removed: { failures: 0, successes: 0, recalls: 0, tasks: 1, runs: 1 },
    });
    expect(await historyIds()).toEqual([]);
  });
});
