/**
 * The whole loop, end to end, on real HumanEval tasks: the CLI starts a NATS container and
 * the five services as separate processes; memory runs on embedded PGlite + pgvector in a
 * temporary data dir; candidates run in the Docker sandbox. The scripted provider answers a
 * failing mutant first, then (after the reflection) the canonical solution. Needs the
 * dataset at LOOPSMITH_HUMANEVAL; without it, it prints one line saying it did not run
 * (tests/e2e/example.test.ts covers the loop with the example the project ships).
 */
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { configuredHumanEval, jsonLines, loopsmith, runNode, REPO } from "../fixtures/cli.js";

const configured = configuredHumanEval();
if (!configured) {
  process.stdout.write(
    "tests/e2e/humaneval.test.ts did not run: no HumanEval dataset is configured (set LOOPSMITH_HUMANEVAL to humaneval.jsonl; .ci/run does)\n",
  );
}
const dataset = configured ?? "";
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-e2e-"));
const env = { LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "info" };

async function scriptFor(id: string): Promise<string> {
  const run = await runNode(join(REPO, "evals", "src", "scripts", "humaneval-script.ts"), [
    "--dataset",
    dataset,
    "--id",
    id,
    "--mutant-first",
  ]);
  expect(run.code, run.stderr).toBe(0);
  const file = join(dataDir, `${id.replace("/", "-")}.script.json`);
  writeFileSync(file, run.stdout);
  return file;
}

async function solve(id: string, script: string, transcript: string) {
  const run = await loopsmith(
    [
      "solve",
      "--humaneval",
      id,
      "--dataset",
      dataset,
      "--provider",
      "scripted",
      "--script",
      script,
      "--transcript",
      transcript,
      "--json",
    ],
    env,
  );
  const lines = jsonLines(run.stdout);
  const result = lines[lines.length - 1] as Record<string, unknown>;
  const events = lines.filter((l) => typeof l.seq === "number");
  return { run, result, events, notice: lines[0] };
}

describe.runIf(configured)("loopsmith solve on HumanEval, scripted, end to end", () => {
  let first: Awaited<ReturnType<typeof solve>>;
  const transcript1 = join(dataDir, "t1.jsonl");

  beforeAll(async () => {
    first = await solve("HumanEval/0", await scriptFor("HumanEval/0"), transcript1);
  });

  it("passes after exactly two iterations and says it was scripted", () => {
    expect(first.run.code, first.run.stderr).toBe(0);
    expect(first.notice?.scripted).toBe(true);
    expect(first.result.status).toBe("passed");
    expect(first.result.iterations).toBe(2);
    expect(first.result.stopReason).toBe("passed");
    expect(first.result.scripted).toBe(true);
    const files = first.result.files as Array<{ path: string; content: string }>;
    expect(files.map((f) => f.path)).toEqual(["solution.py"]);
    expect(files[0]?.content).toContain("def has_close_elements");
  });

  it("names the first iteration's failing test in the events and stores the failure", () => {
    const failed = first.events.find((e) => e.phase === "execute" && e.iteration === 1 && e.kind === "step");
    expect((failed?.data as { failingTests: string[] }).failingTests).toEqual(["test_has_close_elements"]);
    expect(failed?.message).toContain("test_has_close_elements");
    const ids = first.result.failureIds as string[];
    expect(ids).toHaveLength(1);
    const stored = first.events.find((e) => e.phase === "remember" && e.kind === "step");
    expect((stored?.data as { failureId: string }).failureId).toBe(ids[0]);
  });

  it("does not recall the task's own failure, and reflects on it in the second iteration's prompts", () => {
    const calls = readFileSync(transcript1, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const build2 = calls.find((c) => c.role === "build" && c.iteration === 2);
    expect(build2).toBeDefined();
    const prompt = JSON.stringify(build2?.messages);
    const recalled = first.events
      .filter((e) => e.kind === "step" && e.phase === "recall" && e.iteration === 1)
      .flatMap((e) => (e.data as { failureIds: string[] }).failureIds);
    // Memory was empty before this task: its own just-stored failure is not a recalled hint.
    expect(recalled).toEqual([]);
    expect(prompt).not.toContain("[memory:failure:");
    expect(prompt).toContain("Reflection on the failure");
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

  it("recalls the first run's failure in a second run on another task (memory persisted)", async () => {
    const second = await solve("HumanEval/2", await scriptFor("HumanEval/2"), join(dataDir, "t2.jsonl"));
    expect(second.run.code, second.run.stderr).toBe(0);
    expect(second.result.iterations).toBe(2);
    const recalled = second.events
      .filter((e) => e.kind === "step" && e.phase === "recall")
      .flatMap((e) => (e.data as { failureIds?: string[] }).failureIds ?? []);
    const firstFailure = (first.result.failureIds as string[])[0];
    expect(recalled).toContain(firstFailure);
    expect(recalled).not.toContain((second.result.failureIds as string[])[0]);
    // What recall returned reaches the second task's next prompt, tagged with its id.
    const calls = readFileSync(join(dataDir, "t2.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const build2 = calls.find((c) => c.role === "build" && c.iteration === 2);
    expect(JSON.stringify(build2?.messages)).toContain(`[memory:failure:${firstFailure}]`);
  });

  it("lists both tasks in history and counts them in stats", async () => {
    const history = await loopsmith(["history", "--json"], env);
    expect(history.code, history.stderr).toBe(0);
    const tasks = (
      JSON.parse(history.stdout) as { tasks: Array<{ taskId: string; status: string; scripted: boolean }> }
    ).tasks;
    expect(tasks).toHaveLength(2);
    expect(tasks.every((t) => t.status === "passed" && t.scripted)).toBe(true);
    // More than one page's worth asked for: read in pages, not refused.
    const many = await loopsmith(["history", "-n", "1000", "--json"], env);
    expect(many.code, many.stderr).toBe(0);
    expect((JSON.parse(many.stdout) as { tasks: unknown[] }).tasks).toHaveLength(2);
    const stats = await loopsmith(["stats", "--json"], env);
    const s = JSON.parse(stats.stdout) as {
      tasks: number;
      passed: number;
      failures: number;
      meanIterationsToPass: number;
      backend: string;
      passRate: number;
      recall: { recalls: number };
    };
    // Each task failed once, so each made one failure recall (logged for the hit rate).
    expect(s).toMatchObject({
      tasks: 2,
      passed: 2,
      failures: 2,
      meanIterationsToPass: 2,
      backend: "pglite",
      passRate: 1,
      recall: { recalls: 2 },
    });
    const last = await loopsmith(["stats", "--last", "1", "--since", "1d"], env);
    expect(last.code, last.stderr).toBe(0);
    expect(last.stdout).toContain("window: last 1 tasks since");
    expect(last.stdout).toMatch(/tasks: 1 \(1 passed, 100%\)/);
  });
});
