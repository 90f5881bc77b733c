/**
 * The conductor recovering from what is not the candidate's fault, on real NATS JetStream:
 * a sandbox that fails (not counted, retried as a new attempt over the real bus contract), a
 * resubmitted task id (inside and past the duplicate window), a malformed intake message, and
 * a conductor that dies mid-task.
 */
import { describe, expect } from "vitest";
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import {
  DEFAULT_OWNER,
  Endpoints,
  ServiceNames,
  Streams,
  call,
  ensureStreams,
  handle,
  publishEvent,
  rejectsSubject,
  startService,
  submitTask,
  tasksSubmitSubject,
} from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { RejectNotice } from "@loopsmith/shared/contracts";
import { startConductor } from "@loopsmith/architect";
import { it } from "../fixtures/index.js";
import { eventsOf, failed, log, passed, runTask, steps, task, until, withConductor } from "./helpers.js";

describe("conductor recovery on JetStream", () => {
  it("does not count a sandbox failure against the candidate", async ({ nats }) => {
    const { steps: s, calls } = steps(["sandbox_error", passed]);
    await withConductor(nats.url, s, async (nc) => {
      const { result } = await runTask(nc, task());
      expect(result.status).toBe("passed");
      expect(result.iterations).toBe(1);
      expect(calls.execute).toBe(2);
      expect(calls.build).toBe(1);
    });
  });

  it("retries a sandbox error as a new attempt the executor's contract accepts, over the real bus, and passes", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    // A stand-in executor on the bus: its endpoint validates requests with the real contract.
    const keys: string[] = [];
    const executor = await startService(nc, {
      name: ServiceNames.executor,
      version: "0.0.0",
      description: "test executor",
      log,
      registrations: [
        handle(Endpoints.executor.run, async (req) => {
          keys.push(req.idempotencyKey);
          return keys.length === 1
            ? { ...failed(), status: "sandbox_error" as const, tests: [], reason: "the container died" }
            : passed;
        }),
      ],
    });
    const { steps: s } = steps([passed], {
      execute: (req) => call(nc, Endpoints.executor.run, req, { timeoutMs: 10_000, retries: 0 }),
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const input = task();
      const { result, events } = await runTask(nc, input);
      expect(result.status).toBe("passed");
      expect(result.iterations).toBe(1);
      expect(keys).toEqual([`${input.taskId}/1/execute`, `${input.taskId}/1/execute.1`]);
      expect(events.some((e) => e.kind === "warning" && e.message.includes("the container died"))).toBe(true);
    } finally {
      await conductor.stop();
      await executor.stop();
      await nc.close();
    }
  });

  it("treats a resubmitted task id as a duplicate", async ({ nats }) => {
    const { steps: s, calls } = steps([passed]);
    await withConductor(nats.url, s, async (nc) => {
      const input = task();
      await runTask(nc, input);
      const again = await submitTask(nc, input);
      expect(again.duplicate).toBe(true);
      await new Promise((r) => setTimeout(r, 500));
      expect(calls.plan).toBe(1);
    });
  });

  it("answers a finished task id submitted again after the duplicate window from its record, without running it again", async ({
    nats,
  }) => {
    const { steps: s, calls } = steps([passed]);
    await withConductor(nats.url, s, async (nc) => {
      const input = task();
      await runTask(nc, input);
      // Past JetStream's duplicate window a resubmit is a new message: another message id.
      await jetstream(nc).publish(
        tasksSubmitSubject(DEFAULT_OWNER),
        JSON.stringify({ ...input, submittedAt: new Date().toISOString() }),
        { msgID: `${input.taskId}#late` },
      );
      const jsm = await jetstreamManager(nc);
      const queued = async (): Promise<number> => (await jsm.streams.info(Streams.tasks)).state.messages;
      await until(async () => (await queued()) === 0);
      expect(await queued()).toBe(0);
      expect(calls.plan).toBe(1);
      expect(calls.execute).toBe(1);
    });
  });

  it("rejects a malformed message on the submit subject with a typed notice on loopsmith.rejects.tasks, never runs it, and goes on", async ({
    nats,
  }) => {
    const { steps: s, calls } = steps([passed]);
    await withConductor(nats.url, s, async (nc) => {
      const notices: RejectNotice[] = [];
      const sub = nc.subscribe(rejectsSubject("tasks", DEFAULT_OWNER), {
        callback: (_err, m) => {
          notices.push(RejectNotice.parse(m.json()));
        },
      });
      const js = jetstream(nc);
      await js.publish(tasksSubmitSubject(DEFAULT_OWNER), "this is not json", { msgID: "garbage-1" });
      await js.publish(tasksSubmitSubject(DEFAULT_OWNER), JSON.stringify({ v: 1, taskId: "bad-task-1", goal: 5 }), {
        msgID: "garbage-2",
      });
      await until(() => notices.length >= 2, 15_000, 50);
      sub.unsubscribe();
      expect(notices).toHaveLength(2);
      expect(notices[0]).toMatchObject({
        subject: tasksSubmitSubject(DEFAULT_OWNER),
        error: { code: "bad_request", retryable: false, message: expect.stringContaining("not JSON") },
        bytes: 16,
      });
      expect(notices[0]?.taskId).toBeUndefined();
      expect(notices[1]).toMatchObject({
        taskId: "bad-task-1",
        error: { code: "bad_request", message: expect.stringContaining("goal") },
      });
      expect(notices.every((n) => typeof n.streamSeq === "number")).toBe(true);
      expect(calls.plan ?? 0).toBe(0);
      // The conductor goes on with valid tasks.
      const { result } = await runTask(nc, task());
      expect(result.status).toBe("passed");
    });
  });

  it("resumes a task from its checkpoint after the conductor dies mid-task", async ({ nats }) => {
    const nc1 = await connect({ servers: nats.url });
    let release!: () => void;
    const blocked = new Promise<void>((r) => (release = r));
    let executes = 0;
    const first = steps([failed()], {
      // The first conductor hangs in its second execution; then its connection dies.
      execute: async () => {
        executes += 1;
        if (executes === 2) await blocked;
        return failed();
      },
    });
    const c1 = await startConductor({ nc: nc1, steps: first.steps, log });
    const input = task();
    await submitTask(nc1, input);
    while (executes < 2) await new Promise((r) => setTimeout(r, 50));
    await nc1.close(); // the conductor's process is gone: no ack, no more heartbeats
    const died = Date.now();
    release();
    await c1.stop();

    const nc2 = await connect({ servers: nats.url });
    const second = steps([passed]);
    const c2 = await startConductor({ nc: nc2, steps: second.steps, log });
    try {
      const events = await eventsOf(nc2, input.taskId);
      const result = events[events.length - 1]?.result;
      expect(result?.status).toBe("passed");
      expect(result?.iterations).toBe(2);
      // The dead conductor's task came back within the short ack wait, not after 30 s or more.
      expect(Date.now() - died).toBeLessThan(20_000);
      // Resumed at iteration 2's execution: no new plan, no new first build.
      expect(second.calls.plan ?? 0).toBe(0);
      expect(second.calls.build ?? 0).toBe(0);
      expect(second.calls.execute).toBe(1);
    } finally {
      await c2.stop();
      await nc2.close();
    }
  }, 150_000);

  it("an event JetStream does not take (NATS restarting) is a retryable error, so the task resumes instead of ending", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureStreams(nc);
    await nc.close();
    const event = {
      v: 1 as const,
      taskId: "t-publish",
      seq: 0,
      at: new Date().toISOString(),
      iteration: 1,
      kind: "warning" as const,
      message: "x",
    };
    const err = await publishEvent(nc, event).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LoopsmithError);
    expect(err).toMatchObject({ code: "unavailable", retryable: true });
  });
});
