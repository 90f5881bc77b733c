/** The simulated provider and lessons: it writes the lesson call's reply and reads recalled lessons as hints. */
import { describe, expect, it } from "vitest";
import { LessonReply, type RecalledLesson } from "../contracts/lesson.js";
import { Candidate } from "../contracts/plan.js";
import { Simulation } from "../contracts/script.js";
import { LESSON_SCHEMA_NAME, renderLessonAsk, renderLessons } from "./lesson-prompt.js";
import { renderFailure, renderFile, renderTask, section } from "./prompts.js";
import { causeMarker, simulatedAnswer } from "./simulated.js";
import type { ChatMessage, CompletionRequest } from "./types.js";

const SOLUTION = "def same(a, b):\n    return a == b\n";
const WRONG = "def same(a, b):\n    return a != b\n";
const sim = Simulation.parse({
  v: 1,
  kind: "loopsmith-simulation",
  source: "HumanEval/99",
  path: "solution.py",
  solution: SOLUTION,
  wrong: [{ content: WRONG, cause: "== -> !=", description: "line 2: `==` changed to `!=`" }],
  findRate: 0,
  seed: 1,
});
const SIG = "AssertionError: assert <bool> == <bool>";
const brief = { goal: "Write same(a, b).", language: "python" as const, files: [], acceptanceTests: [] };

function req(role: "reflect" | "build", messages: ChatMessage[], schemaName: string): CompletionRequest<unknown> {
  return {
    role,
    system: "",
    messages,
    schema: Candidate,
    schemaName,
    context: { taskId: "t-1", iteration: 2 },
    budget: {},
  } as unknown as CompletionRequest<unknown>;
}

function lessonMessages(rootCause: string): ChatMessage[] {
  return [
    { role: "user", content: renderTask(brief), cache: true },
    {
      role: "user",
      content: renderLessonAsk({
        failures: [{ iteration: 1, signature: SIG, failingTests: ["test_same"], status: "failed" }],
        reflection: { rootCause, hypothesis: "h", fixPlan: "undo it" },
        passed: [{ path: "solution.py", content: SOLUTION }],
        passedAt: 2,
      }),
    },
  ];
}

const lesson = (rule: string): RecalledLesson => ({
  id: "3",
  taskId: "t-0",
  signature: SIG,
  rule,
  source: "reflect",
  match: "signature",
  similarity: 0.5,
  use: { recalledIn: 0, passedAfter: 0, utility: null, stderr: null, demoted: false },
});

function buildWith(rule: string): ChatMessage[] {
  const recall = { failures: [], successes: [], embedder: "e", lessons: [lesson(rule)] };
  return [
    { role: "user", content: [renderTask(brief), renderLessons(recall)].join("\n"), cache: true },
    {
      role: "user",
      content: [
        section("Your previous candidate", renderFile({ path: sim.path, content: WRONG })),
        renderFailure({ iteration: 1, status: "failed", signature: SIG, failingTests: [], output: "", findings: [] }),
      ].join("\n"),
    },
  ];
}

describe("the simulated provider's lessons", () => {
  it("answers the lesson call with one lesson per listed signature, carrying the reflection's cause marker", () => {
    const marker = causeMarker("== -> !=");
    const found = LessonReply.parse(
      simulatedAnswer(sim, req("reflect", lessonMessages(`flipped ${marker}`), LESSON_SCHEMA_NAME)),
    );
    expect(found.lessons).toEqual([{ signature: SIG, rule: expect.stringContaining(marker) as string }]);
    const lost = LessonReply.parse(
      simulatedAnswer(sim, req("reflect", lessonMessages("not found"), LESSON_SCHEMA_NAME)),
    );
    expect(lost.lessons[0]?.rule).not.toContain("[simulated cause:");
  });

  it("builds the fix when a recalled lesson carries the failing candidate's cause, and not otherwise", () => {
    const fixed = simulatedAnswer(sim, req("build", buildWith(`Undo it ${causeMarker("== -> !=")}`), "candidate"));
    expect((fixed as Candidate).files[0]?.content).toBe(SOLUTION);
    const same = simulatedAnswer(sim, req("build", buildWith(`Undo it ${causeMarker("== -> <")}`), "candidate"));
    expect((same as Candidate).files[0]?.content).toBe(WRONG);
  });
});
