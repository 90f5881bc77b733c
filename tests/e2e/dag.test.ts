/**
 * A DAG task end to end, as examples/rest-api/README.md runs it: `loopsmith solve --repo
 * <dir> --decompose --parallel 2` on the scripted provider, through NATS, the five services,
 * the object store and the Docker sandbox. Asserts the DAG the run reports, that the two
 * independent subtasks overlapped, that storage's failed first attempt was retried as a new
 * child task, that each subtask's own tests and then the whole suite passed in the sandbox,
 * and the branch the client made.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { DagProgress, TaskEvent } from "@loopsmith/shared/contracts";
import { REPO, jsonLines, loopsmith } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-dag-e2e-"));
const env = {
  LOOPSMITH_DATA_DIR: dataDir,
  NATS_URL: "",
  DATABASE_URL: "",
  ANTHROPIC_API_KEY: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "info",
};
const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: "User",
  GIT_AUTHOR_EMAIL: "user@example.com",
  GIT_COMMITTER_NAME: "User",
  GIT_COMMITTER_EMAIL: "user@example.com",
};
const git = (dir: string, ...args: string[]): string =>
  execFileSync("git", ["-C", dir, ...args], { env: gitEnv, encoding: "utf8" }).trim();
const GOAL = "Build the REST API for todo items that README.md describes: Python, standard library only, with tests";

describe("solve --repo --decompose on examples/rest-api (scripted, real sandbox)", () => {
  it("plans five subtasks, runs storage and validation side by side, retries storage once, and integrates", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-todo-api-"));
    cpSync(join(REPO, "examples", "rest-api", "repo"), dir, { recursive: true });
    git(dir, "init", "-q", "-b", "main");
    git(dir, "add", "-A");
    git(dir, "commit", "-q", "-m", "the specification");
    const taskId = `todo-api-${Date.now().toString(36)}`;
    const run = await loopsmith(
      [
        "solve",
        "--repo",
        dir,
        GOAL,
        "--decompose",
        "--parallel",
        "2",
        "--provider",
        "scripted",
        "--script",
        join(REPO, "examples", "rest-api", "script.json"),
        "--task-id",
        taskId,
        "--json",
      ],
      env,
      600_000,
    );
    expect(run.code, `${run.stdout.slice(-4000)}\n${run.stderr.slice(-4000)}`).toBe(0);
    const lines = jsonLines(run.stdout);
    const events = lines.filter((l) => l.taskId === taskId && typeof l.seq === "number") as unknown as TaskEvent[];
    // --json: the task's events, then the result object.
    const result = lines.find((l) => l.taskId === taskId && typeof l.stopReason === "string");
    expect(result).toMatchObject({ status: "passed", stopReason: "passed", scripted: true });

    // The DAG as the last events report it: five subtasks, storage on its second attempt.
    const dag = events.filter((e) => e.data?.dag).at(-1)?.data?.dag as DagProgress;
    expect(dag.subtasks.map((s) => [s.id, s.status, s.attempt, s.dependsOn])).toEqual([
      ["model", "passed", 1, []],
      ["storage", "passed", 2, ["model"]],
      ["validation", "passed", 1, ["model"]],
      ["handlers", "passed", 1, ["storage", "validation"]],
      ["app", "passed", 1, ["handlers"]],
    ]);
    const at = (sub: string, prefix: string): number =>
      Date.parse(
        events.find((e) => e.subtaskId === sub && e.message.startsWith(`subtask ${sub}: ${prefix}`))?.at ?? "",
      );
    // storage (both attempts) and validation overlapped: each started before the other finished.
    expect(at("storage", "running")).toBeLessThan(at("validation", "passed"));
    expect(at("validation", "running")).toBeLessThan(at("storage", "passed"));
    expect(at("handlers", "running")).toBeGreaterThanOrEqual(at("storage", "passed"));
    expect(
      events.some((e) => e.subtaskId === "storage" && /^subtask storage: attempt 1 failed \(stuck/.test(e.message)),
    ).toBe(true);

    // The integration run: the repository's own command over the merged tree, every test file.
    const integration = events.find((e) => e.phase === "integrate" && e.kind === "step");
    expect(integration?.message).toMatch(/^integration: passed \((\d+) tests, 0 failing\)$/);
    expect(Number(/\((\d+) tests/.exec(integration?.message ?? "")?.[1])).toBeGreaterThanOrEqual(30);

    // The change on its branch: five modules, the package's __init__, five test files.
    const branch = `loopsmith/${taskId}`;
    const files = git(dir, "diff", "--name-only", "main", branch).split("\n").sort();
    expect(files).toEqual([
      "tests/test_app.py",
      "tests/test_handlers.py",
      "tests/test_model.py",
      "tests/test_storage.py",
      "tests/test_validation.py",
      "todo_api/__init__.py",
      "todo_api/app.py",
      "todo_api/handlers.py",
      "todo_api/model.py",
      "todo_api/storage.py",
      "todo_api/validation.py",
    ]);
    // The user's branch and work tree are as they were.
    expect(git(dir, "rev-parse", "--abbrev-ref", "HEAD")).toBe("main");
    expect(git(dir, "status", "--porcelain")).toBe("");

    // --json also carries the child tasks' events, each naming its parent and subtask.
    const childEvents = lines.filter((l) => l.parentTaskId === taskId);
    expect(new Set(childEvents.map((l) => l.taskId))).toEqual(
      new Set(
        ["model-a1", "storage-a1", "storage-a2", "validation-a1", "handlers-a1", "app-a1"].map(
          (c) => `${taskId}--${c}`,
        ),
      ),
    );
    expect(
      childEvents.filter((l) => l.taskId === `${taskId}--storage-a2`).every((l) => l.subtaskId === "storage"),
    ).toBe(true);

    // history lists the children under their parent.
    const history = await loopsmith(["history", "-n", "20"], env, 120_000);
    expect(history.code, history.stderr).toBe(0);
    const rows = history.stdout.split("\n");
    const parentRow = rows.findIndex((l) => l.includes(taskId) && !l.includes(`${taskId}--`));
    expect(parentRow).toBeGreaterThanOrEqual(0);
    expect(rows.slice(parentRow + 1, parentRow + 7).every((l) => /^\s+/.test(l) && l.includes(`${taskId}--`))).toBe(
      true,
    );

    // A child task is a task of its own: `show` reads storage's failed first attempt back.
    const shown = await loopsmith(["show", `${taskId}--storage-a1`, "--json"], env, 120_000);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('"stopReason":"stuck"');
  }, 900_000);
});
