/** Building blocks shared by every contract. */
import { z } from "zod";
import { OWNER_PATTERN } from "../bus/subjects.js";
import { ErrorData, LoopsmithError } from "../runtime/errors.js";
import { LANGUAGES } from "./values.js";

/** Every payload carries its contract version so a rolling upgrade can tell old from new. */
export const V1 = z.literal(1);

/** Languages the sandbox can run. */
export const Language = z.enum(LANGUAGES);
export type Language = z.infer<typeof Language>;

/** Task ids: safe in NATS subjects and KV keys (letters, digits, `-`, `_`), 1–64 chars. */
export const TaskId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "task ids are 1-64 letters, digits, '-' or '_'");
export type TaskId = z.infer<typeof TaskId>;

/** The client a task belongs to (a subject token; see `OWNER_PATTERN` in `subjects.ts`). */
export const Owner = z.string().regex(OWNER_PATTERN, "owners are 1-64 letters, digits, '-' or '_'");
export type Owner = z.infer<typeof Owner>;

/**
 * A workspace-relative file path: no absolute paths, no `..` segments, no backslashes,
 * at most 255 bytes. The executor checks again on disk (symlinks).
 */
export const RelativePath = z
  .string()
  .min(1)
  .max(255)
  .refine((p) => !p.startsWith("/") && !p.includes("\\") && !p.includes("\0"), {
    message: "paths must be relative, without backslashes or NUL",
  })
  .refine((p) => p.split("/").every((seg) => seg !== ".." && seg !== "" && seg !== "."), {
    message: "paths may not contain '..', '.' or empty segments",
  });

/** One file of a workspace or a candidate: a relative path and its whole UTF-8 content. */
export const FileChange = z.object({
  path: RelativePath,
  content: z.string(),
});
export type FileChange = z.infer<typeof FileChange>;

/** A step's name inside an idempotency key: lower-case letters and `_` (`execute`, `score`). */
export const STEP_NAME_PATTERN = /^[a-z][a-z_]*$/;

/**
 * Idempotency key of a step request: `taskId/iteration/step`, or `taskId/iteration/step.attempt`
 * for a deliberate new attempt of the same step (a sandbox run retried after an
 * infrastructure failure must run again, not be answered from the first attempt's result).
 * A handler that sees the same key twice must not do the work twice. Built only by
 * {@link idempotencyKey}; this schema is the same rule, so whatever one side builds the other
 * side accepts.
 */
export const IdempotencyKey = z
  .string()
  .regex(
    /^[A-Za-z0-9_-]{1,64}\/\d+\/[a-z][a-z_]*(\.[1-9]\d*)?$/,
    "idempotency keys are taskId/iteration/step[.attempt]",
  );
export type IdempotencyKey = z.infer<typeof IdempotencyKey>;

/**
 * Builds the idempotency key of a step request (the one definition both sides use).
 * @param taskId - a {@link TaskId}
 * @param iteration - the task's iteration, a whole number ≥ 0
 * @param step - the step's name ({@link STEP_NAME_PATTERN})
 * @param attempt - 0 for the first attempt; n ≥ 1 appends `.n` (a new attempt runs again)
 * @throws LoopsmithError `bad_request` when a part cannot form a valid key
 */
export function idempotencyKey(taskId: string, iteration: number, step: string, attempt = 0): IdempotencyKey {
  const key = `${taskId}/${iteration}/${step}${attempt > 0 ? `.${attempt}` : ""}`;
  const ok =
    Number.isInteger(attempt) && attempt >= 0 && STEP_NAME_PATTERN.test(step) && IdempotencyKey.safeParse(key).success;
  if (!ok)
    throw new LoopsmithError(
      "bad_request",
      `cannot form an idempotency key from task ${JSON.stringify(taskId)}, iteration ${iteration}, step ${JSON.stringify(step)}, attempt ${attempt}`,
    );
  return key;
}

/** Token usage and cost of one or more LLM calls. Tokens are counts; cost in USD; latency in ms. */
export const Usage = z.object({
  calls: z.number().int().nonnegative(),
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  cacheReadTokens: z.number().int().nonnegative(),
  cacheWriteTokens: z.number().int().nonnegative(),
  costUsd: z.number().nonnegative(),
  latencyMs: z.number().nonnegative(),
});
export type Usage = z.infer<typeof Usage>;

/** A zero {@link Usage}. */
export function emptyUsage(): Usage {
  return {
    calls: 0,
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    costUsd: 0,
    latencyMs: 0,
  };
}

/** Sum of two {@link Usage} values (a new object). */
export function addUsage(a: Usage, b: Usage): Usage {
  return {
    calls: a.calls + b.calls,
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
    cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
    costUsd: a.costUsd + b.costUsd,
    latencyMs: a.latencyMs + b.latencyMs,
  };
}

/**
 * What is left of a task's budget when a step starts; the step's provider refuses a call
 * that would pass it (before making it). `undefined` fields are unlimited.
 */
export const Budget = z.object({
  remainingUsd: z.number().optional(),
  remainingTokens: z.number().int().optional(),
});
export type Budget = z.infer<typeof Budget>;

/** A reply on the bus: a value, or typed error data. */
export function Reply<T extends z.ZodType>(value: T) {
  return z.discriminatedUnion("ok", [
    z.object({ ok: z.literal(true), value }),
    z.object({ ok: z.literal(false), error: ErrorData }),
  ]);
}
export type Reply<T> = { ok: true; value: T } | { ok: false; error: ErrorData };

/** Fields every step request carries. */
export const StepHeader = {
  v: V1,
  taskId: TaskId,
  iteration: z.number().int().nonnegative(),
  idempotencyKey: IdempotencyKey,
};
