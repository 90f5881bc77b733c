/**
 * A task's wall-clock limit (`limits.timeLimitMs`) and a DAG subtask's
 * (`limits.subtaskTimeLimitMs`) in the conductor, on real NATS JetStream: the task stops with
 * `time_limit`, its clock survives a redelivery to another conductor (the start is in the
 * checkpoint), and a DAG task past its limit cancels its running children. The model and the
 * sandbox are functions that take a fixed time, so the limits are reached exactly.
 */
import { connect } from "@nats-io/transport-node";
import { describe, expect } from "vitest";
import { submitTask } from "@loopsmith/shared/bus";
import { type TaskLimits } from "@loopsmith/shared/contracts";
import { startConductor, type Steps } from "@loopsmith/architect";
import { it } from "../fixtures/index.js";
import { dagTask, harness, subOf, withDagConductor } from "./dag-harness.js";
import { eventsOf, failed, log, runTask, steps, task, until } from "./helpers.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Steps whose every build takes `buildMs` and whose every run fails the same way (never `stuck` below 20 in a row). */
function slowFailing(buildMs: number): { steps: Steps; calls: Record<string, number> } {
  const base = steps([failed()]);
  const s: Steps = {
    ...base.steps,
    build: async (req) => {
      await sleep(buildMs);
      return base.steps.build(req);
    },
  };
  return { steps: s, calls: base.calls };
}

/** The DAG harness with builds that take 300 ms: a child's iteration takes its time even when it changes nothing. */
function slowDag(...args: Parameters<typeof harness>): ReturnType<typeof harness> {
  const h = harness(...args);
  const build = h.steps.build;
  h.steps.build = async (req) => {
    await sleep(300);
    return build(req);
  };
  return h;
}

/** Limits of a task that would run for long without its time limit: 50 iterations, never stuck. */
const longLimits = (over: Partial<TaskLimits>) => ({ maxIterations: 50, stuckAfter: 20, ...over }) as TaskLimits;

describe("a task's wall-clock limit in the conductor", () => {
  it("stops a task that goes past its limit with time_limit, after the phase that crossed it", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const { steps: s, calls } = slowFailing(300);
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const { result, events } = await runTask(nc, task({ limits: longLimits({ timeLimitMs: 1_500 }) }));
      expect(result).toMatchObject({ status: "failed", stopReason: "time_limit" });
      expect(result.message).toMatch(
        /^stopped: the task's time limit of 1\.5 s passed \(ran \d+(\.\d)? s, \d+ iterations?\)$/,
      );
      // It ran until the limit, and stopped within one build of it, far from its 50 iterations.
      expect(result.durationMs).toBeGreaterThanOrEqual(1_500);
      expect(result.durationMs).toBeLessThan(1_500 + 1_500);
      expect(result.iterations).toBeGreaterThanOrEqual(1);
      expect(result.iterations).toBeLessThan(10);
      expect(calls.recordTask).toBe(1);
      expect(events.at(-1)?.kind).toBe("result");
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("keeps its clock across a redelivery: the conductor that resumes it stops it at the first start's limit", async ({
    nats,
  }) => {
    const limitMs = 4_000;
    const nc1 = await connect({ servers: nats.url });
    const first = slowFailing(400);
    const c1 = await startConductor({ nc: nc1, steps: first.steps, log });
    const input = task({ limits: longLimits({ timeLimitMs: limitMs }) });
    await submitTask(nc1, input);
    await until(() => (first.calls.build ?? 0) >= 3, 15_000, 20);
    // The first conductor stops: the task hands back at its next step and is redelivered.
    await c1.stop();
    await nc1.close();
    expect(first.calls.build ?? 0).toBeGreaterThanOrEqual(3);

    const nc2 = await connect({ servers: nats.url });
    const second = slowFailing(400);
    const resumedAt = Date.now();
    const c2 = await startConductor({ nc: nc2, steps: second.steps, log });
    try {
      const events = await eventsOf(nc2, input.taskId);
      const result = events.at(-1)!.result!;
      expect(result).toMatchObject({ status: "failed", stopReason: "time_limit" });
      // A clock started anew by the second conductor would need the whole limit from its start.
      expect(Date.now() - resumedAt).toBeLessThan(limitMs);
      expect(result.durationMs).toBeGreaterThanOrEqual(limitMs);
      // One task, accepted once, resumed from its checkpoint rather than planned again.
      expect(events.filter((e) => e.kind === "accepted")).toHaveLength(1);
      expect(second.calls.plan ?? 0).toBe(0);
      expect(result.iterations).toBeGreaterThanOrEqual(3);
    } finally {
      await c2.stop();
      await nc2.close();
    }
  });
});

describe("time limits of a DAG task", () => {
  it("past the task's limit, cancels the running subtask's child and the subtasks not started, and stops with time_limit", async ({
    nats,
  }) => {
    const limitMs = 5_000;
    await withDagConductor(
      nats.url,
      (nc, c) => slowDag(nc, c, { fails: (sub) => sub === "storage", runMs: 300 }),
      async (nc, h) => {
        const input = await dagTask(nc, {
          limits: longLimits({ subtaskAttempts: 3, timeLimitMs: limitMs }),
        });
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        const result = events.at(-1)!.result!;
        expect(result).toMatchObject({ status: "failed", stopReason: "time_limit" });
        expect(result.message).toMatch(
          /^stopped: the task's time limit of 5 s passed; cancelled: .*storage.*; built: /,
        );
        // Stopped at the limit, not after storage's 3 attempts of 50 iterations.
        expect(result.durationMs).toBeGreaterThanOrEqual(limitMs);
        expect(result.durationMs).toBeLessThan(limitMs + 4_000);
        const dag = events.at(-1)!.data?.dag as { subtasks: Array<{ id: string; status: string; reason?: string }> };
        const storage = dag.subtasks.find((t) => t.id === "storage");
        const handlers = dag.subtasks.find((t) => t.id === "handlers");
        expect(storage).toMatchObject({ status: "cancelled", reason: "time_limit" });
        expect(handlers).toMatchObject({ status: "cancelled", reason: "time_limit" });
        expect(h.builds.some((b) => subOf(b.taskId) === "handlers")).toBe(false);
        // Storage's running child was ended with the task (cancelled, or at its own limit, which is
        // what was left of the task's), not left to run its 50 iterations.
        const child = `${input.taskId}--storage-a1`;
        const ended = (await eventsOf(nc, child)).at(-1)!.result!;
        expect(["cancelled", "time_limit"]).toContain(ended.stopReason);
        expect(ended.durationMs).toBeLessThan(limitMs);
        expect(h.builds.filter((b) => b.taskId === child).length).toBeGreaterThanOrEqual(1);
      },
    );
  });

  it("a subtask's own limit stops each attempt with time_limit; the subtask gives up after its attempts", async ({
    nats,
  }) => {
    await withDagConductor(
      nats.url,
      (nc, c) => slowDag(nc, c, { fails: (sub) => sub === "storage", runMs: 300 }),
      async (nc, h) => {
        const input = await dagTask(nc, {
          limits: longLimits({ subtaskAttempts: 2, subtaskTimeLimitMs: 1_500 }),
        });
        await submitTask(nc, input);
        const events = await eventsOf(nc, input.taskId);
        const result = events.at(-1)!.result!;
        expect(result).toMatchObject({ status: "failed", stopReason: "subtask_failed" });
        expect(result.message).toMatch(/subtask storage \(time_limit: stopped: the task's time limit of 1\.5 s passed/);
        for (const attempt of ["a1", "a2"]) {
          const child = (await eventsOf(nc, `${input.taskId}--storage-${attempt}`)).at(-1)!.result!;
          expect(child.stopReason, attempt).toBe("time_limit");
          expect(child.durationMs, attempt).toBeGreaterThanOrEqual(1_500);
          expect(child.durationMs, attempt).toBeLessThan(1_500 + 1_500);
        }
        expect(h.builds.some((b) => b.taskId === `${input.taskId}--storage-a3`)).toBe(false);
        // The subtasks without a limit of their own to reach passed.
        const dag = events.at(-1)!.data?.dag as { subtasks: Array<{ id: string; status: string }> };
        expect(dag.subtasks.find((t) => t.id === "model")?.status).toBe("passed");
        expect(dag.subtasks.find((t) => t.id === "validation")?.status).toBe("passed");
      },
    );
  });
});
