/**
 * The flow every provider shares: budget check before each HTTP
 * call, the call, the structured read, validation, ONE re-ask with the validation errors,
 * usage and cost per call, the transcript line. A provider only supplies a
 * {@link Backend}: how to send a conversation and how to append a re-ask to it.
 */
import type { Logger } from "pino";
import { z } from "zod";
import { addUsage, emptyUsage, type Usage } from "../contracts/common.js";
import type { ProviderInfo } from "../contracts/steps.js";
import type { ModelPrice } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
import { admitBudget, checkBudget, type BudgetCheck } from "./budget.js";
import {
  costOf,
  estimateCost,
  type CostEstimate,
  type EstimateInput,
  type SpendMeter,
  type TokenCounts,
} from "./cost.js";
import type { Pricing, UnpricedModel } from "./prices.js";
import { formatIssues, readStructured, validateValue, type BadReplyDetails, type ReadResult } from "./parse.js";
import type { TranscriptWriter } from "./transcript.js";
import type { AgentMessage, ToolCall } from "../contracts/agent.js";
import type {
  ChatMessage,
  Completion,
  CompletionRequest,
  ConverseReply,
  ConverseRequest,
  LlmProvider,
} from "./types.js";

/** What one HTTP call (or one scripted entry) returned. */
export interface TurnReply {
  /** `json`: a forced tool call's input or a scripted JSON value; `text`: raw text to read tolerantly. */
  content: { kind: "json"; value: unknown } | { kind: "text"; text: string; wrapped?: boolean };
  tokens: TokenCounts;
  /** True when the reply stopped at the output limit (`max_tokens` / `length`). */
  truncated: boolean;
}

/** One `complete()` in progress: a conversation that can be sent and re-asked. */
export interface Conversation {
  /** The system prompt as sent (provider additions included). */
  readonly system: string;
  /** Characters sent besides system and messages (a tool's JSON schema), for the estimate. */
  readonly extraChars: number;
  /** The messages as they would be sent now, provider-neutral. */
  messages(): ChatMessage[];
  /**
   * Makes one call.
   * @throws LoopsmithError mapped from the SDK (`llm_auth`, `llm_rate_limited`,
   *   `llm_overloaded`, `timeout`, `unavailable`, `bad_request`, `llm_refused`, …)
   */
  send(): Promise<TurnReply>;
  /** Appends the reply and the feedback so the next {@link send} is the re-ask. */
  reask(reply: TurnReply, feedback: string): void;
}

/** What one agent-mode call (or one scripted turn) returned. */
export interface ToolTurn {
  content: string;
  toolCalls: ToolCall[];
  tokens: TokenCounts;
  /** True when the reply stopped at the output limit. */
  truncated: boolean;
}

/** A provider's own part. */
export interface Backend {
  readonly info: ProviderInfo;
  /**
   * The model's flat price, USD per million tokens (`Pricing.rates`): the estimate's rates,
   * and the cost of a call when the engine is given no {@link EngineDeps.pricing}.
   */
  readonly price: ModelPrice;
  open<T>(request: CompletionRequest<T>): Conversation;
  /**
   * Makes one agent-mode call (see {@link LlmProvider.converse}); absent where the backend
   * has no agent mode.
   * @throws LoopsmithError mapped from the SDK, as {@link Conversation.send}
   */
  converse?(request: ConverseRequest): Promise<ToolTurn>;
  /** See {@link LlmProvider.verify}. */
  verify?: () => Promise<void>;
}

/** What the shared flow needs. */
export interface EngineDeps {
  log: Logger;
  meter: SpendMeter;
  transcript: TranscriptWriter;
  /** `config.llm.maxOutputTokens`, for the estimate. */
  maxOutputTokens: number;
  /** `config.llm.processCeilingUsd`. */
  processCeilingUsd?: number | undefined;
  /**
   * The model's price as resolved (`lookupPricing`): each call's cost and the estimate's cost
   * come from it (with the source's tiers). @defaultValue flat costs at `backend.price`
   */
  pricing?: Pricing | undefined;
  /**
   * Set when the model has no known price: a call under a USD limit (the request's
   * `budget.remainingUsd`, or {@link processCeilingUsd}) is refused before it is made.
   */
  unpriced?: UnpricedModel | undefined;
}

/** The pre-call estimate (`estimated: true`) of one call, at the engine's pricing. */
function estimateFor(
  price: ModelPrice,
  deps: EngineDeps,
  prompt: Pick<EstimateInput, "system" | "messages" | "extraChars">,
): CostEstimate {
  return estimateCost(price, { ...prompt, maxOutputTokens: deps.maxOutputTokens }, deps.pricing);
}

/** USD of one call's counted tokens, at the engine's pricing. */
function callCost(price: ModelPrice, deps: EngineDeps, tokens: TokenCounts): number {
  return deps.pricing ? deps.pricing.costOf(tokens) : costOf(price, tokens);
}

/**
 * Before a call, nothing sent yet: the admission of an unpriced model under a USD limit
 * (`admitBudget`), then the budget check of the estimate (`checkBudget`).
 * @throws LoopsmithError `config_invalid` naming the model and the `prices` key to set;
 *   `budget_exceeded` naming the limit the call would pass
 */
function admitCall(deps: EngineDeps, check: Pick<BudgetCheck, "estimate" | "budget" | "spent" | "unit">): void {
  if (deps.unpriced) {
    admitBudget([deps.unpriced], "task", {
      usd: check.budget?.remainingUsd !== undefined,
      ceiling: deps.processCeilingUsd !== undefined,
    });
  }
  checkBudget({ ...check, ceilingUsd: deps.processCeilingUsd, meter: deps.meter });
}

/** The sentence that ends every re-ask. */
export const REASK_INSTRUCTION =
  "Reply with only valid JSON that matches the required schema: no prose, no code fences.";

/** The re-ask text: what was wrong, the validation errors, and the instruction. */
export function reaskFeedback(error: LoopsmithError, truncated: boolean, maxOutputTokens: number): string {
  const details = error.details as BadReplyDetails | undefined;
  const parts = [`Your previous reply could not be used: ${error.message}.`];
  if (details?.issues.length) parts.push(`Validation errors:\n${formatIssues(details.issues)}`);
  if (truncated) {
    parts.push(`It was cut off at the output limit of ${maxOutputTokens} tokens; give a shorter, complete reply.`);
  }
  parts.push(REASK_INSTRUCTION);
  return parts.join("\n\n");
}

/** A copy of `err` whose details also carry the usage spent so far (so no cost is lost). */
function withUsage(err: LoopsmithError, usage: Usage): LoopsmithError {
  if (usage.calls === 0) return err;
  const base = typeof err.details === "object" && err.details !== null ? err.details : { detail: err.details };
  return new LoopsmithError(err.code, err.message, {
    retryable: err.retryable,
    cause: err,
    details: { ...base, usage },
  });
}

function asLoopsmithError(err: unknown): LoopsmithError {
  if (err instanceof LoopsmithError) return err;
  return new LoopsmithError("internal", `the LLM call failed unexpectedly: ${(err as Error)?.message ?? String(err)}`, {
    cause: err,
  });
}

function readReply<T>(reply: TurnReply, request: CompletionRequest<T>): ReadResult<T> {
  if (reply.content.kind === "json") return validateValue(reply.content.value, request.schema);
  if (!reply.content.wrapped) return readStructured(reply.content.text, request.schema);
  // The provider was sent a `{value: …}` wrapper schema; accept the wrapper or the bare value.
  const either = z.union([z.object({ value: request.schema }).transform((o) => o.value), request.schema]);
  return readStructured(reply.content.text, either as z.ZodType<T>);
}

/**
 * An agent conversation as provider-neutral `{role, content}` lines, for the budget estimate
 * and the transcript: an assistant's tool calls follow its text as JSON, a tool result is
 * `[<tool> <id>] <content>` (`[<tool> <id> error]` when it failed).
 */
export function agentChatLines(messages: readonly AgentMessage[]): Array<{ role: string; content: string }> {
  return messages.map((m) => {
    if (m.role === "user") return { role: "user", content: m.content };
    if (m.role === "tool") {
      return { role: "tool", content: `[${m.name} ${m.toolCallId}${m.isError ? " error" : ""}] ${m.content}` };
    }
    const calls = m.toolCalls.map((c) => JSON.stringify({ id: c.id, name: c.name, args: c.args }));
    return { role: "assistant", content: [m.content, ...calls].filter(Boolean).join("\n") };
  });
}

function replyText(reply: TurnReply): string {
  return reply.content.kind === "json" ? (JSON.stringify(reply.content.value) ?? "") : reply.content.text;
}

/**
 * The engine's `converse` over a backend: one agent-mode call. The estimate (system,
 * messages, note, the tools' JSON) is checked against the budget and the process ceiling,
 * then the call is made, priced at this model's price and written to the transcript. No
 * re-ask: a bad tool call goes back to the agent loop.
 * @throws LoopsmithError `bad_request` when the backend has no agent mode,
 *   `budget_exceeded` before the call, the backend's codes from it
 */
function agentCaller(backend: Backend, deps: EngineDeps): (request: ConverseRequest) => Promise<ConverseReply> {
  const { info, price } = backend;
  return async function converse(request: ConverseRequest): Promise<ConverseReply> {
    const log = deps.log.child({
      taskId: request.context.taskId,
      iteration: request.context.iteration,
      llmRole: request.role,
    });
    if (!backend.converse) {
      throw new LoopsmithError("bad_request", `the ${info.name} provider has no agent mode (tool calling)`);
    }
    const lines = agentChatLines(request.messages);
    if (request.note) lines.push({ role: "user", content: request.note });
    const extraChars = JSON.stringify(request.tools).length;
    const estimate = estimateFor(price, deps, { system: request.system, messages: lines, extraChars });
    try {
      admitCall(deps, { estimate, budget: request.budget, spent: emptyUsage(), unit: { kind: "turn" } });
    } catch (err) {
      log.warn({ code: (err as LoopsmithError).code, estimate }, (err as Error).message);
      throw asLoopsmithError(err);
    }
    const line = {
      provider: info.name,
      model: info.model,
      role: request.role,
      taskId: request.context.taskId,
      iteration: request.context.iteration,
      attempt: 1,
      system: request.system,
      messages: lines,
    };
    const started = performance.now();
    let turn: ToolTurn;
    try {
      turn = await backend.converse(request);
    } catch (err) {
      const e = asLoopsmithError(err);
      log.warn({ code: e.code, err }, `LLM call failed: ${e.message}`);
      await deps.transcript({
        ...line,
        at: new Date().toISOString(),
        reply: null,
        usage: emptyUsage(),
        error: e.toData(),
      });
      throw e;
    }
    const usage: Usage = {
      calls: 1,
      ...turn.tokens,
      costUsd: callCost(price, deps, turn.tokens),
      latencyMs: Math.round(performance.now() - started),
    };
    deps.meter.add(usage.costUsd);
    const said = agentChatLines([{ role: "assistant", content: turn.content, toolCalls: turn.toolCalls }])[0];
    await deps.transcript({ ...line, at: new Date().toISOString(), reply: said?.content ?? "", usage });
    return {
      content: turn.content,
      toolCalls: turn.toolCalls,
      usage,
      provider: info,
      ...(turn.truncated ? { truncated: true } : {}),
    };
  };
}

/**
 * Wraps a {@link Backend} into an {@link LlmProvider}.
 *
 * `complete()` makes at most two calls (the second is the re-ask). Before each, the
 * worst-case estimate ({@link estimateCost}) is checked against `request.budget` minus
 * what this `complete()` already spent, and against the process ceiling; a model without a
 * known price ({@link EngineDeps.unpriced}) is refused under either USD limit.
 * @throws LoopsmithError `budget_exceeded` or (an unpriced model under a USD limit)
 *   `config_invalid` before a call; the backend's codes from a call; `llm_bad_reply` after the re-ask (details: `{raw, issues, truncated, usage}`).
 *   Any error thrown after a successful call carries `details.usage`, the usage so far.
 */
export function createEngineProvider(backend: Backend, deps: EngineDeps): LlmProvider {
  const { info, price } = backend;
  async function complete<T>(request: CompletionRequest<T>): Promise<Completion<T>> {
    const log = deps.log.child({
      taskId: request.context.taskId,
      iteration: request.context.iteration,
      llmRole: request.role,
    });
    const conv = backend.open(request);
    let usage = emptyUsage();
    for (let attempt = 1; ; attempt++) {
      const messages = conv.messages();
      const estimate = estimateFor(price, deps, { system: conv.system, messages, extraChars: conv.extraChars });
      try {
        admitCall(deps, { estimate, budget: request.budget, spent: usage });
      } catch (err) {
        log.warn({ code: (err as LoopsmithError).code, estimate }, (err as Error).message);
        throw withUsage(asLoopsmithError(err), usage);
      }
      const line = {
        provider: info.name,
        model: info.model,
        role: request.role,
        taskId: request.context.taskId,
        iteration: request.context.iteration,
        attempt,
        system: conv.system,
        messages: messages.map((m) => ({ role: m.role, content: m.content })),
      };
      const started = performance.now();
      let reply: TurnReply;
      try {
        reply = await conv.send();
      } catch (err) {
        const e = asLoopsmithError(err);
        log.warn({ code: e.code, attempt, err }, `LLM call failed: ${e.message}`);
        await deps.transcript({
          ...line,
          at: new Date().toISOString(),
          reply: null,
          usage: emptyUsage(),
          error: e.toData(),
        });
        throw withUsage(e, usage);
      }
      const call: Usage = {
        calls: 1,
        ...reply.tokens,
        costUsd: callCost(price, deps, reply.tokens),
        latencyMs: Math.round(performance.now() - started),
      };
      deps.meter.add(call.costUsd);
      usage = addUsage(usage, call);
      await deps.transcript({ ...line, at: new Date().toISOString(), reply: replyText(reply), usage: call });
      const read = readReply(reply, request);
      if (read.ok) return { value: read.value, usage, provider: info };
      const details = read.error.details as BadReplyDetails;
      log.warn(
        { attempt, issues: details.issues.slice(0, 5), truncated: reply.truncated },
        `bad LLM reply: ${read.error.message}`,
      );
      if (attempt >= 2) {
        throw new LoopsmithError(
          "llm_bad_reply",
          `the model's reply was still unusable after one re-ask (${read.error.message}${reply.truncated ? ", cut off at the output limit" : ""})`,
          { details: { ...details, truncated: reply.truncated, usage } },
        );
      }
      conv.reask(reply, reaskFeedback(read.error, reply.truncated, deps.maxOutputTokens));
    }
  }
  const converse = agentCaller(backend, deps);
  return backend.verify ? { info, complete, converse, verify: backend.verify } : { info, complete, converse };
}
