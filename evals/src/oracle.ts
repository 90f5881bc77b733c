/** Running HumanEval completions through the executor (the same code the service uses). */
import type { ExecutionRequest, ExecutionResult } from "@loopsmith/shared/contracts";
import { humanevalTestFiles, solutionFile, type HumanEvalRecord } from "./humaneval.js";
import { mutantsOf, type Mutant } from "./mutants.js";

/** The part of the executor this needs. */
export interface RunsExecutions {
  run(req: ExecutionRequest): Promise<ExecutionResult>;
}

let counter = 0;

/** An execution request running `completion` against the record's tests. */
export function makeRequest(
  rec: HumanEvalRecord,
  completion: string,
  opts: { timeoutMs?: number } = {},
): ExecutionRequest {
  counter += 1;
  const n = rec.task_id.split("/")[1] ?? "x";
  return {
    v: 1 as const,
    taskId: `oracle-${n}`,
    iteration: counter,
    idempotencyKey: `oracle-${n}/${counter}/execute`,
    language: "python" as const,
    files: [solutionFile(rec, completion), ...humanevalTestFiles(rec)],
    timeoutMs: opts.timeoutMs ?? 30_000,
    memoryMb: 512,
  };
}

/**
 * The reference: HumanEval's own check of a completion, run by plain `python3` (in the same
 * sandbox image) as one program — prompt + completion + test + `check(<entry_point>)` — with
 * no test runner. A completion this passes must pass loopsmith's harness too.
 */
export function plainRequest(
  rec: HumanEvalRecord,
  completion: string,
  opts: { timeoutMs?: number } = {},
): ExecutionRequest {
  const program = `${rec.prompt}${completion}\n${rec.test}\ncheck(${rec.entry_point})\n`;
  return {
    ...makeRequest(rec, completion, opts),
    files: [{ path: "program.py", content: program }],
    command: ["python3", "program.py"],
  };
}

/** Runs one completion; returns the result. */
export function runCompletion(
  executor: RunsExecutions,
  rec: HumanEvalRecord,
  completion: string,
  opts: { timeoutMs?: number } = {},
): Promise<ExecutionResult> {
  return executor.run(makeRequest(rec, completion, opts));
}

/**
 * The first mutant of the canonical solution whose tests fail (status `failed`: the tests
 * ran and an assertion failed), trying at most `maxTries` mutants in order.
 * Returns null when none of them fails.
 */
export async function firstFailingMutant(
  executor: RunsExecutions,
  rec: HumanEvalRecord,
  maxTries = 20,
): Promise<{ mutant: Mutant; result: ExecutionResult } | null> {
  for (const mutant of mutantsOf(rec.canonical_solution).slice(0, maxTries)) {
    const result = await runCompletion(executor, rec, mutant.text, { timeoutMs: 10_000 });
    if (result.status === "failed") return { mutant, result };
  }
  return null;
}
