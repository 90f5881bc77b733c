/**
 * Held-out confirmation cases, end to end on real NATS with a scripted model: the model is shown only the
 * selection set's failing cases, a candidate that special-cases exactly those inputs passes
 * the selection test and is rejected `overfit` on the held-out confirmation set, and the real
 * fix of the same bug is accepted. The fake conductor writes the app.py the hypothesis carries;
 * the fake executor runs the "benchmark" by reading app.py (overlay, else the base snapshot).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, onTestFinished } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import {
  DEFAULT_OWNER,
  ensureStreams,
  followEvents,
  materializeSnapshot,
  putSnapshot,
  submitImprove,
} from "@loopsmith/shared/bus";
import {
  snapshotName,
  type ExecutionRequest,
  type ExecutionResult,
  type ImproveSummary,
} from "@loopsmith/shared/contracts";
import { type LlmProvider } from "@loopsmith/shared/llm";
import { startImprover } from "@loopsmith/architect";
import { gate } from "@loopsmith/reviewer";
import { it } from "../fixtures/index.js";
import { fakeConductor } from "./fake-conductor.js";
import { log, usage } from "./helpers.js";

const BASE = "b".repeat(40);
const CASES = 40;
/** The bug: only cases below 4 pass. */
const ORIGINAL = "def score(case):\n    return case < 4\n";
const REAL_FIX = `def score(case):\n    return case < ${CASES}\n`;
const special = (ids: number[]) => `def score(case):\n    return case < 4 or case in {${ids.join(", ")}}\n`;

/** The cases app.py passes: `case < N`, plus the ids of a `case in {…}` set. */
function passing(app: string): (i: number) => boolean {
  const limit = Number(/case < (\d+)/.exec(app)?.[1] ?? 0);
  const set = new Set((/case in \{([\d, ]*)\}/.exec(app)?.[1] ?? "").split(",").filter(Boolean).map(Number));
  return (i) => i < limit || set.has(i);
}

function executor(nc: NatsConnection, calls: ExecutionRequest[]) {
  const cache = mkdtempSync(join(tmpdir(), "holdout-executor-"));
  return async (req: ExecutionRequest): Promise<ExecutionResult> => {
    calls.push(req);
    const base = { exitCode: 0, durationMs: 1, stderr: "", truncated: false };
    if (req.shell === "check")
      return {
        ...base,
        status: "passed",
        stdout: "",
        tests: ["a", "b"].map((name) => ({ name, classname: "t", status: "passed", durationMs: 1 })),
      };
    const app =
      req.files.find((f) => f.path === "app.py")?.content ??
      readFileSync(join(await materializeSnapshot(nc, req.base?.snapshot ?? "", cache), "app.py"), "utf8");
    const pass = passing(app);
    const stdout = Array.from({ length: CASES }, (_, i) => JSON.stringify({ case: `c${i}`, pass: pass(i) })).join("\n");
    return { ...base, status: "passed", stdout, tests: [] };
  };
}

/** The prompts, by generation task id. */
const prompts = new Map<string, string>();

/**
 * The scripted model. `run-overfit`: generation 1 changes only a comment; generation 2 reads the
 * failing cases its prompt shows and special-cases exactly those. `run-real`: the real fix.
 */
const model: LlmProvider = {
  info: { name: "scripted", model: "scripted", scripted: true },
  async complete<T>(req: { context: { taskId: string }; messages: Array<{ content: string }> }) {
    const prompt = req.messages.map((m) => m.content).join("\n");
    prompts.set(req.context.taskId, prompt);
    let app: string;
    if (req.context.taskId.startsWith("run-real")) app = REAL_FIX;
    else if (req.context.taskId.endsWith("-gen-1")) app = `${ORIGINAL}# a comment\n`;
    else {
      const shown = prompt.split("Cases failing on the parent")[1]?.split("\n\n")[0] ?? "";
      app = special([...shown.matchAll(/^c(\d+)$/gm)].map((m) => Number(m[1])));
    }
    return {
      value: { title: "make more cases pass", rationale: `APP<<${app}>>APP`, expected: "", files: ["app.py"] } as T,
      usage: usage(0),
      provider: { name: "scripted", model: "scripted", scripted: true },
    };
  },
} as unknown as LlmProvider;

async function summaryOf(nc: NatsConnection, runId: string): Promise<ImproveSummary> {
  for await (const e of followEvents(nc, DEFAULT_OWNER, runId, AbortSignal.timeout(120_000)))
    if (e.kind === "result") return e.data?.summary as ImproveSummary;
  throw new Error(`no result for ${runId}`);
}

describe("held-out confirmation cases", () => {
  it("rejects `overfit` a candidate special-casing the shown failing inputs, and accepts the real fix", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureStreams(nc);
    const stop = fakeConductor(nc, {
      write: (task, before) => /APP<<([\s\S]*?)>>APP/.exec(task.goal)?.[1] ?? before,
      checks: ["a", "b"],
      summary: "change app.py",
    });
    const calls: ExecutionRequest[] = [];
    const cache = mkdtempSync(join(tmpdir(), "holdout-cache-"));
    const imp = await startImprover({
      nc,
      log,
      provider: model,
      execute: executor(nc, calls),
      gate: async (req) => gate(req),
      tree: (s) => materializeSnapshot(nc, s, cache),
      cancelTask: async () => undefined,
    });
    onTestFinished(async () => {
      stop();
      await imp.stop();
      await nc.close();
    });
    const dir = mkdtempSync(join(tmpdir(), "holdout-tree-"));
    writeFileSync(join(dir, "app.py"), ORIGINAL);
    await putSnapshot(nc, snapshotName(BASE), execFileSync("tar", ["-cf", "-", "-C", dir, "app.py"]));
    const submit = (runId: string, generations: number) =>
      submitImprove(nc, {
        v: 1,
        runId,
        repo: { baseCommit: BASE, snapshot: snapshotName(BASE), setupCommand: "" },
        language: "python",
        settings: { bench: "bench", check: "check", generations },
        submittedAt: new Date().toISOString(),
      });

    await submit("run-overfit", 2);
    const over = await summaryOf(nc, "run-overfit");
    expect(over.accepted).toEqual([]);
    // The calibration: 3 runs of the parent, a 70/30 split stratified by its pass/fail.
    const cal = over.calibration;
    if (!cal) throw new Error("no calibration in the summary");
    expect(cal).toMatchObject({ runs: 3, flaky: [], source: "fraction" });
    expect(calls.filter((c) => c.taskId === "run-overfit-gen-0")).toHaveLength(3);
    expect(cal.confirmation).toHaveLength(12); // round(0.3 × 4) passing + round(0.3 × 36) failing
    const held = new Set(cal.confirmation);
    const shownFailing = cal.parentFailing.filter((c) => !held.has(c));
    // Generation 2's prompt names every selection case failing on the parent and no held-out case.
    const prompt = prompts.get("run-overfit-gen-2") ?? "";
    for (const c of shownFailing) expect(prompt).toMatch(new RegExp(`^${c}$`, "m"));
    for (const c of cal.confirmation) expect(prompt).not.toMatch(new RegExp(`^${c}$`, "m"));
    const { reports } = await imp.status("run-overfit", DEFAULT_OWNER);
    expect(reports.map((r) => r.decision.reason)).toEqual(["no_improvement", "overfit"]);
    const st = reports[1]?.statistic;
    expect(st?.selection).toMatchObject({ fixed: shownFailing.length, broken: 0, passed: true });
    expect(st?.confirmation).toMatchObject({ fixed: 0, parentFailing: 11, passed: false });
    expect(st).toMatchObject({ testIndex: 2 });
    expect(over.alpha).toMatchObject({ budget: 0.05, tests: 2 });
    expect(over.alpha?.spent).toBeCloseTo(0.05, 10);

    await submit("run-real", 1);
    const real = await summaryOf(nc, "run-real");
    expect(real.accepted).toEqual([1]);
    const [fix] = (await imp.status("run-real", DEFAULT_OWNER)).reports;
    expect(fix?.decision.reason).toBe("accepted");
    expect(fix?.statistic?.confirmation).toMatchObject({ test: "sign_exact", fixed: 11, passed: true });
  });
});
