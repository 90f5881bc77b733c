import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DagPlan, emptyUsage, type DagPlanInput, type DagState, type SubtaskState } from "@loopsmith/shared/contracts";
import { HandBack } from "../durable/index.js";
import {
  dagOutcome,
  reopenSubtask,
  runDag,
  startDag,
  type AttemptOutcome,
  type AttemptRequest,
  type DagIO,
} from "./scheduler.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function plan(subtasks: Array<{ id: string; deps?: string[] }>): DagPlan {
  const input: DagPlanInput = {
    summary: "test plan",
    subtasks: subtasks.map((s) => ({
      id: s.id,
      goal: `build ${s.id}`,
      files: [`${s.id}.py`],
      dependsOn: s.deps ?? [],
    })),
  };
  return DagPlan.parse(input);
}

/** model → (storage ∥ validation) → handlers → server */
const restApi = (): DagPlan =>
  plan([
    { id: "model" },
    { id: "storage", deps: ["model"] },
    { id: "validation", deps: ["model"] },
    { id: "handlers", deps: ["storage", "validation"] },
    { id: "server", deps: ["handlers"] },
  ]);

const pass = (iterations = 1): AttemptOutcome => ({
  passed: true,
  reason: "passed",
  message: "tests pass",
  iterations,
  usage: { ...emptyUsage(), calls: 2, inputTokens: 100 },
  change: { patch: "", changed: [], deleted: [] },
});
const fail = (retryable = true): AttemptOutcome => ({
  passed: false,
  reason: "max_iterations",
  message: "AssertionError in test_x",
  iterations: 3,
  usage: { ...emptyUsage(), calls: 4 },
  retryable,
});

interface Recorded {
  at: number;
  seq: number;
  sub: SubtaskState;
  state: DagState;
}

/** A harness: `behave` answers each attempt (after `ms`), every record is kept with its time. */
function harness(
  behave: (req: AttemptRequest) => AttemptOutcome | Promise<AttemptOutcome>,
  opts: {
    ms?: (req: AttemptRequest) => number;
    stopWhen?: (r: Recorded) => boolean;
    cancelWhen?: (r: Recorded) => boolean;
    timeOutWhen?: (r: Recorded) => boolean;
  } = {},
) {
  const abort = new AbortController();
  let cancelled = false;
  let late = false;
  const records: Recorded[] = [];
  const attempts: AttemptRequest[] = [];
  const t0 = performance.now();
  const io: DagIO = {
    signal: abort.signal,
    cancelled: () => cancelled,
    timedOut: () => late,
    async attempt(req) {
      attempts.push(req);
      const wait = opts.ms?.(req) ?? 20;
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, wait);
        req.signal.addEventListener("abort", () => (clearTimeout(t), reject(req.signal.reason as Error)), {
          once: true,
        });
      });
      return behave(req);
    },
    async record(state, sub) {
      const r = { at: performance.now() - t0, seq: records.length, sub, state };
      records.push(r);
      if (opts.cancelWhen?.(r)) {
        cancelled = true;
        abort.abort(new Error("cancelled"));
      } else if (opts.timeOutWhen?.(r)) {
        late = true;
        abort.abort(new Error("the task's time limit passed"));
      } else if (opts.stopWhen?.(r)) abort.abort(new Error("stopping"));
    },
  };
  return { io, records, attempts };
}

const opts = (parallel: number, attempts = 3) => ({
  parentTaskId: "t-dag",
  parallel,
  attempts,
  backoff: { minMs: 5, maxMs: 20 },
});

/** Seq of the first record where `id` reached `status`. */
function when(records: Recorded[], id: string, status: SubtaskState["status"]): Recorded | undefined {
  return records.find((r) => r.sub.id === id && r.sub.status === status);
}

describe("runDag", () => {
  it("runs independent subtasks at the same time (from the recorded start and end times)", async () => {
    const h = harness(() => pass(), {
      ms: (r) => (r.subtask.id === "storage" || r.subtask.id === "validation" ? 80 : 10),
    });
    const final = await runDag(startDag(restApi()), h.io, opts(2));
    expect(dagOutcome(final).status).toBe("passed");
    const storage = [when(h.records, "storage", "running")!.at, when(h.records, "storage", "passed")!.at];
    const validation = [when(h.records, "validation", "running")!.at, when(h.records, "validation", "passed")!.at];
    // Each started before the other ended: the two runs overlap.
    expect(storage[0]!).toBeLessThan(validation[1]!);
    expect(validation[0]!).toBeLessThan(storage[1]!);
    expect(Math.abs(storage[0]! - validation[0]!)).toBeLessThan(40);
  });

  it("with parallel 1 runs one subtask at a time", async () => {
    const h = harness(() => pass(), { ms: () => 10 });
    await runDag(startDag(restApi()), h.io, opts(1));
    let running = 0;
    for (const r of h.records) {
      if (r.sub.status === "running") running++;
      if (r.sub.status === "passed") running--;
      expect(running).toBeLessThanOrEqual(1);
    }
    expect(h.attempts.map((a) => a.subtask.id)).toHaveLength(5);
  });

  it("never starts a subtask before all its dependencies passed, on random plans and outcomes", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 7 }),
        fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 12 }),
        fc.array(fc.boolean(), { minLength: 7, maxLength: 7 }),
        fc.integer({ min: 1, max: 3 }),
        async (n, pairs, failing, parallel) => {
          const deps = Array.from({ length: n }, () => new Set<string>());
          for (const [a, b] of pairs) {
            const [lo, hi] = [a % n, b % n].sort((x, y) => x - y) as [number, number];
            if (lo !== hi) deps[hi]!.add(`s${lo}`);
          }
          const p = plan(deps.map((d, i) => ({ id: `s${i}`, deps: [...d] })));
          const h = harness((req) => (failing[Number(req.subtask.id.slice(1))] ? fail() : pass()), {
            ms: (req) => (req.attempt * 7 + Number(req.subtask.id.slice(1))) % 4,
          });
          const final = await runDag(startDag(p), h.io, { ...opts(parallel, 2), backoff: { minMs: 1, maxMs: 2 } });
          for (const s of p.subtasks) {
            const started = when(h.records, s.id, "running");
            for (const d of s.dependsOn) {
              if (started) expect(when(h.records, d, "passed")!.seq).toBeLessThan(started.seq);
            }
            const st = final.subtasks.find((x) => x.id === s.id)!;
            // Every subtask ends somewhere; a subtask never run had a failed dependency.
            expect(["passed", "failed", "cancelled"]).toContain(st.status);
            if (st.status === "cancelled") expect(st.reason).toBe("dependency_failed");
            if (failing[Number(s.id.slice(1))] && started) expect(st).toMatchObject({ status: "failed", attempts: 2 });
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("retries a failed subtask with backoff, under a new child task id, and adds up its iterations", async () => {
    const h = harness((req) => (req.subtask.id === "storage" && req.attempt === 1 ? fail() : pass(2)), { ms: () => 5 });
    const final = await runDag(startDag(restApi()), h.io, { ...opts(2), backoff: { minMs: 60, maxMs: 200 } });
    expect(dagOutcome(final).status).toBe("passed");
    const storage = h.attempts.filter((a) => a.subtask.id === "storage");
    expect(storage.map((a) => [a.attempt, a.childTaskId])).toEqual([
      [1, "t-dag--storage-a1"],
      [2, "t-dag--storage-a2"],
    ]);
    const failedAt = h.records.find((r) => r.sub.id === "storage" && r.sub.reason === "max_iterations")!.at;
    const retriedAt = h.records.find((r) => r.sub.id === "storage" && r.sub.attempts === 2)!.at;
    expect(retriedAt - failedAt).toBeGreaterThanOrEqual(55); // ≥ minMs (a random factor ≥ 1), less timer slack
    expect(final.subtasks.find((s) => s.id === "storage")).toMatchObject({
      status: "passed",
      attempts: 2,
      iterations: 3 + 2,
    });
    // handlers started after storage's second attempt passed, from model, storage and validation.
    const handlers = h.attempts.find((a) => a.subtask.id === "handlers")!;
    expect(handlers.base.map((b) => b.id)).toEqual(
      ["model", "storage", "validation"].filter((id) => handlers.base.some((b) => b.id === id)),
    );
    expect(new Set(handlers.base.map((b) => b.id))).toEqual(new Set(["model", "storage", "validation"]));
    expect(handlers.base.every((b) => b.status === "passed")).toBe(true);
  });

  it("cancels the dependents of a subtask that gives up, and finishes the independent ones", async () => {
    const h = harness((req) => (req.subtask.id === "storage" ? fail() : pass()), { ms: () => 5 });
    const final = await runDag(startDag(restApi()), h.io, opts(2, 2));
    const by = Object.fromEntries(final.subtasks.map((s) => [s.id, s]));
    expect(by.storage).toMatchObject({ status: "failed", attempts: 2, reason: "max_iterations", iterations: 6 });
    expect(by.validation!.status).toBe("passed");
    expect(by.handlers).toMatchObject({ status: "cancelled", reason: "dependency_failed" });
    expect(by.server).toMatchObject({ status: "cancelled", reason: "dependency_failed" });
    expect(by.handlers!.message).toContain('"storage" failed after 2 attempt(s)');
    expect(h.attempts.some((a) => a.subtask.id === "handlers" || a.subtask.id === "server")).toBe(false);
    expect(dagOutcome(final)).toEqual({
      status: "failed",
      passed: ["model", "validation"],
      failed: ["storage"],
      cancelled: ["handlers", "server"],
    });
  });

  it("does not retry an attempt that cannot help, nor a non-retryable infrastructure error", async () => {
    const h = harness(
      (req) => {
        if (req.subtask.id === "storage") return fail(false);
        if (req.subtask.id === "validation") throw new Error("the child task's record is malformed");
        return pass();
      },
      { ms: () => 1 },
    );
    const final = await runDag(startDag(restApi()), h.io, opts(2, 3));
    expect(h.attempts.filter((a) => a.subtask.id === "storage")).toHaveLength(1);
    expect(h.attempts.filter((a) => a.subtask.id === "validation")).toHaveLength(1);
    expect(final.subtasks.find((s) => s.id === "validation")).toMatchObject({
      status: "failed",
      reason: "error",
      message: "the child task's record is malformed",
    });
  });

  it("resumes after the conductor stopped: passed subtasks are not run again, a running one is re-attached", async () => {
    const first = harness(() => pass(), {
      ms: (r) => (r.subtask.id === "handlers" ? 1_000 : 5),
      stopWhen: (r) => r.sub.id === "handlers" && r.sub.status === "running",
    });
    await expect(runDag(startDag(restApi()), first.io, opts(2))).rejects.toBeInstanceOf(HandBack);
    const checkpoint = first.records.at(-1)!.state;
    expect(checkpoint.subtasks.map((s) => [s.id, s.status])).toEqual([
      ["model", "passed"],
      ["storage", "passed"],
      ["validation", "passed"],
      ["handlers", "running"],
      ["server", "pending"],
    ]);
    const second = harness(() => pass(), { ms: () => 5 });
    const final = await runDag(checkpoint, second.io, opts(2));
    expect(second.attempts.map((a) => [a.subtask.id, a.attempt, a.childTaskId])).toEqual([
      ["handlers", 1, "t-dag--handlers-a1"],
      ["server", 1, "t-dag--server-a1"],
    ]);
    // Re-attaching is no move: handlers' attempt 1 is recorded running once, by the first run only.
    expect(second.records.filter((r) => r.sub.id === "handlers").map((r) => r.sub.status)).toEqual(["passed"]);
    expect(dagOutcome(final).status).toBe("passed");
    expect(final.subtasks.find((s) => s.id === "handlers")!.attempts).toBe(1);
  });

  it("on a cancel, stops the running subtask and cancels the rest", async () => {
    const h = harness(() => pass(), {
      ms: (r) => (r.subtask.id === "storage" ? 1_000 : 5),
      cancelWhen: (r) => r.sub.id === "validation" && r.sub.status === "passed",
    });
    const final = await runDag(startDag(restApi()), h.io, opts(2));
    expect(final.subtasks.map((s) => [s.id, s.status, s.reason])).toEqual([
      ["model", "passed", "passed"],
      ["storage", "cancelled", "cancelled"],
      ["validation", "passed", "passed"],
      ["handlers", "cancelled", "cancelled"],
      ["server", "cancelled", "cancelled"],
    ]);
    expect(dagOutcome(final).status).toBe("cancelled");
  });

  it("when the parent's time limit passes, stops the running subtask and cancels the rest with reason time_limit", async () => {
    const h = harness(() => pass(), {
      ms: (r) => (r.subtask.id === "storage" ? 1_000 : 5),
      timeOutWhen: (r) => r.sub.id === "validation" && r.sub.status === "passed",
    });
    const t0 = performance.now();
    const final = await runDag(startDag(restApi()), h.io, opts(2));
    // The running attempt was cut off, not waited for.
    expect(performance.now() - t0).toBeLessThan(900);
    expect(final.subtasks.map((s) => [s.id, s.status, s.reason])).toEqual([
      ["model", "passed", "passed"],
      ["storage", "cancelled", "time_limit"],
      ["validation", "passed", "passed"],
      ["handlers", "cancelled", "time_limit"],
      ["server", "cancelled", "time_limit"],
    ]);
    expect(final.subtasks.find((s) => s.id === "storage")?.message).toBe("the task's time limit passed");
    // Not a hand-back: nothing was left running to re-attach.
    expect(h.attempts.filter((a) => a.subtask.id === "handlers")).toHaveLength(0);
  });
});

describe("runDag when recording fails", () => {
  it("stops at once and throws the record's error: no subtask starts on a move that was not checkpointed", async () => {
    const h = harness(() => pass(), { ms: () => 5 });
    const record = h.io.record;
    let n = 0;
    h.io.record = async (state, sub) => {
      if (++n === 3) throw new Error("the checkpoint could not be written: closed connection");
      return record(state, sub);
    };
    await expect(runDag(startDag(restApi()), h.io, opts(2))).rejects.toThrow(/closed connection/);
    // model ran (records 1, 2); record 3, storage's start, failed: neither storage nor validation was attempted.
    expect(h.attempts.map((a) => a.subtask.id)).toEqual(["model"]);
  });
});

describe("reopenSubtask", () => {
  it("re-opens one subtask and its dependents with a fresh attempt limit, once", async () => {
    const h = harness(() => pass(), { ms: () => 1 });
    const done = await runDag(startDag(restApi()), h.io, opts(2));
    const again = reopenSubtask(done, "storage", "integration: test_create fails with KeyError 'id'");
    expect(again.subtasks.map((s) => [s.id, s.status])).toEqual([
      ["model", "passed"],
      ["storage", "pending"],
      ["validation", "passed"],
      ["handlers", "pending"],
      ["server", "pending"],
    ]);
    expect(again.subtasks.find((s) => s.id === "storage")).toMatchObject({
      attemptsBefore: 1,
      message: "re-opened: integration: test_create fails with KeyError 'id'",
    });
    expect(again.subtasks.find((s) => s.id === "storage")!.change).toBeUndefined();

    const rerun = harness(() => pass(), { ms: () => 1 });
    const final = await runDag(again, rerun.io, opts(2, 1));
    expect(rerun.attempts.map((a) => [a.subtask.id, a.childTaskId])).toEqual([
      ["storage", "t-dag--storage-a2"],
      ["handlers", "t-dag--handlers-a2"],
      ["server", "t-dag--server-a2"],
    ]);
    expect(dagOutcome(final).status).toBe("passed");
    expect(() => reopenSubtask(final, "storage", "again")).toThrow(/at most once/);
    expect(() => reopenSubtask(final, "nope", "x")).toThrow(/no such subtask/);
  });

  it("refuses a subtask that has not passed", () => {
    expect(() => reopenSubtask(startDag(restApi()), "model", "x")).toThrow(/it is pending, not passed/);
  });
});

describe("runDag's limits", () => {
  it("refuses parallel 0", async () => {
    const h = harness(() => pass());
    await expect(runDag(startDag(restApi()), h.io, opts(0))).rejects.toThrow(/parallel ≥ 1/);
    await sleep(1);
  });
});
