import { describe, expect, it } from "vitest";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { Task, type FailureBrief } from "@loopsmith/shared/contracts";
import type { LessonsRecord } from "@loopsmith/shared/llm";
import { distilLessons, lessonTexts } from "./lessons.js";
import type { TaskRun } from "./run.js";
import { initialState, type TaskState } from "./state.js";
import type { Steps } from "./steps.js";

const SIG = "NameError: name <id> is not defined";
const failure: FailureBrief = {
  iteration: 1,
  status: "failed",
  signature: SIG,
  failingTests: ["test_add"],
  output: "",
  findings: [],
};

function state(over: Partial<TaskState> = {}, memory: "on" | "off" = "on"): TaskState {
  const task = Task.parse({
    v: 1,
    taskId: "t-lessons",
    goal: "write add(a, b)",
    language: "python",
    files: [],
    acceptanceTests: [],
    submittedAt: new Date().toISOString(),
    memory,
  });
  return {
    ...initialState(task),
    iteration: 2,
    failures: [failure],
    candidate: {
      files: [{ path: "solution.py", content: "def add(a, b):\n    total = a + b\n    return total\n" }],
      tests: [],
      notes: "",
    },
    reflection: { rootCause: "add returns totl, not total.", hypothesis: "h", fixPlan: "Return total." },
    ...over,
  };
}

/** A run whose steps are `steps`, recording what it emits, stores and counts as LLM failures. */
function fakeRun(s: TaskState, steps: Partial<Steps>) {
  const events: Array<{ kind: string; message: string; data?: unknown }> = [];
  const stored: LessonsRecord[] = [];
  const failures: unknown[] = [];
  const run = {
    steps: {
      rememberLessons: async (req: LessonsRecord) => (
        stored.push(req),
        { ids: req.lessons.map((_, i) => String(i + 1)) }
      ),
      ...steps,
    },
    llm: async (_role: string, _step: string, call: (head: unknown) => Promise<{ value: unknown }>) => {
      const reply = await call({
        v: 1,
        taskId: s.task.taskId,
        iteration: s.iteration,
        idempotencyKey: "k",
        callsBefore: 1,
      });
      return { value: reply.value, data: {} };
    },
    emit: async (kind: string, message: string, extra: { data?: unknown } = {}) =>
      void events.push({ kind, message, data: extra.data }),
    llmFailure: async (err: unknown) => (failures.push(err), "iteration_failed"),
    safely: async <T>(fn: () => Promise<T>) => fn(),
  } as unknown as TaskRun;
  return { run, events, stored, failures };
}

const reply = (lessons: unknown) => async () => ({ value: { lessons }, usage: {}, provider: {} }) as never;

describe("LESSONS after a pass", () => {
  it("stores the reflect role's lessons, scrubbed of the candidate's names", async () => {
    const s = state();
    const r = fakeRun(s, {
      distil: reply([{ signature: SIG, rule: "Return total, the name add assigned, not a misspelling." }]),
    });
    await distilLessons(s, r.run);
    expect(r.stored).toHaveLength(1);
    expect(r.stored[0]).toMatchObject({
      taskId: "t-lessons",
      iteration: 2,
      promptVersion: 1,
      lessons: [
        { signature: SIG, rule: "Return <name>, the name <name> assigned, not a misspelling.", source: "reflect" },
      ],
    });
    expect(r.events.map((e) => e.message)).toEqual([lessonTexts.learned(1, "reflect")]);
  });

  it("falls back to the last reflection on an unreadable reply, counting it as the LLM step's failure", async () => {
    const s = state();
    const bad = new LoopsmithError("llm_bad_reply", "the reply is not JSON");
    const r = fakeRun(s, { distil: async () => Promise.reject(bad) });
    await distilLessons(s, r.run);
    expect(r.failures).toEqual([bad]);
    expect(r.stored[0]?.lessons).toEqual([
      { signature: SIG, rule: "<name> returns totl, not <name>. Fix: Return <name>.", source: "fallback" },
    ]);
  });

  it("skips the lesson when the provider has no lesson reply: one step line, nothing stored, no LLM failure", async () => {
    const s = state();
    const none = new LoopsmithError("provider_unconfigured", "the script s.json has no lesson reply for task t");
    const r = fakeRun(s, { distil: async () => Promise.reject(none) });
    await distilLessons(s, r.run);
    expect(r.stored).toEqual([]);
    expect(r.failures).toEqual([]);
    expect(r.events).toEqual([{ kind: "step", message: lessonTexts.noReply(none.message), data: undefined }]);
  });

  it("warns and falls back on any other error (the budget), and without the lesson call", async () => {
    const s = state();
    const r = fakeRun(s, { distil: async () => Promise.reject(new LoopsmithError("budget_exceeded", "budget spent")) });
    await distilLessons(s, r.run);
    expect(r.events[0]).toMatchObject({ kind: "warning", message: lessonTexts.unusable("budget spent") });
    expect(r.stored[0]?.lessons[0]?.source).toBe("fallback");
    const plain = fakeRun(s, {});
    await distilLessons(s, plain.run);
    expect(plain.stored[0]?.lessons[0]?.source).toBe("fallback");
  });

  it("warns when nothing can be learned: no usable lesson and no reflection", async () => {
    const s = state({ reflection: undefined });
    const r = fakeRun(s, { distil: reply([{ signature: "KeyError: <str>", rule: "x" }]) });
    // With one signature the reply's lesson is taken as about it, but its rule says nothing.
    await distilLessons(s, r.run);
    expect(r.stored).toEqual([]);
    expect(r.events.map((e) => e.message)).toEqual([lessonTexts.unusable(lessonTexts.noneFit), lessonTexts.none]);
  });

  it("does nothing with memory off, without failures, or without a way to store lessons", async () => {
    for (const s of [state({}, "off"), state({ failures: [] })]) {
      const r = fakeRun(s, { distil: reply([{ signature: SIG, rule: "Spell the name as it was defined." }]) });
      await distilLessons(s, r.run);
      expect(r.stored).toEqual([]);
      expect(r.events).toEqual([]);
    }
    const s = state();
    const r = fakeRun(s, { rememberLessons: undefined });
    await distilLessons(s, r.run);
    expect(r.events).toEqual([]);
  });
});
