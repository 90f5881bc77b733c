/**
 * OpenAI's HumanEval (164 Python problems) as loopsmith tasks. A record's prompt (signature
 * and docstring) becomes the goal and the starting `solution.py`; its `check` function
 * becomes the visible acceptance test (`humaneval_check.py` run by `test_solution.py`, one
 * pytest test named `test_<entry_point>`). Format: `task_id`, `prompt`, `entry_point`, `canonical_solution`,
 * `test` (see the dataset's README).
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type FileChange, type TaskInput, type TaskLimits } from "@loopsmith/shared/contracts";

/** One HumanEval record. */
export const HumanEvalRecord = z.object({
  task_id: z.string(),
  prompt: z.string(),
  entry_point: z.string().regex(/^[A-Za-z_]\w*$/),
  canonical_solution: z.string(),
  test: z.string(),
});
export type HumanEvalRecord = z.infer<typeof HumanEvalRecord>;

/** `12` → `HumanEval/12`; anything else as given. */
export function humanevalId(id: string): string {
  return /^\d+$/.test(id) ? `HumanEval/${id}` : id;
}

/**
 * Reads a JSONL file in HumanEval's format.
 * @throws LoopsmithError `bad_request` naming the file and line of the first bad record.
 */
export function loadHumanEval(path: string): HumanEvalRecord[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new LoopsmithError("bad_request", `cannot read the dataset ${path}: ${(err as Error).message}`, {
      cause: err,
    });
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
    if (!parsed.success)
      throw new LoopsmithError(
        "bad_request",
        `${path} line ${i + 1} is not a HumanEval record: ${parsed.error.issues[0]?.message}`,
      );
    out.push(parsed.data);
  });
  return out;
}

/**
 * Finds one record by id; accepts `HumanEval/12` or `12`.
 * @throws LoopsmithError `not_found`.
 */
export function findHumanEval(records: HumanEvalRecord[], id: string): HumanEvalRecord {
  const want = humanevalId(id);
  const rec = records.find((r) => r.task_id === want);
  if (!rec) throw new LoopsmithError("not_found", `no task ${want} in the dataset (it has ${records.length})`);
  return rec;
}

/** The file that holds a record's `test` code verbatim (not a test module: pytest does not collect it). */
export const HUMANEVAL_CHECK_PATH = "humaneval_check.py";

/**
 * The acceptance test of a record, as two files:
 * - {@link HUMANEVAL_CHECK_PATH}: the record's `test` code, byte for byte;
 * - `test_solution.py`: one pytest test, `test_<entry_point>`, that runs that code in a copy
 *   of the candidate module's namespace (every name `solution.py` defines, `_private` ones
 *   too, as HumanEval's own harness sees them) and calls `check(<entry_point>)`.
 * Nothing of the candidate is imported into the test module, so a candidate function named
 * `test_*` is never collected as a test, and the record's code is never joined to loopsmith's
 * own lines (its indentation, tabs included, stands alone). Assertions are rewritten by
 * pytest's rewriter when it accepts the code, for informative failure messages; when it
 * does not, the code runs as plain Python.
 */
export function humanevalTestFiles(rec: HumanEvalRecord): FileChange[] {
  const harness = [
    `"""Acceptance test of ${rec.task_id}: runs the record's check function (${HUMANEVAL_CHECK_PATH}) against solution.py."""`,
    "import ast",
    "import pathlib",
    "",
    "import solution",
    "",
    `CHECK = pathlib.Path(__file__).with_name(${JSON.stringify(HUMANEVAL_CHECK_PATH)})`,
    "",
    "",
    "def _compiled(path):",
    "    source = path.read_bytes()",
    "    tree = ast.parse(source, filename=str(path))",
    "    try:",
    "        from _pytest.assertion.rewrite import rewrite_asserts",
    "        rewrite_asserts(tree, source, str(path))",
    "    except Exception:",
    "        tree = ast.parse(source, filename=str(path))",
    '    return compile(tree, str(path), "exec")',
    "",
    "",
    `def test_${rec.entry_point}():`,
    "    namespace = dict(vars(solution))",
    "    exec(_compiled(CHECK), namespace)",
    `    namespace["check"](namespace[${JSON.stringify(rec.entry_point)}])`,
    "",
  ].join("\n");
  return [
    { path: HUMANEVAL_CHECK_PATH, content: rec.test },
    { path: "test_solution.py", content: harness },
  ];
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
export function humanevalTask(
  rec: HumanEvalRecord,
  opts: { taskId?: string; limits?: Partial<TaskLimits> } = {},
): TaskInput {
  return {
    v: 1,
    taskId: opts.taskId ?? humanevalTaskId(rec),
    goal: `Complete the Python function \`${rec.entry_point}\` in solution.py so that it behaves as its docstring says.\n\n${rec.prompt}`,
    language: "python",
    files: [{ path: "solution.py", content: rec.prompt }],
    acceptanceTests: humanevalTestFiles(rec),
    source: { kind: "humaneval", id: rec.task_id },
    ...(opts.limits ? { limits: opts.limits } : {}),
    submittedAt: new Date().toISOString(),
  };
}
