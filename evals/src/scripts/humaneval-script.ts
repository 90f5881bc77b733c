/**
 * Prints a scripted-provider file for one HumanEval task:
 *   npm run --silent script:humaneval -- --dataset <path> --id <task_id> [--mutant-first] [--no-verify]
 * With --mutant-first the builder first answers a mutant of the canonical solution (one
 * operator or constant changed so that the tests fail; checked in the Docker sandbox unless
 * --no-verify) and, after the reflection, the canonical solution. Replies are replayed by
 * the scripted provider: no model is involved, and every run says so.
 */
import Docker from "dockerode";
import { Command } from "commander";
import { createLogger, loadConfig, LoopsmithError } from "@loopsmith/shared/runtime";
import { createExecutor } from "@loopsmith/executor";
import { findHumanEval, loadHumanEval, type HumanEvalRecord } from "../humaneval.js";
import { mutantsOf, type Mutant } from "../mutants.js";
import { firstFailingMutant } from "../oracle.js";
import { docstringExamples } from "../humaneval-examples.js";

/** Docstring examples (`>>> call` then the expected output) as acceptance criteria. */
function examples(rec: HumanEvalRecord): string[] {
  return docstringExamples(rec.prompt)
    .filter((e) => e.expected)
    .slice(0, 10)
    .map((e) => `${e.call} == ${e.expected}`);
}

/** The script file's object. */
export function scriptFor(rec: HumanEvalRecord, mutant: Mutant | null) {
  const canonical = {
    files: [{ path: "solution.py", content: `${rec.prompt}${rec.canonical_solution}` }],
    tests: [],
    notes: "the canonical solution",
  };
  const build = mutant
    ? [
        {
          files: [{ path: "solution.py", content: `${rec.prompt}${mutant.text}` }],
          tests: [],
          notes: `scripted mutant: ${mutant.description}`,
        },
        canonical,
      ]
    : [canonical];
  return {
    v: 1,
    kind: "loopsmith-script",
    description: `${rec.task_id}: ${mutant ? `a mutant first (${mutant.description}), then ` : ""}the canonical solution. Replayed by the scripted provider; no model is called.`,
    replies: {
      plan: [
        {
          summary: `Complete ${rec.entry_point} in solution.py as its docstring says.`,
          acceptanceCriteria: examples(rec),
          steps: [`Write the body of ${rec.entry_point} in solution.py, keeping the prompt's signature and docstring.`],
          files: ["solution.py"],
        },
      ],
      spec: [],
      build,
      reflect: mutant
        ? [
            {
              rootCause: `In solution.py the candidate's ${mutant.description} (scripted reflection: this file was generated from that mutation).`,
              hypothesis: `Restoring \`${mutant.from}\` on line ${mutant.line} of the body makes ${rec.entry_point} pass its check.`,
              fixPlan: `In solution.py, in ${rec.entry_point}, change \`${mutant.to}\` back to \`${mutant.from}\` (body line ${mutant.line}).`,
            },
          ]
        : [],
      review: [{ approved: true, score: 0.9, findings: [] }],
    },
  };
}

const program = new Command()
  .requiredOption("--dataset <path>", "HumanEval JSONL file")
  .requiredOption("--id <task_id>", "task id, e.g. HumanEval/12")
  .option("--mutant-first", "answer a failing mutant first")
  .option("--no-verify", "do not check in the sandbox that the mutant fails")
  .parse(process.argv);
const opts = program.opts<{ dataset: string; id: string; mutantFirst?: boolean; verify: boolean }>();

try {
  const rec = findHumanEval(loadHumanEval(opts.dataset), opts.id);
  let mutant: Mutant | null = null;
  if (opts.mutantFirst) {
    if (opts.verify) {
      const log = createLogger({ service: "script", level: "warn" });
      const executor = createExecutor({ docker: new Docker(), config: loadConfig(), log });
      await executor.start();
      try {
        mutant = (await firstFailingMutant(executor, rec))?.mutant ?? null;
      } finally {
        await executor.stop();
      }
    } else {
      mutant = mutantsOf(rec.canonical_solution)[0] ?? null;
    }
    if (!mutant)
      throw new LoopsmithError("not_found", `no mutant of ${rec.task_id}'s canonical solution fails its tests`);
  }
  process.stdout.write(`${JSON.stringify(scriptFor(rec, mutant), null, 2)}\n`);
} catch (err) {
  process.stderr.write(`script:humaneval: ${(err as Error).message}\n`);
  process.exitCode = err instanceof LoopsmithError && err.code === "bad_request" ? 2 : 1;
}
