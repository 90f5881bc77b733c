import { describe, expect, it } from "vitest";
import { ScriptFile, Simulation, Task } from "@loopsmith/shared/contracts";
import { armPrefix, benchTask, benchTaskId, scriptFor, simulationFor } from "./tasks.js";
import type { BenchCase } from "./types.js";

const prompt = 'def add(a: int, b: int) -> int:\n    """Adds.\n    >>> add(1, 2)\n    3\n    """\n';
const c: BenchCase = {
  id: "HumanEval/900",
  format: "humaneval",
  language: "python",
  goal: `Complete add in solution.py.\n\n${prompt}`,
  files: [{ path: "solution.py", content: prompt }],
  visibleTests: [
    {
      path: "test_examples.py",
      content: "import solution\n\ndef test_examples():\n    assert solution.add(1, 2) == 3\n",
    },
  ],
  hiddenTests: [
    {
      path: "test_solution.py",
      content: "import solution\n\ndef test_hidden():\n    assert solution.add(40, 2) == 42  # HIDDEN\n",
    },
  ],
  solutionPath: "solution.py",
  solution: `${prompt}    return a + b\n`,
  entryPoint: "add",
  line: 1,
};
const base = { runId: "r1", index: 3, attempt: 1, paired: true } as const;

describe("benchTask", () => {
  it("puts the hidden tests only in hiddenTests and the visible ones in the acceptance tests", () => {
    const task = Task.parse(benchTask(c, { ...base, arm: "on", provider: "simulated" }));
    expect(task.acceptanceTests).toEqual(c.visibleTests);
    expect(task.hiddenTests).toEqual(c.hiddenTests);
    const seen = JSON.stringify({
      goal: task.goal,
      files: task.files,
      acceptanceTests: task.acceptanceTests,
      script: task.script,
    });
    expect(seen).not.toContain("HIDDEN");
    expect(task.source).toEqual({ kind: "humaneval", id: "HumanEval/900" });
  });

  it("scopes the on arm of an A/B to its own arm's tasks, and turns memory off for the off arm", () => {
    const on = Task.parse(benchTask(c, { ...base, arm: "on", provider: "simulated" }));
    const off = Task.parse(benchTask(c, { ...base, arm: "off", provider: "simulated" }));
    expect(on.taskId).toBe("bench-r1-on-3-1");
    expect(on.taskId.startsWith(on.memoryScope ?? "?")).toBe(true);
    expect(on.memory).toBe("on");
    expect(off.memory).toBe("off");
    expect(off.memoryScope).toBeUndefined();
    // A single-arm run with memory on recalls all of memory.
    expect(
      Task.parse(benchTask(c, { ...base, paired: false, arm: "on", provider: "simulated" })).memoryScope,
    ).toBeUndefined();
    expect(benchTaskId({ runId: "r1", arm: "off", index: 0, attempt: 2 })).toBe(`${armPrefix("r1", "off")}0-2`);
  });

  it("carries a script or a simulation without a model, and nothing with one", () => {
    expect(Task.parse(benchTask(c, { ...base, arm: "off", provider: "scripted" })).script?.kind).toBe(
      "loopsmith-script",
    );
    expect(Task.parse(benchTask(c, { ...base, arm: "off", provider: "simulated" })).script?.kind).toBe(
      "loopsmith-simulation",
    );
    expect(Task.parse(benchTask(c, { ...base, arm: "off", provider: "model" })).script).toBeUndefined();
  });
});

describe("scriptFor and simulationFor", () => {
  it("answer a mutant of the body first, never of the signature, and then the reference", () => {
    const script = ScriptFile.parse(scriptFor(c));
    const build = script.replies.build as Array<{ files: Array<{ content: string }> }>;
    expect(build).toHaveLength(2);
    expect(build[0]?.files[0]?.content).toContain("return a - b");
    expect(build[0]?.files[0]?.content).toContain("def add(a: int, b: int) -> int:");
    expect(build[1]?.files[0]?.content).toBe(c.solution);
  });

  it("makes task-independent causes from the mutants (the operator change)", () => {
    const sim = Simulation.parse(simulationFor(c, { findRate: 0.5, seed: 7 }));
    expect(sim.wrong[0]?.cause).toBe("+ -> -");
    expect(sim.wrong.every((w) => w.content !== c.solution)).toBe(true);
    expect(sim).toMatchObject({
      source: "HumanEval/900",
      path: "solution.py",
      solution: c.solution,
      findRate: 0.5,
      seed: 7,
    });
  });

  it("falls back to a failing statement when the reference has no mutant", () => {
    const sim = simulationFor({ ...c, solution: 'def add(a, b):\n    """x"""\n    pass\n' });
    expect(sim.wrong[0]?.content).toContain("simulated wrong candidate");
  });
});
