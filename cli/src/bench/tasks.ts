/**
 * A bench case as a loopsmith task: the visible tests as its acceptance tests, the hidden
 * ones as `hiddenTests` (never in a prompt, scored once at the end), and, when no model
 * answers, the replies that travel with it (`Task.script`): a script (`scripted`) or a
 * simulation (`simulated`), both made from the case's reference solution and its mutants.
 */
import type { Simulation, ScriptFile, TaskInput } from "@loopsmith/shared/contracts";
import { mutantsOf, type Mutant } from "@loopsmith/evals";
import type { BenchArm, BenchCase, ProviderLabel } from "./types.js";

/** What a task of a run needs besides its case. */
export interface BenchTaskOptions {
  runId: string;
  arm: BenchArm;
  /** 0-based position of the case in the run (task ids carry it). */
  index: number;
  /** 1-based submission of this case in this arm. */
  attempt: number;
  provider: ProviderLabel;
  /** True for `--memory ab`: the `on` arm recalls only its own run's tasks. */
  paired: boolean;
  maxIterations?: number;
  /** Simulation: probability a reflection finds the cause unaided. @defaultValue 0.3 */
  findRate?: number;
  /** Simulation seed. @defaultValue 1 */
  seed?: number;
}

/** The task-id prefix of one arm of a run; the `on` arm of an A/B recalls only these. */
export function armPrefix(runId: string, arm: BenchArm): string {
  return `bench-${runId}-${arm}-`;
}

/** The id of one submission: `bench-<runId>-<arm>-<index>-<attempt>` (at most 64 characters). */
export function benchTaskId(o: Pick<BenchTaskOptions, "runId" | "arm" | "index" | "attempt">): string {
  return `${armPrefix(o.runId, o.arm)}${o.index}-${o.attempt}`;
}

/** Mutants of the reference solution below the entry point's definition line. */
function wrongCandidates(c: BenchCase): Mutant[] {
  const lines = c.solution.split("\n");
  const def = lines.findIndex((l) =>
    new RegExp(`\\b(def|function)\\s+${c.entryPoint}\\b|\\b${c.entryPoint}\\s*=`).test(l),
  );
  return mutantsOf(c.solution).filter((m) => m.line - 1 > def);
}

/** A wrong candidate when no mutant exists: the reference with a failing statement appended. */
function fallbackWrong(c: BenchCase): string {
  return c.language === "python"
    ? `${c.solution}\nraise AssertionError("simulated wrong candidate")\n`
    : `${c.solution}\nthrow new Error("simulated wrong candidate");\n`;
}

function plan(c: BenchCase, who: string) {
  return {
    summary: `Complete ${c.entryPoint} in ${c.solutionPath} (${who}, ${c.id}).`,
    acceptanceCriteria: [],
    steps: [`Write ${c.entryPoint} in ${c.solutionPath} as the goal says.`],
    files: [c.solutionPath],
  };
}

/**
 * The scripted replies of a case: the first mutant of the reference solution, then (after a
 * scripted reflection) the reference itself; the reference at once when it has no mutant.
 */
export function scriptFor(c: BenchCase): ScriptFile {
  const reference = {
    files: [{ path: c.solutionPath, content: c.solution }],
    tests: [],
    notes: "the reference solution (scripted)",
  };
  const mutant = wrongCandidates(c)[0];
  return {
    v: 1,
    kind: "loopsmith-script",
    description: `${c.id}: ${mutant ? `a mutant first (${mutant.description}), then ` : ""}the reference solution. No model is called.`,
    replies: {
      plan: [plan(c, "scripted")],
      spec: [plan(c, "scripted")],
      build: mutant
        ? [
            {
              files: [{ path: c.solutionPath, content: mutant.text }],
              tests: [],
              notes: `scripted mutant: ${mutant.description}`,
            },
            reference,
          ]
        : [reference],
      reflect: [
        {
          rootCause: mutant ? `${mutant.description} (scripted reflection)` : "scripted reflection",
          hypothesis: mutant ? `Restoring \`${mutant.from}\` makes ${c.entryPoint} pass.` : "The reference passes.",
          fixPlan: mutant
            ? `Change \`${mutant.to}\` back to \`${mutant.from}\` on line ${mutant.line}.`
            : "Use the reference.",
        },
      ],
      review: [{ approved: true, score: 0.9, findings: [] }],
    },
  };
}

/** The simulation of a case (see `Simulation`): its first three mutants as wrong candidates. */
export function simulationFor(c: BenchCase, o: { findRate?: number; seed?: number } = {}): Simulation {
  const mutants = wrongCandidates(c).slice(0, 3);
  const wrong = mutants.length
    ? mutants.map((m) => ({ content: m.text, cause: `${m.from} -> ${m.to}`, description: m.description }))
    : [{ content: fallbackWrong(c), cause: "appended failure", description: "a failing statement appended" }];
  return {
    v: 1,
    kind: "loopsmith-simulation",
    source: c.id,
    path: c.solutionPath,
    solution: c.solution,
    wrong,
    findRate: o.findRate ?? 0.3,
    seed: o.seed ?? 1,
  };
}

/**
 * The task of one case in one arm. The hidden tests go only to `hiddenTests`; the `off` arm
 * recalls nothing; in an A/B the `on` arm recalls only its own arm's earlier tasks.
 */
export function benchTask(c: BenchCase, o: BenchTaskOptions): TaskInput {
  const script =
    o.provider === "scripted" ? scriptFor(c) : o.provider === "simulated" ? simulationFor(c, o) : undefined;
  return {
    v: 1,
    taskId: benchTaskId(o),
    goal: c.goal,
    language: c.language,
    files: c.files,
    acceptanceTests: c.visibleTests,
    hiddenTests: c.hiddenTests,
    memory: o.arm,
    ...(o.paired && o.arm === "on" ? { memoryScope: armPrefix(o.runId, "on") } : {}),
    ...(script ? { script } : {}),
    ...(o.maxIterations !== undefined ? { limits: { maxIterations: o.maxIterations } } : {}),
    source: { kind: c.format, id: c.id },
    submittedAt: new Date().toISOString(),
  };
}
