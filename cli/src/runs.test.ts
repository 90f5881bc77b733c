import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Command } from "commander";
import pino from "pino";
import { RunRecord, Task, type TaskEvent, type TaskResult } from "@loopsmith/shared/contracts";
import { registerRunCommands } from "./commands/runs.js";
import {
  codeSpan,
  duration,
  providersByRole,
  reportMarkdown,
  runDag,
  runFailures,
  runIterations,
  runText,
} from "./run-view.js";
import { localRunRecord, writeExport } from "./runs.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "loopsmith-runs-test-"));
  dirs.push(d);
  return d;
}

const usage = (calls: number, costUsd: number) => ({
  calls,
  inputTokens: 100 * calls,
  outputTokens: 10 * calls,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd,
  latencyMs: 10,
});
const SIGNATURE = "AssertionError: assert <str> == <str>";
const reflection = {
  rootCause: "The table has no subtractive pairs.",
  hypothesis: "Adding them gives IV.",
  fixPlan: "Extend _VALUES with (4, 'IV') and the other pairs.",
};
const provider = { name: "scripted", model: "script:roman.json", scripted: true };

/** A recorded run: iteration 1 fails (signature, reflection), iteration 2 passes; repo mode when `repo`. */
function recorded(opts: { repo?: boolean; result?: boolean } = {}): RunRecord {
  const taskId = opts.repo ? "repo-task" : "roman-task";
  const base = "0123456789abcdef0123456789abcdef01234567";
  const task = Task.parse({
    v: 1,
    taskId,
    goal: "Write to_roman(n) in roman.py.\nUse ``` fences ``` freely.",
    language: "python",
    submittedAt: "2026-01-01T00:00:00.000Z",
    ...(opts.repo ? { repo: { baseCommit: base, snapshot: `tree-${base}.tar`, name: "demo-repo" } } : {}),
  });
  const result: TaskResult = {
    v: 1,
    taskId,
    status: "passed",
    stopReason: "passed",
    iterations: 2,
    files: [{ path: "roman.py", content: "def to_roman(n):\n    return 'IV'\n" }],
    tests: [{ path: "test_gen.py", content: "def test(): pass\n" }],
    lastExecution: null,
    hidden: { status: "passed", passed: 3, total: 3 },
    failureIds: ["7"],
    usage: {
      total: usage(4, 0.0123),
      byRole: { plan: usage(1, 0.003), build: usage(2, 0.008), reflect: usage(1, 0.0013) },
      byIteration: [],
    },
    scripted: true,
    providers: ["scripted:script:roman.json"],
    durationMs: 12_345,
    message: "passed after 2 iterations",
    ...(opts.repo
      ? {
          repo: {
            baseCommit: base,
            patch: "diff --git a/roman.py b/roman.py\n--- a/roman.py\n+++ b/roman.py\n@@ -1 +1 @@\n-x\n+y\n",
            summary: "add subtractive pairs",
            changed: ["roman.py"],
            deleted: ["old.py"],
          },
        }
      : {}),
  };
  const ev = (seq: number, iteration: number, kind: TaskEvent["kind"], extra: Partial<TaskEvent> = {}): TaskEvent => ({
    v: 1,
    taskId,
    seq,
    at: "2026-01-01T00:00:01.000Z",
    iteration,
    kind,
    message: `${kind} ${seq}`,
    ...extra,
  });
  const events: TaskEvent[] = [
    ev(0, 0, "accepted"),
    ev(1, 0, "step", { phase: "plan", data: { llm: { role: "plan", callsBefore: 0, calls: 1, value: {}, provider } } }),
    ev(2, 1, "usage", { data: { role: "plan", provider, call: usage(1, 0.003) } }),
    ev(3, 1, "step", {
      phase: "execute",
      data: { status: "failed", failingTests: ["test_roman.py::test_four", "test_roman.py::test_1994"] },
    }),
    ev(4, 1, "step", { phase: "remember", data: { failureId: "7", signature: SIGNATURE } }),
    ev(5, 1, "step", { phase: "reflect", data: { reflection } }),
    ev(6, 2, "step", { phase: "execute", data: { status: "passed", failingTests: [] } }),
    ev(7, 2, "result", { phase: "done", result }),
  ];
  return RunRecord.parse({
    v: 1,
    taskId,
    task,
    result: opts.result === false ? null : result,
    events,
    recordedAt: "2026-01-01T00:00:20.000Z",
  });
}

describe("the iterations and failures of a run", () => {
  it("reads each iteration's verdict, failing tests, signature and reflection from the events", () => {
    const its = runIterations(recorded());
    expect(its).toEqual([
      {
        iteration: 1,
        outcome: "failed",
        failingTests: ["test_roman.py::test_four", "test_roman.py::test_1994"],
        signature: SIGNATURE,
        reflection,
        findings: [],
      },
      { iteration: 2, outcome: "passed", failingTests: [], findings: [] },
    ]);
    expect(runFailures(recorded()).map((f) => f.iteration)).toEqual([1]);
  });

  it("reads blocking gate findings and unreadable replies", () => {
    const r = recorded();
    const extra: TaskEvent[] = [
      {
        v: 1,
        taskId: r.taskId,
        seq: 10,
        at: "x",
        iteration: 3,
        kind: "step",
        phase: "gate",
        message: "blocked",
        data: {
          findings: [
            { severity: "blocker", message: "os.system is not allowed" },
            { severity: "info", message: "fine" },
          ],
        },
      },
      {
        v: 1,
        taskId: r.taskId,
        seq: 11,
        at: "x",
        iteration: 4,
        kind: "warning",
        message: "the build reply could not be read: not JSON",
      },
    ];
    const its = runIterations({ ...r, events: [...r.events, ...extra] });
    expect(its.slice(2)).toMatchObject([
      { iteration: 3, outcome: "blocked", findings: ["os.system is not allowed"] },
      { iteration: 4, outcome: "llm_bad_reply" },
    ]);
  });

  it("names each role's providers", () => {
    expect(providersByRole(recorded())).toEqual({ plan: ["scripted:script:roman.json"] });
  });
});

describe("report.md", () => {
  it("has the goal, the verdict, each failure with its signature, failing tests and reflection, cost, time and providers", () => {
    const md = reportMarkdown(recorded());
    expect(md).toMatch(/^# loopsmith run roman-task\n/);
    expect(md).toContain("**PASSED (stop reason passed)**");
    expect(md).toContain("Write to_roman(n) in roman.py.\nUse ``` fences ``` freely.");
    expect(md).toContain("### Iteration 1: failed");
    expect(md).toContain(`- Signature: \`${SIGNATURE}\``);
    expect(md).toContain("- Failing tests: `test_roman.py::test_four`, `test_roman.py::test_1994`");
    expect(md).toContain(`  - Root cause: ${reflection.rootCause}`);
    expect(md).toContain("  - Fix plan: Extend _VALUES with (4, 'IV') and the other pairs.");
    expect(md).toContain("### Iteration 2: passed");
    expect(md).toContain("| iterations | 2 of at most 5 |");
    expect(md).toContain("| time | 12.3 s |");
    expect(md).toContain("| cost | $0.01 (4 calls, 400 input + 40 output tokens (0 cache read)) |");
    expect(md).toMatch(
      /\| providers \| `scripted:script:roman.json` — \*\*SCRIPTED: replies were replayed from a file, no model was called\*\* \|/,
    );
    expect(md).toContain("| build |  | 2 | 200 | 20 | 0 | $0.0080 |");
    expect(md).toContain("| hidden tests | 3/3 passed |");
    expect(md).toContain("- `roman.py` (3 lines)");
    // The goal's fence cannot be closed by the goal's own backticks or tildes.
    expect(md).toContain("~~~text\nWrite to_roman");
  });

  it("shows the change in repo mode, and says so when there is no result", () => {
    const md = reportMarkdown(recorded({ repo: true }));
    expect(md).toContain("| repository | demo-repo at `0123456789abcdef0123456789abcdef01234567` |");
    expect(md).toContain("Against `0123456789abcdef0123456789abcdef01234567`: add subtractive pairs");
    expect(md).toContain("- changed `roman.py`\n- deleted `old.py`");
    expect(md).toContain("`change.patch`");
    expect(reportMarkdown(recorded({ result: false }))).toContain("**NO RESULT RECORDED**");
  });

  it("keeps model text from breaking a table or a code span", () => {
    expect(codeSpan("a `b` c")).toBe("`` a `b` c ``");
    expect(codeSpan("x\ny")).toBe("`x y`");
    const r = recorded();
    const md = reportMarkdown({
      ...r,
      result: r.result && { ...r.result, providers: ["a|b"], message: "<script> | x" },
    });
    expect(md).toContain("| providers | `a\\|b`");
    expect(md).toContain("&lt;script&gt; \\| x");
  });
});

describe("show's text", () => {
  it("names the verdict, iterations, failures, cost by role, duration and SCRIPTED, with control characters escaped", () => {
    const r = recorded({ repo: true });
    const text = runText({ ...r, task: { ...r.task, goal: "to_roman \u001b[2J" } });
    expect(text).toMatch(/^task repo-task · PASSED \(stop reason passed\) · 2 iterations · 12\.3 s\n/);
    expect(text).toContain("goal: to_roman \\x1b[2J");
    expect(text).toContain("SCRIPTED");
    expect(text).toContain(`signature: ${SIGNATURE}`);
    expect(text).toContain("failing: test_roman.py::test_four, test_roman.py::test_1994");
    expect(text).toContain(`reflection: ${reflection.rootCause}`);
    expect(text).toMatch(/build {4}2 calls, 200 input \+ 20 output tokens/);
    expect(text).toContain("repo demo-repo at 0123456789abcdef0123456789abcdef01234567");
    expect(text).toContain("changed: roman.py; deleted: old.py");
    expect(duration(850)).toBe("850 ms");
    expect(duration(245_000)).toBe("4 min 05 s");
  });
});

describe("a DAG task's run", () => {
  const sub = (id: string, status: "passed" | "failed" | "cancelled", dependsOn: string[], extra: object = {}) => ({
    id,
    goal: `build ${id} | now`,
    status,
    dependsOn,
    attempt: 1,
    iteration: 0,
    iterations: 2,
    tokens: 1_000,
    costUsd: 0.01,
    startedAt: "2026-01-01T00:00:00.000Z",
    finishedAt: "2026-01-01T00:00:10.000Z",
    ...extra,
  });
  /** A recorded DAG task: a schedule event, then the result event with the final subtasks. */
  function dagRun(): RunRecord {
    const r = recorded({ repo: true });
    const early = {
      reopened: [],
      subtasks: [sub("lib", "passed", []), { ...sub("app", "passed", ["lib"]), status: "running" }],
    };
    const final = {
      reopened: ["lib"],
      subtasks: [
        sub("lib", "passed", []),
        sub("app", "failed", ["lib"], { reason: "max_iterations", attempt: 3 }),
        sub("cli", "cancelled", ["app"], {
          reason: "dependency_failed",
          attempt: 0,
          iterations: 0,
          tokens: 0,
          costUsd: 0,
          startedAt: undefined,
        }),
      ],
    };
    const events: TaskEvent[] = [
      ...r.events.slice(0, -1),
      {
        v: 1,
        taskId: r.taskId,
        seq: 20,
        at: "x",
        iteration: 0,
        kind: "step",
        phase: "schedule",
        message: "app started",
        subtaskId: "app",
        data: { dag: early },
      },
      { ...r.events.at(-1)!, data: { dag: final } },
    ];
    return { ...r, events };
  }

  it("reads the subtasks from the last event that carries them (the result's)", () => {
    expect(runDag(dagRun())?.subtasks.map((s) => s.status)).toEqual(["passed", "failed", "cancelled"]);
    expect(runDag(recorded())).toBeUndefined();
  });

  it("show lists the subtasks as a tree with their totals", () => {
    const text = runText(dagRun());
    expect(text).toContain(
      "  subtasks:\n    3 subtasks: 1 passed, 1 failed, 1 cancelled · 4 iterations · 2.0k tokens · $0.02 · 20.0 s of subtask time in 10.0 s · re-opened: lib\n",
    );
    expect(text).toContain(
      "      └─ ✖ app     failed (max_iterations) · attempt 3 · 2 iterations · 1.0k tokens · $0.01 · 10.0 s — build app | now\n",
    );
    expect(text).toContain("         └─ ⊘ cli  cancelled (dependency_failed) — build cli | now\n");
    expect(runText(recorded())).not.toContain("subtasks:");
  });

  it("report.md has a table of the subtasks, indented by depth, with model text escaped", () => {
    const md = reportMarkdown(dagRun());
    expect(md).toContain("## Subtasks");
    expect(md).toContain("| `lib` | passed, re-opened |  | 1 | 2 | 1.0k | $0.01 | 10.0 s | build lib \\| now |");
    expect(md).toContain(
      "| &nbsp;&nbsp;`app` | failed (max_iterations) | `lib` | 3 | 2 | 1.0k | $0.01 | 10.0 s | build app \\| now |",
    );
    expect(md).toContain(
      "| &nbsp;&nbsp;&nbsp;&nbsp;`cli` | cancelled (dependency_failed) | `app` | 0 | 0 | 0 | $0 |  | build cli \\| now |",
    );
    expect(reportMarkdown(recorded())).not.toContain("## Subtasks");
  });
});

describe("writeExport", () => {
  it("writes result.json and report.md, and no change.patch, for an inline task", async () => {
    const dir = join(await tempDir(), "out", "nested");
    const r = recorded();
    const written = await writeExport(r, dir);
    expect(written).toEqual([join(dir, "result.json"), join(dir, "report.md")]);
    expect((await readdir(dir)).sort()).toEqual(["report.md", "result.json"]);
    expect(JSON.parse(await readFile(join(dir, "result.json"), "utf8"))).toEqual(r.result);
    expect(await readFile(join(dir, "report.md"), "utf8")).toBe(reportMarkdown(r));
  });

  it("writes change.patch in repo mode", async () => {
    const dir = await tempDir();
    const r = recorded({ repo: true });
    expect(await writeExport(r, dir)).toEqual([
      join(dir, "result.json"),
      join(dir, "report.md"),
      join(dir, "change.patch"),
    ]);
    expect(await readFile(join(dir, "change.patch"), "utf8")).toBe(r.result?.repo?.patch);
  });

  it("writes the whole run as result.json when there is no result, and fails typed on a folder it cannot write", async () => {
    const dir = await tempDir();
    const r = recorded({ result: false });
    await writeExport(r, dir);
    expect(RunRecord.parse(JSON.parse(await readFile(join(dir, "result.json"), "utf8")))).toEqual(r);
    const file = join(dir, "a-file");
    await writeFile(file, "x");
    await expect(writeExport(r, join(file, "sub"))).rejects.toMatchObject({ code: "bad_request" });
  });
});

describe("localRunRecord", () => {
  it("builds a run from what solve watched, in seq order", () => {
    const r = recorded();
    const local = localRunRecord(r.task, [...r.events].reverse(), r.result);
    expect(local).toMatchObject({
      taskId: r.taskId,
      task: r.task,
      result: r.result,
      events: r.events,
      eventsTruncated: false,
      eventsTotal: r.events.length,
    });
    expect(() => localRunRecord({ ...r.task, taskId: "bad id" }, [], null)).toThrow(/cannot be recorded/);
  });
});

describe("registerRunCommands", () => {
  it("registers show, export and replay, and refuses a bad task id before starting anything", async () => {
    const errors: unknown[] = [];
    const program = new Command().exitOverride();
    const runner = () => () => Promise.resolve(undefined);
    registerRunCommands(program, {
      run: async (_json, action) => void (await action().catch((err: unknown) => void errors.push(err))),
      logger: () => Promise.resolve(pino({ level: "silent" })),
      replayRunner: runner,
    });
    expect(program.commands.map((c) => c.name())).toEqual(["show", "export", "replay"]);
    expect(program.commands[1]?.options.find((o) => o.long === "--out")?.mandatory).toBe(true);
    for (const argv of [
      ["show", "bad id!"],
      ["export", "x/y", "--out", "d"],
      ["replay", "a".repeat(65)],
    ]) {
      await program.parseAsync(["node", "loopsmith", ...argv]);
    }
    expect(errors).toHaveLength(3);
    for (const err of errors)
      expect(err).toMatchObject({
        code: "bad_request",
        message: expect.stringMatching(/is not valid: task ids are 1-64/),
      });
  });
});
