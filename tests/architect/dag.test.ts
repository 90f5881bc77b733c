/**
 * DAG tasks in the conductor, on real NATS JetStream: the parent's plan of subtasks is
 * validated, each subtask runs as a real child task through the intake stream (same
 * conductor), its start tree is a real snapshot in the object store, and the integration run
 * sees the merged tree. The model and the sandbox are functions, so each rule can be driven
 * exactly: a subtask that fails once, one that gives up, a refused plan, a stopped conductor.
 */
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { describe, expect } from "vitest";
import { DEFAULT_OWNER, followEvents, materializeSnapshot, submitTask } from "@loopsmith/shared/bus";
import { type TaskEvent } from "@loopsmith/shared/contracts";
import { startConductor, type Conductor } from "@loopsmith/architect";
import { it } from "../fixtures/index.js";
import { at, attemptOf, dagTask, harness, plan, provider, subOf, withDagConductor } from "./dag-harness.js";
import { eventsOf, log, usage } from "./helpers.js";

describe("DAG tasks in the conductor", () => {
  it("runs independent subtasks at the same time, retries one that fails, and integrates the merged tree", async ({
    nats,
  }) => {
    await withDagConductor(
      nats.url,
      (nc, c) => harness(nc, c, { fails: (sub, attempt) => sub === "storage" && attempt === 1, runMs: 300 }),
      async (nc, h) => {
        const input = await dagTask(nc);
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        const result = events.at(-1)!.result!;
        expect(result).toMatchObject({ status: "passed", stopReason: "passed" });
        expect([...(result.repo?.changed ?? [])].sort()).toEqual([
          "tests/test_handlers.py",
          "tests/test_model.py",
          "tests/test_storage.py",
          "tests/test_validation.py",
          "todo_api/handlers.py",
          "todo_api/model.py",
          "todo_api/storage.py",
          "todo_api/validation.py",
        ]);
        // storage and validation overlap in time: each started before the other ended.
        expect(at(events, "storage", "running")).toBeLessThan(at(events, "validation", "passed"));
        expect(at(events, "validation", "running")).toBeLessThan(at(events, "storage", "passed"));
        // No subtask starts before its dependencies passed.
        expect(at(events, "storage", "running")).toBeGreaterThanOrEqual(at(events, "model", "passed"));
        expect(at(events, "handlers", "running")).toBeGreaterThanOrEqual(
          Math.max(at(events, "storage", "passed"), at(events, "validation", "passed")),
        );
        // storage's first attempt failed; the second, a new child task, passed.
        const storageBuilds = h.builds.filter((b) => subOf(b.taskId) === "storage").map((b) => b.taskId);
        expect(new Set(storageBuilds)).toEqual(new Set([`${input.taskId}--storage-a1`, `${input.taskId}--storage-a2`]));
        expect(
          h.builds.filter((b) => subOf(b.taskId) === "model").every((b) => b.taskId === `${input.taskId}--model-a1`),
        ).toBe(true);
        // Each child started from its dependencies' work: handlers' tree held model, storage and validation.
        const handlersRun = h.runs.find((r) => subOf(r.taskId) === "handlers" && r.files.length > 0)!;
        expect(handlersRun.shell).toBe("python3 -m pytest -q tests/test_handlers.py");
        const handlersTree = await materializeSnapshot(
          nc,
          handlersRun.base!.snapshot,
          mkdtempSync(join(tmpdir(), "loopsmith-dag-check-")),
        );
        expect(readdirSync(join(handlersTree, "todo_api")).sort()).toEqual(["model.py", "storage.py", "validation.py"]);
        // The integration run saw every module and every subtask's tests.
        const integration = h.runs.filter((r) => !subOf(r.taskId) && r.files.length > 0).at(-1)!;
        expect(integration.shell).toBe("python3 -m pytest -q");
        expect(integration.files.map((f) => f.path)).toContain("todo_api/handlers.py");
        // A child's events name their parent and subtask.
        const child = await eventsOf(nc, `${input.taskId}--validation-a1`);
        expect(child.every((e) => e.parentTaskId === input.taskId && e.subtaskId === "validation")).toBe(true);
        // The parent's result event carries the DAG, with the retried subtask's two attempts.
        const dag = events.at(-1)!.data?.dag as { subtasks: Array<{ id: string; status: string; attempt: number }> };
        expect(dag.subtasks.map((t) => [t.id, t.status, t.attempt])).toEqual([
          ["model", "passed", 1],
          ["storage", "passed", 2],
          ["validation", "passed", 1],
          ["handlers", "passed", 1],
        ]);
        // The children's usage is in the parent's report.
        expect(result.usage.byRole.subtasks?.calls).toBeGreaterThan(0);
      },
    );
  });

  it("with parallel 1, never runs two subtasks at once", async ({ nats }) => {
    await withDagConductor(
      nats.url,
      (nc, c) => harness(nc, c, { runMs: 100 }),
      async (nc) => {
        const input = await dagTask(nc, { parallel: 1 });
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        expect(events.at(-1)!.result?.status).toBe("passed");
        const spans = ["storage", "validation"].map(
          (s) => [at(events, s, "running"), at(events, s, "passed")] as const,
        );
        const [a, b] = spans as [readonly [number, number], readonly [number, number]];
        expect(a[1] <= b[0] || b[1] <= a[0]).toBe(true);
      },
    );
  });

  it("cancels the dependents of a subtask that gives up, and says what was built", async ({ nats }) => {
    await withDagConductor(
      nats.url,
      (nc, c) => harness(nc, c, { fails: (sub) => sub === "validation" }),
      async (nc, h) => {
        const input = await dagTask(nc, { limits: { maxIterations: 1, subtaskAttempts: 2 } });
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        const result = events.at(-1)!.result!;
        expect(result).toMatchObject({ status: "failed", stopReason: "subtask_failed" });
        expect(result.message).toMatch(/validation .*gave up; cancelled: handlers; built: model, storage/);
        const handlers = events.find(
          (e) => e.subtaskId === "handlers" && e.message.startsWith("subtask handlers: cancelled"),
        );
        expect(handlers?.message).toContain("dependency_failed");
        expect(h.builds.some((b) => subOf(b.taskId) === "handlers")).toBe(false);
      },
    );
  });

  it("after a failed integration run, re-opens the one subtask the reflection names, with its dependents only", async ({
    nats,
  }) => {
    await withDagConductor(
      nats.url,
      (nc, c) => harness(nc, c, { integrationFailures: 1 }),
      async (nc, h) => {
        const input = await dagTask(nc);
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        expect(events.at(-1)!.result).toMatchObject({ status: "passed", iterations: 2 });
        const builtBy = (sub: string) => [
          ...new Set(h.builds.filter((b) => subOf(b.taskId) === sub).map((b) => attemptOf(b.taskId))),
        ];
        expect(builtBy("model")).toEqual([1]);
        expect(builtBy("validation")).toEqual([1]);
        expect(builtBy("storage")).toEqual([1, 2]);
        expect(builtBy("handlers")).toEqual([1, 2]);
        // The re-opened attempt's child task was told why.
        const again = h.builds.find((b) => b.taskId === `${input.taskId}--storage-a2`)!;
        expect(again.task.goal).toContain("Fix: add Store.save");
        expect(
          events.some((e) => e.phase === "reflect" && e.message === "reflection: re-open storage: Store has no save()"),
        ).toBe(true);
      },
    );
  });

  it("stops with subtask_failed when the integration still fails at the iteration limit", async ({ nats }) => {
    await withDagConductor(
      nats.url,
      (nc, c) => harness(nc, c, { integrationFailures: 5 }),
      async (nc) => {
        const input = await dagTask(nc);
        await submitTask(nc, input);
        const result = (await eventsOf(nc, input.taskId)).at(-1)!.result!;
        expect(result).toMatchObject({ status: "failed", stopReason: "subtask_failed", iterations: 2 });
        expect(result.message).toMatch(/fail on the merged tree .*iteration limit/);
      },
    );
  });

  it("turns a repo-mode task into a DAG task when its plan says the goal is too big for one change", async ({
    nats,
  }) => {
    const bigPlan = { summary: "four modules", acceptanceCriteria: [], steps: [], files: [], decompose: true };
    await withDagConductor(
      nats.url,
      (nc, c) => {
        const h = harness(nc, c);
        h.steps.plan = async () => ({ value: bigPlan, usage: usage(), provider });
        return h;
      },
      async (nc, h) => {
        const input = await dagTask(nc, { decompose: false });
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        expect(events.at(-1)!.result).toMatchObject({ status: "passed" });
        expect(events.some((e) => e.message === "the goal is too big for one change: planning it as subtasks")).toBe(
          true,
        );
        expect(h.decomposed).toHaveLength(1);
        // Its children are not decomposed again, though their plan step gets the same reply.
        expect(h.builds.length).toBeGreaterThanOrEqual(4);
      },
    );
  });

  it("shares the task's budget: a child may spend what is left when it starts, and none starts once it is used up", async ({
    nats,
  }) => {
    await withDagConductor(
      nats.url,
      (nc, c) => harness(nc, c),
      async (nc, h) => {
        // Every fake LLM call costs $0.01: the plan of subtasks, then a plan and a build per child.
        const input = await dagTask(nc, { limits: { maxIterations: 2, subtaskAttempts: 2, maxCostUsd: 0.045 } });
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        const result = events.at(-1)!.result!;
        expect(result).toMatchObject({ status: "failed", stopReason: "budget" });
        expect(result.message).toMatch(
          /^stopped: (subtask handlers: )?the task's USD budget (would be passed|is used up) \(\$\d\.\d{4} left\): .*; built: model, storage, validation$/,
        );
        expect(h.builds.some((b) => subOf(b.taskId) === "handlers")).toBe(false);
        // Each child was given what was left of the budget when it started (never more than the task's).
        // storage started after $0.03 was spent (the plan of subtasks, model's plan and build): its
        // build, after its own plan, had about $0.005 left, not the $0.035 a full budget would leave.
        const storageBuild = h.builds.find((b) => b.taskId === `${input.taskId}--storage-a1`)!;
        expect(storageBuild.budget.remainingUsd).toBeLessThan(0.02);
        expect(result.usage.total.costUsd).toBeGreaterThanOrEqual(0.045);
      },
    );
  });

  it("a cancelled DAG task cancels its running children and the subtasks not started", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const ref: { conductor?: Conductor } = {};
    // Runs long enough that storage, started just before validation, is still running when
    // the cancel lands (with 2 s, storage can pass first on a loaded machine).
    const h = harness(nc, () => ref.conductor!, { runMs: 8_000 });
    const conductor = (ref.conductor = await startConductor({ nc, steps: h.steps, log, concurrency: 4 }));
    try {
      const input = await dagTask(nc);
      await submitTask(nc, input);
      const abort = new AbortController();
      for await (const e of followEvents(nc, DEFAULT_OWNER, input.taskId, abort.signal)) {
        if (e.subtaskId === "validation" && e.message.startsWith("subtask validation: running")) break;
      }
      abort.abort();
      expect(await conductor.cancel(input.taskId, DEFAULT_OWNER)).toBe(true);
      const events = await eventsOf(nc, input.taskId);
      expect(events.at(-1)!.result).toMatchObject({ status: "cancelled", stopReason: "cancelled" });
      // The running children were cancelled too, and nothing after them started.
      for (const child of ["storage-a1", "validation-a1"]) {
        const result = (await eventsOf(nc, `${input.taskId}--${child}`)).at(-1)!.result!;
        expect(result.stopReason, child).toBe("cancelled");
      }
      expect(h.builds.some((b) => subOf(b.taskId) === "handlers")).toBe(false);
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("asks for the plan again once with the problems named, and stops with invalid_plan the second time", async ({
    nats,
  }) => {
    const cyclic = plan((p) => ({
      ...p,
      subtasks: p.subtasks.map((s) => (s.id === "model" ? { ...s, dependsOn: ["handlers"] } : s)),
    }));
    await withDagConductor(
      nats.url,
      (nc, c) => harness(nc, c, { plans: [cyclic, plan()] }),
      async (nc, h) => {
        const input = await dagTask(nc);
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        expect(events.at(-1)!.result?.status).toBe("passed");
        expect(h.decomposed).toHaveLength(2);
        expect(h.decomposed[1]!.map((p) => p.kind)).toEqual(["cycle"]);
        expect(h.decomposed[1]![0]!.message).toContain('"model"');
      },
    );
    await withDagConductor(
      nats.url,
      (nc, c) => harness(nc, c, { plans: [cyclic] }),
      async (nc, h) => {
        const input = await dagTask(nc);
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        expect(events.at(-1)!.result).toMatchObject({ status: "failed", stopReason: "invalid_plan" });
        expect(events.at(-1)!.result!.message).toMatch(/failed validation twice: a dependency cycle/);
        expect(h.builds).toHaveLength(0);
      },
    );
  });

  it("resumes after the conductor died mid-DAG (its connection gone, nothing handed back): finished subtasks are not run again", async ({
    nats,
  }) => {
    const input = await (async () => {
      const nc = await connect({ servers: nats.url });
      try {
        return await dagTask(nc, { taskId: `dag-died-${Date.now().toString(36)}` });
      } finally {
        await nc.close();
      }
    })();
    // The first conductor's own connection, dropped like a killed process's: no nak, no hand-back.
    const dying = await connect({ servers: nats.url });
    const ref: { first?: Conductor; second?: Conductor } = {};
    const h1 = harness(dying, () => ref.first!, { runMs: 1_500 });
    ref.first = await startConductor({ nc: dying, steps: h1.steps, log, concurrency: 4 });
    const watcher = await connect({ servers: nats.url });
    await submitTask(watcher, input);
    const abort = new AbortController();
    for await (const e of followEvents(watcher, DEFAULT_OWNER, input.taskId, abort.signal)) {
      if (e.subtaskId === "storage" && e.message.startsWith("subtask storage: running")) break;
    }
    abort.abort();
    await dying.close();

    const nc = await connect({ servers: nats.url });
    const h2 = harness(nc, () => ref.second!, { runMs: 50 });
    ref.second = await startConductor({ nc, steps: h2.steps, log, concurrency: 4 });
    try {
      // Redelivered after the ack wait (TASK_ACK_WAIT_MS), the parent resumes from its checkpoint.
      const events = await eventsOf(watcher, input.taskId);
      expect(events.at(-1)!.result?.status).toBe("passed");
      expect(h2.decomposed).toHaveLength(0);
      expect(h2.builds.some((b) => subOf(b.taskId) === "model")).toBe(false);
      expect(events.some((e) => e.phase === "schedule" && e.message.startsWith("running 3 of 4 subtasks"))).toBe(true);
      // storage was re-attached to its first attempt's child task, which resumed from its own checkpoint.
      // Each move's checkpoint comes before its event, so the event seen before the kill means
      // storage was checkpointed running: the resumed conductor re-attached it without announcing
      // it again. Exactly one event per move across the kill, whatever moment the kill hit:
      // one `running` per subtask attempt, one `passed` per subtask.
      for (const sub of ["model", "storage", "validation", "handlers"]) {
        const moves = events.filter((e) => e.subtaskId === sub && e.message.startsWith(`subtask ${sub}: `));
        expect(
          moves
            .filter((e) => e.message.startsWith(`subtask ${sub}: running`))
            .map((e) => (e.data?.subtask as { attempts: number }).attempts),
          sub,
        ).toEqual([1]);
        expect(
          moves.filter((e) => e.message === `subtask ${sub}: passed`),
          sub,
        ).toHaveLength(1);
      }
      expect(
        h2.builds.filter((b) => subOf(b.taskId) === "storage").every((b) => b.taskId === `${input.taskId}--storage-a1`),
      ).toBe(true);
    } finally {
      await ref.second.stop();
      await nc.close();
      await watcher.close();
    }
  }, 120_000);

  it("resumes after the conductor stopped mid-DAG: finished subtasks are not run again", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const input = await dagTask(nc);
    const ref: { first?: Conductor; second?: Conductor } = {};
    const h1 = harness(nc, () => ref.first!, { runMs: 400 });
    const first = (ref.first = await startConductor({ nc, steps: h1.steps, log, concurrency: 4 }));
    await submitTask(nc, input);
    // Stop once model passed and storage/validation are running.
    const seen: TaskEvent[] = [];
    const abort = new AbortController();
    for await (const e of followEvents(nc, DEFAULT_OWNER, input.taskId, abort.signal)) {
      seen.push(e);
      if (e.subtaskId === "storage" && e.message.startsWith("subtask storage: running")) break;
    }
    abort.abort();
    await first.stop();
    const modelBuilds = h1.builds.filter((b) => subOf(b.taskId) === "model").length;
    expect(modelBuilds).toBeGreaterThan(0);

    const h2 = harness(nc, () => ref.second!, { runMs: 50 });
    const second = (ref.second = await startConductor({ nc, steps: h2.steps, log, concurrency: 4 }));
    try {
      const events = await eventsOf(nc, input.taskId);
      expect(events.at(-1)!.result?.status).toBe("passed");
      // The second conductor did not plan again nor rebuild model; storage kept its attempt number (re-attached).
      expect(h2.decomposed).toHaveLength(0);
      expect(h2.builds.some((b) => subOf(b.taskId) === "model")).toBe(false);
      expect(
        events
          .filter((e) => e.message.startsWith("subtask storage: running"))
          .map((e) => (e.data?.subtask as { attempts: number }).attempts),
      ).toEqual([1]);
      // The resumed schedule had the three subtasks left, and nobody recorded the stop as a failure.
      expect(events.some((e) => e.phase === "schedule" && e.message.startsWith("running 3 of 4 subtasks"))).toBe(true);
      expect(events.some((e) => e.subtaskId && /stopping/.test(e.message))).toBe(false);
    } finally {
      await second.stop();
      await nc.close();
    }
  });
});
