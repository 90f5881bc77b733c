/**
 * The improver on real NATS (JetStream work queue, KV, object store), with a fake conductor
 * that answers each generation's task with a patch, a fake executor that runs the "benchmark"
 * by reading the overlaid file, and a fake provider whose hypotheses cost money. Checks the
 * run's durability (a runner that dies mid-run: the run resumes at its generation and no
 * generation runs twice), the budget stop, a generation past its time limit, and a
 * resubmitted run id.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, onTestFinished } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Config } from "@loopsmith/shared/runtime";
import { ensureStreams, materializeSnapshot, submitImprove, DEFAULT_OWNER, followEvents } from "@loopsmith/shared/bus";
import {
  type ExecutionRequest,
  type ExecutionResult,
  type ImproveRequest,
  type ImproveRequestInput,
  type ImproveSummary,
  type TaskEvent,
} from "@loopsmith/shared/contracts";
import { type LlmProvider } from "@loopsmith/shared/llm";
import { budgetAdmission, startImprover, type Improver } from "@loopsmith/architect";
import { gate } from "@loopsmith/reviewer";
import { it } from "../fixtures/index.js";
import { fakeConductor } from "./fake-conductor.js";
import { FIXED, putImproveTree } from "./improve-tree.js";
import { log, usage } from "./helpers.js";

const BASE = "a".repeat(40);
/**
 * The executor: the check passes with 3 tests; the bench passes the cases app.py's threshold
 * lets through, app.py read from the overlay or else from the base snapshot, as the real one does.
 */
function executor(nc: NatsConnection, calls: ExecutionRequest[]) {
  const cache = mkdtempSync(join(tmpdir(), "fake-executor-"));
  return async (req: ExecutionRequest): Promise<ExecutionResult> => {
    calls.push(req);
    const base = { exitCode: 0, durationMs: 1, stderr: "", truncated: false };
    if (req.shell === "check")
      return {
        ...base,
        status: "passed",
        stdout: "",
        tests: ["a", "b", "c"].map((name) => ({ name, classname: "t", status: "passed", durationMs: 1 })),
      };
    const app =
      req.files.find((f) => f.path === "app.py")?.content ??
      readFileSync(join(await materializeSnapshot(nc, req.base?.snapshot ?? "", cache), "app.py"), "utf8");
    const limit = Number(/case < (\d+)/.exec(app)?.[1] ?? 0);
    const stdout = Array.from({ length: 10 }, (_, i) => JSON.stringify({ case: `c${i}`, pass: i < limit })).join("\n");
    return { ...base, status: "passed", stdout, tests: [] };
  };
}

/** The hypothesis prompts, by generation task id. */
const prompts = new Map<string, string>();

/** A provider whose every hypothesis costs `usd`; counts calls per generation task. */
function provider(usd: number, calls: Map<string, number>): LlmProvider {
  return {
    info: { name: "fake", model: "fake", scripted: true },
    async complete<T>(req: { context: { taskId: string }; messages: Array<{ content: string }> }) {
      calls.set(req.context.taskId, (calls.get(req.context.taskId) ?? 0) + 1);
      prompts.set(req.context.taskId, req.messages.map((m) => m.content).join("\n"));
      return {
        value: { title: "raise the threshold", rationale: "", expected: "", files: ["app.py"] } as T,
        usage: usage(usd),
        provider: { name: "fake", model: "fake", scripted: true },
      };
    },
  } as unknown as LlmProvider;
}

function request(
  runId: string,
  snap: string,
  over: Partial<ImproveRequestInput["settings"]> = {},
): ImproveRequestInput {
  return {
    v: 1,
    runId,
    repo: { baseCommit: BASE, snapshot: snap, setupCommand: "" },
    language: "python",
    settings: { bench: "bench", check: "check", generations: 3, ...over },
    submittedAt: new Date().toISOString(),
  };
}

async function summaryOf(
  nc: NatsConnection,
  runId: string,
): Promise<{ summary: ImproveSummary; generations: number[] }> {
  const generations: number[] = [];
  for await (const e of followEvents(nc, DEFAULT_OWNER, runId, AbortSignal.timeout(120_000))) {
    if (e.kind === "generation") generations.push(Number(e.data?.generation));
    if (e.kind === "result") return { summary: e.data?.summary as ImproveSummary, generations };
  }
  throw new Error(`no result for ${runId}`);
}

function improver(
  nc: NatsConnection,
  deps: {
    usd: number;
    hypotheses: Map<string, number>;
    exec: ExecutionRequest[];
    cancelled?: string[];
    admit?: (request: ImproveRequest) => void;
  },
): Promise<Improver> {
  const cache = mkdtempSync(join(tmpdir(), "improver-cache-"));
  return startImprover({
    nc,
    log,
    provider: provider(deps.usd, deps.hypotheses),
    execute: executor(nc, deps.exec),
    gate: async (req) => gate(req),
    tree: (s) => materializeSnapshot(nc, s, cache),
    cancelTask: async (id) => void deps.cancelled?.push(id),
    ...(deps.admit ? { admit: deps.admit } : {}),
  });
}

/** NATS, a fake conductor and an improver for one test, stopped when the test ends (passed or not). */
async function setup(
  url: string,
  opts: { usd?: number; hold?: (taskId: string) => boolean; admit?: (request: ImproveRequest) => void } = {},
) {
  const nc = await connect({ servers: url });
  await ensureStreams(nc);
  const stop = fakeConductor(nc, {
    write: (task) => `${FIXED}# ${task.taskId}\n`,
    checks: ["a", "b", "c"],
    summary: "raise the threshold",
    ...(opts.hold ? { hold: opts.hold } : {}),
  });
  const deps = {
    usd: opts.usd ?? 0,
    hypotheses: new Map<string, number>(),
    exec: [] as ExecutionRequest[],
    cancelled: [] as string[],
    ...(opts.admit ? { admit: opts.admit } : {}),
  };
  const imp = await improver(nc, deps);
  onTestFinished(async () => {
    stop();
    await imp.stop();
    await nc.close();
  });
  return { nc, deps, imp, snap: await putImproveTree(nc, BASE) };
}

describe("the improver", () => {
  it("accepts a real fix once, then ties; a resubmitted run id is answered from the record", async ({ nats }) => {
    const { nc, deps, imp, snap } = await setup(nats.url);
    expect((await submitImprove(nc, request("run-a", snap))).duplicate).toBe(false);
    const { summary, generations } = await summaryOf(nc, "run-a");
    expect(generations).toEqual([1, 2, 3]);
    expect(summary).toMatchObject({ stopReason: "completed", accepted: [1], generations: 3 });
    const { reports } = await imp.status("run-a", DEFAULT_OWNER);
    // Generation 1 fixes 8 cases (p = 2/2^8); 2 and 3 start from it and change only a comment.
    expect(reports.map((r) => [r.decision.reason, r.statistic?.fixed])).toEqual([
      ["accepted", 8],
      ["no_improvement", 0],
      ["no_improvement", 0],
    ]);
    expect(reports[1]?.parent).toBe(reports[0]?.candidate);
    // The bench ran on the parent without an overlay, then on the candidate with app.py over it.
    const benches = deps.exec
      .filter((r) => r.shell === "bench" && r.taskId === "run-a-gen-1")
      .map((r) => r.files.map((f) => f.path));
    expect(benches).toEqual([[], ["app.py"]]);
    // Resubmitted: a duplicate; nothing runs again.
    const before = deps.exec.length;
    expect((await submitImprove(nc, request("run-a", snap))).duplicate).toBe(true);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(deps.exec.length).toBe(before);
    // Another owner's run under the same id: refused on that owner's own subject; the run is not shown to it.
    expect((await submitImprove(nc, request("run-a", snap), "bob")).duplicate).toBe(false);
    const his: TaskEvent[] = [];
    for await (const e of followEvents(nc, "bob", "run-a", AbortSignal.timeout(20_000))) his.push(e);
    expect(his).toHaveLength(1);
    expect(his[0]).toMatchObject({ kind: "result", data: { error: { code: "bad_request" } } });
    expect(his[0]?.message).toContain("belongs to another client");
    expect(await imp.status("run-a", "bob")).toEqual({ state: null, reports: [] });
    expect(deps.exec.length).toBe(before);
  });

  it("stops before a generation the budget cannot fit", async ({ nats }) => {
    const { nc, snap } = await setup(nats.url, { usd: 0.4 });
    await submitImprove(nc, request("run-budget", snap, { generations: 5, budgetUsd: 1 }));
    const { summary } = await summaryOf(nc, "run-budget");
    // $0.40 + $0.40 spent; $0.20 left is less than the $0.40 a generation has cost.
    expect(summary).toMatchObject({ stopReason: "budget", generations: 2 });
    expect(summary.message).toBe(
      "stopped: the improvement run's USD budget of $1.0000 would be passed ($0.2000 left): generation 3 could cost up to $0.4000 (as much as the dearest generation so far)",
    );
    expect(summary.usage.costUsd).toBeCloseTo(0.8, 10);
  });

  it("stops a generation whose hypothesis used up the rest of the budget before its task is sent", async ({ nats }) => {
    const tasks: string[] = [];
    const { nc, imp, snap } = await setup(nats.url, {
      usd: 1.5,
      hold: (taskId) => {
        tasks.push(taskId);
        return false;
      },
    });
    await submitImprove(nc, request("run-spent", snap, { generations: 3, budgetUsd: 1 }));
    const { summary, generations } = await summaryOf(nc, "run-spent");
    // Generation 1 could start ($1 left, nothing spent yet); its hypothesis cost $1.50.
    const text = "the improvement run's USD budget of $1.0000 is used up ($0.0000 left): generation 1 cannot start";
    expect(summary).toMatchObject({ stopReason: "budget", generations: 1, message: `stopped: ${text}` });
    expect(summary.usage.costUsd).toBeCloseTo(1.5, 10);
    expect(generations).toEqual([1]);
    const { reports } = await imp.status("run-spent", DEFAULT_OWNER);
    expect(reports.map((r) => r.decision)).toEqual([{ verdict: "rejected", reason: "budget", message: text }]);
    expect(reports[0]?.hypothesis?.title).toBe("raise the threshold");
    // No task was sent for it (it would have run with no cost limit).
    expect(tasks).toEqual([]);
  });

  it("refuses a USD budget over an unpriced model (the improve role's included) before any generation; admits the run without one", async ({
    nats,
  }) => {
    // The improve role on a local server: neither llm.prices nor @pydantic/genai-prices prices it.
    const config = Config.parse({
      llm: {
        provider: "anthropic",
        roles: {
          improve: { provider: "openai-compatible", model: "qwen2.5-coder:14b", baseUrl: "http://127.0.0.1:9/v1" },
        },
      },
    });
    // A task's budget does not cover the improve role; a run's does.
    expect(() => budgetAdmission(config).task({ limits: { maxCostUsd: 1 } } as never)).not.toThrow();
    const { nc, deps, snap } = await setup(nats.url, { admit: budgetAdmission(config).run });
    await submitImprove(nc, request("run-unpriced", snap, { generations: 2, budgetUsd: 1 }));
    const { summary, generations } = await summaryOf(nc, "run-unpriced");
    expect(summary.stopReason).toBe("error");
    expect(summary.message).toContain('set llm.prices["qwen2.5-coder:14b"]');
    expect(summary.message).toContain("role improve");
    expect(summary.message).toContain("so the improvement run's USD budget (--budget-usd) cannot bind");
    expect(generations).toEqual([]);
    expect(deps.hypotheses.size).toBe(0);
    expect(deps.exec).toEqual([]);
    await submitImprove(nc, request("run-unbudgeted", snap, { generations: 1 }));
    expect((await summaryOf(nc, "run-unbudgeted")).summary).toMatchObject({ stopReason: "completed", generations: 1 });
  });

  it("records a generation past its time limit as timeout, cancels its task, and goes on", async ({ nats }) => {
    const { nc, deps, imp, snap } = await setup(nats.url, { hold: (taskId) => taskId === "run-slow-gen-1" });
    await submitImprove(nc, request("run-slow", snap, { generations: 2, generationTimeoutMs: 10_000 }));
    const { summary } = await summaryOf(nc, "run-slow");
    const { reports } = await imp.status("run-slow", DEFAULT_OWNER);
    expect(reports.map((r) => r.decision.reason)).toEqual(["timeout", "accepted"]);
    expect(deps.cancelled).toEqual(["run-slow-gen-1"]);
    expect(summary).toMatchObject({ stopReason: "completed", accepted: [2] });
  });

  it("shows a new run the attempts earlier runs made from the same tree and why they were rejected", async ({
    nats,
  }) => {
    const { nc, snap } = await setup(nats.url);
    await submitImprove(nc, request("run-memo", snap, { generations: 1 }));
    await summaryOf(nc, "run-memo");
    // run-slow's first generation started from the same base and timed out (the test above).
    expect(prompts.get("run-memo-gen-1")).toContain('run-slow gen 1: "raise the threshold" → rejected (timeout)');
    expect(prompts.get("run-memo-gen-1")).not.toContain("run-memo gen");
  });

  it("resumes a run whose runner died at the generation it was in; no generation runs twice", async ({ nats }) => {
    // The first runner's task for generation 2 stays queued until that runner is gone.
    let release = false;
    const {
      nc: control,
      deps,
      imp: own,
      snap,
    } = await setup(nats.url, { hold: (taskId) => taskId === "run-crash-gen-2" && !release });
    await own.stop(); // this test brings two runners of its own
    const first = await connect({ servers: nats.url });
    const dying = await improver(first, deps);
    await submitImprove(control, request("run-crash", snap, { generations: 3 }));
    const seen: number[] = [];
    for await (const e of followEvents(control, DEFAULT_OWNER, "run-crash", AbortSignal.timeout(60_000))) {
      if (e.kind === "generation") seen.push(Number(e.data?.generation));
      if (e.kind === "step" && e.data?.phase === "implement" && e.data?.generation === 2) break;
    }
    expect(seen).toEqual([1]);
    await first.close(); // the runner is gone mid-generation: no heartbeat, no ack
    await dying.stop();
    release = true;
    const second = await connect({ servers: nats.url });
    onTestFinished(() => second.close());
    const resumed = await improver(second, deps);
    onTestFinished(() => resumed.stop());
    const { summary, generations } = await summaryOf(control, "run-crash");
    expect(summary).toMatchObject({ stopReason: "completed", generations: 3 });
    expect(generations).toEqual([1, 2, 3]);
    // Generation 2's hypothesis was checkpointed before the crash: asked once, not again.
    expect([...deps.hypotheses.entries()].sort()).toEqual([
      ["run-crash-gen-1", 1],
      ["run-crash-gen-2", 1],
      ["run-crash-gen-3", 1],
    ]);
  });
});
