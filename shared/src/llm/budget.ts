/**
 * Budgets: the one place that decides whether work may go on under a USD or token limit, and
 * the one text every budget stop is told in. Three decisions:
 *
 * 1. Admission ({@link admitBudget}): can work under a USD limit run at all? Not when a model
 *    it can call has no known price (its calls would count as $0 and the limit could not bind).
 * 2. The check before a unit of work ({@link budgetOver}, and {@link checkBudget} before every
 *    LLM call): the unit's need (an estimate, or what the last such unit cost) against what is
 *    left of the USD budget, the token budget and the process's USD ceiling.
 * 3. The stop ({@link budgetStopText}, {@link budgetError}): one sentence naming the limit hit
 *    (USD, tokens, the ceiling), whose budget it is and the unit that did not fit.
 *
 * The units are an LLM call and an agent turn (scope `task`), a DAG subtask's attempt (scope
 * `subtask`: it shares its task's budget) and an improvement run's generation (scope
 * `generation`: the run's budget). One rule for all: a unit is refused when nothing is left of
 * a limit, or when its need is more than what is left.
 */
import type { Budget, Usage } from "../contracts/common.js";
import { LoopsmithError } from "../runtime/errors.js";
import type { CostEstimate, SpendMeter } from "./cost.js";
import { refuseUnpriced, type UnpricedModel } from "./prices.js";

/**
 * Whose budget a unit spends: `task` (an LLM call or an agent turn of a task), `subtask` (an
 * attempt of a DAG subtask, under its task's budget), `generation` (a generation of an
 * improvement run, under the run's budget).
 */
export type BudgetScope = "task" | "subtask" | "generation";

/** The limit a unit would pass: the USD budget, the token budget, or the process's USD ceiling. */
export type BudgetLimit = "usd" | "tokens" | "ceiling";

/** The unit of work being checked; its scope follows from it ({@link scopeOf}). */
export type BudgetUnit =
  { kind: "call" } | { kind: "turn" } | { kind: "subtask"; id: string } | { kind: "generation"; generation: number };

/**
 * What a unit could spend, and how that was found: `estimate` (the worst-case pre-call estimate,
 * `estimateCost`), `last` (what the last agent turn cost), `dearest` (the dearest generation so
 * far), `none` (nothing known yet: the unit is refused only when nothing is left).
 */
export interface BudgetNeed {
  /** USD the unit could cost (0 when unknown). */
  usd: number;
  /** Tokens the unit could use, cached ones included (0 when unknown). */
  tokens: number;
  basis: "estimate" | "last" | "dearest" | "none";
}

/** A unit of which nothing is known yet: it fits while something is left. */
export const NO_NEED: BudgetNeed = { usd: 0, tokens: 0, basis: "none" };

/** What is left to spend. */
export interface BudgetRoom {
  /** What is left of the budget (USD, tokens); an `undefined` field is unlimited. */
  budget?: Budget | undefined;
  /** The budget's whole size in USD, when known (an improvement run's `budgetUsd`): named in the text. */
  totalUsd?: number | undefined;
  /** The process's USD ceiling (`config.llm.processCeilingUsd`) and what the process has spent, USD. */
  ceiling?: { usd: number; spentUsd: number } | undefined;
}

/** A unit that does not fit: the limit it hit, with the figures (USD for `usd`/`ceiling`, tokens for `tokens`). */
export interface BudgetOver {
  scope: BudgetScope;
  limit: BudgetLimit;
  unit: BudgetUnit;
  /** What the unit could spend against this limit (USD or tokens); 0 when unknown. */
  need: number;
  /** What is left of the limit (USD or tokens); 0 or less when it is used up. */
  left: number;
  basis: BudgetNeed["basis"];
  /** The limit's whole size, USD, when known (always for the ceiling). */
  totalUsd?: number | undefined;
}

/** The scope a unit spends in. */
export function scopeOf(unit: BudgetUnit): BudgetScope {
  if (unit.kind === "subtask") return "subtask";
  if (unit.kind === "generation") return "generation";
  return "task";
}

/** The rule: nothing left, or a need larger than what is left. */
function passes(left: number, need: number): boolean {
  return left <= 0 || need > left;
}

/**
 * The check before a unit of work: the first limit it would pass, in the order USD budget,
 * token budget, process ceiling; `undefined` when it fits every limit.
 */
export function budgetOver(unit: BudgetUnit, need: BudgetNeed, room: BudgetRoom): BudgetOver | undefined {
  const scope = scopeOf(unit);
  const over = (limit: BudgetLimit, left: number, n: number, totalUsd?: number): BudgetOver => ({
    scope,
    limit,
    unit,
    need: n,
    left,
    basis: need.basis,
    ...(totalUsd !== undefined ? { totalUsd } : {}),
  });
  const { budget, ceiling } = room;
  if (budget?.remainingUsd !== undefined && passes(budget.remainingUsd, need.usd))
    return over("usd", budget.remainingUsd, need.usd, room.totalUsd);
  if (budget?.remainingTokens !== undefined && passes(budget.remainingTokens, need.tokens))
    return over("tokens", budget.remainingTokens, need.tokens);
  if (ceiling && passes(ceiling.usd - ceiling.spentUsd, need.usd))
    return over("ceiling", ceiling.usd - ceiling.spentUsd, need.usd, ceiling.usd);
  return undefined;
}

const dollars = (n: number): string => `$${n.toFixed(4)}`;

/** Whose budget a scope spends, as the texts name it. */
const OWNER: Record<BudgetScope, string> = {
  task: "the task's",
  subtask: "the task's",
  generation: "the improvement run's",
};

/** The limit, named: `the task's USD budget`, `the improvement run's USD budget of $5.0000`, `this process's USD ceiling of …`. */
function limitName(o: BudgetOver): string {
  const of = o.totalUsd !== undefined ? ` of ${dollars(o.totalUsd)}` : "";
  if (o.limit === "ceiling") return `this process's USD ceiling${of} (llm.processCeilingUsd)`;
  return `${OWNER[o.scope]} ${o.limit === "usd" ? "USD" : "token"} budget${o.limit === "usd" ? of : ""}`;
}

function unitName(u: BudgetUnit): string {
  switch (u.kind) {
    case "call":
      return "the next LLM call";
    case "turn":
      return "the next model turn";
    case "subtask":
      return `subtask ${u.id}`;
    case "generation":
      return `generation ${u.generation}`;
  }
}

const BASIS: Record<BudgetNeed["basis"], string> = {
  estimate: "estimated before it is made",
  last: "as much as the last turn",
  dearest: "as much as the dearest generation so far",
  none: "",
};

/**
 * The one text of a budget stop: the limit and whose it is, whether it is used up or would be
 * passed, what is left, and the unit with its need, e.g. `the task's USD budget would be passed
 * ($0.0050 left): the next model turn could cost up to $0.0100 (as much as the last turn)` or
 * `the task's token budget is used up (0 tokens left): subtask api cannot start`.
 */
export function budgetStopText(o: BudgetOver): string {
  const tokens = o.limit === "tokens";
  const amount = (n: number): string => (tokens ? `${Math.max(0, n)} tokens` : dollars(Math.max(0, n)));
  const state = o.left <= 0 ? "is used up" : "would be passed";
  const need =
    o.need > 0 && o.basis !== "none"
      ? `could ${tokens ? "use" : "cost"} up to ${amount(o.need)} (${BASIS[o.basis]})`
      : "cannot start";
  return `${limitName(o)} ${state} (${amount(o.left)} left): ${unitName(o.unit)} ${need}`;
}

/**
 * The error of a budget stop: `budget_exceeded` with {@link budgetStopText} as its message.
 * @param details more figures for `details` (they go beside `scope`, `limit`, `need`, `left`)
 */
export function budgetError(o: BudgetOver, details: Record<string, unknown> = {}): LoopsmithError {
  const { scope, limit, need, left } = o;
  return new LoopsmithError("budget_exceeded", budgetStopText(o), {
    details: { ...details, scope, limit, need, left },
  });
}

/** What the check before an LLM call compares against. */
export interface BudgetCheck {
  estimate: CostEstimate;
  /** The task's remaining budget when the step started; `undefined` fields are unlimited. */
  budget?: Budget | undefined;
  /** What this `complete()` has already spent (the first attempt, before a re-ask). */
  spent: Pick<Usage, "costUsd" | "inputTokens" | "outputTokens" | "cacheReadTokens" | "cacheWriteTokens">;
  /** `config.llm.processCeilingUsd`, USD. */
  ceilingUsd?: number | undefined;
  meter: SpendMeter;
  /** The call: a structured `complete()` call, or an agent turn. @defaultValue `{kind: "call"}` */
  unit?: Extract<BudgetUnit, { kind: "call" | "turn" }> | undefined;
}

/**
 * The check before every LLM call ({@link budgetOver} with the call's estimate): refuses a call
 * that could pass the task's budget less what this `complete()` already spent, or the process
 * ceiling. Tokens counted are input + output + cache tokens.
 * @throws LoopsmithError `budget_exceeded` ({@link budgetStopText}) with
 *   `details: {estimate, budget, spent, ceilingUsd, processSpentUsd, scope, limit, need, left}`
 */
export function checkBudget(check: BudgetCheck): void {
  const { estimate, budget, spent, ceilingUsd, meter } = check;
  const spentTokens = spent.inputTokens + spent.outputTokens + spent.cacheReadTokens + spent.cacheWriteTokens;
  const left: Budget = {
    ...(budget?.remainingUsd !== undefined ? { remainingUsd: budget.remainingUsd - spent.costUsd } : {}),
    ...(budget?.remainingTokens !== undefined ? { remainingTokens: budget.remainingTokens - spentTokens } : {}),
  };
  const over = budgetOver(
    check.unit ?? { kind: "call" },
    { usd: estimate.usd, tokens: estimate.tokens, basis: "estimate" },
    { budget: left, ...(ceilingUsd !== undefined ? { ceiling: { usd: ceilingUsd, spentUsd: meter.spentUsd } } : {}) },
  );
  if (over) throw budgetError(over, { estimate, budget, spent, ceilingUsd, processSpentUsd: meter.spentUsd });
}

/** The USD limits that make work need a price for every model it can call. */
export interface AdmissionLimits {
  /** True when the work has a USD budget (`--budget-usd`: a task's `limits.maxCostUsd`, a run's `settings.budgetUsd`). */
  usd: boolean;
  /** True when the process has a USD ceiling (`llm.processCeilingUsd`). */
  ceiling?: boolean | undefined;
}

/**
 * Admission: work under a USD limit may not start when a model it can call has no known price
 * (its calls would count as $0, so the limit could not bind). `scope` names whose budget:
 * `task` (a task's, or a subtask's) or `generation` (an improvement run's).
 * @param unpriced the models without a known price that the work can call (`unpricedModels`)
 * @throws LoopsmithError `config_invalid` (not retryable) naming each model, its roles, the
 *   `llm.prices` key to set and the limit (`the task's USD budget (--budget-usd)`,
 *   `the improvement run's USD budget (--budget-usd)`, `this process's USD ceiling (llm.processCeilingUsd)`)
 */
export function admitBudget(unpriced: readonly UnpricedModel[], scope: BudgetScope, limits: AdmissionLimits): void {
  if (limits.usd) refuseUnpriced(unpriced, `${OWNER[scope]} USD budget (--budget-usd)`);
  if (limits.ceiling) refuseUnpriced(unpriced, "this process's USD ceiling (llm.processCeilingUsd)");
}
