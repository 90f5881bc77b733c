import { describe, expect, it } from "vitest";
import { emptyUsage } from "../contracts/common.js";
import type { LoopsmithError } from "../runtime/errors.js";
import { NO_NEED, admitBudget, budgetOver, budgetStopText, checkBudget, type BudgetOver } from "./budget.js";
import { estimateCost, SpendMeter } from "./cost.js";
import type { UnpricedModel } from "./prices.js";

const sonnet = { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 };

/** The error `fn` throws, or undefined. */
function thrown(fn: () => void): LoopsmithError | undefined {
  try {
    fn();
  } catch (err) {
    return err as LoopsmithError;
  }
  return undefined;
}

describe("budgetOver: one rule for every unit", () => {
  const need = { usd: 0.01, tokens: 1000, basis: "last" as const };

  it("fits while the need is within what is left of every limit (an equal need fits)", () => {
    expect(budgetOver({ kind: "turn" }, need, {})).toBeUndefined();
    expect(budgetOver({ kind: "turn" }, need, { budget: { remainingUsd: 0.01, remainingTokens: 1000 } })).toBe(
      undefined,
    );
    expect(budgetOver({ kind: "call" }, need, { ceiling: { usd: 1, spentUsd: 0.99 } })).toBeUndefined();
  });

  it("a need larger than what is left stops at that limit, USD first, then tokens, then the ceiling", () => {
    expect(budgetOver({ kind: "turn" }, need, { budget: { remainingUsd: 0.009, remainingTokens: 1 } })).toMatchObject({
      scope: "task",
      limit: "usd",
      left: 0.009,
      need: 0.01,
    });
    expect(budgetOver({ kind: "turn" }, need, { budget: { remainingUsd: 1, remainingTokens: 999 } })).toMatchObject({
      scope: "task",
      limit: "tokens",
      left: 999,
      need: 1000,
    });
    expect(budgetOver({ kind: "call" }, need, { budget: {}, ceiling: { usd: 1, spentUsd: 0.995 } })).toMatchObject({
      limit: "ceiling",
      need: 0.01,
      totalUsd: 1,
    });
  });

  it("nothing left stops even a unit of which nothing is known yet; something left admits it", () => {
    const unit = { kind: "subtask", id: "api" } as const;
    expect(budgetOver(unit, NO_NEED, { budget: { remainingUsd: 0 } })).toMatchObject({
      scope: "subtask",
      limit: "usd",
    });
    expect(budgetOver(unit, NO_NEED, { budget: { remainingTokens: -5 } })).toMatchObject({
      scope: "subtask",
      limit: "tokens",
      left: -5,
    });
    expect(budgetOver(unit, NO_NEED, { budget: { remainingUsd: 0.0001, remainingTokens: 1 } })).toBeUndefined();
  });

  it("a generation is checked against the improvement run's budget by the dearest generation so far", () => {
    const unit = { kind: "generation", generation: 3 } as const;
    const dearest = { usd: 0.02, tokens: 0, basis: "dearest" as const };
    expect(budgetOver(unit, dearest, { budget: { remainingUsd: 0.02 }, totalUsd: 0.05 })).toBeUndefined();
    expect(budgetOver(unit, dearest, { budget: { remainingUsd: 0.015 }, totalUsd: 0.05 })).toMatchObject({
      scope: "generation",
      limit: "usd",
      totalUsd: 0.05,
    });
  });
});

describe("budgetStopText: one sentence naming the limit, whose it is and the unit", () => {
  const over = (o: Partial<BudgetOver>): BudgetOver => ({
    scope: "task",
    limit: "usd",
    unit: { kind: "call" },
    need: 0.075,
    left: 0.02,
    basis: "estimate",
    ...o,
  });

  it("a task's USD and token budgets, for an LLM call and an agent turn", () => {
    expect(budgetStopText(over({}))).toBe(
      "the task's USD budget would be passed ($0.0200 left): the next LLM call could cost up to $0.0750 (estimated before it is made)",
    );
    expect(budgetStopText(over({ limit: "tokens", need: 4010, left: 2900 }))).toBe(
      "the task's token budget would be passed (2900 tokens left): the next LLM call could use up to 4010 tokens (estimated before it is made)",
    );
    expect(budgetStopText(over({ unit: { kind: "turn" }, need: 0.01, left: 0.005, basis: "last" }))).toBe(
      "the task's USD budget would be passed ($0.0050 left): the next model turn could cost up to $0.0100 (as much as the last turn)",
    );
  });

  it("the process's ceiling names its size and its configuration key", () => {
    expect(budgetStopText(over({ limit: "ceiling", need: 0.01, left: 0.005, totalUsd: 0.02 }))).toBe(
      "this process's USD ceiling of $0.0200 (llm.processCeilingUsd) would be passed ($0.0050 left): the next LLM call could cost up to $0.0100 (estimated before it is made)",
    );
  });

  it("a subtask that cannot start, with what is left shown as 0 once it is overspent", () => {
    const subtask = { scope: "subtask", unit: { kind: "subtask", id: "api" }, need: 0, basis: "none" } as const;
    expect(budgetStopText(over({ ...subtask, left: -0.001 }))).toBe(
      "the task's USD budget is used up ($0.0000 left): subtask api cannot start",
    );
    expect(budgetStopText(over({ ...subtask, limit: "tokens", left: -20 }))).toBe(
      "the task's token budget is used up (0 tokens left): subtask api cannot start",
    );
  });

  it("a generation names the improvement run's budget and its size", () => {
    const gen = over({
      scope: "generation",
      unit: { kind: "generation", generation: 3 },
      need: 0.02,
      left: 0.01,
      basis: "dearest",
      totalUsd: 0.05,
    });
    expect(budgetStopText(gen)).toBe(
      "the improvement run's USD budget of $0.0500 would be passed ($0.0100 left): generation 3 could cost up to $0.0200 (as much as the dearest generation so far)",
    );
  });
});

describe("checkBudget: before every LLM call", () => {
  const estimate = estimateCost(sonnet, { system: "s".repeat(400), messages: [], maxOutputTokens: 1000 }); // 100 in, 1000 out

  it("admits a call within the budget, unlimited fields included", () => {
    const meter = new SpendMeter();
    expect(thrown(() => checkBudget({ estimate, budget: {}, spent: emptyUsage(), meter }))).toBeUndefined();
    expect(
      thrown(() =>
        checkBudget({ estimate, budget: { remainingUsd: 1, remainingTokens: 1100 }, spent: emptyUsage(), meter }),
      ),
    ).toBeUndefined();
  });

  it("refuses by USD and by tokens with budget_exceeded naming the limit, and counts what the call already spent", () => {
    const meter = new SpendMeter();
    const usd = thrown(() => checkBudget({ estimate, budget: { remainingUsd: 0.01 }, spent: emptyUsage(), meter }));
    expect(usd?.code).toBe("budget_exceeded");
    expect(usd?.message).toMatch(/^the task's USD budget would be passed \(\$0\.0100 left\): the next LLM call/);
    expect(usd?.details).toMatchObject({ scope: "task", limit: "usd", left: 0.01, estimate });
    const tokens = thrown(() =>
      checkBudget({ estimate, budget: { remainingTokens: 1099 }, spent: emptyUsage(), meter }),
    );
    expect(tokens?.message).toContain("the task's token budget would be passed (1099 tokens left)");
    const spent = { ...emptyUsage(), inputTokens: 500, outputTokens: 100, costUsd: 0.5 };
    expect(
      thrown(() => checkBudget({ estimate, budget: { remainingTokens: 1500 }, spent, meter }))?.details,
    ).toMatchObject({ limit: "tokens", left: 900 });
    expect(
      thrown(() => checkBudget({ estimate, budget: { remainingUsd: 0.51 }, spent, meter }))?.details,
    ).toMatchObject({
      limit: "usd",
    });
    expect(thrown(() => checkBudget({ estimate, budget: { remainingUsd: 0.52 }, spent, meter }))).toBeUndefined();
  });

  it("refuses past the process ceiling, naming it; an agent turn is named as a turn", () => {
    const meter = new SpendMeter();
    expect(thrown(() => checkBudget({ estimate, spent: emptyUsage(), ceilingUsd: 0.02, meter }))).toBeUndefined();
    meter.add(0.01);
    const err = thrown(() =>
      checkBudget({ estimate, spent: emptyUsage(), ceilingUsd: 0.02, meter, unit: { kind: "turn" } }),
    );
    expect(err?.code).toBe("budget_exceeded");
    expect(err?.message).toMatch(
      /^this process's USD ceiling of \$0\.0200 \(llm\.processCeilingUsd\) would be passed \(\$0\.0100 left\): the next model turn/,
    );
    expect(err?.details).toMatchObject({ limit: "ceiling", processSpentUsd: 0.01 });
    expect(meter.spentUsd).toBe(0.01);
  });
});

describe("admitBudget: a USD limit needs a price for every model", () => {
  const unpriced: UnpricedModel[] = [
    {
      model: "llama3.1",
      provider: "openai-compatible",
      roles: ["build"],
      source: "llm.roles.build",
      priceKey: 'llm.prices["llama3.1"]',
    },
  ];

  it("refuses a task's and an improvement run's USD budget, and the process ceiling, naming each", () => {
    const task = thrown(() => admitBudget(unpriced, "task", { usd: true }));
    expect(task?.code).toBe("config_invalid");
    expect(task?.message).toMatch(/llama3\.1 .*so the task's USD budget \(--budget-usd\) cannot bind/);
    expect(thrown(() => admitBudget(unpriced, "generation", { usd: true }))?.message).toContain(
      "so the improvement run's USD budget (--budget-usd) cannot bind",
    );
    expect(thrown(() => admitBudget(unpriced, "task", { usd: false, ceiling: true }))?.message).toContain(
      "so this process's USD ceiling (llm.processCeilingUsd) cannot bind",
    );
  });

  it("admits work without a USD limit, and any work when every model is priced", () => {
    expect(thrown(() => admitBudget(unpriced, "task", { usd: false }))).toBeUndefined();
    expect(thrown(() => admitBudget([], "generation", { usd: true, ceiling: true }))).toBeUndefined();
  });
});
