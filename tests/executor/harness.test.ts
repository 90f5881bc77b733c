/**
 * The HumanEval-format harness runs exactly the record's tests against the candidate, for
 * any valid Python: every canonical solution below passes plain `python3` running HumanEval's
 * own program (the reference), and must pass loopsmith's harness in the real sandbox with
 * exactly one test collected. The records are shaped like the ones that broke it (MBPP in
 * HumanEval's format): candidate functions named `test_*`, tab indentation, CRLF line ends,
 * `_private` helpers and `__all__`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Executor } from "@loopsmith/executor";
import { humanevalTask, plainRequest, runCompletion, type HumanEvalRecord } from "@loopsmith/evals";
import { startExecutor } from "./helpers.js";

let ex: Executor;
beforeAll(async () => {
  ex = await startExecutor({ warmPoolSize: 1, concurrency: 2 });
});
afterAll(async () => {
  await ex?.stop();
});

const records: HumanEvalRecord[] = [
  {
    task_id: "Tricky/0",
    prompt: "",
    entry_point: "remove_odd",
    canonical_solution:
      "def remove_odd(l):\n\tfor i in l[:]:\n\t\tif i % 2 != 0:\n\t\t\tl.remove(i)\n\treturn l\n\ndef test_remove_odd_helper():\n\tassert False, 'a candidate function named like a test is not a test'\n",
    test: "def check(candidate):\n    assert candidate([1,2,3]) == [2]\n    assert candidate([2,4,6]) == [2,4,6]\n",
  },
  {
    task_id: "Tricky/1",
    prompt: "def _scale(x):\n    return x * 10\n\n",
    entry_point: "scaled_sum",
    canonical_solution: "def scaled_sum(xs):\n    return sum(_scale(x) for x in xs)\n",
    test: "def check(candidate):\n    assert candidate([1, 2]) == _scale(3)\n",
  },
  {
    task_id: "Tricky/2",
    prompt: "__all__ = ['area']\n\ndef unit():\n    return 1\n\n",
    entry_point: "area",
    canonical_solution: "def area(w, h):\n    return w * h * unit()\n",
    test: "def check(candidate):\n    assert candidate(2, 3) == 6 * unit()\n",
  },
  {
    task_id: "Tricky/3",
    prompt: 'def swap_case(s):\r\n    """Swap the case of every letter."""\r\n',
    entry_point: "swap_case",
    canonical_solution: "    return s.swapcase()\r\n",
    test: "def check(candidate):\r\n\tassert candidate('aB') == 'Ab'\r\n\tassert candidate('') == ''\r\n",
  },
  {
    task_id: "Tricky/4",
    prompt: "def check(x):\n    return 'the candidate may define check; the record\\'s own wins'\n\n",
    entry_point: "double",
    canonical_solution: "def double(x):\n    return 2 * x\n",
    test: "def check(candidate):\n    assert candidate(21) == 42\n",
  },
  {
    task_id: "Tricky/5",
    prompt: "def greet(name):\n",
    entry_point: "greet",
    canonical_solution: "    return f'héllo, {name} ✓'\n\nif __name__ == '__main__':\n    print(greet('x'))\n",
    test: "def check(candidate):\n    assert candidate('wörld') == 'héllo, wörld ✓'\n",
  },
];

describe("HumanEval-format harness", () => {
  for (const rec of records) {
    it(`${rec.task_id}: passes as under plain python3, with exactly the record's one test`, async () => {
      const plain = await ex.run(plainRequest(rec, rec.canonical_solution));
      expect(plain.status, plain.stderr).toBe("passed");
      const r = await runCompletion(ex, rec, rec.canonical_solution);
      expect(r.status, `${r.reason ?? ""}\n${r.stdout}\n${r.stderr}`).toBe("passed");
      expect(r.tests.map((t) => t.name)).toEqual([`test_${rec.entry_point}`]);
    });
  }

  it("a wrong completion fails with the record's assertion in the message", async () => {
    const rec = records[1] as HumanEvalRecord;
    const r = await runCompletion(ex, rec, "def scaled_sum(xs):\n    return sum(xs)\n");
    expect(r.status).toBe("failed");
    const failure = r.tests.find((t) => t.status === "failed");
    expect(failure?.message ?? "").toMatch(/assert 3 == 30/);
  });

  it("the task's acceptance tests are the harness and the record's test, verbatim", () => {
    const rec = records[3] as HumanEvalRecord;
    const task = humanevalTask(rec);
    expect(task.acceptanceTests?.map((f) => f.path)).toEqual(["humaneval_check.py", "test_solution.py"]);
    expect(task.acceptanceTests?.[0]?.content).toBe(rec.test);
  });
});
