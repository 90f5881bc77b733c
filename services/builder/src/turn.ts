/**
 * Agent mode's model turn (`loopsmith.builder.turn`): the architect's tool loop
 * sends the conversation so far, the builder renders the system prompt (`prompts/agent.v1.md`)
 * and the opening message, asks the model through {@link LlmProvider.converse} with the
 * agent tools, and answers with the model's next message (text and tool calls). The loop,
 * the tools and the stuck and step rules live in the architect; the builder keeps no state
 * between turns.
 *
 * Prompt caching: the system prompt, the tools and the opening message are the same on every
 * turn of a loop (the opening holds the task, the repo map, the hints and the previous
 * iteration, nothing that changes within it); the steps left travel as the request's `note`,
 * after the last cache breakpoint.
 */
import type { Logger } from "pino";
import { createIdempotencyCache } from "@loopsmith/shared/bus";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import {
  renderInstructions,
  type AgentMessage,
  type AgentTurnReply,
  type AgentTurnRequest,
  type ToolCall,
} from "@loopsmith/shared/contracts";
import {
  renderLessons,
  agentToolSpecs,
  loadPrompt,
  renderHints,
  renderTask,
  section,
  type ConverseRequest,
  type LlmProvider,
} from "@loopsmith/shared/llm";

/** Tool calls a reply carries at most (`AgentTurnReply.toolCalls`). */
export const MAX_TOOL_CALLS_PER_TURN = 20;

/** Agent mode's one operation. */
export interface TurnTaker {
  /**
   * The model's next message for one turn of the agent loop.
   * @throws LoopsmithError from the provider (`budget_exceeded` before the call,
   *   `llm_auth`, `llm_rate_limited`, `llm_refused`, …), `bad_request` when the provider has
   *   no agent mode (the simulated provider, a test double without `converse`)
   */
  turn(request: AgentTurnRequest): Promise<AgentTurnReply>;
}

/**
 * The opening user message: the task (goal, test command, failing tests at base, the repo
 * map and any picked files, via `renderTask`), the repository's project instructions
 * (`renderInstructions`: `AGENTS.md` or `CONVENTIONS.md`), the recalled hints
 * (`renderHints`), the previous iteration's failing verdict and reflection when set, and what to do. It depends
 * only on fields that do not change within a loop, so it stays in the cached prefix.
 */
export function openingMessage(req: AgentTurnRequest): string {
  return [
    renderTask(req.task),
    renderInstructions(req.task.repo?.instructions),
    renderHints(req.recall),
    renderLessons(req.recall),
    req.previous ? section(`The previous attempt (iteration ${req.iteration - 1}) failed`, req.previous) : "",
    "Explore the repository with the tools, reproduce the failure, make the change with `edit`, " +
      "check it with `run`, then call `submit` with a one-line summary.",
  ]
    .filter(Boolean)
    .join("\n");
}

/** The per-turn note after the conversation: the steps left in the step budget. */
export function stepsNote(stepsLeft: number): string {
  if (stepsLeft <= 0) return "Steps left: 0. Submit now.";
  return stepsLeft === 1
    ? "Steps left: 1. This is your last step: submit now unless one check is essential."
    : `Steps left: ${stepsLeft}.`;
}

/** The converse request of one turn: the agent prompt, the tools, the opening then `messages`. */
export function turnRequest(req: AgentTurnRequest, system: string): ConverseRequest {
  const messages: AgentMessage[] = [{ role: "user", content: openingMessage(req) }, ...req.messages];
  return {
    role: "agent",
    system,
    messages,
    tools: agentToolSpecs(),
    note: stepsNote(req.stepsLeft),
    context: {
      taskId: req.taskId,
      iteration: req.iteration,
      ...(req.callsBefore !== undefined ? { callsBefore: req.callsBefore } : {}),
      ...(req.script ? { script: req.script } : {}),
    },
    budget: req.budget,
  };
}

/** Calls as the reply contract allows them: at most 20, names and ids cut to its lengths. */
function fitCalls(calls: ToolCall[]): ToolCall[] {
  return calls.slice(0, MAX_TOOL_CALLS_PER_TURN).map((c, i) => ({
    id: (c.id || `call_${i}`).slice(0, 200),
    name: (c.name || "(none)").slice(0, 100),
    args: c.args,
  }));
}

/** Creates agent mode's turn taker over a provider; retried requests join the call in flight. */
export function createTurnTaker(deps: { provider: LlmProvider; log: Logger }): TurnTaker {
  const prompt = loadPrompt("agent");
  const calls = createIdempotencyCache<AgentTurnReply>();
  return { turn: (req) => calls.run(req.idempotencyKey, () => turn(req)) };

  async function turn(req: AgentTurnRequest): Promise<AgentTurnReply> {
    const { provider } = deps;
    if (!provider.converse) {
      throw new LoopsmithError("bad_request", `the ${provider.info.name} provider has no agent mode (tool calling)`);
    }
    const reply = await provider.converse(turnRequest(req, prompt.system));
    if (reply.toolCalls.length > MAX_TOOL_CALLS_PER_TURN) {
      deps.log.warn(
        { taskId: req.taskId, iteration: req.iteration, calls: reply.toolCalls.length },
        `the model made ${reply.toolCalls.length} tool calls in one turn; the first ${MAX_TOOL_CALLS_PER_TURN} are kept`,
      );
    }
    return {
      content: reply.content,
      toolCalls: fitCalls(reply.toolCalls),
      usage: reply.usage,
      provider: reply.provider ?? provider.info,
    };
  }
}
