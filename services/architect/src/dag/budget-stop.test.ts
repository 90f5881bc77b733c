import { budgetStopText } from "@loopsmith/shared/llm";
import { describe, expect, it } from "vitest";
import { dagTexts } from "../event-texts.js";

describe("a DAG task's budget stop names the subtask and the limit it hit", () => {
  it("a subtask that could not start: its own sentence, which names it, without the subtask said twice", () => {
    const why = budgetStopText({
      scope: "subtask",
      limit: "tokens",
      unit: { kind: "subtask", id: "api" },
      need: 0,
      left: -12,
      basis: "none",
    });
    expect(dagTexts.budgetStop("api", why, ["model"])).toBe(
      "stopped: the task's token budget is used up (0 tokens left): subtask api cannot start; built: model",
    );
  });

  it("a subtask whose own task stopped on the budget: its stop, first line only, after the subtask's id", () => {
    const why =
      "stopped: the task's USD budget would be passed ($0.0050 left): the next LLM call could cost up to $0.0100 (estimated before it is made)\nmore";
    expect(dagTexts.budgetStop("handlers", why, [])).toBe(
      "stopped: subtask handlers: the task's USD budget would be passed ($0.0050 left): the next LLM call could cost up to $0.0100 (estimated before it is made); built: none",
    );
  });
});
