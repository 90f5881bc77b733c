import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import type { ZodType } from "zod";
import {
  Candidate,
  Plan,
  RunRecord,
  ScriptFile,
  Task,
  TaskId,
  type TaskEvent,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { createProvider, readStructured } from "@loopsmith/shared/llm";
import { loadConfig } from "@loopsmith/shared/runtime";
import { UNREADABLE_REPLY, compareRuns, replayScript, replaySolveOptions, replayTask, replayTaskId } from "./replay.js";
import { flagsOf } from "./steering.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const usage = (calls: number) => ({
  calls,
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0,
  latencyMs: 0,
});
const provider = { name: "anthropic", model: "claude-sonnet-4-6", scripted: false };
const plan = {
  summary: "greedy table",
  acceptanceCriteria: ["to_roman(4) == 'IV'"],
  steps: ["table"],
  files: ["roman.py"],
};
const candidate = (content: string) => ({ files: [{ path: "roman.py", content }], tests: [], notes: "" });
const reflection = { rootCause: "no pairs", hypothesis: "add pairs", fixPlan: "add (4, 'IV')" };

function result(over: Partial<TaskResult> = {}): TaskResult {
  return {
    v: 1,
    taskId: "rec",
    status: "passed",
    stopReason: "passed",
    iterations: 3,
    files: [{ path: "roman.py", content: "v2" }],
    tests: [],
    lastExecution: null,
    hidden: null,
    failureIds: [],
    // build: 2 calls (a re-ask) + 1 + 2 more that produced no reply (the last step's re-ask failed too).
    usage: { total: usage(7), byRole: { plan: usage(1), build: usage(5), reflect: usage(1) }, byIteration: [] },
    scripted: false,
    providers: ["anthropic:claude-sonnet-4-6"],
    durationMs: 1_000,
    message: "passed",
    ...over,
  };
}

/** A recorded run whose first build needed a re-ask (calls 2), with a later build and a reflection. */
function recorded(): RunRecord {
  const task = Task.parse({
    v: 1,
    taskId: "rec",
    goal: "to_roman",
    language: "python",
    submittedAt: "2026-01-01T00:00:00.000Z",
    review: true,
    files: [{ path: "README.md", content: "x" }],
    acceptanceTests: [{ path: "test_roman.py", content: "def test(): pass\n" }],
    hiddenTests: [{ path: "test_hidden.py", content: "def test(): pass\n" }],
    limits: { maxIterations: 7, maxCostUsd: 1 },
    source: { kind: "humaneval", id: "HumanEval/1" },
  });
  const llm = (seq: number, role: string, callsBefore: number, calls: number, value: unknown): TaskEvent => ({
    v: 1,
    taskId: "rec",
    seq,
    at: "t",
    iteration: 1,
    kind: "step",
    phase: role === "reflect" ? "reflect" : role === "plan" ? "plan" : "build",
    message: role,
    data: { llm: { role, callsBefore, calls, value, provider } },
  });
  const events: TaskEvent[] = [
    { v: 1, taskId: "rec", seq: 0, at: "t", iteration: 0, kind: "accepted", message: "accepted" },
    llm(1, "plan", 0, 1, plan),
    llm(2, "build", 0, 2, candidate("v1")),
    llm(3, "reflect", 0, 1, reflection),
    llm(4, "build", 2, 1, candidate("v2")),
    {
      v: 1,
      taskId: "rec",
      seq: 5,
      at: "t",
      iteration: 2,
      kind: "step",
      phase: "build",
      message: "no llm data here",
      data: { llm: { role: "build" } },
    },
  ];
  return RunRecord.parse({ v: 1, taskId: "rec", task, result: result(), events, recordedAt: "t" });
}

describe("replayScript", () => {
  it("puts each recorded reply at its call index, an unreadable reply before a re-ask and for calls with no reply", () => {
    const script = ScriptFile.parse(replayScript(recorded()));
    expect(script.description).toBe("replay of rec (recorded replies; no model is called)");
    expect(script.replies.plan).toEqual([plan]);
    expect(script.replies.reflect).toEqual([reflection]);
    // Call 0 was unreadable (the step used 2 calls), call 1 its reply, call 2 the next step's,
    // calls 3 and 4 are in the usage only (the last build's reply and its re-ask were unreadable).
    expect(script.replies.build).toEqual([
      UNREADABLE_REPLY,
      candidate("v1"),
      candidate("v2"),
      UNREADABLE_REPLY,
      UNREADABLE_REPLY,
    ]);
    expect(script.replies.spec).toBeUndefined();
    expect(script.replies.review).toBeUndefined();
  });

  it("writes a reply the tolerant reader cannot read", () => {
    expect(readStructured(UNREADABLE_REPLY, Plan).ok).toBe(false);
    expect(readStructured(UNREADABLE_REPLY, Candidate).ok).toBe(false);
  });

  it("is served by the scripted provider so the replay makes the same calls in the same order", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-replay-test-"));
    dirs.push(dir);
    const scriptFile = join(dir, "replay-rec.json");
    await writeFile(scriptFile, JSON.stringify(replayScript(recorded())));
    // The configuration `solve` builds from the replay's options: every role scripted.
    const config = loadConfig({ env: {}, flags: flagsOf(replaySolveOptions(join(dir, "task.json"), scriptFile)) });
    const llm = createProvider({ config, log: pino({ level: "silent" }) });
    expect(llm.info.scripted).toBe(true);
    const ask = <T>(role: "plan" | "build", schema: ZodType<T>, callsBefore: number) =>
      llm.complete({
        role,
        system: "s",
        messages: [{ role: "user", content: "go" }],
        schema,
        schemaName: role,
        context: { taskId: "rec-replay", iteration: 1, callsBefore },
      });
    expect((await ask("plan", Plan, 0)).value).toEqual(plan);
    const first = await ask("build", Candidate, 0);
    expect(first.value).toEqual(candidate("v1"));
    expect(first.usage.calls).toBe(2); // the unreadable reply, then the re-ask: as recorded
    expect(first.provider).toMatchObject({ name: "scripted", model: "script:replay-rec.json", scripted: true });
    const second = await ask("build", Candidate, 2);
    expect([second.value, second.usage.calls]).toEqual([candidate("v2"), 1]);
    await expect(ask("build", Candidate, 3)).rejects.toMatchObject({ code: "llm_bad_reply" });
  });
});

describe("replayTask", () => {
  it("keeps goal, language, files, tests, review, limits, source and repository under a new id", () => {
    const r = recorded();
    const t = Task.parse(replayTask(r, "rec-replay-abc123"));
    const { taskId, submittedAt, ...rest } = t;
    const { taskId: _id, submittedAt: before, ...original } = r.task;
    expect(rest).toEqual(original);
    expect(taskId).toBe("rec-replay-abc123");
    expect(submittedAt).not.toBe(before);
    const base = "a".repeat(40);
    const repo = {
      ...r,
      task: {
        ...r.task,
        repo: {
          baseCommit: base,
          snapshot: `tree-${base}.tar`,
          dependencies: "reject" as const,
          mapTokens: 2048,
          mode: "oneshot" as const,
        },
      },
    };
    expect(Task.parse(replayTask(repo, "x")).repo?.baseCommit).toBe(base);
  });

  it("names the replay after the task, within the task id limit", () => {
    expect(replayTaskId("rec")).toMatch(/^rec-replay-[0-9a-f]{6}$/);
    const long = replayTaskId("t".repeat(64));
    expect(TaskId.safeParse(long).success).toBe(true);
  });
});

describe("compareRuns", () => {
  it("finds nothing between equal results, whatever they cost or who answered", () => {
    expect(
      compareRuns(
        result(),
        result({
          scripted: true,
          providers: ["scripted:script:x.json"],
          durationMs: 5,
          usage: { total: usage(0), byRole: {}, byIteration: [] },
        }),
      ),
    ).toEqual({ same: true, differences: [] });
  });

  it("names each difference: status, stop reason, iterations and the final files", () => {
    const replayed = result({
      status: "failed",
      stopReason: "max_iterations",
      iterations: 7,
      files: [
        { path: "roman.py", content: "v3" },
        { path: "extra.py", content: "" },
      ],
      tests: [{ path: "test_gen.py", content: "" }],
    });
    const cmp = compareRuns(
      result({
        files: [
          { path: "roman.py", content: "v2" },
          { path: "gone.py", content: "" },
        ],
      }),
      replayed,
    );
    expect(cmp.same).toBe(false);
    expect(cmp.differences).toEqual([
      "status: passed in the recorded run, failed in the replay",
      "stop reason: passed in the recorded run, max_iterations in the replay",
      "iterations: 3 in the recorded run, 7 in the replay",
      "file roman.py differs",
      "file gone.py is only in the recorded run",
      "file extra.py is only in the replay",
      "generated test test_gen.py is only in the replay",
    ]);
  });

  it("compares the patch in repo mode, not the files", () => {
    const change = {
      baseCommit: "b".repeat(40),
      patch: "--- a/x\n+++ b/x\n",
      summary: "s",
      changed: ["x"],
      deleted: [],
    };
    expect(compareRuns(result({ repo: change }), result({ repo: change, files: [] })).same).toBe(true);
    const cmp = compareRuns(
      result({ repo: change }),
      result({ repo: { ...change, patch: "--- a/y\n+++ b/y\n@@\n", changed: ["y"] } }),
    );
    expect(cmp.differences).toEqual([
      "the patch differs (3 lines in the recorded run, 4 in the replay)",
      "changed files: x in the recorded run, y in the replay",
    ]);
    expect(compareRuns(result({ repo: change }), result()).differences).toEqual([
      "only the recorded run has a change against a base commit",
    ]);
  });
});
