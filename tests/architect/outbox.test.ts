/**
 * The record outbox on real NATS JetStream: a task record memory cannot take is kept in KV
 * and written once memory answers again; a record memory refuses for good is not kept.
 */
import { describe, expect } from "vitest";
import { connect } from "@nats-io/transport-node";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { emptyUsage, type Remembered, type TaskRecord } from "@loopsmith/shared/contracts";
import { openRecordOutbox } from "@loopsmith/architect";
import { it } from "../fixtures/index.js";
import { log } from "./helpers.js";

const record = (taskId: string): TaskRecord => ({
  v: 1,
  taskId,
  goal: "add",
  language: "python",
  status: "passed",
  stopReason: "passed",
  iterations: 1,
  usage: emptyUsage(),
  usageByRole: {},
  durationMs: 5,
  scripted: true,
  finishedAt: new Date().toISOString(),
});

describe("the record outbox", () => {
  it("keeps a record memory cannot take, says so, and writes it when memory answers again (also after a restart of the architect)", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    let memoryUp = false;
    const written: string[] = [];
    const send = async (r: TaskRecord): Promise<Remembered> => {
      if (!memoryUp) throw new LoopsmithError("unavailable", "no responders for loopsmith.memory.record_task");
      written.push(r.taskId);
      return { id: r.taskId };
    };
    // A long retry period: the test drives the drain itself.
    const first = await openRecordOutbox(nc, send, log, 3_600_000);
    try {
      await expect(first.record(record("outbox-1"))).rejects.toMatchObject({
        code: "unavailable",
        retryable: true,
        message: expect.stringContaining("kept and written to history when memory answers again"),
      });
      await expect(first.record(record("outbox-2"))).rejects.toThrow(/kept/);
      expect(await first.pending()).toBe(2);
      expect(await first.drain()).toBe(0);
    } finally {
      await first.stop();
    }
    // A new architect process finds the kept records; memory is back.
    memoryUp = true;
    const second = await openRecordOutbox(nc, send, log, 3_600_000);
    try {
      expect(await second.drain()).toBe(2);
      expect(written.sort()).toEqual(["outbox-1", "outbox-2"]);
      expect(await second.pending()).toBe(0);
      // Recorded at once when memory answers.
      await expect(second.record(record("outbox-3"))).resolves.toEqual({ id: "outbox-3" });
      expect(await second.pending()).toBe(0);
    } finally {
      await second.stop();
      await nc.close();
    }
  });

  it("does not keep a record memory refuses for good (bad_request), and retries on its own timer", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    let calls = 0;
    const send = async (r: TaskRecord): Promise<Remembered> => {
      calls += 1;
      if (r.taskId === "refused-1") throw new LoopsmithError("bad_request", "the record fails its schema");
      if (calls < 3) throw new LoopsmithError("timeout", "memory did not answer");
      return { id: r.taskId };
    };
    const outbox = await openRecordOutbox(nc, send, log, 200);
    try {
      await expect(outbox.record(record("refused-1"))).rejects.toMatchObject({ code: "bad_request" });
      expect(await outbox.pending()).toBe(0);
      await expect(outbox.record(record("late-1"))).rejects.toMatchObject({ code: "timeout" });
      const deadline = Date.now() + 10_000;
      while ((await outbox.pending()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(await outbox.pending()).toBe(0);
      expect(calls).toBe(3); // refused, refused for now, then taken by the timer's drain
    } finally {
      await outbox.stop();
      await nc.close();
    }
  });
});
