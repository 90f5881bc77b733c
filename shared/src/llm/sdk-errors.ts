/**
 * SDK errors to {@link LoopsmithError} codes, by SDK error class and HTTP status (never by
 * message text). The SDKs have already retried what they retry (408, 409, 429, 5xx,
 * connection errors and timeouts, `config.llm.maxRetries` times) when these run.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { LoopsmithError } from "../runtime/errors.js";

/** What an error message needs to name. */
export interface ErrorContext {
  /** Provider name for messages: "Anthropic", "Amazon Bedrock", "the OpenAI-compatible server at …". */
  provider: string;
  model: string;
  /** Where the credential comes from, named in `llm_auth` messages (e.g. "the API key (ANTHROPIC_API_KEY)"). */
  credential: string;
  /** `config.llm.maxRetries`, named in messages about retried failures. */
  maxRetries: number;
  /** `config.llm.timeoutMs`. */
  timeoutMs: number;
  /** Where the model is set, named in 404 messages. @defaultValue "LOOPSMITH_MODEL" */
  modelSetting?: string | undefined;
  /** Where the timeout is set, named in timeout messages. @defaultValue "LOOPSMITH_LLM_TIMEOUT_MS" */
  timeoutSetting?: string | undefined;
}

const said = (apiMessage: string | null | undefined): string => (apiMessage ? `: ${apiMessage}` : "");

/**
 * The code and one sentence for an HTTP error status.
 * 401/402/403 → `llm_auth`; 429 → `llm_rate_limited`; 529 or an `overloaded_error` body →
 * `llm_overloaded`; 408/504 → `timeout`; 404 → `config_invalid` (unknown model or URL);
 * other 4xx → `bad_request`; other 5xx → `unavailable`.
 */
export function errorForStatus(
  status: number,
  ctx: ErrorContext,
  opts: { apiMessage?: string | null; overloaded?: boolean; cause?: unknown } = {},
): LoopsmithError {
  const cause = opts.cause;
  const tries = `after ${ctx.maxRetries} ${ctx.maxRetries === 1 ? "retry" : "retries"}`;
  if (status === 401) {
    return new LoopsmithError(
      "llm_auth",
      `${ctx.provider} rejected ${ctx.credential} (401)${said(opts.apiMessage)}; check that it is set and valid`,
      { cause },
    );
  }
  if (status === 403) {
    return new LoopsmithError(
      "llm_auth",
      `${ctx.provider} refused ${ctx.credential} permission to use model ${ctx.model} (403)${said(opts.apiMessage)}`,
      { cause },
    );
  }
  if (status === 402) {
    return new LoopsmithError(
      "llm_auth",
      `${ctx.provider} refused the request for billing reasons (402)${said(opts.apiMessage)}`,
      {
        cause,
      },
    );
  }
  if (status === 529 || opts.overloaded) {
    return new LoopsmithError("llm_overloaded", `${ctx.provider} is overloaded (${status}) ${tries}; try again later`, {
      cause,
    });
  }
  if (status === 429) {
    return new LoopsmithError(
      "llm_rate_limited",
      `${ctx.provider} is rate-limiting this key (429) ${tries}; try again later`,
      {
        cause,
      },
    );
  }
  if (status === 408 || status === 504) {
    return new LoopsmithError("timeout", `${ctx.provider} timed out (${status}) ${tries}`, { cause });
  }
  if (status === 404) {
    return new LoopsmithError(
      "config_invalid",
      `${ctx.provider} does not know model ${ctx.model} or the URL (404)${said(opts.apiMessage)}; check ${ctx.modelSetting ?? "LOOPSMITH_MODEL"} and the base URL`,
      { cause },
    );
  }
  if (status >= 400 && status < 500) {
    return new LoopsmithError(
      "bad_request",
      `${ctx.provider} rejected the request (${status})${said(opts.apiMessage)}`,
      { cause },
    );
  }
  return new LoopsmithError("unavailable", `${ctx.provider} failed with a server error (${status}) ${tries}`, {
    cause,
  });
}

function timeoutError(ctx: ErrorContext, cause: unknown): LoopsmithError {
  return new LoopsmithError(
    "timeout",
    `${ctx.provider} did not answer within ${ctx.timeoutMs} ms (${ctx.maxRetries} retries); raise ${ctx.timeoutSetting ?? "LOOPSMITH_LLM_TIMEOUT_MS"} if replies are slow`,
    { cause },
  );
}

function connectionError(ctx: ErrorContext, cause: unknown): LoopsmithError {
  // The Bedrock SDK resolves AWS credentials inside its request and reports a failure as a
  // connection error whose cause is the chain's CredentialsProviderError: none were found.
  if ((cause as { cause?: { name?: unknown } } | undefined)?.cause?.name === "CredentialsProviderError") {
    return new LoopsmithError(
      "llm_auth",
      `no credentials found for ${ctx.provider}: set ${ctx.credential} in the environment or in an AWS profile`,
      { cause },
    );
  }
  return new LoopsmithError(
    "unavailable",
    `cannot reach ${ctx.provider} (connection failed after ${ctx.maxRetries} retries)`,
    {
      cause,
    },
  );
}

/** Maps an error thrown by `@anthropic-ai/sdk` (or the Bedrock SDK, which shares its classes). */
export function mapAnthropicError(err: unknown, ctx: ErrorContext): LoopsmithError {
  if (err instanceof LoopsmithError) return err;
  if (err instanceof Anthropic.APIConnectionTimeoutError) return timeoutError(ctx, err);
  if (err instanceof Anthropic.APIUserAbortError)
    return new LoopsmithError("cancelled", "the LLM call was cancelled", { cause: err });
  if (err instanceof Anthropic.APIConnectionError) return connectionError(ctx, err);
  if (err instanceof Anthropic.APIError && typeof err.status === "number") {
    return errorForStatus(err.status, ctx, {
      apiMessage: err.apiMessage,
      overloaded: err.type === "overloaded_error",
      cause: err,
    });
  }
  return new LoopsmithError("internal", `${ctx.provider} call failed: ${(err as Error)?.message ?? String(err)}`, {
    cause: err,
  });
}

/** Maps an error thrown by the `openai` SDK. */
export function mapOpenAIError(err: unknown, ctx: ErrorContext): LoopsmithError {
  if (err instanceof LoopsmithError) return err;
  if (err instanceof OpenAI.APIConnectionTimeoutError) return timeoutError(ctx, err);
  if (err instanceof OpenAI.APIUserAbortError)
    return new LoopsmithError("cancelled", "the LLM call was cancelled", { cause: err });
  if (err instanceof OpenAI.APIConnectionError) return connectionError(ctx, err);
  if (err instanceof OpenAI.APIError && typeof err.status === "number") {
    const body = err.error as { message?: unknown } | undefined;
    const apiMessage = typeof body?.message === "string" ? body.message : null;
    return errorForStatus(err.status, ctx, { apiMessage, overloaded: err.type === "overloaded_error", cause: err });
  }
  return new LoopsmithError("internal", `${ctx.provider} call failed: ${(err as Error)?.message ?? String(err)}`, {
    cause: err,
  });
}
