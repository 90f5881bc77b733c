/**
 * Lessons through the loop, on real NATS JetStream and the real memory service (over NATS, on
 * embedded PGlite and on PostgreSQL + pgvector): the real planner (reflection and the lesson
 * call) and builder answer on the scripted provider, the sandbox is a function. Two related
 * tasks make the same mistake (a misspelt name, `NameError`) and pass on their second
 * iteration. The first task's failures become a lesson written by the reflect role; the second
 * task's build prompt after its failure carries that lesson (its id, the task it came from) and
 * no raw failure, and the recall-use log records that the lesson was shown, at which
 * iteration, and that the next iteration and the task passed. A lesson reply that is garbage
 * gives a warning and the fallback lesson (the last reflection's). A script with no lesson reply
 * learns nothing (one step line, no re-ask), and the later tasks' hints are the raw failures,
 * each named with its source task and measured use, which the recall reply carries.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { describe, expect } from "vitest";
import { Config, loadConfig, runService } from "@loopsmith/shared/runtime";
import { DEFAULT_OWNER, Endpoints, call } from "@loopsmith/shared/bus";
import { type ExecutionResult, type Task } from "@loopsmith/shared/contracts";
import { rememberLessonsEndpoint, createProvider, type TranscriptLine } from "@loopsmith/shared/llm";
import { createPlanner, type Steps } from "@loopsmith/architect";
import { createBuilder } from "@loopsmith/builder";
import { memoryService } from "@loopsmith/memory";
import { it, type Started } from "../fixtures/index.js";
import { failed, log, passed, runTask, steps, task, withConductor } from "../architect/helpers.js";
import { freshDatabase, freshDataDir, removeFreshDirs } from "./fresh.js";

const SIGNATURE = "NameError: name <id> is not defined";
const RULE =
  "A misspelt local name raises NameError: return the variable that was assigned, spelt exactly as assigned.";
const WRONG = (fn: string) => `def ${fn}(a, b):\n    total = a + b\n    return totl\n`;
const RIGHT = (fn: string) => `def ${fn}(a, b):\n    total = a + b\n    return total\n`;

function replies(fn: string, lesson: unknown) {
  return {
    plan: [{ summary: `write ${fn}`, acceptanceCriteria: [], steps: [], files: ["solution.py"] }],
    build: [
      { files: [{ path: "solution.py", content: WRONG(fn) }], tests: [], notes: "" },
      { files: [{ path: "solution.py", content: RIGHT(fn) }], tests: [], notes: "" },
    ],
    reflect: [
      {
        rootCause: `The return statement of ${fn} names totl, a misspelling of total.`,
        hypothesis: "The name was mistyped.",
        fixPlan: "Return total.",
      },
      lesson,
    ],
  };
}

/**
 * Steps with the real planner and builder on one scripted provider (its transcript kept), the
 * memory steps over NATS to the memory service, and a sandbox that passes when the solution
 * returns `total`.
 */
function loopSteps(nc: NatsConnection, scripts: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-lessons-llm-"));
  const scriptPath = join(dir, "script.json");
  const transcriptPath = join(dir, "transcript.jsonl");
  writeFileSync(scriptPath, JSON.stringify({ v: 1, kind: "loopsmith-script", replies: {}, tasks: scripts }));
  const config = Config.parse({ llm: { provider: "scripted", scriptPath, transcriptPath } });
  const provider = createProvider({ config, log });
  const planner = createPlanner({ provider, log });
  const builder = createBuilder({ provider, log });
  const m = Endpoints.memory;
  const s: Steps = {
    ...steps([failed()]).steps,
    plan: (req) => planner.plan(req),
    reflect: (req) => planner.reflect(req),
    distil: (req) => (planner.distil as NonNullable<typeof planner.distil>)(req),
    build: (req) => builder.build(req),
    execute: async (req): Promise<ExecutionResult> =>
      req.files.some((f) => f.path === "solution.py" && f.content.includes("return total\n"))
        ? passed
        : failed("NameError: name 'totl' is not defined"),
    recall: (req) => call(nc, m.recall, req),
    rememberFailure: (req) => call(nc, m.rememberFailure, req),
    attachFix: (req) => call(nc, m.attachFix, req),
    rememberSuccess: (req) => call(nc, m.rememberSuccess, req),
    recordTask: (req) => call(nc, m.recordTask, req),
    rememberLessons: (req) => call(nc, rememberLessonsEndpoint, req),
  };
  /** The transcript's build prompts of `taskId`, in order, each as its messages joined. */
  const builds = (taskId: string): string[] =>
    readFileSync(transcriptPath, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as TranscriptLine)
      .filter((l) => l.role === "build" && l.taskId === taskId)
      .map((l) => l.messages.map((x) => x.content).join("\n"));
  return { steps: s, builds };
}

/** Runs `fn` with the memory service of `env` (a data dir or a database) on NATS at `nats`. */
async function withMemory<T>(nats: Started, env: Record<string, string>, fn: (nc: NatsConnection) => Promise<T>) {
  const config = loadConfig({ env: { NATS_URL: nats.url, ...env } });
  const running = await runService("memory", (deps) => memoryService(deps), { config, log });
  try {
    return await fn(running.nc);
  } finally {
    await running.stop();
  }
}

async function twoRelatedTasks(nats: Started, env: Record<string, string>): Promise<void> {
  const lesson = { lessons: [{ signature: SIGNATURE, rule: RULE }] };
  const first = task({ goal: "Write add(a, b): return the sum of a and b." });
  const second = task({ goal: "Write add_pair(a, b): return the sum of the two numbers a and b." });
  await withMemory(nats, env, async (mnc) => {
    const r = loopSteps(mnc, {
      [first.taskId]: replies("add", lesson),
      [second.taskId]: replies("add_pair", lesson),
    });
    await withConductor(nats.url, r.steps, async (nc) => {
      const one = await runTask(nc, first);
      expect(one.result.status).toBe("passed");
      const learned = one.events.find((e) => e.data?.lessonIds !== undefined);
      expect(learned?.message).toContain("written by the reflect role");
      const lessonId = (learned?.data?.lessonIds as string[])[0] as string;

      const two = await runTask(nc, second);
      expect(two.result.status).toBe("passed");
      expect(two.result.iterations).toBe(2);
      // The second build of the second task: the first task's lesson, named with its source task
      // and its record, and no raw failure (a lesson fits, so the failures stay out).
      const prompts = r.builds(second.taskId);
      expect(prompts).toHaveLength(2);
      const hint = prompts[1] as string;
      expect(hint).toContain(`[memory:lesson:${lessonId}] from task ${first.taskId}; for the error "${SIGNATURE}"`);
      expect(hint).toContain(`rule: ${RULE}`);
      expect(hint).not.toContain("[memory:failure:");

      const read = await call(
        mnc,
        Endpoints.memory.failures,
        { v: 1, taskId: second.taskId, limit: 20 },
        { owner: DEFAULT_OWNER },
      );
      const shown = (read.uses ?? []).filter((u) => u.kind === "lesson" && u.memoryId === lessonId);
      expect(shown.length).toBeGreaterThan(0);
      // Shown after the failure of iteration 1: iteration 2 passed, and so did the task, in 2.
      expect(shown.find((u) => u.iteration === 1)).toMatchObject({
        nextPassed: true,
        taskPassed: true,
        taskIterations: 2,
      });
      // The lesson now counts one finished task that recalled it, which passed.
      const all = await call(mnc, Endpoints.memory.failures, { v: 1, limit: 20 }, { owner: DEFAULT_OWNER });
      const stored = (all.lessons ?? []).find((l) => l.id === lessonId);
      expect(stored).toMatchObject({ taskId: first.taskId, signature: SIGNATURE, rule: RULE, source: "reflect" });
      expect(stored?.use).toMatchObject({ recalledIn: 1, passedAfter: 1, demoted: false });
    });
  });
}

async function garbageLessonReply(nats: Started, env: Record<string, string>): Promise<void> {
  const t = task({ goal: "Write add(a, b): return the sum of a and b." });
  await withMemory(nats, env, async (mnc) => {
    const r = loopSteps(mnc, { [t.taskId]: replies("add", "this is not a lesson {") });
    await withConductor(nats.url, r.steps, async (nc) => {
      const { result, events } = await runTask(nc, t);
      expect(result.status).toBe("passed");
      expect(events.some((e) => e.kind === "warning" && /reflect/.test(e.message))).toBe(true);
      const learned = events.find((e) => e.data?.lessonIds !== undefined);
      expect(learned?.message).toContain("from the last reflection");
      const read = await call(
        mnc,
        Endpoints.memory.failures,
        { v: 1, taskId: t.taskId, limit: 5 },
        { owner: DEFAULT_OWNER },
      );
      expect(read.lessons).toHaveLength(1);
      // The reflection as the rule, with the task's own names (add, total) scrubbed.
      expect(read.lessons?.[0]).toMatchObject({ source: "fallback", signature: SIGNATURE });
      expect(read.lessons?.[0]?.rule).toBe(
        "The return statement of <name> names totl, a misspelling of <name>. Fix: Return <name>.",
      );
    });
  });
}

/**
 * Three related tasks on a script with no lesson reply: each passes, learns no lesson (one step
 * line, no re-ask, no warning), so the later tasks are shown the raw failures, each named with
 * its source task and its measured use, and the recall reply carries that use.
 */
async function noLessonReply(nats: Started, env: Record<string, string>): Promise<void> {
  const tasks = ["add", "add_pair", "add_two"].map((fn) => ({
    fn,
    task: task({ goal: `Write ${fn}(a, b): return the sum of a and b.` }),
  }));
  await withMemory(nats, env, async (mnc) => {
    // Only the reflection after the failure: the lesson call finds no entry of its own.
    const scripts = Object.fromEntries(
      tasks.map(({ fn, task: t }) => {
        const r = replies(fn, undefined);
        return [t.taskId, { ...r, reflect: r.reflect.slice(0, 1) }];
      }),
    );
    const r = loopSteps(mnc, scripts);
    await withConductor(nats.url, r.steps, async (nc) => {
      const [first, second, third] = tasks.map((t) => t.task) as [Task, Task, Task];
      const one = await runTask(nc, first);
      expect(one.result.status).toBe("passed");
      expect(one.result.iterations).toBe(2);
      const said = one.events.filter((e) => e.message.includes("lesson"));
      expect(said).toHaveLength(1);
      expect(said[0]).toMatchObject({ kind: "step", phase: "score" });
      expect(said[0]?.message).toMatch(
        /^no lesson: the provider has no lesson reply \(the script .* has no lesson reply/,
      );
      expect(one.events.filter((e) => e.kind === "warning")).toEqual([]);
      // The lesson call made no call: one reflect call, the reflection's.
      expect(one.result.usage.byRole.reflect?.calls).toBe(1);
      const own = await call(
        mnc,
        Endpoints.memory.failures,
        { v: 1, taskId: first.taskId, limit: 5 },
        { owner: DEFAULT_OWNER },
      );
      expect(own.lessons ?? []).toEqual([]);
      const failureId = own.failures[0]?.id as string;

      // The second task is shown the first one's raw failure, which no finished task was shown yet.
      expect((await runTask(nc, second)).result.status).toBe("passed");
      const hint2 = r.builds(second.taskId)[1] as string;
      expect(hint2).toContain(
        `[memory:failure:${failureId}] from task ${first.taskId}; not recalled by a finished task before;`,
      );
      expect(hint2).not.toContain("[memory:lesson:");

      // The third: that failure was recalled by one finished task, which passed.
      expect((await runTask(nc, third)).result.status).toBe("passed");
      const hint3 = r.builds(third.taskId)[1] as string;
      expect(hint3).toMatch(
        new RegExp(
          `\\[memory:failure:${failureId}\\] from task ${first.taskId}; recalled in 1 finished task, 1 of them passed \\(utility [+-]\\d\\.\\d\\d, s\\.e\\. \\d\\.\\d\\d\\);`,
        ),
      );
      const recall = await call(mnc, Endpoints.memory.recall, {
        v: 1,
        taskId: "t-probe",
        language: "python",
        text: first.goal,
        errorText: "NameError: name 'totl' is not defined",
        k: 5,
        excludeSameTask: true,
      });
      const recalled = recall.failures.find((f) => f.id === failureId);
      expect(recalled).toMatchObject({ taskId: first.taskId, use: { recalledIn: 2, passedAfter: 2, demoted: false } });
      expect(recalled?.use?.utility).not.toBeNull();
      expect(recall.failures.every((f) => f.use !== undefined)).toBe(true);
    });
  });
}

describe("lessons through the loop and the memory service on PGlite", () => {
  it("gives the second of two related tasks the first one's lesson as its hint, and logs the recall", async ({
    nats,
  }) => {
    const fresh = await freshDataDir();
    await twoRelatedTasks(nats, { LOOPSMITH_DATA_DIR: fresh.config.dataDir });
    await removeFreshDirs();
  });

  it("falls back to the last reflection when the lesson reply is garbage", async ({ nats }) => {
    const fresh = await freshDataDir();
    await garbageLessonReply(nats, { LOOPSMITH_DATA_DIR: fresh.config.dataDir });
    await removeFreshDirs();
  });

  it("skips the lesson when the script has no lesson reply; raw failure hints name their task and use", async ({
    nats,
  }) => {
    const fresh = await freshDataDir();
    await noLessonReply(nats, { LOOPSMITH_DATA_DIR: fresh.config.dataDir });
    await removeFreshDirs();
  });
});

describe("lessons through the loop and the memory service on PostgreSQL", () => {
  it("gives the second of two related tasks the first one's lesson as its hint, and logs the recall", async ({
    nats,
    postgres,
  }) => {
    const fresh = await freshDatabase(postgres);
    await twoRelatedTasks(nats, { DATABASE_URL: fresh.config.databaseUrl as string });
  });

  it("skips the lesson when the script has no lesson reply; raw failure hints name their task and use", async ({
    nats,
    postgres,
  }) => {
    const fresh = await freshDatabase(postgres);
    await noLessonReply(nats, { DATABASE_URL: fresh.config.databaseUrl as string });
  });
});
