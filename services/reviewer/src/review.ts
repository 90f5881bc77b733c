/**
 * The review step (docs/PROTOCOL.md, "3. The loop": REVIEW): asks the LLM whether a candidate
 * meets the task and the plan, and whether it is safe to run.
 */
import type { Logger } from "pino";
import { createIdempotencyCache } from "@loopsmith/shared/bus";
import { loadPrompt, renderFile, renderTask, section, type LlmProvider, type Prompt } from "@loopsmith/shared/llm";
import {
  renderInstructions,
  Review,
  type Finding,
  type Plan,
  type ReviewReply,
  type ReviewRequest,
} from "@loopsmith/shared/contracts";

/** Dependencies and options of {@link createReviewer}. */
export interface ReviewerDeps {
  provider: LlmProvider;
  log: Logger;
  /** The review prompt. @defaultValue `loadPrompt("review")` */
  prompt?: Prompt;
  /**
   * How many replies are kept by idempotency key, so a retried request (same
   * `taskId/iteration/step`) is answered without a second model call. @defaultValue 128
   */
  cacheSize?: number;
}

/** The reviewer: one method per LLM step it serves. */
export interface Reviewer {
  /**
   * Reviews a candidate against its task and plan.
   * A second request with the same idempotency key gets the first one's reply (or waits for
   * it while it is in flight); a failed call is not kept, so a retry calls the model again.
   * @returns the model's validated `{approved, score, findings}`, the usage of the call
   *   (tokens, USD, ms) and the provider that answered
   * @throws LoopsmithError from the provider, unchanged (`llm_auth`, `llm_rate_limited`,
   *   `llm_overloaded`, `timeout`, `llm_bad_reply`, `budget_exceeded`, `unavailable`)
   */
  review(request: ReviewRequest): Promise<ReviewReply>;
}

/** The plan as the reviewer's prompt shows it. */
export function renderPlan(plan: Plan): string {
  const list = (items: string[], numbered: boolean): string =>
    items.map((item, i) => `${numbered ? `${i + 1}.` : "-"} ${item}`).join("\n");
  return section(
    "Plan",
    [
      plan.summary,
      plan.acceptanceCriteria.length ? `Acceptance criteria:\n${list(plan.acceptanceCriteria, false)}` : "",
      plan.steps.length ? `Steps:\n${list(plan.steps, true)}` : "",
      plan.files.length ? `Files to write: ${plan.files.join(", ")}` : "",
    ]
      .filter(Boolean)
      .join("\n\n"),
  );
}

/** The gate's evaluation-tampering concerns as the review prompt shows them: one line each, with file and line. */
export function renderConcerns(concerns: readonly Finding[] | undefined): string {
  if (!concerns?.length) return "";
  const lines = concerns.map(
    (f) => `- ${f.path ?? "?"}${f.line ? `:${f.line}` : ""} (${f.rule ?? "tampering"}): ${f.message}`,
  );
  return section(
    "Gate concerns",
    `The static gate saw possible evaluation tampering it could not judge. Decide for each whether it is tampering (then do not approve, and give a blocker finding) or the program's legitimate business:\n${lines.join("\n")}`,
  );
}

/**
 * The user message of a review: the task (never hidden tests: `TaskBrief` has none), the
 * repository's project instructions in repo mode (`renderInstructions`), the plan, the
 * candidate's files, its generated tests, the builder's notes, and the gate's
 * evaluation-tampering concerns when it had any. Each file is trimmed to about 4,000 tokens
 * by `renderFile`.
 */
export function renderReviewMessage(request: ReviewRequest): string {
  const { candidate } = request;
  return [
    renderTask(request.task),
    renderInstructions(request.task.repo?.instructions),
    renderPlan(request.plan),
    section("Candidate files", candidate.files.map((f) => renderFile(f)).join("\n")),
    section("Generated tests", candidate.tests.map((f) => renderFile(f)).join("\n")),
    section("Builder's notes", candidate.notes),
    renderConcerns(request.concerns),
    "Review this candidate against the task and the plan. Reply with the structured output only.",
  ]
    .filter(Boolean)
    .join("\n");
}

/**
 * Creates the reviewer.
 * @throws LoopsmithError `internal` when the review prompt file is missing or malformed
 *   (only when `deps.prompt` is not given).
 */
export function createReviewer(deps: ReviewerDeps): Reviewer {
  const prompt = deps.prompt ?? loadPrompt("review");
  const cacheSize = deps.cacheSize ?? 128;
  const replies = createIdempotencyCache<ReviewReply>({ maxEntries: cacheSize });

  const run = async (request: ReviewRequest): Promise<ReviewReply> => {
    const log = deps.log.child({ taskId: request.taskId, iteration: request.iteration, phase: "review" });
    const { value, usage, provider } = await deps.provider.complete({
      role: "review",
      system: prompt.system,
      messages: [{ role: "user", content: renderReviewMessage(request) }],
      schema: Review,
      schemaName: "review",
      context: {
        taskId: request.taskId,
        iteration: request.iteration,
        ...(request.callsBefore !== undefined ? { callsBefore: request.callsBefore } : {}),
        ...(request.script ? { script: request.script } : {}),
      },
      budget: request.budget,
    });
    log.info(
      { approved: value.approved, score: value.score, findings: value.findings.length, costUsd: usage.costUsd },
      "candidate reviewed",
    );
    return { value, usage, provider: provider ?? deps.provider.info };
  };

  return { review: (request) => replies.run(request.idempotencyKey, () => run(request)) };
}
