/**
 * A task waiting in the intake queue, on a real NATS: right after submission the client reads
 * how many tasks are ahead of it from the conductor consumer's info, and that number falls as
 * a conductor takes tasks; a task already taken has no place in the queue.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, describe, expect } from "vitest";
import { Streams, ensureTaskIntake, submitTask } from "@loopsmith/shared/bus";
import { type TaskInput } from "@loopsmith/shared/contracts";
import { intakePosition } from "../../cli/src/intake-queue.js";
import { solveProgress } from "../../cli/src/solve-progress.js";
import { REPO } from "../fixtures/cli.js";
import { it } from "../fixtures/index.js";

const roman = JSON.parse(readFileSync(join(REPO, "examples", "roman", "task.json"), "utf8")) as TaskInput;
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const close of closers) await close();
});

describe("the intake queue as the client sees it", () => {
  it("says how many tasks are ahead, fewer after a conductor takes one, none for a task taken", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    closers.push(() => nc.close());
    await ensureTaskIntake(nc);
    const seqs: number[] = [];
    for (const n of [1, 2, 3])
      seqs.push(
        (await submitTask(nc, { ...roman, v: 1, submittedAt: new Date().toISOString(), taskId: `queued-${n}` })).seq,
      );
    const [first, , third] = seqs as [number, number, number];
    expect(await intakePosition(nc, third)).toBe(2);
    expect(await intakePosition(nc, first)).toBe(0);

    // A conductor takes the first task (the consumer conductors pull from).
    const consumer = await jetstream(nc).consumers.get(Streams.tasks, Streams.conductorConsumer);
    const taken = await consumer.next({ expires: 5_000 });
    expect(taken?.json<{ taskId: string }>().taskId).toBe("queued-1");
    expect(await intakePosition(nc, third)).toBe(1);
    expect(await intakePosition(nc, first)).toBeUndefined();
    taken?.ack();

    // What `solve` prints: queued at once, started at the task's first event.
    let out = "";
    let clock = 1_000;
    const progress = solveProgress({ write: (s: string) => ((out += s), true), isTTY: false } as never, {
      now: () => clock,
    });
    progress.queued((await intakePosition(nc, third)) ?? -1);
    clock += 2_500;
    progress.event({
      v: 1,
      taskId: "queued-3",
      seq: 0,
      at: new Date(clock).toISOString(),
      iteration: 0,
      kind: "accepted",
      message: "accepted",
    } as never);
    expect(out.split("\n").slice(0, 2)).toEqual([
      "queued: waiting for a conductor (1 task ahead)",
      "started: a conductor took the task after 2.5 s in the queue",
    ]);
  });
});
