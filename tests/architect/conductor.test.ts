/**
 * The conductor on real NATS JetStream (work queue, KV checkpoints, events stream). The
 * step services are replaced by functions, so each stop rule can be driven exactly; the
 * broker is real.
 */
import { describe, expect } from "vitest";
import { connect } from "@nats-io/transport-node";
import { Config, LoopsmithError } from "@loopsmith/shared/runtime";
import { DEFAULT_OWNER, ensureStreams, followEvents, submitTask } from "@loopsmith/shared/bus";
import { type ExecutionResult, type TaskEvent, type TaskInput, type TaskRecord } from "@loopsmith/shared/contracts";
import { CANCEL_POLL_MS, budgetAdmission, openStateStore, startConductor, type Steps } from "@loopsmith/architect";
import { it } from "../fixtures/index.js";
import { eventsOf, failed, log, passed, runTask, steps, task, usage } from "./helpers.js";

describe("conductor on JetStream", () => {
  it("keeps owners apart: a task's owner is its subject's, another owner's status and cancel see nothing, and its id cannot be taken", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    const { steps: s, calls } = steps([passed]);
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      // The body names bob; the subject (alice's) wins.
      const input = task({ owner: "bob" });
      await submitTask(nc, input, "alice");
      const hers: TaskEvent[] = [];
      for await (const e of followEvents(nc, "alice", input.taskId)) hers.push(e);
      expect(hers.at(-1)?.result?.status).toBe("passed");
      expect(((await conductor.status(input.taskId, "alice")) as { task: { owner?: string } } | null)?.task.owner).toBe(
        "alice",
      );
      expect(await conductor.status(input.taskId, "bob")).toBeNull();
      expect(await conductor.cancel(input.taskId, "bob")).toBe(false);
      // Bob submits the same id: he gets an error result on his own subject; alice's task stays as it was.
      await submitTask(nc, { ...input, goal: "bob's goal" }, "bob");
      const his: TaskEvent[] = [];
      for await (const e of followEvents(nc, "bob", input.taskId)) his.push(e);
      expect(his).toHaveLength(1);
      expect(his[0]?.result).toMatchObject({ status: "error", error: { code: "bad_request" } });
      expect(his[0]?.message).toContain("belongs to another client");
      expect(calls.recordTask).toBe(1);
      const state = (await conductor.status(input.taskId, "alice")) as {
        task: { goal: string };
        status: string;
      } | null;
      expect(state).toMatchObject({ status: "final", task: { goal: input.goal } });
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("refuses a USD budget over a model without a known price before any step; admits it without the budget", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    // The build role on a local server: neither llm.prices nor @pydantic/genai-prices prices it.
    const config = Config.parse({
      llm: {
        provider: "anthropic",
        roles: {
          build: { provider: "openai-compatible", model: "qwen2.5-coder:14b", baseUrl: "http://127.0.0.1:9/v1" },
        },
      },
    });
    const { steps: s, calls } = steps([passed]);
    const conductor = await startConductor({ nc, steps: s, log, admit: budgetAdmission(config).task });
    try {
      const refused = await runTask(nc, task({ limits: { maxCostUsd: 1 } as never }));
      expect(refused.result).toMatchObject({ status: "error", error: { code: "config_invalid" } });
      expect(refused.result.message).toContain('set llm.prices["qwen2.5-coder:14b"]');
      expect(refused.result.message).toContain("role build");
      expect(calls.plan ?? 0).toBe(0);
      expect(calls.build ?? 0).toBe(0);
      const admitted = await runTask(nc, task());
      expect(admitted.result.status).toBe("passed");
      expect(calls.build).toBe(1);
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("fails, reflects, passes; sums usage per role and iteration; acks the task", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    await ensureStreams(nc);
    const seen: Array<[string, number | undefined]> = [];
    const base = steps([failed(), passed]);
    const { steps: s, calls } = steps([failed(), passed], {
      plan: async (req) => (seen.push(["plan", req.callsBefore]), base.steps.plan(req)),
      build: async (req) => (seen.push(["build", req.callsBefore]), base.steps.build(req)),
      reflect: async (req) => (seen.push(["reflect", req.callsBefore]), base.steps.reflect(req)),
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const { result, events } = await runTask(nc, task());
      expect(result.status).toBe("passed");
      expect(result.iterations).toBe(2);
      // Each LLM step names the calls the task already made for its role (what a script replays by).
      expect(seen).toEqual([
        ["plan", 0],
        ["build", 0],
        ["reflect", 0],
        ["build", 1],
      ]);
      expect(result.failureIds).toEqual(["f-1"]);
      expect({ ...calls, ...base.calls }).toMatchObject({
        plan: 1,
        build: 2,
        execute: 2,
        reflect: 1,
        attachFix: 1,
        rememberSuccess: 1,
        recordTask: 1,
      });
      // plan + 2 builds + reflect = 4 calls at $0.01
      expect(result.usage.total.calls).toBe(4);
      expect(result.usage.total.costUsd).toBeCloseTo(0.04);
      expect(result.usage.byRole.build?.calls).toBe(2);
      // Planning happens before the first iteration (index 0); then build + reflect, then build.
      expect(result.usage.byIteration.map((u) => u.calls)).toEqual([1, 2, 1]);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
      expect(events.some((e) => e.message.includes("failing tests: test_add"))).toBe(true);
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("refuses a taken task id at once while the other owner's task runs here, and lets that task finish", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let building!: () => void;
    const started = new Promise<void>((r) => (building = r));
    const base = steps([passed]);
    const { steps: s } = steps([passed], {
      build: async (req) => {
        building();
        await gate;
        return base.steps.build(req);
      },
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const input = task();
      await submitTask(nc, input, "alice");
      await started;
      const t0 = Date.now();
      await submitTask(nc, input, "bob");
      const his: TaskEvent[] = [];
      for await (const e of followEvents(nc, "bob", input.taskId)) his.push(e);
      // Well before the 10 redeliveries at 5 s each would have run out.
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(his.map((e) => e.result?.status)).toEqual(["error"]);
      release();
      const hers: TaskEvent[] = [];
      for await (const e of followEvents(nc, "alice", input.taskId)) hers.push(e);
      expect(hers.at(-1)?.result?.status).toBe("passed");
    } finally {
      release();
      await conductor.stop();
      await nc.close();
    }
  });

  it("with memory off recalls nothing and puts no hint in a prompt, yet stores the failure and its fix", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    const hint = {
      failures: [
        {
          id: "old-1",
          taskId: "other",
          goal: "g",
          signature: "AssertionError: assert <num> == <num>",
          failingTests: [],
          reflection: null,
          similarity: 0.9,
        },
      ],
      successes: [],
      embedder: "test",
    };
    const prompts: unknown[] = [];
    const base = steps([failed(), passed]);
    const { steps: s, calls } = steps([failed(), passed], {
      recall: async () => hint,
      plan: async (req) => (prompts.push(req.recall), base.steps.plan(req)),
      build: async (req) => (prompts.push(req.recall), base.steps.build(req)),
      reflect: async (req) => (prompts.push(req.recall), base.steps.reflect(req)),
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const off = await runTask(nc, task({ memory: "off" }));
      expect(off.result.status).toBe("passed");
      expect(calls.recall ?? 0).toBe(0);
      expect(prompts).toHaveLength(4);
      expect(prompts.every((r) => r === undefined)).toBe(true);
      expect(calls).toMatchObject({ rememberFailure: 1, attachFix: 1, rememberSuccess: 1 });
      expect(off.events.some((e) => e.message === "memory is off for this task: nothing recalled")).toBe(true);
      // The same task with memory on: the hint reaches the prompts.
      prompts.length = 0;
      await runTask(nc, task());
      expect(prompts.some((r) => JSON.stringify(r ?? null).includes("old-1"))).toBe(true);
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("stops with max_iterations, stuck, budget and error by their rules", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const cases: Array<[string, Partial<TaskInput>, Partial<Steps>, string]> = [
      ["max_iterations", { limits: { maxIterations: 2, stuckAfter: 5 } as never }, {}, "max_iterations"],
      ["stuck", { limits: { maxIterations: 9, stuckAfter: 3 } as never }, {}, "stuck"],
      [
        "budget",
        { limits: { maxCostUsd: 0.001 } as never },
        {
          plan: async () => {
            throw new LoopsmithError("budget_exceeded", "the plan call would cost more than the $0.001 left");
          },
        },
        "budget",
      ],
      ["replan", { limits: { maxIterations: 9, stuckAfter: 2, replanOnStuck: true } as never }, {}, "stuck"],
      [
        "auth",
        {},
        {
          build: async () => {
            throw new LoopsmithError("llm_auth", "the API key was rejected");
          },
        },
        "error",
      ],
    ];
    for (const [name, over, stepOver, reason] of cases) {
      const { steps: s, calls } = steps([failed()], stepOver);
      const conductor = await startConductor({ nc, steps: s, log });
      try {
        const { result } = await runTask(nc, task(over));
        expect(result.stopReason, name).toBe(reason);
        if (name === "stuck") expect(calls.execute).toBe(3);
        if (name === "max_iterations") expect(calls.execute).toBe(2);
        if (name === "budget") expect(calls.build ?? 0).toBe(0);
        // The breaker fires after 2 identical failures, re-plans once, then fires again and stops.
        if (name === "replan") expect([calls.plan, calls.execute]).toEqual([2, 4]);
      } finally {
        await conductor.stop();
      }
    }
    await nc.close();
  });

  it("records an unreadable build reply as a failed iteration and goes on", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    let builds = 0;
    const base = steps([passed]);
    const { steps: s } = steps([passed], {
      build: async (req) => {
        builds += 1;
        if (builds === 1) throw new LoopsmithError("llm_bad_reply", "the reply did not validate after the re-ask");
        return base.steps.build(req);
      },
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const { result, events } = await runTask(nc, task());
      expect(result.status).toBe("passed");
      expect(result.iterations).toBe(2);
      expect(events.some((e) => e.kind === "warning" && e.message.includes("build reply could not be read"))).toBe(
        true,
      );
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("shows a switch to a fallback model as a warning and counts the fallback among the providers", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    const fallbackFrom = {
      name: "anthropic",
      model: "claude-opus-4-1",
      code: "llm_overloaded",
      message: "529 overloaded",
    };
    const base = steps([passed]);
    const { steps: s } = steps([passed], {
      build: async (req) => ({
        ...(await base.steps.build(req)),
        provider: { name: "bedrock", model: "us.anthropic.claude-opus", scripted: false, fallbackFrom },
      }),
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const { result, events } = await runTask(nc, task());
      expect(result.status).toBe("passed");
      const warning = events.find((e) => e.kind === "warning" && e.message.includes("answered instead"));
      expect(warning?.message).toBe(
        "build: anthropic:claude-opus-4-1 failed (llm_overloaded); bedrock:us.anthropic.claude-opus answered instead",
      );
      expect(result.providers).toContain("bedrock:us.anthropic.claude-opus");
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("cancels a running task at its next step", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    let release!: () => void;
    const inBuild = new Promise<void>((r) => (release = r));
    let building!: () => void;
    const started = new Promise<void>((r) => (building = r));
    const base = steps([passed]);
    const { steps: s, calls } = steps([passed], {
      build: async (req) => {
        building();
        await inBuild;
        return base.steps.build(req);
      },
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const input = task();
      await submitTask(nc, input);
      await started;
      expect(await conductor.cancel(input.taskId, DEFAULT_OWNER)).toBe(true);
      release();
      const events = await eventsOf(nc, input.taskId);
      const result = events[events.length - 1]?.result;
      expect(result?.status).toBe("cancelled");
      expect(result?.stopReason).toBe("cancelled");
      expect(calls.execute ?? 0).toBe(0);
      expect(await conductor.cancel(input.taskId, DEFAULT_OWNER)).toBe(false);
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("sees a cancel written by another instance (the KV marker) at a checkpoint within CANCEL_POLL_MS", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    let building!: () => void;
    const started = new Promise<void>((r) => (building = r));
    const base = steps([failed()]);
    const { steps: s } = steps([failed()], {
      build: async (req) => {
        building();
        // Longer than the poll period, so the checkpoint after this build reads the marker.
        await new Promise((r) => setTimeout(r, CANCEL_POLL_MS + 200));
        return base.steps.build(req);
      },
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const input = task({ limits: { maxIterations: 5 } });
      await submitTask(nc, input);
      await started;
      // Another architect instance's cancel: only the marker in KV, no local abort.
      await (await openStateStore(nc)).requestCancel(input.taskId, DEFAULT_OWNER);
      const events = await eventsOf(nc, input.taskId);
      expect(events[events.length - 1]?.result?.status).toBe("cancelled");
      expect(base.calls.build).toBe(1);
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("reviews when asked, never shows hidden tests to a prompt, and scores them once after a pass", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    const seen: string[] = [];
    const executed: string[][] = [];
    const base = steps([passed]);
    const { steps: s } = steps([passed], {
      plan: async (req) => (seen.push(JSON.stringify(req)), base.steps.plan(req)),
      build: async (req) => (seen.push(JSON.stringify(req)), base.steps.build(req)),
      review: async (req) => (seen.push(JSON.stringify(req)), base.steps.review(req)),
      execute: async (req) => {
        executed.push(req.files.map((f) => f.path));
        return req.files.some((f) => f.path === "test_hidden.py")
          ? {
              ...passed,
              tests: [
                ...passed.tests,
                { name: "test_hidden", classname: "", status: "failed" as const, durationMs: 1 },
              ],
            }
          : passed;
      },
    });
    const conductor = await startConductor({ nc, steps: s, log });
    try {
      const { result } = await runTask(
        nc,
        task({ review: true, hiddenTests: [{ path: "test_hidden.py", content: "SECRET_HIDDEN_ASSERTION = 1\n" }] }),
      );
      expect(result.status).toBe("passed");
      expect(base.calls.review).toBe(1);
      expect(seen.length).toBe(3); // plan, build, review
      for (const req of seen) expect(req).not.toContain("SECRET_HIDDEN_ASSERTION");
      expect(executed).toEqual([
        ["solution.py", "test_add.py"],
        ["solution.py", "test_add.py", "test_hidden.py"],
      ]);
      expect(result.hidden).toEqual({ status: "passed", passed: 1, total: 2 });
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });

  it("ends a task at once on an error a retry cannot cure, and counts usage paid before a bad reply", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    const recorded: TaskRecord[] = [];
    const broken = steps([passed], {
      gate: async () => {
        throw new LoopsmithError("internal", "the gate crashed");
      },
      recordTask: async (rec) => (recorded.push(rec), { id: rec.taskId }),
    });
    const c1 = await startConductor({ nc, steps: broken.steps, log });
    try {
      const { result } = await runTask(nc, task());
      expect(result.stopReason).toBe("error");
      expect(result.error?.code).toBe("internal");
      expect(broken.calls.build).toBe(1); // not redelivered and rebuilt
      // Ended on the conductor's error path, and still in history with its reason and its run.
      expect(recorded).toHaveLength(1);
      expect(recorded[0]).toMatchObject({
        taskId: result.taskId,
        status: result.status,
        stopReason: "error",
        iterations: 1,
      });
      expect(recorded[0]?.result?.error?.message).toContain("the gate crashed");
      expect(recorded[0]?.task?.goal).toBeTruthy();
    } finally {
      await c1.stop();
    }
    let builds = 0;
    const base = steps([passed]);
    const paid = steps([passed], {
      build: async (req) => {
        builds += 1;
        if (builds === 1) {
          throw new LoopsmithError("llm_bad_reply", "unreadable twice", {
            details: { usage: { ...usage(0.05, 1000), calls: 2 } },
          });
        }
        return base.steps.build(req);
      },
    });
    const c2 = await startConductor({ nc, steps: paid.steps, log });
    try {
      const { result } = await runTask(nc, task());
      expect(result.status).toBe("passed");
      // plan (1) + the two paid calls of the unreadable build (2) + the good build (1)
      expect(result.usage.total.calls).toBe(4);
      expect(result.usage.total.costUsd).toBeCloseTo(0.07);
    } finally {
      await c2.stop();
      await nc.close();
    }
  });

  it("keeps a cancel that arrives before the task starts, and checkpoints a 1 MB output", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const huge: ExecutionResult = {
      ...failed(),
      stdout: "x".repeat(1_000_000),
      truncated: true,
      status: "output_limit",
    };
    let runs = 0;
    const { steps: s, calls } = steps([passed], {
      execute: async () => {
        runs += 1;
        if (runs === 1) {
          await gate;
          return huge;
        }
        return passed;
      },
    });
    const conductor = await startConductor({ nc, steps: s, log, concurrency: 1 });
    try {
      const first = task();
      const second = task();
      await submitTask(nc, first);
      while (runs < 1) await new Promise((r) => setTimeout(r, 50));
      await submitTask(nc, second);
      expect(await conductor.cancel(second.taskId, DEFAULT_OWNER)).toBe(true); // queued: no checkpoint yet
      release();
      const events = await eventsOf(nc, first.taskId);
      expect(events[events.length - 1]?.result?.status).toBe("passed");
      expect(events[events.length - 1]?.result?.iterations).toBe(2);
      const other = await eventsOf(nc, second.taskId);
      expect(other[other.length - 1]?.result?.status).toBe("cancelled");
      expect(calls.plan).toBe(1); // only the first task was planned
    } finally {
      await conductor.stop();
      await nc.close();
    }
  });
});
