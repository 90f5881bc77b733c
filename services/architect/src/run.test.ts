import pino from "pino";
import { describe, expect, it } from "vitest";
import { Task, type ExecutionRequest, type ExecutionResult, type TaskEvent } from "@loopsmith/shared/contracts";
import { applyEdits, renderEditFailures } from "@loopsmith/shared/workspace";
import { durationText, loopTexts } from "./event-texts.js";
import { briefFromError, briefFromExecution, briefFromFindings, failureLine } from "./failure.js";
import { executePhase, rememberPhase, scorePhase } from "./phases.js";
import { runLoop } from "./loop.js";
import { executionRequest, timeLeftMs } from "./requests.js";
import { MAX_SANDBOX_ERRORS, TaskRun } from "./run.js";
import { initialState, type TaskState } from "./state.js";
import type { LoopIO, Steps } from "./steps.js";

const result = (status: ExecutionResult["status"], reason?: string): ExecutionResult => ({
  status,
  exitCode: status === "passed" ? 0 : null,
  durationMs: 5,
  stdout: "",
  stderr: "",
  truncated: false,
  tests: status === "passed" ? [{ name: "test_a", classname: "", status: "passed", durationMs: 1 }] : [],
  ...(reason ? { reason } : {}),
});

/** A conductor's I/O as far as a run goes: the checkpoints written and the events published, in order. */
function io(): { io: LoopIO; checkpoints: TaskState[]; events: TaskEvent[] } {
  const checkpoints: TaskState[] = [];
  const events: TaskEvent[] = [];
  return {
    checkpoints,
    events,
    io: {
      checkpoint: async (s) => void checkpoints.push(s),
      emit: async (e) => void events.push(e),
      heartbeat: () => undefined,
      cancelled: () => false,
      stopping: () => false,
      log: pino({ level: "silent" }),
    },
  };
}

/** Steps whose sandbox answers `results` in turn (the last one again after), recording each request. */
function sandbox(results: ExecutionResult[]): { steps: Steps; requests: ExecutionRequest[] } {
  const requests: ExecutionRequest[] = [];
  const steps = {
    execute: async (req: ExecutionRequest) => {
      requests.push(req);
      return results[Math.min(requests.length - 1, results.length - 1)]!;
    },
  } as unknown as Steps;
  return { steps, requests };
}

function state(over: Partial<Task> = {}): TaskState {
  const task = Task.parse({
    v: 1,
    taskId: "t-run",
    goal: "add",
    language: "python",
    submittedAt: new Date().toISOString(),
    ...over,
  });
  return {
    ...initialState(task),
    phase: "execute",
    iteration: 1,
    candidate: { files: [{ path: "add.py", content: "def add(a, b): return a + b\n" }], tests: [], notes: "" },
  };
}

const request = (s: TaskState) => (attempt: number) => executionRequest(s, "execute", [], undefined, attempt);

describe("the run's sandbox retry", () => {
  it("retries a sandbox failure as a new attempt, checkpointing the count before each try", async () => {
    const { steps, requests } = sandbox([
      result("sandbox_error", "container died"),
      result("sandbox_error", "container died"),
      result("passed"),
    ]);
    const out = io();
    const s = state();
    const run = new TaskRun(s, steps, out.io);
    const r = await run.sandbox("execute", request(s), loopTexts.sandboxFailed);
    expect(r.status).toBe("passed");
    expect(requests.map((q) => q.idempotencyKey)).toEqual([
      "t-run/1/execute",
      "t-run/1/execute.1",
      "t-run/1/execute.2",
    ]);
    // A checkpoint after each failure, holding the count the next try runs with.
    expect(out.checkpoints.map((c) => c.sandboxErrors)).toEqual([1, 2]);
    expect(out.events.filter((e) => e.kind === "warning").map((e) => e.message)).toEqual([
      loopTexts.sandboxFailed("container died"),
      loopTexts.sandboxFailed("container died"),
    ]);
    // The count is reset once the sandbox answered (the phase's checkpoint records it).
    expect(run.s.sandboxErrors).toBe(0);
  });

  it("a run resumed from the checkpoint goes on at the next attempt number", async () => {
    const first = sandbox([result("sandbox_error", "engine gone")]);
    const out = io();
    const s = state();
    let calls = 0;
    // The conductor dies on the second try: the checkpoint written after the first failure is what is left.
    const dying = {
      execute: async (req: ExecutionRequest) =>
        ++calls === 2 ? Promise.reject(new Error("killed")) : first.steps.execute(req),
    } as unknown as Steps;
    await expect(new TaskRun(s, dying, out.io).sandbox("execute", request(s), loopTexts.sandboxFailed)).rejects.toThrow(
      "killed",
    );
    const saved = out.checkpoints.at(-1)!;
    expect(saved.sandboxErrors).toBe(1);

    const second = sandbox([result("passed")]);
    const r = await new TaskRun(saved, second.steps, io().io).sandbox(
      "execute",
      request(saved),
      loopTexts.sandboxFailed,
    );
    expect(r.status).toBe("passed");
    expect(second.requests.map((q) => q.idempotencyKey)).toEqual(["t-run/1/execute.1"]);
  });

  it(`gives up after ${MAX_SANDBOX_ERRORS} failures in a row, and EXECUTE stops with its text`, async () => {
    const { steps, requests } = sandbox([result("sandbox_error", "no engine")]);
    const out = io();
    const s = state();
    const run = new TaskRun(s, steps, out.io);
    const outcome = await executePhase(s, run);
    expect(requests).toHaveLength(MAX_SANDBOX_ERRORS);
    expect(outcome).toMatchObject({
      stop: "error",
      message: "stopped: the sandbox failed 3 times in a row: no engine",
    });
    // A warning (and a checkpoint) between tries only.
    expect(out.events.filter((e) => e.kind === "warning")).toHaveLength(MAX_SANDBOX_ERRORS - 1);
    expect(out.checkpoints.map((c) => c.sandboxErrors)).toEqual([1, 2]);
  });
});

describe("EXECUTE and SCORE", () => {
  it("a pass goes to SCORE with the history line; SCORE runs only the hidden tests and stops as passed", async () => {
    const { steps, requests } = sandbox([result("passed")]);
    const s = state({ hiddenTests: [{ path: "test_hidden.py", content: "def test_h(): pass\n" }] });
    const run = new TaskRun(s, steps, io().io);
    const executed = await executePhase(s, run);
    expect(executed).toMatchObject({ next: "score", patch: { history: ["iteration 1: passed"] } });
    const final = await run.advance(executed);
    expect(final).toBeUndefined();
    expect(run.s.phase).toBe("score");
    const scored = await scorePhase(run.s, run);
    expect(scored).toMatchObject({
      stop: "passed",
      message: "passed after 1 iteration",
      hidden: { status: "passed", passed: 1, total: 1 },
    });
    expect(requests.at(-1)).toMatchObject({ idempotencyKey: "t-run/1/score", tests: ["test_hidden.py"] });
  });

  it("SCORE without hidden tests runs nothing", async () => {
    const { steps, requests } = sandbox([result("passed")]);
    const s = { ...state(), phase: "score" as const, iteration: 2 };
    expect(await scorePhase(s, new TaskRun(s, steps, io().io))).toEqual({
      stop: "passed",
      message: "passed after 2 iterations",
      hidden: null,
    });
    expect(requests).toHaveLength(0);
  });
});

/** An edit_failed brief as BUILD makes it: the rendered failures of an edit whose search is not in the file. */
function editFailed(): ReturnType<typeof briefFromError> {
  const applied = applyEdits(
    [{ path: "slug.py", search: "return title\n", replace: "return t\n", delete: false }],
    (p) => (p === "slug.py" ? "def slugify(title):\n    return title.lower()\n" : undefined),
  );
  if (applied.ok) throw new Error("the edit applied");
  return briefFromError(1, "edit_failed", renderEditFailures(applied.failures));
}

describe("failureLine", () => {
  it("names the failing tests, the failed edits and their files, or the first line said", () => {
    const failed = {
      ...result("failed"),
      tests: ["a", "b", "c", "d", "e", "f", "g"].map((n) => ({
        name: `test_${n}`,
        classname: "",
        status: "failed" as const,
        durationMs: 1,
      })),
    };
    expect(failureLine(briefFromExecution(1, failed))).toBe(
      "failed: failing test_a, test_b, test_c, test_d, test_e and 2 more",
    );
    expect(failureLine(editFailed())).toMatch(/^edit_failed: Edit 1 \(slug\.py\), not_found: \S/);
    expect(failureLine(editFailed())).not.toContain("none of the edits was applied");
    const blocked = briefFromFindings(1, "blocked", [
      { severity: "blocker", message: "calls os.system", path: "slug.py", line: 3, rule: "py.exec" },
    ]);
    expect(failureLine(blocked)).toBe("blocked: blocker: calls os.system (slug.py:3)");
    // The output's stream labels are not what it said.
    const timedOut = briefFromExecution(1, { ...result("timeout"), stderr: "\n\nKilled after 60 s\n" });
    expect(failureLine(timedOut)).toBe("timeout: Killed after 60 s");
    expect(failureLine(briefFromError(1, "llm_bad_reply", ""))).toBe("llm_bad_reply");
    expect(failureLine(briefFromError(1, "llm_bad_reply", "x".repeat(1_000)))).toHaveLength(400);
  });
});

describe("REMEMBER at the iteration limit", () => {
  it("stops max_iterations with a message saying how the last iteration failed", async () => {
    const failure = editFailed();
    const base = state({ memory: "off" });
    const task = { ...base.task, limits: { ...base.task.limits, maxIterations: 1 } };
    const s: TaskState = { ...base, task, phase: "remember", failure };
    const steps = { rememberFailure: async () => ({ id: "f1", signature: "edit_failed: <str>" }) } as unknown as Steps;
    const outcome = await rememberPhase(s, new TaskRun(s, steps, io().io));
    expect(outcome).toMatchObject({ stop: "max_iterations" });
    const message = (outcome as { message: string }).message;
    expect(message).toBe(`stopped after 1 iterations without passing; the last: ${failureLine(failure)}`);
    expect(message).toMatch(
      /^stopped after 1 iterations without passing; the last: edit_failed: Edit 1 \(slug\.py\), not_found: /,
    );
  });
});

describe("the task's wall-clock limit", () => {
  const limited = (timeLimitMs: number, startedMsAgo: number, phase: TaskState["phase"]): TaskState => {
    const base = state({ limits: { timeLimitMs } as Task["limits"] });
    const startedAtMs = Date.now() - startedMsAgo;
    return { ...base, phase, startedAtMs, startedAt: new Date(startedAtMs).toISOString() };
  };
  const recorded = () => {
    const records: unknown[] = [];
    const box = sandbox([result("passed")]);
    const steps = {
      ...box.steps,
      recordTask: async (r: unknown) => (records.push(r), { id: "r-1" }),
    } as unknown as Steps;
    return { steps, records, requests: box.requests };
  };

  it("is counted from the checkpointed start: what is left, none without a limit", () => {
    const s = limited(60_000, 0, "recall");
    expect(timeLeftMs(s, s.startedAtMs + 45_000)).toBe(15_000);
    expect(timeLeftMs(s, s.startedAtMs + 61_000)).toBe(-1_000);
    expect(timeLeftMs(state(), Date.now() + 10 ** 9)).toBeUndefined();
  });

  it("stops a task resumed past its limit with time_limit before any step runs", async () => {
    const { steps, records, requests } = recorded();
    const out = io();
    // Resumed from a checkpoint whose start is 3 s ago, with a limit of 2 s: no step runs.
    const final = await runLoop(limited(2_000, 3_000, "execute"), steps, out.io);
    expect(final.result).toMatchObject({ status: "failed", stopReason: "time_limit", iterations: 1 });
    expect(final.result?.message).toMatch(
      /^stopped: the task's time limit of 2 s passed \(ran 3(\.\d)? s, 1 iteration\)$/,
    );
    expect(final.result?.durationMs).toBeGreaterThanOrEqual(3_000);
    expect(out.events.map((e) => e.kind)).toEqual(["result"]);
    expect(records).toHaveLength(1);
    expect(requests).toHaveLength(0);
  });

  it("does not turn a task that passed and is being scored into time_limit", async () => {
    const { steps } = recorded();
    const final = await runLoop({ ...limited(1_000, 5_000, "score") }, steps, io().io);
    expect(final.result).toMatchObject({ status: "passed", stopReason: "passed" });
  });

  it("runs the phases of a task within its limit", async () => {
    const { steps } = recorded();
    const final = await runLoop(limited(60_000, 0, "score"), steps, io().io);
    expect(final.result?.stopReason).toBe("passed");
  });
});

describe("durationText", () => {
  it("says seconds, minutes and hours as people read them", () => {
    expect(durationText(1_500)).toBe("1.5 s");
    expect(durationText(2_000)).toBe("2 s");
    expect(durationText(45_000)).toBe("45 s");
    expect(durationText(30 * 60_000)).toBe("30 min");
    expect(durationText(2 * 3_600_000 + 5 * 60_000)).toBe("2 h 5 min");
    expect(durationText(90_000)).toBe("1 min 30 s");
  });
});
