/**
 * Lessons and each memory's measured use in the real memory store, on embedded PGlite and on
 * PostgreSQL + pgvector: a lesson comes before the raw failures it was learned from; one recalled
 * in three finished tasks that never passed afterwards is demoted (left out of recall, the raw
 * failure back in its place), `failures --utility` shows it, and a person's promotion brings it
 * back for good; bad input is refused with the field named.
 */
import { afterAll, describe, expect } from "vitest";
import { it as plain } from "vitest";
import type { LoopsmithError } from "@loopsmith/shared/runtime";
import { openMemoryStore, type MemoryStore } from "@loopsmith/memory";
import { failuresText, statsText } from "../../cli/src/output.js";
import { it } from "../fixtures/index.js";
import { freshDatabase, freshDataDir, removeFreshDirs } from "./fresh.js";
import { GOAL_A, GOAL_B, fixPlan, log, nameErrorFailure, type Fresh } from "./suite.js";

afterAll(removeFreshDirs);

const SIG = "NameError: name <id> is not defined";
const RULE = "A misspelt name raises NameError: use the name exactly as it was defined.";

const usage = {
  calls: 1,
  inputTokens: 10,
  outputTokens: 10,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0,
  latencyMs: 1,
};

async function recordTask(store: MemoryStore, taskId: string, passed: boolean, iterations: number): Promise<void> {
  await store.recordTask({
    v: 1,
    taskId,
    goal: GOAL_B,
    language: "python",
    status: passed ? "passed" : "failed",
    stopReason: passed ? "passed" : "max_iterations",
    iterations,
    usage,
    durationMs: 10,
    scripted: true,
    finishedAt: new Date().toISOString(),
  });
}

/** A task that fails like the source task, recalls (as the loop does after its failure, with the log), and ends. */
async function failingTask(store: MemoryStore, taskId: string, passed = false) {
  const failure = nameErrorFailure(taskId, GOAL_B, "balanse");
  await store.rememberFailure(failure);
  const req = {
    v: 1 as const,
    taskId,
    language: "python" as const,
    text: GOAL_B,
    errorText: failure.errorText,
    failingTests: failure.failingTests,
    iteration: 1,
  };
  const recall = await store.recall(req);
  await store.logUses(req, recall);
  await recordTask(store, taskId, passed, passed ? 2 : 5);
  return { recall, demoted: await store.judge(taskId) };
}

async function errorOf(p: Promise<unknown>): Promise<LoopsmithError> {
  return p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e as LoopsmithError,
  );
}

async function demotionScenario(f: Fresh): Promise<void> {
  const store = await openMemoryStore({ config: f.config, log });
  try {
    const source = await store.rememberFailure(nameErrorFailure("src", GOAL_A, "numbrs"));
    await store.attachFix({
      v: 1,
      taskId: "src",
      iteration: 1,
      idempotencyKey: "src/1/attach_fix",
      failureId: source.id,
      reflection: fixPlan,
    });
    const { ids } = await store.rememberLessons({
      v: 1,
      taskId: "src",
      iteration: 2,
      idempotencyKey: "src/2/lessons",
      language: "python",
      goal: GOAL_A,
      lessons: [{ signature: SIG, rule: RULE, source: "reflect" }],
      promptVersion: 1,
    });
    const lessonId = ids[0] as string;
    await recordTask(store, "src", true, 2);

    // Recalled in three tasks, none of which passed: demoted after the third, not before.
    for (const n of [1, 2, 3]) {
      const { recall, demoted } = await failingTask(store, `bad-${n}`);
      expect(recall.lessons?.map((l) => [l.id, l.taskId, l.match])).toEqual([[lessonId, "src", "signature"]]);
      // A lesson fits, so the raw failures stay out.
      expect(recall.failures).toEqual([]);
      expect(recall.lessons?.[0]?.use).toMatchObject({ recalledIn: n - 1, passedAfter: 0, demoted: false });
      expect(demoted).toEqual(n === 3 ? [`lesson:${lessonId}`] : []);
    }

    // Demoted: no longer recalled; the raw failure (never shown, so never judged) comes instead.
    const after = await store.recall({
      v: 1,
      taskId: "next",
      language: "python",
      text: GOAL_B,
      errorText: nameErrorFailure("next", GOAL_B, "x").errorText,
    });
    expect(after.lessons ?? []).toEqual([]);
    expect(after.failures.length).toBeGreaterThan(0);
    expect(new Set(after.failures.map((x) => x.signature))).toEqual(new Set([SIG]));

    const listed = await store.failures({ v: 1, utility: true, limit: 20 });
    const row = listed.utility?.find((u) => u.kind === "lesson" && u.id === lessonId);
    expect(row).toMatchObject({
      recalledIn: 3,
      passedAfter: 0,
      demoted: true,
      reason: "recalled in 3 tasks, none of which passed",
    });
    // Three shown, none passed, against the comparable tasks (none: every later task recalled it).
    expect(row?.utility).toBeCloseTo(1 / 5 - 1 / 2, 10);
    const text = failuresText(listed);
    expect(text).toContain(
      `lesson ${lessonId} DEMOTED: recalled in 3 finished tasks, 0 passed; utility -0.30 (s.e. 0.40) (recalled in 3 tasks, none of which passed)`,
    );
    expect(text).toContain(`lesson ${lessonId} · from task src · reflect role, lesson prompt v1 · DEMOTED`);

    const stats = await store.stats();
    expect(stats.utility).toMatchObject({ shown: 3, lessonsShown: 3, tasksShown: 3, measured: 1, demoted: 1 });
    expect(statsText(stats)).toContain("memories shown: 3 (3 lessons) to 3 tasks");

    // Promoted by hand: recalled again, and the rule no longer demotes it.
    await store.failures({ v: 1, limit: 1, verdict: { kind: "lesson", id: lessonId, demoted: false } });
    const again = await failingTask(store, "bad-4");
    expect(again.recall.lessons?.map((l) => l.id)).toEqual([lessonId]);
    expect(again.demoted).toEqual([]);
    const promoted = (await store.failures({ v: 1, limit: 20 })).lessons?.find((l) => l.id === lessonId);
    expect(promoted?.use).toMatchObject({ recalledIn: 4, passedAfter: 0, demoted: false, reason: "promoted by hand" });

    // Another owner sees neither the memory's use nor this task's recalls, and cannot judge it.
    const alice = await store.failures({ v: 1, utility: true, taskId: "bad-4", limit: 20 }, "alice");
    expect(alice.utility).toEqual([]);
    expect(alice.uses).toEqual([]);
    const refused = await errorOf(store.verdict({ v: 1, kind: "lesson", id: lessonId, demoted: true }, "alice"));
    expect(refused.code).toBe("not_found");

    // A task that passes after recalling it counts for it.
    const good = await failingTask(store, "good-1", true);
    expect(good.recall.lessons?.map((l) => l.id)).toEqual([lessonId]);
    const uses = (await store.failures({ v: 1, taskId: "good-1", limit: 5 })).uses ?? [];
    expect(uses).toEqual([
      expect.objectContaining({
        kind: "lesson",
        memoryId: lessonId,
        iteration: 1,
        taskPassed: true,
        taskIterations: 2,
      }),
    ]);
  } finally {
    await store.close();
  }
}

async function badInput(f: Fresh): Promise<void> {
  const store = await openMemoryStore({ config: f.config, log });
  try {
    const bad = await errorOf(
      store.rememberLessons({
        v: 1,
        taskId: "src",
        iteration: 2,
        idempotencyKey: "src/2/lessons",
        language: "python",
        goal: GOAL_A,
        lessons: [{ signature: SIG, rule: "short", source: "reflect" }],
        promptVersion: 1,
      }),
    );
    expect(bad.code).toBe("bad_request");
    expect(bad.message).toContain("lessons");
    expect(bad.message).toContain("rule");
    const missing = await errorOf(store.verdict({ v: 1, kind: "lesson", id: "424242", demoted: false }));
    expect(missing.code).toBe("not_found");
    expect(missing.message).toBe("no stored lesson has id 424242");
    const notAnId = await errorOf(store.verdict({ v: 1, kind: "failure", id: "abc", demoted: true }));
    expect(notAnId.code).toBe("bad_request");
    expect(notAnId.message).toContain("a memory id is a decimal number");
  } finally {
    await store.close();
  }
}

describe("lessons and measured use on embedded PGlite", () => {
  plain(
    "demotes a lesson recalled in 3 tasks that never passed; failures --utility shows it; promotion undoes it",
    async () => demotionScenario(await freshDataDir()),
  );
  plain("refuses bad lessons and verdicts with the field named", async () => badInput(await freshDataDir()));
});

describe("lessons and measured use on PostgreSQL + pgvector", () => {
  it("demotes a lesson recalled in 3 tasks that never passed; failures --utility shows it; promotion undoes it", async ({
    postgres,
  }) => demotionScenario(await freshDatabase(postgres)));
  it("refuses bad lessons and verdicts with the field named", async ({ postgres }) =>
    badInput(await freshDatabase(postgres)));
});
