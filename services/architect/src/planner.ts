/** Planning and reflection: the architect's own LLM roles. */
import type { Logger } from "pino";
import type { z } from "zod";
import {
  DagPlan,
  IntegrationReflection,
  Plan,
  Reflection,
  renderInstructions,
  type DagPlanProblem,
  type PlanReply,
  type PlanRequest,
  type ProviderInfo,
  type ReflectReply,
  type ReflectRequest,
  type Usage,
} from "@loopsmith/shared/contracts";
import {
  LESSON_SCHEMA_NAME,
  LESSON_SYSTEM,
  LessonReply,
  renderLessonAsk,
  renderLessons,
  type LessonAsk,
  loadPrompt,
  renderFailure,
  renderFile,
  renderHints,
  renderTask,
  section,
  type ChatMessage,
  type LlmProvider,
} from "@loopsmith/shared/llm";

/** The architect's LLM steps. Both throw the provider's `LoopsmithError`s. */
export interface Planner {
  /** A plan for the task; a task with no visible tests is first turned into a spec (role `spec`). */
  plan(req: PlanRequest): Promise<PlanReply>;
  /** Root cause, hypothesis and fix plan for a failed iteration (role `reflect`). */
  reflect(req: ReflectRequest): Promise<ReflectReply>;
  /**
   * A DAG task's plan of subtasks (role `plan`, the `dag` prompt). `problems` are those
   * validation found in the plan refused before (empty on the first ask).
   */
  decompose(req: PlanRequest, problems: readonly DagPlanProblem[]): Promise<LlmValue<DagPlan>>;
  /** After the task's tests failed on the merged tree: the one subtask to re-open (role `reflect`, the `dag` prompt). */
  reflectIntegration(req: IntegrationReflectRequest): Promise<LlmValue<IntegrationReflection>>;
  /**
   * A task that passed after failing: one lesson per distinct signature of its failures (role
   * `reflect`, the lesson prompt `LESSON_SYSTEM`, schema `lessons`). A reply that is not a
   * {@link LessonReply} after the engine's re-ask throws `llm_bad_reply`.
   */
  distil?(req: LessonRequest): Promise<LlmValue<LessonReply>>;
}

/** What the lesson call is shown: the task (and recalled hints), then its failures, the last reflection and what passed. */
export interface LessonRequest extends Omit<ReflectRequest, "plan" | "candidate" | "failure"> {
  ask: LessonAsk;
}

/** A structured LLM reply: the validated value, the usage and who answered. */
export interface LlmValue<T> {
  value: T;
  usage: Usage;
  provider: ProviderInfo;
}

/** What the integration reflection is shown: the task, its plan of subtasks, and the failure on the merged tree. */
export interface IntegrationReflectRequest extends Omit<ReflectRequest, "plan" | "candidate"> {
  dag: DagPlan;
  /** Subtasks already re-opened once (they cannot be again). */
  reopened: readonly string[];
}

/** A plan of subtasks as a prompt shows it: id, dependencies, owned files and interfaces. */
function renderDag(plan: DagPlan, reopened: readonly string[]): string {
  return plan.subtasks
    .map((s) =>
      [
        `- ${s.id}${s.dependsOn.length ? ` (after ${s.dependsOn.join(", ")})` : ""}${reopened.includes(s.id) ? " [re-opened once already: cannot be again]" : ""}: ${s.goal}`,
        `  owns: ${[...s.files, ...s.acceptanceTests.map((t) => t.path)].join(", ")}`,
        s.provides.length
          ? `  provides: ${s.provides.map((p) => `${p.name}${p.description ? ` = ${p.description}` : ""}`).join("; ")}`
          : "",
      ]
        .filter(Boolean)
        .join("\n"),
    )
    .join("\n");
}

/** Creates the planner over a provider. */
export function createPlanner(deps: { provider: LlmProvider; log: Logger }): Planner {
  const prompts = { plan: loadPrompt("plan"), spec: loadPrompt("spec"), reflect: loadPrompt("reflect") };
  const repoPlan = loadPrompt("plan", "repo");
  const dag = { plan: loadPrompt("plan", "dag"), reflect: loadPrompt("reflect", "dag") };

  /**
   * One structured call: the task, the project instructions (repo mode) and recalled hints as
   * the cached prefix, then `parts`.
   */
  async function ask<T>(
    role: "plan" | "spec" | "reflect",
    schema: z.ZodType<T>,
    schemaName: string,
    req: PlanRequest | ReflectRequest | IntegrationReflectRequest | LessonRequest,
    parts: string[],
    system?: string,
  ): Promise<LlmValue<T>> {
    const messages: ChatMessage[] = [
      {
        role: "user",
        content: [
          renderTask(req.task),
          renderInstructions(req.task.repo?.instructions),
          renderHints(req.recall),
          renderLessons(req.recall),
        ]
          .filter(Boolean)
          .join("\n"),
        cache: true,
      },
      { role: "user", content: parts.filter(Boolean).join("\n") },
    ];
    const { value, usage, provider } = await deps.provider.complete({
      role,
      system: system ?? (role === "plan" && req.task.repo ? repoPlan.system : prompts[role].system),
      messages,
      schema,
      schemaName,
      context: {
        taskId: req.taskId,
        iteration: req.iteration,
        ...(req.callsBefore !== undefined ? { callsBefore: req.callsBefore } : {}),
        ...(req.script ? { script: req.script } : {}),
      },
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
        section(
          req.task.repo ? "Files the candidate changed (in full)" : "Candidate",
          req.candidate.files.map((f) => renderFile(f)).join("\n"),
        ),
        req.candidate.deleted?.length ? section("Files the candidate deleted", req.candidate.deleted.join("\n")) : "",
        req.candidate.tests.length
          ? section("Generated tests", req.candidate.tests.map((f) => renderFile(f)).join("\n"))
          : "",
        renderFailure(req.failure),
        "Reply with the reflection as structured output.",
      ]),
    decompose: (req, problems) =>
      ask(
        "plan",
        DagPlan,
        "dag_plan",
        req,
        [
          problems.length
            ? section(
                "Problems of the plan you sent before (fix every one)",
                problems.map((p) => `- ${p.message}`).join("\n"),
              )
            : "",
          "Reply with the plan of subtasks as structured output.",
        ],
        dag.plan.system,
      ),
    reflectIntegration: (req) =>
      ask(
        "reflect",
        IntegrationReflection,
        "integration_reflection",
        req,
        [
          section("Subtasks", renderDag(req.dag, req.reopened)),
          renderFailure(req.failure),
          "Reply with the subtask to re-open as structured output.",
        ],
        dag.reflect.system,
      ),
    distil: (req) => ask("reflect", LessonReply, LESSON_SCHEMA_NAME, req, [renderLessonAsk(req.ask)], LESSON_SYSTEM),
  };
}
