import { describe, expect, it } from "vitest";
import {
  ERRORS_KEPT,
  REVIEWS_KEPT,
  type GenerationError,
  type GenerationReview,
  type TaskEvent,
} from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { addReview, generationError, keptErrors, reviewOfEvent } from "./generation.js";

/** A task event of the generation's task. */
function event(over: Partial<TaskEvent>): TaskEvent {
  return {
    v: 1,
    taskId: "run-gen-1",
    seq: 0,
    at: "2025-01-01T00:00:00Z",
    iteration: 1,
    kind: "step",
    message: "",
    ...over,
  };
}

const review = {
  approved: false,
  score: 0.25,
  findings: [
    { severity: "blocker" as const, rule: "security.eval", path: "app.py", line: 7, message: "eval of input" },
    { severity: "warning" as const, message: "a long function" },
  ],
};

describe("reviewOfEvent", () => {
  it("reads the review step of the task's REVIEW phase with its iteration, findings as given", () => {
    const got = reviewOfEvent(
      event({ iteration: 2, phase: "review", data: { review, llm: { model: "m" } }, message: "review: not approved" }),
    );
    expect(got).toEqual({ iteration: 2, ...review });
  });

  it("is undefined for other events and for a review step without a readable review", () => {
    expect(
      reviewOfEvent(event({ phase: "review", kind: "phase", message: "reviewing the candidate" })),
    ).toBeUndefined();
    expect(reviewOfEvent(event({ phase: "execute", data: { review } }))).toBeUndefined();
    // The reply could not be read: the step carries the gate's concerns, no review.
    expect(reviewOfEvent(event({ phase: "review", data: { concerns: review.findings } }))).toBeUndefined();
    expect(reviewOfEvent(event({ phase: "review", data: { review: { approved: "yes" } } }))).toBeUndefined();
  });
});

describe("addReview", () => {
  const at = (iteration: number, approved = true): GenerationReview => ({
    iteration,
    approved,
    score: 1,
    findings: [],
  });

  it("replaces a review of the same iteration (a phase run again) and keeps the last ones in order", () => {
    expect(addReview([at(1, false), at(2)], at(1, true))).toEqual([at(2), at(1, true)]);
    let reviews = [at(1)];
    for (let i = 2; i <= REVIEWS_KEPT + 3; i++) reviews = addReview(reviews, at(i));
    expect(reviews.map((r) => r.iteration)).toEqual(Array.from({ length: REVIEWS_KEPT }, (_, i) => i + 4));
  });
});

describe("generationError", () => {
  it("keeps a LoopsmithError's code, calls anything else internal, and marks a retried one", () => {
    expect(
      generationError("bench", new LoopsmithError("unavailable", "executor down", { retryable: true }), true),
    ).toEqual({ phase: "bench", code: "unavailable", message: "executor down", retried: true });
    expect(generationError("plan", new TypeError("x is undefined"))).toEqual({
      phase: "plan",
      code: "internal",
      message: "x is undefined",
    });
    expect(generationError("decide", "a string")).toEqual({ phase: "decide", code: "internal", message: "a string" });
  });

  it("cuts a long message to 2,000 characters, ending it with …", () => {
    const { message } = generationError("implement", new Error("y".repeat(5_000)));
    expect(message).toHaveLength(2_000);
    expect(message.endsWith("y…")).toBe(true);
  });
});

describe("keptErrors", () => {
  it("keeps every error up to the limit, else the first ones and the last", () => {
    const errs = (n: number): GenerationError[] =>
      Array.from({ length: n }, (_, i) => ({ phase: "implement", message: `error ${i + 1}` }));
    expect(keptErrors(errs(3))).toEqual(errs(3));
    const kept = keptErrors(errs(ERRORS_KEPT + 10));
    expect(kept).toHaveLength(ERRORS_KEPT);
    expect(kept.at(-2)?.message).toBe(`error ${ERRORS_KEPT - 1}`);
    expect(kept.at(-1)?.message).toBe(`error ${ERRORS_KEPT + 10}`);
  });
});
