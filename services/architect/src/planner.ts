/** Planning and reflection: the architect's own LLM roles. */
import type { Logger } from "pino";
import type { z } from "zod";
import {
  Plan,
  Reflection,
  loadPrompt,
  renderFailure,
  renderFile,
  renderHints,
  renderTask,
  section,
  type ChatMessage,
  type LlmProvider,
  type PlanReply,
  type PlanRequest,
  type ProviderInfo,
  type ReflectReply,
  type ReflectRequest,
  type Usage,
} from "@loopsmith/shared";

/** The architect's LLM steps. Both throw the provider's `LoopsmithError`s. */
export interface Planner {
  /** A plan for the task; a task with no visible tests is first turned into a spec (role `spec`). */
  plan(req: PlanRequest): Promise<PlanReply>;
  /** Root cause, hypothesis and fix plan for a failed iteration (role `reflect`). */
  reflect(req: ReflectRequest): Promise<ReflectReply>;
}

/** Creates the planner over a provider. */
export function createPlanner(deps: { provider: LlmProvider; log: Logger }): Planner {
  const prompts = { plan: loadPrompt("plan"), spec: loadPrompt("spec"), reflect: loadPrompt("reflect") };
  const repoPlan = loadPrompt("plan", "repo");

  /** One structured call: the task and recalled hints as the cached prefix, then `parts`. */
  async function ask<T>(
    role: "plan" | "spec" | "reflect",
    schema: z.ZodType<T>,
    schemaName: string,
    req: PlanRequest | ReflectRequest,
    parts: string[],
  ): Promise<{ value: T; usage: Usage; provider: ProviderInfo }> {
    const messages: ChatMessage[] = [
      { role: "user", content: [renderTask(req.task), renderHints(req.recall)].filter(Boolean).join("\n"), cache: true },
      { role: "user", content: parts.filter(Boolean).join("\n") },
    ];
    const { value, usage, provider } = await deps.provider.complete({
      role,
      system: role === "plan" && req.task.repo ? repoPlan.system : prompts[role].system,
      messages,
      schema,
      schemaName,
      context: { taskId: req.taskId, iteration: req.iteration, ...(req.callsBefore !== undefined ? { callsBefore: req.callsBefore } : {}), ...(req.script ? { script: req.script } : {}) },
      budget: req.budget,
    });
    return { value, usage, provider: provider ?? deps.provider.info };
  }

  return {
    plan: (req) =>
      ask(req.task.acceptanceTests.length || req.task.repo ? "plan" : "spec", Plan, "plan", req, [
        ...req.previousFailures.map((f) => renderFailure(f, 400)),
        req.previousFailures.length ? "The earlier plan kept failing the same way: plan a different approach." : "",
        "Reply with the plan as structured output.",
      ]),
    reflect: (req) =>
      ask("reflect", Reflection, "reflection", req, [
        section("Plan", req.plan.summary),
        section(req.task.repo ? "Files the candidate changed (in full)" : "Candidate", req.candidate.files.map((f) => renderFile(f)).join("\n")),
        req.candidate.deleted?.length ? section("Files the candidate deleted", req.candidate.deleted.join("\n")) : "",
        req.candidate.tests.length ? section("Generated tests", req.candidate.tests.map((f) => renderFile(f)).join("\n")) : "",
        renderFailure(req.failure),
        "Reply with the reflection as structured output.",
      ]),
  };
}
