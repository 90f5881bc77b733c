/**
 * The routing provider: one chain of providers per role, the role's primary
 * then its fallbacks. A call goes to the first; a retryable failure that its SDK has
 * already retried (`llm_overloaded`, `llm_rate_limited`, `timeout`, `unavailable`) moves it
 * to the next. Nothing else does: `llm_auth`, `bad_request`, `config_invalid`,
 * `llm_refused`, `llm_bad_reply` and `budget_exceeded` end the call where they happen.
 *
 * Each provider in a chain checks the budget with its own price before its own HTTP call,
 * so the budget is reserved against the model that is actually called, minus what the
 * models before it in this call already spent.
 */
import type { Logger } from "pino";
import { addUsage, emptyUsage, Usage, type Budget } from "../contracts/common.js";
import type { ProviderInfo } from "../contracts/steps.js";
import { LoopsmithError, type ErrorCode } from "../runtime/errors.js";
import {
  ROLES,
  type AnsweredBy,
  type Completion,
  type CompletionRequest,
  type ConverseReply,
  type ConverseRequest,
  type FallbackNote,
  type LlmProvider,
  type Role,
} from "./types.js";

/** Codes after which the next model of the chain is tried. */
export const FALLBACK_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "llm_overloaded",
  "llm_rate_limited",
  "timeout",
  "unavailable",
]);

/** Dependencies of {@link createRoutingProvider}. */
export interface RouterDeps {
  /** What `info` says: the default model (`llm.provider`/`llm.model`). */
  info: ProviderInfo;
  /** Per role, the providers to try in order (at least one each). */
  chains: Record<Role, LlmProvider[]>;
  log: Logger;
  /**
   * After a provider failed with a fallback code, how long later calls try it only after
   * the rest of the chain, in ms (`config.llm.fallbackCooldownMs`); 0 never reorders.
   */
  cooldownMs: number;
  /** The clock, in ms. @defaultValue Date.now */
  now?: () => number;
}

function asError(err: unknown): LoopsmithError {
  if (err instanceof LoopsmithError) return err;
  return new LoopsmithError("internal", `the LLM call failed unexpectedly: ${(err as Error)?.message ?? String(err)}`, {
    cause: err,
  });
}

/** The usage an error says was already paid (`details.usage`), else zero. */
function paidBy(err: LoopsmithError): Usage {
  const parsed = Usage.safeParse((err.details as { usage?: unknown } | undefined)?.usage);
  return parsed.success ? parsed.data : emptyUsage();
}

function remaining(budget: Budget | undefined, spent: Usage): Budget | undefined {
  if (!budget || spent.calls === 0) return budget;
  const tokens = spent.inputTokens + spent.outputTokens + spent.cacheReadTokens + spent.cacheWriteTokens;
  return {
    ...(budget.remainingUsd !== undefined ? { remainingUsd: budget.remainingUsd - spent.costUsd } : {}),
    ...(budget.remainingTokens !== undefined ? { remainingTokens: budget.remainingTokens - tokens } : {}),
  };
}

const label = (info: ProviderInfo): string => `${info.name}:${info.model}`;

/**
 * The chain walk both `complete` and `converse` share: `route(role, taskId, budget, call)`
 * sends `call(p, budget)` to each provider of the role's chain in order (cooling ones last)
 * until one answers, with the budget less what the models before it spent.
 */
function chainRouter(deps: RouterDeps) {
  const now = deps.now ?? Date.now;
  const cooling = new Map<LlmProvider, { until: number; note: FallbackNote }>();
  return async function route<R extends { usage: Usage; provider?: AnsweredBy }>(
    role: Role,
    taskId: string,
    budget: Budget | undefined,
    call: (p: LlmProvider, budget: Budget | undefined) => Promise<R>,
  ): Promise<R> {
    const chain = deps.chains[role];
    const t = now();
    const isUp = (p: LlmProvider): boolean => (cooling.get(p)?.until ?? 0) <= t;
    const order = [...chain.filter(isUp), ...chain.filter((p) => !isUp(p))];
    const first = chain[0] as LlmProvider;
    const skipped = isUp(first) ? undefined : cooling.get(first)?.note;
    let spent = emptyUsage();
    const attempts: FallbackNote[] = [];
    const notes = new Map<LlmProvider, FallbackNote>();
    for (const [i, p] of order.entries()) {
      try {
        const done = await call(p, remaining(budget, spent));
        cooling.delete(p);
        const answered = done.provider ?? p.info;
        const usage = addUsage(spent, done.usage);
        if (p === first) return { ...done, usage, provider: answered };
        const from =
          notes.get(first) ??
          (skipped && { ...skipped, message: `skipped while cooling down after: ${skipped.message}` });
        if (!from) return { ...done, usage, provider: answered };
        return { ...done, usage, provider: { ...answered, fallbackFrom: from } };
      } catch (err) {
        const e = asError(err);
        spent = addUsage(spent, paidBy(e));
        const note: FallbackNote = { name: p.info.name, model: p.info.model, code: e.code, message: e.message };
        attempts.push(note);
        notes.set(p, note);
        const next = order[i + 1];
        if (!FALLBACK_CODES.has(e.code) || !next) {
          if (attempts.length === 1) throw e;
          const earlier = attempts.slice(0, -1).map((a) => `${a.name}:${a.model} failed first (${a.code})`);
          const details = typeof e.details === "object" && e.details !== null ? e.details : {};
          throw new LoopsmithError(e.code, [e.message, ...earlier].join("; "), {
            retryable: e.retryable,
            cause: e,
            details: { ...details, usage: spent, attempts },
          });
        }
        if (deps.cooldownMs > 0) cooling.set(p, { until: now() + deps.cooldownMs, note });
        deps.log.warn(
          { taskId, llmRole: role, from: label(p.info), to: label(next.info), code: e.code },
          `${role}: ${label(p.info)} failed (${e.code}); falling back to ${label(next.info)}`,
        );
      }
    }
    // Unreachable: every chain has at least one provider, and the last one returns or throws.
    throw new LoopsmithError("internal", `no model is configured for the role ${role}`);
  };
}

/**
 * Builds a provider that dispatches each `complete()` and `converse()` on `request.role`.
 *
 * The completion's `provider` names the model that answered; when that is not the first
 * of the chain, `provider.fallbackFrom` names the first (its error code and sentence), and
 * the switch is logged at `warn`. `usage` sums every call of every model tried, each at its
 * own price. While a provider cools down ({@link RouterDeps.cooldownMs}) it is tried after
 * the others, so a storm of 529s costs its retries once, not on every call.
 * @throws LoopsmithError the last model's error when no model answered, its message
 *   naming the earlier failures, with `details.usage` (everything paid) and
 *   `details.attempts` (`FallbackNote[]`, in order); errors without a fallback code at once
 */
export function createRoutingProvider(deps: RouterDeps): LlmProvider {
  const route = chainRouter(deps);

  function complete<T>(request: CompletionRequest<T>): Promise<Completion<T>> {
    return route(request.role, request.context.taskId, request.budget, (p, budget) =>
      p.complete({ ...request, ...(budget ? { budget } : {}) }),
    );
  }

  /** Agent mode, routed as {@link complete}: a provider without `converse` fails with `bad_request`. */
  function converse(request: ConverseRequest): Promise<ConverseReply> {
    return route(request.role, request.context.taskId, request.budget, (p, budget) => {
      if (!p.converse) {
        throw new LoopsmithError("bad_request", `the ${p.info.name} provider has no agent mode (tool calling)`);
      }
      return p.converse({ ...request, ...(budget ? { budget } : {}) });
    });
  }

  const all = [...new Set(ROLES.flatMap((r) => deps.chains[r]))];
  const checked = all.filter((p) => p.verify);
  /**
   * Every distinct model's check, at once. A rejected credential anywhere fails; an
   * unreachable model fails only when no model of some role's chain passed.
   */
  async function verify(): Promise<void> {
    const failed = new Map<LlmProvider, LoopsmithError>();
    await Promise.all(
      checked.map(async (p) => {
        try {
          await p.verify?.();
        } catch (err) {
          failed.set(p, asError(err));
        }
      }),
    );
    const auth = [...failed.values()].find((e) => e.code === "llm_auth");
    if (auth) throw auth;
    for (const role of ROLES) {
      const chain = deps.chains[role];
      if (chain.every((p) => failed.has(p))) throw failed.get(chain[0] as LlmProvider) as LoopsmithError;
    }
    for (const [p, e] of failed)
      deps.log.warn(
        { model: label(p.info), code: e.code },
        `pre-flight check of ${label(p.info)} failed: ${e.message}`,
      );
  }
  return checked.length ? { info: deps.info, complete, converse, verify } : { info: deps.info, complete, converse };
}
