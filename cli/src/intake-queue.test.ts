import { describe, expect, it } from "vitest";
import { conductorActive, tasksAhead } from "./intake-queue.js";
import { queuedLine, startedLine } from "./solve-progress.js";

describe("a task's place in the intake queue", () => {
  it("counts the messages between the last one handed out and the task, capped by what is pending", () => {
    expect(tasksAhead({ num_pending: 5, delivered: { stream_seq: 10 } }, 14)).toBe(3);
    // Two of those messages are gone (cancelled): only what is pending counts.
    expect(tasksAhead({ num_pending: 2, delivered: { stream_seq: 10 } }, 14)).toBe(1);
    expect(tasksAhead({ num_pending: 1, delivered: { stream_seq: 13 } }, 14)).toBe(0);
    expect(tasksAhead({ num_pending: 0, delivered: { stream_seq: 14 } }, 14)).toBeUndefined();
  });

  it("words the queued and started lines", () => {
    expect(queuedLine(0)).toBe("queued: waiting for a conductor (0 tasks ahead)");
    expect(queuedLine(1)).toBe("queued: waiting for a conductor (1 task ahead)");
    expect(startedLine(53_000)).toBe("started: a conductor took the task after 53.0 s in the queue");
  });
});

describe("a conductor at work on the intake", () => {
  it("is one with a fetch waiting or a task held, and none with neither", () => {
    expect(conductorActive({ num_waiting: 1, num_ack_pending: 0 })).toBe(true);
    expect(conductorActive({ num_waiting: 0, num_ack_pending: 2 })).toBe(true);
    expect(conductorActive({ num_waiting: 0, num_ack_pending: 0 })).toBe(false);
  });
});
