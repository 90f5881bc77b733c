import { describe, expect, it } from "vitest";
import { Task, type TaskInput } from "@loopsmith/shared/contracts";
import { initialState, type TaskState } from "./state.js";
import { forCheckpoint, verdictFiles } from "./verdict.js";

function state(over: Partial<TaskInput>, candidate: TaskState["candidate"]): TaskState {
  const task = Task.parse({
    v: 1,
    taskId: "t1",
    goal: "g",
    language: "python",
    submittedAt: new Date().toISOString(),
    ...over,
  });
  return { ...initialState(task), candidate };
}

describe("verdictFiles", () => {
  it("leaves out the candidate's runner configuration and replaced acceptance tests; the task's files stay", () => {
    const s = state(
      {
        files: [{ path: "setup.cfg", content: "task's own" }],
        acceptanceTests: [{ path: "test_a.py", content: "real" }],
      },
      {
        files: [
          { path: "solution.py", content: "x" },
          { path: "conftest.py", content: "evil" },
          { path: "setup.cfg", content: "evil" },
          { path: "test_a.py", content: "fake" },
          { path: "test_helpers.py", content: "the candidate's own module named like a test" },
        ],
        tests: [{ path: "pkg/pytest.ini", content: "evil" }],
        notes: "",
      },
    );
    const v = verdictFiles(s);
    expect(v.ignored.sort()).toEqual(["conftest.py", "pkg/pytest.ini", "setup.cfg", "test_a.py"]);
    const byPath = Object.fromEntries(v.files.map((f) => [f.path, f.content]));
    expect(byPath).toEqual({
      "setup.cfg": "task's own",
      "solution.py": "x",
      "test_a.py": "real",
      "test_helpers.py": "the candidate's own module named like a test",
    });
    // Exactly the acceptance tests run, not a candidate module that looks like a test.
    expect(v.tests).toEqual(["test_a.py"]);
  });

  it("runs the generated tests when the task has none, and leaves them out for the hidden-test score", () => {
    const s = state(
      {},
      { files: [{ path: "solution.py", content: "x" }], tests: [{ path: "test_gen.py", content: "t" }], notes: "" },
    );
    expect(verdictFiles(s).tests).toEqual(["test_gen.py"]);
    const scored = verdictFiles(s, { generatedTests: false });
    expect(scored.files.map((f) => f.path)).toEqual(["solution.py"]);
    expect(scored.tests).toBeUndefined();
  });
});

describe("forCheckpoint", () => {
  it("keeps failing test cases first and the run's counts when it trims the list", () => {
    const tests = Array.from({ length: 2_000 }, (_, i) => ({
      name: `t${i}`,
      classname: "",
      status: i === 1_999 ? ("failed" as const) : ("passed" as const),
      durationMs: 0,
    }));
    const r = forCheckpoint({
      status: "failed",
      exitCode: 1,
      durationMs: 1,
      tests,
      stdout: "",
      stderr: "",
      truncated: false,
    });
    expect(r.tests).toHaveLength(500);
    expect(r.tests[0]?.name).toBe("t1999");
    expect(r.summary).toEqual({ total: 2_000, passed: 1_999, failed: 1, error: 0, skipped: 0 });
  });
});
