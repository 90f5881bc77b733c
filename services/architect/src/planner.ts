/** Planning and reflection: the architect's own LLM roles. */
import type { Logger } from "pino";
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
  type ReflectReply,
  type ReflectRequest,
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
  return {
    async plan(req) {
      const role = req.task.acceptanceTests.length ? "plan" : "spec";
      const messages: ChatMessage[] = [
        { role: "user", content: [renderTask(req.task), renderHints(req.recall)].filter(Boolean).join("\n"), cache: true },
        {
          role: "user",
          content: [
            ...req.previousFailures.map((f) => renderFailure(f, 400)),
            req.previousFailures.length ? "The earlier plan kept failing the same way: plan a different approach." : "",
            "Reply with the plan as structured output.",
          ]
            .filter(Boolean)
            .join("\n"),
        },
      ];
      const { value, usage } = await deps.provider.complete({
        role,
        system: prompts[role].system,
        messages,
        schema: Plan,
        schemaName: "plan",
        context: { taskId: req.taskId, iteration: req.iteration },
        budget: req.budget,
      });
      return { value, usage, provider: deps.provider.info };
    },
    async reflect(req) {
      const messages: ChatMessage[] = [
        { role: "user", content: [renderTask(req.task), renderHints(req.recall)].filter(Boolean).join("\n"), cache: true },
        {
          role: "user",
          content: [
            section("Plan", req.plan.summary),
            section("Candidate", req.candidate.files.map((f) => renderFile(f)).join("\n")),
            req.candidate.tests.length ? section("Generated tests", req.candidate.tests.map((f) => renderFile(f)).join("\n")) : "",
            renderFailure(req.failure),
            "Reply with the reflection as structured output.",
          ]
            .filter(Boolean)
            .join("\n"),
        },
      ];
      const { value, usage } = await deps.provider.complete({
        role: "reflect",
        system: prompts.reflect.system,
        messages,
        schema: Reflection,
        schemaName: "reflection",
        context: { taskId: req.taskId, iteration: req.iteration },
        budget: req.budget,
      });
      return { value, usage, provider: deps.provider.info };
    },
  };
}
