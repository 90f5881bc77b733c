/**
 * A candidate the gate passes with an unsure tampering finding (a thread started when the
 * module is imported) runs, and so can pass and be committed, only after a review approves
 * it: the conductor on real NATS JetStream, the reviewer's real `gate()` in-process as the
 * gate step, and a review that approves, does not approve, or cannot be read.
 */
import { describe, expect } from "vitest";
import { connect } from "@nats-io/transport-node";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type GateRequest, type Review } from "@loopsmith/shared/contracts";
import { startConductor } from "@loopsmith/architect";
import { gate } from "@loopsmith/reviewer";
import { it } from "../fixtures/index.js";
import { log, passed, provider, runTask, steps, task, usage } from "./helpers.js";

/** A right `add` whose module starts a thread at import: the gate's `tampering.import_thread` (review, never a block). */
const THREADED = [
  "import threading",
  "_ready = threading.Event()",
  "threading.Thread(target=_ready.set, daemon=True).start()",
  "",
  "def add(a, b):",
  "    return a + b",
  "",
].join("\n");

/** Runs one task of one iteration whose candidate is {@link THREADED}, with the review answering `review`. */
async function solveWith(url: string, review: () => Promise<Review>) {
  const gated: GateRequest[] = [];
  const { steps: s, calls } = steps([passed], {
    build: async () => ({
      value: { files: [{ path: "solution.py", content: THREADED }], tests: [], notes: "" },
      usage: usage(),
      provider,
    }),
    gate: async (req) => (gated.push(req), gate(req)),
    review: async () => ({ value: await review(), usage: usage(), provider }),
  });
  const nc = await connect({ servers: url });
  const conductor = await startConductor({ nc, steps: s, log });
  try {
    const run = await runTask(nc, task({ review: false, memory: "off", limits: { maxIterations: 1 } }));
    return { ...run, calls, gated };
  } finally {
    await conductor.stop();
    await nc.close();
  }
}

describe("a candidate with an unsure tampering finding", () => {
  it("goes to review with the task's review off, runs after an approval, and its result says the review cleared it", async ({
    nats,
  }) => {
    const r = await solveWith(nats.url, async () => ({ approved: true, score: 0.9, findings: [] }));
    expect(r.gated).toHaveLength(1);
    expect(
      r.events.some((e) => e.message.startsWith("gate passed (1 findings) with possible evaluation tampering")),
    ).toBe(true);
    expect(r.calls.execute).toBe(1);
    expect(r.result.status).toBe("passed");
    expect(r.result.message).toBe(
      "passed after 1 iteration (the gate's 1 tampering concern cleared by an approving review)",
    );
  });

  it("does not run when the review does not approve it: no pass, nothing to commit", async ({ nats }) => {
    const r = await solveWith(nats.url, async () => ({ approved: false, score: 0.2, findings: [] }));
    expect(r.calls.execute).toBeUndefined();
    expect(r.result.status).not.toBe("passed");
    expect(
      r.events.some((e) => e.message.startsWith("review: not approved, score 0.20: `threading.Thread(…).start()`")),
    ).toBe(true);
  });

  it("does not run when the review's reply cannot be read: an unreadable review approves nothing", async ({ nats }) => {
    const r = await solveWith(nats.url, async () => {
      throw new LoopsmithError("llm_bad_reply", "the reply did not validate after the re-ask");
    });
    expect(r.calls.execute).toBeUndefined();
    expect(r.result.status).not.toBe("passed");
    expect(
      r.events.some((e) =>
        e.message.startsWith("review: the reply could not be read, so nothing cleared the gate's 1 tampering concern"),
      ),
    ).toBe(true);
  });
});
