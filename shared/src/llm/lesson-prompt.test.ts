import { describe, expect, it } from "vitest";
import { LessonReply, type RecalledLesson } from "../contracts/lesson.js";
import {
  acceptLessons,
  definedNames,
  fallbackLesson,
  renderLessonAsk,
  renderLessons,
  scrubRule,
} from "./lesson-prompt.js";

const SIG = "NameError: name <id> is not defined";
const CODE =
  "def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n    return balance < 0\n";

function lesson(over: Partial<RecalledLesson> = {}): RecalledLesson {
  return {
    id: "7",
    taskId: "t-src",
    signature: SIG,
    rule: "Use the name exactly as it was defined.",
    source: "reflect",
    match: "signature",
    similarity: 0.4,
    use: { recalledIn: 3, passedAfter: 2, utility: 0.25, stderr: 0.1, demoted: false },
    ...over,
  };
}

describe("the lesson prompt's helpers", () => {
  it("finds the names a candidate defines: functions, parameters, assigned variables", () => {
    expect([...definedNames(CODE)].sort()).toEqual(["balance", "below_zero", "op", "operations"].sort());
    expect([...definedNames("function sumTo(limit, step) {\n  const total = 0;\n}\n")].sort()).toEqual(
      ["limit", "step", "sumTo", "total"].sort(),
    );
  });

  it("scrubs a rule of the task's names, string literals and long numbers, and caps its length", () => {
    const names = definedNames(CODE);
    expect(scrubRule("below_zero returns balance > 100 where 'negative' was meant; op is fine", names)).toBe(
      "<name> returns <name> > <num> where <value> was meant; <name> is fine",
    );
    // A name inside a longer word is left alone.
    expect(scrubRule("the rebalance step uses balances", names)).toBe("the rebalance step uses balances");
    expect(scrubRule("x".repeat(900), new Set())).toHaveLength(400);
  });

  it("keeps only lessons about the task's own signatures, one each, scrubbed; drops rules scrubbed to nothing", () => {
    const names = definedNames(CODE);
    const kept = acceptLessons(
      [
        { signature: ` ${SIG} `, rule: "A misspelt balance raises NameError: spell it as defined." },
        { signature: SIG, rule: "A second lesson for the same signature is dropped." },
        { signature: "KeyError: <str>", rule: "Not a signature of this task, so dropped." },
        { signature: "ZeroDivisionError: division by zero", rule: "'a' 'b' 'c'" },
      ],
      new Set([SIG, "ZeroDivisionError: division by zero"]),
      names,
      "reflect",
    );
    expect(kept).toEqual([
      { signature: SIG, rule: "A misspelt <name> raises NameError: spell it as defined.", source: "reflect" },
    ]);
  });

  it("takes every lesson as about the one signature of a task that has one", () => {
    const kept = acceptLessons(
      [{ signature: "AssertionError", rule: "Spell the name as it was defined." }],
      new Set([SIG]),
      new Set(),
      "reflect",
    );
    expect(kept).toEqual([{ signature: SIG, rule: "Spell the name as it was defined.", source: "reflect" }]);
  });

  it("falls back to the last reflection, scrubbed, and to nothing without one", () => {
    const reflection = { rootCause: "balance is never reset.", hypothesis: "h", fixPlan: "Reset balance to 0." };
    expect(fallbackLesson(reflection, SIG, definedNames(CODE))).toEqual({
      signature: SIG,
      rule: "<name> is never reset. Fix: Reset <name> to 0.",
      source: "fallback",
    });
    expect(fallbackLesson(undefined, SIG, new Set())).toBeUndefined();
  });

  it("refuses a garbage lesson reply: not the shape, an empty list, a rule too short", () => {
    expect(LessonReply.safeParse({ rootCause: "x", hypothesis: "y", fixPlan: "z" }).success).toBe(false);
    expect(LessonReply.safeParse({ lessons: [] }).success).toBe(false);
    expect(LessonReply.safeParse({ lessons: [{ signature: SIG, rule: "short" }] }).success).toBe(false);
    expect(LessonReply.safeParse({ lessons: [{ signature: SIG, rule: "Use the name as defined." }] }).success).toBe(
      true,
    );
  });

  it("asks with one line per distinct signature, the reflection and what passed", () => {
    const text = renderLessonAsk({
      failures: [
        { iteration: 1, signature: SIG, failingTests: ["test_a"], status: "failed" },
        { iteration: 2, signature: SIG, failingTests: [], status: "failed" },
      ],
      reflection: { rootCause: "misspelt", hypothesis: "h", fixPlan: "spell it" },
      passed: [{ path: "solution.py", content: CODE }],
      passedAt: 3,
    });
    expect(text.match(/^- iteration/gm)).toHaveLength(1);
    expect(text).toContain(`- iteration 1, failed; signature: ${SIG}; failing tests: test_a`);
    expect(text).toContain("Root cause: misspelt\nFix plan: spell it");
    expect(text).toContain("## What passed (iteration 3)\n--- solution.py");
  });

  it("shows a recalled lesson with its id, source task, match and record; nothing without lessons", () => {
    const text = renderLessons({ failures: [], successes: [], embedder: "e", lessons: [lesson()] });
    expect(text).toBe(
      "## Lessons from memory\nLESSONS recalled from memory: rules learned by earlier tasks that failed the same way and then passed. They may not apply; use them where they fit.\n" +
        `- [memory:lesson:7] from task t-src; for the error "${SIG}"; recalled in 3 finished tasks, 2 of them passed (utility +0.25, s.e. 0.10)\n` +
        "  rule: Use the name exactly as it was defined.\n",
    );
    const fresh = renderLessons({
      failures: [],
      successes: [],
      embedder: "e",
      lessons: [
        lesson({ match: "goal", use: { recalledIn: 0, passedAfter: 0, utility: null, stderr: null, demoted: false } }),
      ],
    });
    expect(fresh).toContain(
      'a similar goal (similarity 0.40), error "NameError: name <id> is not defined"; not recalled by a finished task before',
    );
    expect(renderLessons({ failures: [], successes: [], embedder: "e" })).toBe("");
    expect(renderLessons(undefined)).toBe("");
  });
});
