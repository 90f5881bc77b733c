/**
 * `loopsmith bench` end to end on real HumanEval records, over one stack that `loopsmith up
 * --provider scripted` started with no script file: every task carries its own replies (a
 * simulation or a script), so one stack serves them all at once. Real NATS, PGlite memory
 * and Docker sandbox. Checks: the files a run writes, the labels of a run without a model,
 * `--memory ab` pairs, invalid dataset lines reported by number and skipped, no prompt
 * carrying a hidden test, a service killed mid-run (the run goes on), and `--resume`.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, configuredHumanEval, jsonLines, loopsmith } from "../fixtures/cli.js";

const configured = configuredHumanEval();
if (!configured) {
  process.stdout.write(
    "tests/e2e/bench.test.ts did not run: no HumanEval dataset is configured (set LOOPSMITH_HUMANEVAL to humaneval.jsonl; .ci/run does)\n",
  );
}
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-bench-"));
const env = { LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "info" };
const transcript = join(dataDir, "transcript.jsonl");
const datasetPath = join(dataDir, "dataset.jsonl");
const records = configured
  ? readFileSync(configured, "utf8")
      .split("\n")
      .filter(Boolean)
      .slice(0, 6)
      .map((l) => JSON.parse(l) as { task_id: string; test: string })
  : [];

interface Line {
  caseId: string;
  arm: string;
  passed: boolean;
  provider: string;
  status: string;
  iterations: number;
  attempts: number;
}
const lines = (dir: string): Line[] => jsonLines(readFileSync(join(dir, "results.jsonl"), "utf8")) as unknown as Line[];

beforeAll(async () => {
  if (!configured) return;
  // Six real records, then a line that is not JSON and one that is no record of the format.
  writeFileSync(
    datasetPath,
    `${records.map((r) => JSON.stringify(r)).join("\n")}\nthis is not json\n{"task_id": "HumanEval/x"}\n`,
  );
  const up = await loopsmith(["up", "--provider", "scripted", "--transcript", transcript, "--json"], env, 120_000);
  expect(up.code, up.stderr).toBe(0);
}, 180_000);

afterAll(async () => {
  if (configured) await loopsmith(["down"], env, 60_000);
});

describe.runIf(configured)("loopsmith bench over a running stack", () => {
  const abDir = join(dataDir, "ab");

  it("runs --memory ab on the simulated provider, says so everywhere, and writes the four files", async () => {
    const run = await loopsmith(
      [
        "bench",
        "--dataset",
        datasetPath,
        "--memory",
        "ab",
        "--provider",
        "simulated",
        "--concurrency",
        "3",
        "--out",
        abDir,
        "--json",
      ],
      env,
      600_000,
    );
    expect(run.code, run.stderr).toBe(0);
    // Bad lines: reported with their numbers, skipped; the run goes on.
    expect(run.stderr).toMatch(/line 7 skipped/);
    expect(run.stderr).toMatch(/line 8 skipped/);
    expect(run.stderr).toContain("SIMULATED RUN");
    const results = lines(abDir);
    expect(results).toHaveLength(12);
    expect(new Set(results.map((r) => `${r.arm} ${r.caseId}`)).size).toBe(12);
    expect(results.every((r) => r.provider === "simulated")).toBe(true);
    const summary = JSON.parse(readFileSync(join(abDir, "summary.json"), "utf8")) as {
      notice: string;
      provider: { label: string };
      arms: {
        on: { tasks: number; memory: { tasks: number; recalls: number; hits: number } };
        off: { tasks: number; memory: { tasks: number; recalls: number; lessonsShown: number } };
      };
      paired: { pairs: number };
      skippedLines: Array<{ line: number }>;
    };
    expect(summary.provider.label).toBe("simulated");
    expect(summary.notice).toContain("SIMULATED RUN");
    expect(summary.arms.on.tasks).toBe(6);
    expect(summary.arms.off.tasks).toBe(6);
    expect(summary.paired.pairs).toBe(6);
    // Memory's use per arm: the off arm recalls nothing by construction; the on arm recalls
    // before each first build and after each failure, and some of its recalls showed a memory.
    expect(summary.arms.off.memory).toMatchObject({ tasks: 6, recalls: 0, lessonsShown: 0 });
    expect(summary.arms.on.memory.tasks).toBe(6);
    expect(summary.arms.on.memory.recalls).toBeGreaterThanOrEqual(6);
    expect(summary.arms.on.memory.hits).toBeGreaterThan(0);
    expect(readFileSync(join(abDir, "report.md"), "utf8")).toContain("## Memory use per arm");
    expect(summary.skippedLines.map((s) => s.line)).toEqual([7, 8]);
    expect(readFileSync(join(abDir, "report.md"), "utf8")).toContain("SIMULATED RUN");
    const html = readFileSync(join(abDir, "report.html"), "utf8");
    expect(html).toContain("SIMULATED RUN");
    expect(html).toContain("<svg");
    const last = jsonLines(run.stdout).at(-1) as { kind: string; runId: string };
    expect(last.kind).toBe("summary");
  }, 600_000);

  it("never sends a hidden test to a prompt", () => {
    const prompts = readFileSync(transcript, "utf8");
    expect(prompts.length).toBeGreaterThan(1000);
    expect(prompts).toContain("solution.py");
    for (const r of records) {
      // Every assertion line of the record's check function is hidden.
      const asserts = r.test
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l.startsWith("assert ") && l.includes("candidate"));
      expect(asserts.length).toBeGreaterThan(0);
      for (const a of asserts) expect(prompts).not.toContain(JSON.stringify(a).slice(1, -1));
    }
    expect(prompts).not.toContain("def check(candidate)");
  });

  it("goes on when a service is killed mid-run, and --resume runs only what is missing", async () => {
    const dir = join(dataDir, "killed");
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        join(REPO, "cli", "src", "main.ts"),
        "bench",
        "--dataset",
        datasetPath,
        "--provider",
        "scripted",
        "--memory",
        "off",
        "--concurrency",
        "1",
        "--limit",
        "4",
        "--out",
        dir,
      ],
      {
        cwd: REPO,
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    // Once the first task is done, kill the builder the stack runs.
    const record = JSON.parse(readFileSync(join(dataDir, "run", "stack.json"), "utf8")) as {
      pids: Record<string, number>;
    };
    for (
      let i = 0;
      i < 600 && !(existsSync(join(dir, "results.jsonl")) && readFileSync(join(dir, "results.jsonl"), "utf8").trim());
      i++
    )
      await new Promise((r) => setTimeout(r, 200));
    process.kill(record.pids.builder as number, "SIGKILL");
    expect(await exited, stderr).toBe(0);
    expect(stderr).toMatch(/restarted builder/);
    const results = lines(dir);
    expect(results.map((r) => r.caseId).sort()).toEqual(
      records
        .slice(0, 4)
        .map((r) => r.task_id)
        .sort(),
    );
    // The scripted replies pass every case once the builder is back.
    expect(results.filter((r) => r.passed).length).toBeGreaterThanOrEqual(3);

    // An interrupted run: drop the last line, resume, and only that case runs again.
    const kept = readFileSync(join(dir, "results.jsonl"), "utf8").trim().split("\n");
    writeFileSync(join(dir, "results.jsonl"), `${kept.slice(0, -1).join("\n")}\n`);
    const resumed = await loopsmith(
      [
        "bench",
        "--dataset",
        datasetPath,
        "--provider",
        "scripted",
        "--memory",
        "off",
        "--limit",
        "4",
        "--out",
        dir,
        "--resume",
        "--json",
      ],
      env,
      300_000,
    );
    expect(resumed.code, resumed.stderr).toBe(0);
    const ran = jsonLines(resumed.stdout).filter((l) => l.kind === "result");
    expect(ran).toHaveLength(1);
    expect(lines(dir)).toHaveLength(4);
  }, 600_000);
});
