/**
 * The transfer benchmark's corpus: real failures of named mutants on many tasks.
 *
 * For each task (a HumanEval record) and each operator ({@link OPERATORS}), the operator's
 * candidates on the canonical solution are run against the record's tests in order
 * ({@link LocalRunner}) until one fails (status `failed`: the tests ran and one failed), at most
 * `tries` of them; that one is kept. So a task contributes at most one failure per operator,
 * and every failure is labelled by the operator that made it. Each kept failure is what the
 * loop stores: the goal (`humanevalTask`'s), the error text (`errorTextOf`), the failing
 * tests (`failingTests`) and the code (`solution.py`: the prompt and the mutated body).
 */
import { errorTextOf, failingTests } from "@loopsmith/architect";
import { humanevalTask, type HumanEvalRecord } from "@loopsmith/evals";
import { namedMutants, OPERATORS, type Operator } from "./operators.js";
import type { LocalRunner } from "./run-local.js";

/** One stored failure. */
export interface Failure {
  /** `<record>/<operator>`. */
  id: string;
  /** The HumanEval record's id (`HumanEval/12`). */
  record: string;
  /** The task id the failure is stored under: one per record, so a task's failures share it. */
  taskId: string;
  /** Its place among the task's failures (the loop's iteration). */
  iteration: number;
  operator: Operator;
  goal: string;
  errorText: string;
  failingTests: string[];
  code: string;
  mutation: string;
}

/** What the corpus build did, per operator: candidates run, and how they ended. */
export interface OperatorCounts {
  tasksWithCandidates: number;
  runs: number;
  failed: number;
  passed: number;
  other: number;
}

export interface Corpus {
  failures: Failure[];
  counts: Record<Operator, OperatorCounts>;
  runs: number;
  seconds: number;
}

/** The memory task id of a record: `tr-<number>` (`HumanEval/12` is `tr-12`). */
function taskIdOf(rec: HumanEvalRecord): string {
  return `tr-${rec.task_id.replace(/[^A-Za-z0-9_-]+/g, "-").replace(/^HumanEval-/, "")}`;
}

/** Builds the corpus over `records`, `tries` candidates at most per task and operator. */
export async function buildCorpus(
  records: readonly HumanEvalRecord[],
  runner: LocalRunner,
  opts: { tries: number; progress?: (done: number, failures: number, runs: number) => void },
): Promise<Corpus> {
  const counts = Object.fromEntries(
    OPERATORS.map((op) => [op, { tasksWithCandidates: 0, runs: 0, failed: 0, passed: 0, other: 0 }]),
  ) as Record<Operator, OperatorCounts>;
  const failures: Failure[] = [];
  const started = performance.now();
  let runs = 0;
  let done = 0;
  const task = async (rec: HumanEvalRecord): Promise<void> => {
    const taskId = taskIdOf(rec);
    const goal = humanevalTask(rec, { taskId }).goal;
    const mutants = namedMutants(rec);
    const mine: Failure[] = [];
    await Promise.all(
      OPERATORS.map(async (op) => {
        const candidates = mutants.filter((m) => m.operator === op).slice(0, opts.tries);
        if (candidates.length > 0) counts[op].tasksWithCandidates++;
        for (const m of candidates) {
          runs++;
          counts[op].runs++;
          const result = await runner.run(rec, m.prompt, m.body);
          if (result.status === "passed") counts[op].passed++;
          if (result.status !== "failed") {
            if (result.status !== "passed") counts[op].other++;
            continue;
          }
          counts[op].failed++;
          mine.push({
            id: `${rec.task_id}/${op}`,
            record: rec.task_id,
            taskId,
            iteration: 0,
            operator: op,
            goal,
            errorText: errorTextOf(result),
            failingTests: failingTests(result),
            code: `${m.prompt}${m.body}`,
            mutation: m.description,
          });
          return;
        }
      }),
    );
    mine.sort((a, b) => OPERATORS.indexOf(a.operator) - OPERATORS.indexOf(b.operator));
    mine.forEach((f, i) => failures.push({ ...f, iteration: i + 1 }));
    done++;
    opts.progress?.(done, failures.length, runs);
  };
  // Tasks one after another; a task's operators at once (the runner bounds the parallelism).
  for (const rec of records) await task(rec);
  return { failures, counts, runs, seconds: (performance.now() - started) / 1000 };
}
