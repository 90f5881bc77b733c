/**
 * An improvement run resumes at the phase it was in (the durable phase machine,
 * `services/architect/src/improve/run.ts`): on real NATS, with a fake conductor, a fake
 * executor and a fake provider, a generation whose handler is handed back by a retryable
 * executor failure in VALIDATE (the parent's check) resumes at VALIDATE: the hypothesis is
 * not asked again, the task is not sent again and the generation is not announced again. One
 * handed back in MEASURE resumes at MEASURE: the parent's check (VALIDATE's) does not run again.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, onTestFinished } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_OWNER, ensureStreams, followEvents, materializeSnapshot, submitImprove } from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  type ExecutionRequest,
  type ExecutionResult,
  type GenerationReport,
  type ImproveSummary,
  type TaskEvent,
} from "@loopsmith/shared/contracts";
import { type LlmProvider } from "@loopsmith/shared/llm";
import { startImprover } from "@loopsmith/architect";
import { gate } from "@loopsmith/reviewer";
import { it } from "../fixtures/index.js";
import { fakeConductor } from "./fake-conductor.js";
import { FIXED, putImproveTree } from "./improve-tree.js";
import { log, usage } from "./helpers.js";

const BASE = "c".repeat(40);
/**
 * The executor: the check passes with 3 tests; the bench passes the cases app.py's threshold
 * lets through. The first call of the kind `failOnce` names fails as unavailable (retryable),
 * as an executor that went away for a moment does.
 */
function executor(nc: NatsConnection, calls: ExecutionRequest[], failOnce: (req: ExecutionRequest) => boolean) {
  const cache = mkdtempSync(join(tmpdir(), "improve-resume-executor-"));
  let failed = false;
  return async (req: ExecutionRequest): Promise<ExecutionResult> => {
    calls.push(req);
    if (!failed && failOnce(req)) {
      failed = true;
      throw new LoopsmithError("unavailable", "the executor went away", { retryable: true });
    }
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

/** A provider whose every hypothesis is the same; counts its calls. */
function provider(calls: { n: number }): LlmProvider {
  return {
    info: { name: "fake", model: "fake", scripted: true },
    async complete<T>() {
      calls.n++;
      return {
        value: { title: "raise the threshold", rationale: "", expected: "", files: ["app.py"] } as T,
        usage: usage(0),
        provider: { name: "fake", model: "fake", scripted: true },
      };
    },
  } as unknown as LlmProvider;
}

/** Every event of a run up to its result. */
async function eventsUntilResult(nc: NatsConnection, runId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  for await (const e of followEvents(nc, DEFAULT_OWNER, runId, AbortSignal.timeout(90_000))) {
    events.push(e);
    if (e.kind === "result") return events;
  }
  throw new Error(`no result for ${runId}`);
}

/** One run of one generation whose executor fails once on the first call `failOnce` names; what it saw. */
async function runFailingOnce(url: string, runId: string, failOnce: (req: ExecutionRequest) => boolean) {
  const nc = await connect({ servers: url });
  await ensureStreams(nc);
  const tasks: string[] = [];
  const stopConductor = fakeConductor(nc, {
    write: (task) => (tasks.push(task.taskId), `${FIXED}# ${task.taskId}\n`),
    checks: ["a", "b", "c"],
    summary: "raise the threshold",
  });
  const calls: ExecutionRequest[] = [];
  const asked = { n: 0 };
  const cache = mkdtempSync(join(tmpdir(), "improve-resume-cache-"));
  const improver = await startImprover({
    nc,
    log,
    provider: provider(asked),
    execute: executor(nc, calls, failOnce),
    gate: async (req) => gate(req),
    tree: (s) => materializeSnapshot(nc, s, cache),
    cancelTask: async () => undefined,
  });
  onTestFinished(async () => {
    stopConductor();
    await improver.stop();
    await nc.close();
  });
  await submitImprove(nc, {
    v: 1,
    runId,
    repo: { baseCommit: BASE, snapshot: await putImproveTree(nc, BASE), setupCommand: "" },
    language: "python",
    settings: { bench: "bench", check: "check", generations: 1, repeats: 2 },
    submittedAt: new Date().toISOString(),
  });
  const events = await eventsUntilResult(nc, runId);
  const result = events.at(-1);
  const generation = events.find((e) => e.kind === "generation")?.data?.report as GenerationReport | undefined;
  const steps = (phase: string) => events.filter((e) => e.kind === "step" && e.data?.phase === phase);
  return {
    summary: result?.data?.summary as ImproveSummary,
    report: generation,
    steps,
    tasks,
    asked: asked.n,
    shells: calls.map((c) => c.idempotencyKey.split("/").at(-1)),
  };
}

describe("a handed-back generation", () => {
  it("resumes at VALIDATE: neither planned nor implemented again", async ({ nats }) => {
    const seen = await runFailingOnce(nats.url, "resume-validate", (req) =>
      req.idempotencyKey.endsWith("/check_parent"),
    );
    expect(seen.summary).toMatchObject({ stopReason: "completed", generations: 1, accepted: [1] });
    // PLAN and IMPLEMENT ran once: one hypothesis asked, one task sent, one announcement each.
    expect(seen.asked).toBe(1);
    expect(seen.tasks).toEqual(["resume-validate-gen-1"]);
    expect(seen.steps("start")).toHaveLength(1);
    expect(seen.steps("plan")).toHaveLength(1);
    expect(seen.steps("implement")).toHaveLength(1);
    // VALIDATE ran again: the parent's check twice (the failed call, then the resumed one).
    expect(seen.shells.filter((s) => s === "check_parent")).toHaveLength(2);
    expect(seen.report?.errors).toEqual([
      { phase: "validate", code: "unavailable", message: "the executor went away", retried: true },
    ]);
    expect(seen.report?.decision.verdict).toBe("accepted");
  });

  it("resumes at MEASURE: the candidate is not validated again", async ({ nats }) => {
    const seen = await runFailingOnce(nats.url, "resume-measure", (req) =>
      req.idempotencyKey.includes("bench_candidate"),
    );
    expect(seen.summary).toMatchObject({ stopReason: "completed", generations: 1, accepted: [1] });
    expect(seen.asked).toBe(1);
    expect(seen.tasks).toEqual(["resume-measure-gen-1"]);
    expect(seen.steps("implement")).toHaveLength(1);
    // The parent's check (VALIDATE) ran once; the benchmarking was announced twice (MEASURE ran again).
    expect(seen.shells.filter((s) => s === "check_parent")).toHaveLength(1);
    expect(seen.steps("bench")).toHaveLength(2);
    expect(seen.report?.errors).toEqual([
      { phase: "bench", code: "unavailable", message: "the executor went away", retried: true },
    ]);
  });
});
