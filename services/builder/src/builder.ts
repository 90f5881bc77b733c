/**
 * The builder: asks the model for a candidate (whole files, plus tests when the task has
 * none) from the task, the plan, the previous failure with its reflection, and recalled hints.
 */
import type { Logger } from "pino";
import {
  Candidate,
  EditReply,
  renderInstructions,
  type BuildReply,
  type BuildRequest,
} from "@loopsmith/shared/contracts";
import { createIdempotencyCache } from "@loopsmith/shared/bus";
import {
  renderLessons,
  loadPrompt,
  renderFailure,
  renderFile,
  renderHints,
  renderHistory,
  renderTask,
  section,
  type ChatMessage,
  type LlmProvider,
} from "@loopsmith/shared/llm";

/** The builder's one operation. */
export interface Builder {
  /**
   * Produces a candidate for one iteration.
   * @throws LoopsmithError from the provider (`llm_bad_reply`, `budget_exceeded`, `llm_auth`, …).
   */
  build(request: BuildRequest): Promise<BuildReply>;
}

/**
 * The messages of a build prompt: a stable, cached prefix (task, the repository's project
 * instructions in repo mode, hints, recalled lessons), then this iteration.
 */
export function buildMessages(req: BuildRequest): ChatMessage[] {
  const stable = [
    renderTask(req.task),
    renderInstructions(req.task.repo?.instructions),
    renderHints(req.recall),
    renderLessons(req.recall),
  ]
    .filter(Boolean)
    .join("\n");
  const plan = section(
    "Plan",
    [
      req.plan.summary,
      req.plan.acceptanceCriteria.length
        ? `Acceptance criteria:\n${req.plan.acceptanceCriteria.map((c) => `- ${c}`).join("\n")}`
        : "",
      req.plan.steps.length ? `Steps:\n${req.plan.steps.map((s, i) => `${i + 1}. ${s}`).join("\n")}` : "",
      req.plan.files.length ? `Files to write: ${req.plan.files.join(", ")}` : "",
    ]
      .filter(Boolean)
      .join("\n\n"),
  );
  const parts = [plan, renderHistory(req.history)];
  if (req.previous && req.task.repo) {
    const edits = req.previous.candidate.edits ?? [];
    parts.push(
      section(
        "Your previous edits",
        edits.length ? "```json\n" + JSON.stringify(edits, null, 1).slice(0, 16_000) + "\n```" : "",
      ),
    );
    parts.push(
      section(
        "Files your change touched so far",
        [
          ...req.previous.candidate.files.map((f) => f.path),
          ...(req.previous.candidate.deleted ?? []).map((p) => `${p} (deleted)`),
        ].join("\n"),
      ),
    );
  } else if (req.previous) {
    parts.push(section("Your previous candidate", req.previous.candidate.files.map((f) => renderFile(f)).join("\n")));
    parts.push(renderFailure(req.previous.failure));
    if (req.previous.reflection) {
      const r = req.previous.reflection;
      parts.push(
        section(
          "Reflection on the failure",
          `Root cause: ${r.rootCause}\nHypothesis: ${r.hypothesis}\nFix plan: ${r.fixPlan}`,
        ),
      );
    }
  }
  if (req.task.repo) {
    parts.push(`Iteration ${req.iteration}. Reply with the summary and the search/replace edits as structured output.`);
  } else {
    const tests = req.task.acceptanceTests.length
      ? "The visible acceptance tests are fixed; return only the files to write."
      : "The task has no visible tests: also return tests that check the acceptance criteria.";
    parts.push(`Iteration ${req.iteration}. ${tests} Reply with the candidate as structured output.`);
  }
  return [
    { role: "user", content: stable, cache: true },
    { role: "user", content: parts.filter(Boolean).join("\n") },
  ];
}

/** Creates a builder over a provider. */
export function createBuilder(deps: { provider: LlmProvider; log: Logger }): Builder {
  const prompt = loadPrompt("build");
  const repoPrompt = loadPrompt("build", "repo");
  // A retried request (same idempotency key, e.g. after a bus timeout) joins the model call
  // in flight instead of paying for a second one.
  const calls = createIdempotencyCache<BuildReply>();
  return {
    build: (req) => calls.run(req.idempotencyKey, () => build(req)),
  };

  /** Repo mode: search/replace edits (applied by the conductor, which knows the tree). */
  async function buildEdits(req: BuildRequest): Promise<BuildReply> {
    const { value, usage, provider } = await deps.provider.complete({
      role: "build",
      system: repoPrompt.system,
      messages: buildMessages(req),
      schema: EditReply,
      schemaName: "edits",
      context: {
        taskId: req.taskId,
        iteration: req.iteration,
        ...(req.callsBefore !== undefined ? { callsBefore: req.callsBefore } : {}),
        ...(req.script ? { script: req.script } : {}),
      },
      budget: req.budget,
    });
    const candidate: Candidate = {
      files: [],
      tests: [],
      notes: value.notes,
      edits: value.edits,
      summary: value.summary,
    };
    return { value: candidate, usage, provider: provider ?? deps.provider.info };
  }

  async function build(req: BuildRequest): Promise<BuildReply> {
    if (req.task.repo) return buildEdits(req);
    const { value, usage, provider } = await deps.provider.complete({
      role: "build",
      system: prompt.system,
      messages: buildMessages(req),
      schema: Candidate,
      schemaName: "candidate",
      context: {
        taskId: req.taskId,
        iteration: req.iteration,
        ...(req.callsBefore !== undefined ? { callsBefore: req.callsBefore } : {}),
        ...(req.script ? { script: req.script } : {}),
      },
      budget: req.budget,
    });
    // The visible acceptance tests are fixed: a candidate may not replace them.
    const fixed = new Set(req.task.acceptanceTests.map((f) => f.path));
    const files = value.files.filter((f) => !fixed.has(f.path));
    const tests = req.task.acceptanceTests.length ? [] : value.tests.filter((f) => !fixed.has(f.path));
    if (files.length !== value.files.length) {
      deps.log.warn(
        { taskId: req.taskId, iteration: req.iteration },
        "the candidate tried to replace acceptance tests; ignored",
      );
    }
    const candidate: Candidate = { files: files.length ? files : value.files, tests, notes: value.notes };
    return { value: candidate, usage, provider: provider ?? deps.provider.info };
  }
}
