/**
 * OpenAI's HumanEval (164 Python problems) as loopsmith tasks. A record's prompt (signature
 * and docstring) becomes the goal and the starting `solution.py`; its `check` function
 * becomes the visible acceptance test `test_solution.py`, one pytest test named
 * `test_<entry_point>`. Format: `task_id`, `prompt`, `entry_point`, `canonical_solution`,
 * `test` (see the dataset's README).
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { LoopsmithError, type FileChange, type TaskInput, type TaskLimits } from "@loopsmith/shared";

/** One HumanEval record. */
export const HumanEvalRecord = z.object({
  task_id: z.string(),
  prompt: z.string(),
  entry_point: z.string().regex(/^[A-Za-z_]\w*$/),
  canonical_solution: z.string(),
  test: z.string(),
});
export type HumanEvalRecord = z.infer<typeof HumanEvalRecord>;

/**
 * Reads a JSONL file in HumanEval's format.
 * @throws LoopsmithError `bad_request` naming the file and line of the first bad record.
 */
export function loadHumanEval(path: string): HumanEvalRecord[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new LoopsmithError("bad_request", `cannot read the dataset ${path}: ${(err as Error).message}`, { cause: err });
  }
  const out: HumanEvalRecord[] = [];
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      throw new LoopsmithError("bad_request", `${path} line ${i + 1} is not JSON`);
    }
    const parsed = HumanEvalRecord.safeParse(raw);
    if (!parsed.success) throw new LoopsmithError("bad_request", `${path} line ${i + 1} is not a HumanEval record: ${parsed.error.issues[0]?.message}`);
    out.push(parsed.data);
  });
  return out;
}

/**
 * Finds one record by id; accepts `HumanEval/12` or `12`.
 * @throws LoopsmithError `not_found`.
 */
export function findHumanEval(records: HumanEvalRecord[], id: string): HumanEvalRecord {
  const want = /^\d+$/.test(id) ? `HumanEval/${id}` : id;
  const rec = records.find((r) => r.task_id === want);
  if (!rec) throw new LoopsmithError("not_found", `no task ${want} in the dataset (it has ${records.length})`);
  return rec;
}

/** The pytest file that runs a record's `check` against `solution.py`. */
export function humanevalTestFile(rec: HumanEvalRecord): FileChange {
  const content = [
    "# Acceptance test generated from the HumanEval record's check function.",
    "from solution import *  # noqa: F401,F403  (helpers the prompt defines)",
    `from solution import ${rec.entry_point}`,
    rec.test,
    "",
    `def test_${rec.entry_point}():`,
    `    check(${rec.entry_point})`,
    "",
  ].join("\n");
  return { path: "test_solution.py", content };
}

/** The full solution file for a completion (prompt + body). */
export function solutionFile(rec: HumanEvalRecord, completion: string): FileChange {
  return { path: "solution.py", content: `${rec.prompt}${completion}` };
}

/** A task id for a HumanEval run: `he-<n>-<random>`, unique per run. */
export function humanevalTaskId(rec: HumanEvalRecord): string {
  const n = rec.task_id.split("/")[1] ?? "x";
  return `he-${n}-${randomBytes(4).toString("hex")}`;
}

/** A loopsmith task from a record. */
export function humanevalTask(rec: HumanEvalRecord, opts: { taskId?: string; limits?: Partial<TaskLimits> } = {}): TaskInput {
  return {
    v: 1,
    taskId: opts.taskId ?? humanevalTaskId(rec),
    goal: `Complete the Python function \`${rec.entry_point}\` in solution.py so that it behaves as its docstring says.\n\n${rec.prompt}`,
    language: "python",
    files: [{ path: "solution.py", content: rec.prompt }],
    acceptanceTests: [humanevalTestFile(rec)],
    source: { kind: "humaneval", id: rec.task_id },
    ...(opts.limits ? { limits: opts.limits } : {}),
    submittedAt: new Date().toISOString(),
  };
}
