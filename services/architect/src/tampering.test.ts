import { describe, expect, it } from "vitest";
import pino from "pino";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  Task,
  emptyUsage,
  type ExecutionResult,
  type Finding,
  type GateRequest,
  type GateResult,
  type Review,
  type TaskEvent,
} from "@loopsmith/shared/contracts";
import { runLoop } from "./loop.js";
import { initialState } from "./state.js";
import type { LoopIO, Steps } from "./steps.js";
import { evaluationNames, gateChange, tamperingConcerns } from "./tampering.js";

const exitFinding = (path: string, line: number): Finding => ({
  severity: "blocker",
  message: "`os._exit` at module level: importing the module ends the process before the tests report",
  path,
  line,
  rule: "tampering.exit",
});
const argvConcern: Finding = {
  severity: "warning",
  message: "`sys.argv` tested in a function: fine for a command-line tool's main",
  path: "solution.py",
  line: 4,
  rule: "tampering.branch_on_runner",
};

/** A gate stub: the findings per file content marker (`EXIT` → an exit at that line, `ARGV` → a concern). */
function stubGate(requests: GateRequest[] = []): (req: GateRequest) => Promise<GateResult> {
  return async (req) => {
    requests.push(req);
    const findings = req.files.flatMap((f) =>
      f.content
        .split("\n")
        .flatMap((line, i) =>
          line.includes("EXIT")
            ? [exitFinding(f.path, i + 1)]
            : line.includes("ARGV")
              ? [{ ...argvConcern, path: f.path, line: i + 1 }]
              : [],
        ),
    );
    return { blocked: findings.some((f) => f.severity === "blocker"), findings };
  };
}

describe("tampering: the change's findings", () => {
  it("drops a tampering finding the base file already had, keeps a new one, and recomputes blocked", async () => {
    const requests: GateRequest[] = [];
    const base = (p: string) => (p === "pkg/cli.py" ? "EXIT\n" : undefined);
    const request: GateRequest = {
      v: 1,
      taskId: "t",
      iteration: 1,
      idempotencyKey: "t/1/gate",
      language: "python",
      files: [{ path: "pkg/cli.py", content: "x = 1\nEXIT\n" }],
    };
    const old = await gateChange(stubGate(requests), request, base, "t/1/gate_base");
    expect(old).toEqual({ blocked: false, findings: [] });
    expect(requests.map((r) => r.idempotencyKey)).toEqual(["t/1/gate", "t/1/gate_base"]);
    const added = await gateChange(
      stubGate(),
      { ...request, files: [{ path: "pkg/cli.py", content: "EXIT\nEXIT\n" }] },
      base,
    );
    expect(added.blocked).toBe(true);
    expect(added.findings).toHaveLength(1);
    // A new file has no base version: its findings are all the change's.
    expect(
      (await gateChange(stubGate(), { ...request, files: [{ path: "new.py", content: "EXIT\n" }] }, base)).blocked,
    ).toBe(true);
  });

  it("concerns are the tampering warnings", () => {
    expect(
      tamperingConcerns({
        blocked: true,
        findings: [
          exitFinding("a.py", 1),
          argvConcern,
          { severity: "warning", message: "x", rule: "subprocess-shell" },
        ],
      }),
    ).toEqual([argvConcern]);
  });

  it("evaluation names: the command lines' words and the paths, once each", () => {
    expect(
      evaluationNames(
        ["python3 bench/run.py --out=bench-out/x.json", undefined],
        ["tests/test_a.py", undefined, "tests/test_a.py"],
      ),
    ).toEqual(["python3", "bench/run.py", "--out", "bench-out/x.json", "tests/test_a.py"]);
  });
});

const passed: ExecutionResult = {
  status: "passed",
  exitCode: 0,
  durationMs: 5,
  stdout: "",
  stderr: "",
  truncated: false,
  tests: [{ name: "test_add", classname: "t", status: "passed", durationMs: 1 }],
};
const provider = { name: "test", model: "fake", scripted: true };
const usage = { ...emptyUsage(), calls: 1 };

/** Runs one task (one iteration at most) through the loop with a gate and a review that answer as given. */
async function solve(opts: { review: boolean; gate: GateResult; verdict: Review }) {
  const calls: Record<string, number> = {};
  const reviews: unknown[] = [];
  const count = (k: string) => void (calls[k] = (calls[k] ?? 0) + 1);
  const steps: Steps = {
    recall: async () => ({ failures: [], successes: [], embedder: "test" }),
    plan: async () => ({
      value: { summary: "add", acceptanceCriteria: [], steps: [], files: ["solution.py"] },
      usage,
      provider,
    }),
    build: async () => ({
      value: { files: [{ path: "solution.py", content: "def add(a, b):\n    return a + b\n" }], tests: [], notes: "" },
      usage,
      provider,
    }),
    gate: async () => (count("gate"), opts.gate),
    review: async (req) => (count("review"), reviews.push(req), { value: opts.verdict, usage, provider }),
    execute: async () => (count("execute"), passed),
    rememberFailure: async () => ({ id: "f-1", signature: "blocked" }),
    attachFix: async (req) => ({ id: req.failureId }),
    rememberSuccess: async () => ({ id: "s-1" }),
    recordTask: async () => ({ id: "r-1" }),
    reflect: async () => ({ value: { rootCause: "", hypothesis: "", fixPlan: "" }, usage, provider }),
    tree: async () => {
      throw new LoopsmithError("not_found", "no trees here");
    },
    decompose: async () => {
      throw new LoopsmithError("internal", "no subtasks here");
    },
    reflectIntegration: async () => {
      throw new LoopsmithError("internal", "no subtasks here");
    },
  };
  const events: TaskEvent[] = [];
  const io: LoopIO = {
    checkpoint: async () => {},
    emit: async (e) => void events.push(e),
    heartbeat: () => {},
    cancelled: () => false,
    stopping: () => false,
    log: pino({ level: "silent" }),
  };
  const task = Task.parse({
    v: 1,
    taskId: "t-1",
    goal: "write add",
    language: "python",
    files: [],
    acceptanceTests: [{ path: "test_add.py", content: "def test_add(): pass\n" }],
    review: opts.review,
    memory: "off",
    limits: { maxIterations: 1 },
    submittedAt: new Date().toISOString(),
  });
  const final = await runLoop(initialState(task), steps, io);
  return { final, calls, reviews, messages: events.map((e) => e.message) };
}

const approve: Review = { approved: true, score: 0.9, findings: [] };
const concerned: GateResult = { blocked: false, findings: [argvConcern] };

describe("tampering: a concern sends the candidate to review", () => {
  it("even with the task's review off; the reviewer sees the concerns; an approval lets it run", async () => {
    const r = await solve({ review: false, gate: concerned, verdict: approve });
    expect(r.calls).toMatchObject({ gate: 1, review: 1, execute: 1 });
    expect(r.reviews[0]).toMatchObject({ concerns: [argvConcern] });
    expect(
      r.messages.some((m) =>
        m.startsWith(
          "gate passed (1 findings) with possible evaluation tampering; the candidate goes to review although the task's review is off: `sys.argv` tested in a function",
        ),
      ),
    ).toBe(true);
    expect(r.final.result?.status).toBe("passed");
  });

  it("a review that does not approve blocks the candidate, and the event and the failure say why", async () => {
    const verdict: Review = {
      approved: false,
      score: 0,
      findings: [{ severity: "error", message: "returns 42 when run under pytest", path: "solution.py", line: 4 }],
    };
    const r = await solve({ review: false, gate: concerned, verdict });
    expect(r.calls.execute).toBeUndefined();
    expect(r.messages).toContain("review: not approved, score 0.00: returns 42 when run under pytest (solution.py:4)");
    expect(r.final.failures[0]).toMatchObject({
      status: "blocked",
      findings: [{ severity: "blocker", message: "returns 42 when run under pytest" }],
    });
  });

  it("without concerns and with review off, no review; a clear finding blocks with the place in the event", async () => {
    const none = await solve({ review: false, gate: { blocked: false, findings: [] }, verdict: approve });
    expect(none.calls.review).toBeUndefined();
    const blocked = await solve({
      review: false,
      gate: { blocked: true, findings: [exitFinding("solution.py", 3)] },
      verdict: approve,
    });
    expect(blocked.calls.review).toBeUndefined();
    expect(blocked.calls.execute).toBeUndefined();
    expect(blocked.messages).toContain(
      "gate blocked the candidate: `os._exit` at module level: importing the module ends the process before the tests report (solution.py:3)",
    );
    expect(blocked.final.failures[0]?.output).toContain("(solution.py:3)");
  });
});
