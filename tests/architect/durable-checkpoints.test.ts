/**
 * Checkpoints larger than the server's `max_payload` (1 MB here) on real NATS: their large
 * parts go to the checkpoint blob store by sha256, before the checkpoint that names them, are
 * read back on resume, and are removed when the task ends or its state is deleted.
 */
import { createHash } from "node:crypto";
import { describe, expect, onTestFinished } from "vitest";
import { connect } from "@nats-io/transport-node";
import { DEFAULT_OWNER, openCheckpointBlobs, openTaskStates, submitTask } from "@loopsmith/shared/bus";
import { Task, type ExecutionResult, type TestCase } from "@loopsmith/shared/contracts";
import {
  CHECKPOINT_HEADROOM_BYTES,
  TaskState,
  initialState,
  maxPayloadOf,
  openStateStore,
  startConductor,
} from "@loopsmith/architect";
import { it } from "../fixtures/index.js";
import { eventsOf, failed, log, passed, provider, steps, task, usage } from "./helpers.js";

const sha = (text: string): string => createHash("sha256").update(text).digest("hex");
/** A 5 MB source file (lines that differ, so nothing compresses it away). */
const bigFile = (): string =>
  Array.from({ length: 80_000 }, (_, i) => `VALUE_${i} = ${i * 7919} # ${"x".repeat(40)}`)
    .join("\n")
    .slice(0, 5_000_000);
/** A run of 2,000 test cases, the first 600 failing with a 1.5 kB message each. */
function run2000(): ExecutionResult {
  const tests: TestCase[] = Array.from({ length: 2_000 }, (_, i) => ({
    name: `test_case_${i}`,
    classname: "tests.test_big",
    status: i < 600 ? "failed" : "passed",
    durationMs: 1,
    ...(i < 600 ? { message: `AssertionError: case ${i}: ${"expected value differs; ".repeat(62)}` } : {}),
  }));
  return { ...failed(), stdout: "F".repeat(600) + ".".repeat(1_400), tests };
}

describe("checkpoints over max_payload", () => {
  it("stores a 5 MB file and a 2,000-case run under max_payload, reads them back whole, cleans superseded blobs, and removes them with the state", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    try {
      const store = await openStateStore(nc);
      const content = bigFile();
      const base = initialState(Task.parse(task()));
      const state: TaskState = {
        ...base,
        phase: "remember",
        iteration: 1,
        candidate: { files: [{ path: "data.py", content }], tests: [], notes: "" },
        lastExecution: run2000(),
      };
      const revision = await store.create(state);
      const raw = await (await openTaskStates(nc)).get(base.task.taskId);
      expect(raw?.length).toBeLessThanOrEqual(maxPayloadOf(nc) - CHECKPOINT_HEADROOM_BYTES);
      expect(raw?.string()).toContain(sha(content));
      const firstBlobs = await store.blobsOf(base.task.taskId);
      expect(firstBlobs).toContain(`task/${base.task.taskId}/${sha(content)}`);
      // Another process reads it whole.
      const nc2 = await connect({ servers: nats.url });
      onTestFinished(() => nc2.close());
      const other = await openStateStore(nc2);
      const read = await other.get(base.task.taskId);
      expect(read?.state).toEqual(state);
      expect(read?.state.lastExecution?.tests).toHaveLength(2_000);
      // A checkpoint that no longer names the file deletes its blob after it is written.
      const next = {
        ...state,
        candidate: { files: [{ path: "data.py", content: "VALUE = 1\n" }], tests: [], notes: "" },
      };
      await store.update(next, revision);
      const left = await store.blobsOf(base.task.taskId);
      expect(left).not.toContain(`task/${base.task.taskId}/${sha(content)}`);
      expect(left.length).toBeGreaterThan(0); // the run's cases still need theirs
      expect((await other.get(base.task.taskId))?.state).toEqual(next);
      await store.remove(base.task.taskId);
      expect(await store.get(base.task.taskId)).toBeNull();
      expect(await store.blobsOf(base.task.taskId)).toEqual([]);
    } finally {
      await nc.close();
    }
  }, 120_000);

  it("resumes a task checkpointed with a 5 MB file and a 2,000-case run after its conductor dies, with its state intact, and removes the blobs when the task ends", async ({
    nats,
  }) => {
    const content = bigFile();
    const nc1 = await connect({ servers: nats.url });
    let reached!: () => void;
    const blocked = new Promise<void>((r) => (reached = r));
    let kill!: (err: Error) => void;
    const dying = new Promise<never>((_, reject) => (kill = reject));
    dying.catch(() => undefined);
    const first = steps([run2000()], {
      rememberFailure: async () => {
        reached();
        return dying;
      },
    });
    const c1 = await startConductor({ nc: nc1, steps: first.steps, log });
    const input = task();
    await submitTask(nc1, input);
    await blocked;
    await nc1.close(); // the conductor's process is gone: no ack, no more heartbeats
    kill(new Error("killed"));
    await c1.stop();

    // The checkpoint the dead conductor would have left had its candidate held a 5 MB file,
    // with the whole 2,000-case run. (Through the loop a 5 MB candidate cannot be built today:
    // the build step's event carries the reply, and an event must fit max_payload.)
    const nc2 = await connect({ servers: nats.url });
    const store = await openStateStore(nc2);
    const left = await store.get(input.taskId);
    expect(left?.state.phase).toBe("remember");
    const big = TaskState.parse({
      ...left?.state,
      candidate: { files: [{ path: "data.py", content }], tests: [], notes: "" },
      lastExecution: run2000(),
    });
    await store.update(big, left?.revision ?? 0);
    const raw = await (await openTaskStates(nc2)).get(input.taskId);
    expect(raw?.length).toBeLessThanOrEqual(maxPayloadOf(nc2) - CHECKPOINT_HEADROOM_BYTES);
    expect((await store.blobsOf(input.taskId)).length).toBeGreaterThan(0);
    const nc3 = await connect({ servers: nats.url });
    onTestFinished(() => nc3.close());
    const fresh = await openStateStore(nc3);
    expect((await fresh.get(input.taskId))?.state).toEqual(big);

    const reflected: string[] = [];
    const second = steps([passed], {
      reflect: async (req) => {
        reflected.push(sha(req.candidate.files[0]?.content ?? ""), ...req.failure.failingTests.slice(0, 2));
        return { value: { rootCause: "r", hypothesis: "h", fixPlan: "f" }, usage: usage(), provider };
      },
    });
    const c2 = await startConductor({ nc: nc2, steps: second.steps, log });
    try {
      const events = await eventsOf(nc2, input.taskId);
      const result = events.at(-1)?.result;
      expect(result?.status).toBe("passed");
      expect(result?.iterations).toBe(2);
      // Resumed at the remember step of iteration 1, with the 5 MB candidate as checkpointed.
      expect(second.calls.plan ?? 0).toBe(0);
      expect(second.calls.rememberFailure).toBe(1);
      expect(reflected).toEqual([sha(content), "test_case_0", "test_case_1"]);
      expect(second.calls.build).toBe(1);
      // The task ended: no blob of it is left, and its final state fits without any.
      expect(await store.blobsOf(input.taskId)).toEqual([]);
      const blobs = await openCheckpointBlobs(nc2);
      expect((await blobs.list()).filter((o) => !o.deleted && o.name.includes(input.taskId))).toEqual([]);
      expect((await (await openTaskStates(nc2)).get(input.taskId))?.string()).not.toContain('"$blob"');
      expect((await c2.status(input.taskId, DEFAULT_OWNER))?.status).toBe("final");
    } finally {
      await c2.stop();
      await nc2.close();
    }
  }, 180_000);
});
