/**
 * The keyless path on a fresh clone, end to end, with only what the project ships: what
 * `npm run demo` runs without a key (README, "The two commands"), typed as docs/USAGE.md
 * shows it: `npx loopsmith solve --file examples/roman/task.json --provider scripted --script
 * examples/roman/script.json`, then `failures`, `history` and `stats`.
 * The CLI starts a NATS container and the five services as separate processes; memory runs
 * on embedded PGlite in a temporary data dir; the candidates run in the Docker sandbox.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO, type CliRun } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-example-"));
// No key, no NATS, no database: what a fresh machine has.
const env = {
  ...process.env,
  LOOPSMITH_DATA_DIR: dataDir,
  NATS_URL: "",
  DATABASE_URL: "",
  ANTHROPIC_API_KEY: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "info",
};

/** Runs a documented command line (split on spaces) from the repository root. */
function readme(command: string): Promise<CliRun> {
  const [bin, ...args] = command.split(" ");
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(bin as string, args, { cwd: REPO, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, stdout, stderr, ms: Date.now() - started }));
  });
}

/** The keyless example, as docs/USAGE.md ("Everyday commands") shows it. */
const SOLVE =
  "npx loopsmith solve --file examples/roman/task.json --provider scripted --script examples/roman/script.json";

describe("the bundled example (npm run demo's task), without a key", () => {
  let solved: CliRun;
  beforeAll(async () => {
    solved = await readme(SOLVE);
  });

  it("is the command docs/USAGE.md shows", () => {
    expect(readFileSync(join(REPO, "docs", "USAGE.md"), "utf8").split("\n")).toContain(SOLVE);
  });

  it("says it is scripted, fails once, then passes (exit 0)", () => {
    expect(solved.code, solved.stderr).toBe(0);
    expect(solved.stdout.split("\n")[0]).toMatch(/^SCRIPTED RUN/);
    expect(solved.stdout).toMatch(/iteration 1: failed; failing tests: test_/);
    expect(solved.stdout).toMatch(/PASSED: passed after 2 iterations/);
    expect(solved.stdout).toMatch(/no model was called/);
  });

  it("names how many failures were stored and where to see them, not bare ids", () => {
    expect(solved.stdout).toMatch(/1 failure of this task stored in memory/);
    expect(solved.stdout).toMatch(/see it with `loopsmith failures --task [\w-]+`/);
    expect(solved.stdout).not.toMatch(/failures remembered: [0-9a-f-]{8,}/);
  });

  it("ran the five services as separate processes", () => {
    const logs = readdirSync(join(dataDir, "logs")).sort();
    expect(logs).toEqual(["architect.log", "builder.log", "executor.log", "memory.log", "reviewer.log"]);
    const pids = new Set(
      logs.map(
        (f) =>
          (JSON.parse(readFileSync(join(dataDir, "logs", f), "utf8").split("\n")[0] as string) as { pid: number }).pid,
      ),
    );
    expect(pids.size).toBe(5);
  });

  it("`loopsmith failures --task <id>`, as the result says, shows the stored failure and its fix", async () => {
    const command = /`(loopsmith failures --task [\w-]+)`/.exec(solved.stdout)?.[1];
    expect(command).toBeDefined();
    const failures = await readme(`npx ${command as string}`);
    expect(failures.code, failures.stderr).toBe(0);
    expect(failures.stdout).toMatch(/iteration 1 · failed/);
    expect(failures.stdout).toMatch(/signature: \S+/);
    expect(failures.stdout).toMatch(/fix: \S+/);
  });

  it("history and stats show the task and its stored failure", async () => {
    const history = await readme("npx loopsmith history");
    expect(history.code, history.stderr).toBe(0);
    expect(history.stdout).toMatch(/passed/);
    const stats = await readme("npx loopsmith stats --json");
    expect(stats.code, stats.stderr).toBe(0);
    expect(JSON.parse(stats.stdout)).toMatchObject({ tasks: 1, passed: 1, failures: 1 });
  });
});
