import pino from "pino";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { Candidate, Plan, Reflection, Review } from "../contracts/plan.js";
import type { Recall } from "../contracts/memory.js";
import { Simulation } from "../contracts/script.js";
import type { FailureBrief, TaskBrief } from "../contracts/steps.js";
import { renderFailure, renderFile, renderHints, renderTask, section } from "./prompts.js";
import { SpendMeter } from "./cost.js";
import { createEngineProvider } from "./engine.js";
import { causeMarker, createSimulatedBackend, simulatedAnswer, simulatedDraw } from "./simulated.js";
import type { ChatMessage, CompletionRequest, Role } from "./types.js";

const log = pino({ level: "silent" });

const SOLUTION = "def same(a, b):\n    return a == b\n";
const WRONG_EQ = "def same(a, b):\n    return a != b\n";
const WRONG_LT = "def same(a, b):\n    return a < b\n";

const sim: Simulation = Simulation.parse({
  v: 1,
  kind: "loopsmith-simulation",
  source: "HumanEval/99",
  path: "solution.py",
  solution: SOLUTION,
  wrong: [
    { content: WRONG_EQ, cause: "== -> !=", description: "line 2: `==` changed to `!=`" },
    { content: WRONG_LT, cause: "== -> <", description: "line 2: `==` changed to `<`" },
  ],
  findRate: 0.3,
  seed: 1,
});
const [EQ, LT] = sim.wrong as [Simulation["wrong"][0], Simulation["wrong"][0]];

const task = (goal = "Write same(a, b): True when a equals b."): TaskBrief => ({
  goal,
  language: "python",
  files: [],
  acceptanceTests: [
    { path: "test_solution.py", content: "from solution import same\n\ndef test_same():\n    assert same(1, 1)\n" },
  ],
});

const failure = (output = "AssertionError: assert False"): FailureBrief => ({
  iteration: 1,
  status: "failed",
  signature: "AssertionError",
  failingTests: ["test_same"],
  output,
  findings: [],
});

/** A recall whose one failure has this root cause (as memory stores a reflection). */
const recallWith = (rootCause: string, goal = "Write same(a, b)."): Recall => ({
  failures: [
    {
      id: "f-1",
      taskId: "earlier-task",
      goal,
      signature: "AssertionError",
      failingTests: ["test_same"],
      reflection: { rootCause, hypothesis: "h", fixPlan: "change it back" },
      similarity: 0.93,
    },
  ],
  successes: [],
  embedder: "test",
});

/** The build prompt as the builder renders it (services/builder/src/builder.ts, buildMessages). */
function buildMessages(o: {
  goal?: string;
  recall?: Recall;
  previous?: { content: string; reflection?: Reflection; output?: string };
  iteration?: number;
}): ChatMessage[] {
  const stable = [renderTask(task(o.goal)), renderHints(o.recall)].filter(Boolean).join("\n");
  const parts = [section("Plan", "Write same in solution.py.\n\nFiles to write: solution.py")];
  if (o.previous) {
    parts.push(section("Your previous candidate", renderFile({ path: sim.path, content: o.previous.content })));
    parts.push(renderFailure(failure(o.previous.output)));
    if (o.previous.reflection) {
      const r = o.previous.reflection;
      parts.push(
        section(
          "Reflection on the failure",
          `Root cause: ${r.rootCause}\nHypothesis: ${r.hypothesis}\nFix plan: ${r.fixPlan}`,
        ),
      );
    }
  }
  parts.push(
    `Iteration ${o.iteration ?? (o.previous ? 2 : 1)}. The visible acceptance tests are fixed; return only the files to write. Reply with the candidate as structured output.`,
  );
  return [
    { role: "user", content: stable, cache: true },
    { role: "user", content: parts.filter(Boolean).join("\n") },
  ];
}

/** The reflect prompt as the planner renders it (services/architect/src/planner.ts). */
function reflectMessages(o: { content: string; recall?: Recall; goal?: string }): ChatMessage[] {
  return [
    {
      role: "user",
      content: [renderTask(task(o.goal)), renderHints(o.recall)].filter(Boolean).join("\n"),
      cache: true,
    },
    {
      role: "user",
      content: [
        section("Plan", "Write same in solution.py."),
        section("Candidate", renderFile({ path: sim.path, content: o.content })),
        renderFailure(failure()),
        "Reply with the reflection as structured output.",
      ]
        .filter(Boolean)
        .join("\n"),
    },
  ];
}

const SCHEMAS = {
  plan: Plan,
  spec: Plan,
  build: Candidate,
  reflect: Reflection,
  review: Review,
  improve: Plan,
  agent: Plan,
} as const;

function request(
  role: Role,
  messages: ChatMessage[],
  o: { taskId?: string; iteration?: number; schemaName?: string } = {},
): CompletionRequest<unknown> {
  return {
    role,
    system: "system prompt",
    messages,
    schema: SCHEMAS[role] as z.ZodType<unknown>,
    schemaName: o.schemaName ?? role,
    context: { taskId: o.taskId ?? "task-1", iteration: o.iteration ?? 1 },
  };
}

/** The engine over the simulated backend, as `withTaskScripts` builds it. */
function provider(s: Simulation = sim) {
  return createEngineProvider(createSimulatedBackend(s), {
    log,
    meter: new SpendMeter(),
    transcript: async () => {},
    maxOutputTokens: 4_096,
  });
}

const built = (value: unknown): string => Candidate.parse(value).files[0]?.content ?? "";

describe("the simulated backend", () => {
  it("names itself, costs nothing, and answers plan and spec with a valid plan for the one file", async () => {
    const p = provider();
    for (const role of ["plan", "spec"] as const) {
      const done = await p.complete(request(role, buildMessages({})));
      expect(done.provider).toEqual({ name: "simulated", model: "simulated:HumanEval/99", scripted: true });
      expect(done.usage).toMatchObject({ calls: 1, inputTokens: 0, outputTokens: 0, costUsd: 0 });
      const plan = Plan.parse(done.value);
      expect(plan.files).toEqual(["solution.py"]);
      expect(plan.acceptanceCriteria).toEqual([]);
      expect(plan.summary).toMatch(/simulat/i);
      expect(plan.summary).toContain("HumanEval/99");
    }
  });

  it("answers the first build with the first wrong candidate, even when a hint already names its cause", async () => {
    const done = await provider().complete(
      request("build", buildMessages({ recall: recallWith(`x ${causeMarker(EQ.cause)}`) })),
    );
    expect(Candidate.parse(done.value)).toMatchObject({
      files: [{ path: "solution.py", content: WRONG_EQ }],
      tests: [],
    });
    expect(Candidate.parse(done.value).notes).toMatch(/^simulated/);
  });

  it("stays stuck on the failing wrong candidate while the cause is not known", async () => {
    const value = simulatedAnswer(sim, request("build", buildMessages({ previous: { content: WRONG_EQ } })));
    expect(built(value)).toBe(WRONG_EQ);
    const second = simulatedAnswer(sim, request("build", buildMessages({ previous: { content: WRONG_LT } })));
    expect(built(second)).toBe(WRONG_LT);
  });

  it("applies the fix when a recalled failure's root cause carries the failing candidate's marker", async () => {
    const recall = recallWith(`line 2 compares wrongly ${causeMarker(EQ.cause)}`);
    const messages = buildMessages({ recall, previous: { content: WRONG_EQ } });
    expect(messages[0]?.content).toContain("## Hints from memory");
    const done = await provider().complete(request("build", messages, { iteration: 2 }));
    expect(built(done.value)).toBe(SOLUTION);
  });

  it("does not apply the fix for a hint that names another wrong candidate's cause", () => {
    const recall = recallWith(`x ${causeMarker(EQ.cause)}`);
    expect(
      built(simulatedAnswer(sim, request("build", buildMessages({ recall, previous: { content: WRONG_LT } })))),
    ).toBe(WRONG_LT);
  });

  it("applies the fix when the previous reflection carries the marker", () => {
    const reflection = {
      rootCause: `the comparison is inverted ${causeMarker(EQ.cause)}`,
      hypothesis: "h",
      fixPlan: "change it back",
    };
    expect(
      built(simulatedAnswer(sim, request("build", buildMessages({ previous: { content: WRONG_EQ, reflection } })))),
    ).toBe(SOLUTION);
    const without = { rootCause: "cause not found", hypothesis: "h", fixPlan: "look again" };
    expect(
      built(
        simulatedAnswer(sim, request("build", buildMessages({ previous: { content: WRONG_EQ, reflection: without } }))),
      ),
    ).toBe(WRONG_EQ);
  });

  it("ignores a marker outside the hints' root causes and the reflection: in the goal, the test output, a recalled goal", () => {
    const marker = causeMarker(EQ.cause);
    const inGoal = buildMessages({ goal: `Write same(a, b). ${marker}`, previous: { content: WRONG_EQ } });
    expect(inGoal[0]?.content).toContain(marker);
    expect(built(simulatedAnswer(sim, request("build", inGoal)))).toBe(WRONG_EQ);
    const inOutput = buildMessages({ previous: { content: WRONG_EQ, output: `AssertionError ${marker}` } });
    expect(built(simulatedAnswer(sim, request("build", inOutput)))).toBe(WRONG_EQ);
    // The goal also reaches the hints (a recalled failure of the same task shows its goal).
    const inRecalledGoal = buildMessages({
      goal: `Write same. ${marker}`,
      recall: recallWith("cause not found", `Write same. ${marker}`),
      previous: { content: WRONG_EQ },
    });
    expect(inRecalledGoal[0]?.content).toMatch(/## Hints from memory[\s\S]*\[simulated cause/);
    expect(built(simulatedAnswer(sim, request("build", inRecalledGoal)))).toBe(WRONG_EQ);
  });

  it("keeps answering the solution once the previous candidate was the solution", () => {
    expect(built(simulatedAnswer(sim, request("build", buildMessages({ previous: { content: SOLUTION } }))))).toBe(
      SOLUTION,
    );
  });

  it("falls back to the first wrong candidate for a previous candidate it does not know", () => {
    const other = "def same(a, b):\n    return True\n";
    expect(built(simulatedAnswer(sim, request("build", buildMessages({ previous: { content: other } }))))).toBe(
      WRONG_EQ,
    );
    const recall = recallWith(causeMarker(EQ.cause));
    expect(built(simulatedAnswer(sim, request("build", buildMessages({ recall, previous: { content: other } }))))).toBe(
      SOLUTION,
    );
  });

  it("refuses repo-mode builds and improvement hypotheses with bad_request", async () => {
    await expect(
      provider().complete(request("build", buildMessages({}), { schemaName: "edits" })),
    ).rejects.toMatchObject({
      code: "bad_request",
      message: "a simulation answers inline tasks only",
    });
    await expect(provider().complete(request("improve", buildMessages({})))).rejects.toMatchObject({
      code: "bad_request",
      message: "a simulation does not answer improvement hypotheses",
    });
  });

  it("approves every review with score 0.9", async () => {
    const done = await provider().complete(request("review", buildMessages({})));
    expect(Review.parse(done.value)).toEqual({ approved: true, score: 0.9, findings: [] });
  });
});

describe("the simulated reflection", () => {
  const reflect = (
    s: Simulation,
    iteration: number,
    o: { content?: string; recall?: Recall; taskId?: string } = {},
  ): Reflection =>
    Reflection.parse(
      simulatedAnswer(
        s,
        request(
          "reflect",
          reflectMessages({ content: o.content ?? WRONG_EQ, ...(o.recall ? { recall: o.recall } : {}) }),
          { iteration, taskId: o.taskId ?? "task-1" },
        ),
      ),
    );
  const iterations = Array.from({ length: 40 }, (_, i) => i + 1);

  it("never finds the cause at findRate 0 and always finds it at 1, the marker of the candidate shown", () => {
    for (const i of iterations) {
      expect(reflect({ ...sim, findRate: 0 }, i).rootCause).not.toContain("[simulated cause");
      expect(reflect({ ...sim, findRate: 0 }, i).rootCause).toContain("cause not found");
      expect(reflect({ ...sim, findRate: 1 }, i).rootCause).toContain(causeMarker(EQ.cause));
      expect(reflect({ ...sim, findRate: 1 }, i, { content: WRONG_LT }).rootCause).toContain(causeMarker(LT.cause));
    }
    expect(reflect({ ...sim, findRate: 1 }, 1).fixPlan).toMatch(/change it back/);
  });

  it("draws deterministically from (seed, source, iteration): the same for two task ids, different across seeds", () => {
    const half = { ...sim, findRate: 0.5 };
    const outcomes = iterations.map((i) =>
      reflect(half, i, { taskId: "bench-r1-on-0-1" }).rootCause.includes("[simulated cause"),
    );
    expect(
      iterations.map((i) => reflect(half, i, { taskId: "bench-r1-off-0-1" }).rootCause.includes("[simulated cause")),
    ).toEqual(outcomes);
    expect(outcomes).toEqual(iterations.map((i) => simulatedDraw(half, i) < 0.5));
    expect(outcomes).toContain(true);
    expect(outcomes).toContain(false);
    for (const i of iterations) {
      const u = simulatedDraw(sim, i);
      expect(u).toBeGreaterThanOrEqual(0);
      expect(u).toBeLessThan(1);
      expect(simulatedDraw(sim, i)).toBe(u);
    }
    expect(iterations.map((i) => simulatedDraw({ ...sim, seed: 2 }, i))).not.toEqual(
      iterations.map((i) => simulatedDraw(sim, i)),
    );
    expect(iterations.map((i) => simulatedDraw({ ...sim, source: "HumanEval/1" }, i))).not.toEqual(
      iterations.map((i) => simulatedDraw(sim, i)),
    );
  });

  it("finds the cause from a recalled hint even at findRate 0, and not from a hint for another cause", () => {
    const none = { ...sim, findRate: 0 };
    expect(reflect(none, 1, { recall: recallWith(`x ${causeMarker(EQ.cause)}`) }).rootCause).toContain(
      causeMarker(EQ.cause),
    );
    expect(
      reflect(none, 1, { content: WRONG_LT, recall: recallWith(`x ${causeMarker(EQ.cause)}`) }).rootCause,
    ).not.toContain("[simulated cause");
  });

  it("closes the memory loop: a found reflection, recalled by a later task, gives that task the fix", async () => {
    const first = reflect({ ...sim, findRate: 1 }, 1);
    const later = await provider({ ...sim, findRate: 0 }).complete(
      request("build", buildMessages({ recall: recallWith(first.rootCause), previous: { content: WRONG_EQ } }), {
        taskId: "task-2",
        iteration: 2,
      }),
    );
    expect(built(later.value)).toBe(SOLUTION);
    const notFound = reflect({ ...sim, findRate: 0 }, 1);
    const stuck = simulatedAnswer(
      sim,
      request("build", buildMessages({ recall: recallWith(notFound.rootCause), previous: { content: WRONG_EQ } })),
    );
    expect(built(stuck)).toBe(WRONG_EQ);
  });

  it("gives the same answer to a retried request", async () => {
    const req = request("reflect", reflectMessages({ content: WRONG_EQ }), { iteration: 3 });
    const p = provider({ ...sim, findRate: 0.5 });
    expect((await p.complete(req)).value).toEqual((await p.complete(req)).value);
  });
});
