/**
 * EXPLORE, agent mode's phase (docs/PROTOCOL.md, "The agent loop"): the model
 * works on the repository through tools in a bounded loop, one model turn per execution of
 * the phase. Each execution ends with `{ next: "explore", patch: { agent } }`, so every
 * step is a checkpoint and a conductor that dies resumes at the next step (never redoing a
 * finished one). The first execution of an iteration opens the session; `submit`, or the
 * step budget, ends the loop and the candidate goes on to GATE as one-shot's does; the budget
 * and the stuck rule stop the task.
 */
import {
  agentTool,
  argsSummary,
  repoModeOf,
  type AgentMessage,
  type AgentMessagesNote,
  type AgentTurnReply,
  type Candidate,
  type ToolCall,
} from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { NO_NEED, budgetOver, budgetStopText } from "@loopsmith/shared/llm";
import { agentTexts, loopTexts, runTexts } from "../event-texts.js";
import { briefFromError } from "../failure.js";
import { baseTree } from "../repo/workspace.js";
import { budgetLeft, treeBase } from "../requests.js";
import { HandBack } from "../durable/index.js";
import type { PhaseOutcome, TaskRun } from "../run.js";
import type { TaskState } from "../state.js";
import type { AgentLoopState } from "./loop-state.js";
import { OBSERVATION_CUT, cutObservation } from "./observe.js";
import { closeSession } from "./close.js";
import { openSession, type LoopContext } from "./session.js";
import { countStep, type StuckVerdict } from "./stuck.js";
import { runTool, type ToolResult } from "./tools.js";

/** Longest text of the previous iteration's output told to the next loop, in characters. */
const PREVIOUS_OUTPUT_CHARS = 8_000;
/** Files a candidate holds at most (`Candidate.files`). */
const MAX_CANDIDATE_FILES = 50;

/** True for a repo task in agent mode. */
export function isAgentTask(s: TaskState): boolean {
  return s.task.repo !== undefined && repoModeOf(s.task) === "agent";
}

/** The phase that makes an iteration's candidate: `explore` in agent mode, `build` otherwise. */
export function candidatePhase(s: TaskState): "build" | "explore" {
  return isAgentTask(s) ? "explore" : "build";
}

/**
 * Where the loop's tree starts: the previous iteration's candidate, unless the policy, the
 * gate or the review blocked it (a blocked change never becomes the base of the next one);
 * then the latest candidate that ran, or the base commit's tree (`treeBase`).
 */
function startingTree(s: TaskState): { files: Candidate["files"]; deleted: string[] } {
  const from = treeBase(s);
  return { files: from?.files ?? [], deleted: from?.deleted ?? [] };
}

/** The previous iteration as the turn request's `previous`: its failure, the reflection, what the tree holds. */
function previousOf(s: TaskState): string | undefined {
  const f = s.failure;
  if (!f || s.iteration <= 1) return undefined;
  const output = cutObservation(f.output, { ...OBSERVATION_CUT, maxChars: PREVIOUS_OUTPUT_CHARS });
  const base = treeBase(s);
  const changed = [...(base?.files ?? []).map((x) => x.path), ...(base?.deleted ?? []).map((p) => `-${p}`)];
  const tree = f.status === "blocked" ? { blocked: f.output.split("\n")[0] ?? "", kept: changed } : { kept: changed };
  return agentTexts.previous(f.iteration, f.status, f.failingTests, output, s.reflection, tree).slice(0, 40_000);
}

/** Short arguments of a step for its event line: the tool table's `summary` of the tool (`argsSummary` for a name that is no tool). */
function argsLine(call: ToolCall | undefined): string {
  if (!call) return "";
  return (agentTool(call.name)?.summary ?? argsSummary)(call.args);
}

/**
 * The stop, when the next turn would pass the task's budget (`budgetOver`): the last turn's
 * cost is the estimate of the next (the conversation only grows).
 */
function budgetStop(s: TaskState, a: AgentLoopState): string | undefined {
  const t = a.lastTurn;
  const need = t ? { usd: t.costUsd, tokens: t.tokens, basis: "last" as const } : NO_NEED;
  const over = budgetOver({ kind: "turn" }, need, { budget: budgetLeft(s) });
  return over && runTexts.stopped(budgetStopText(over));
}

/** EXPLORE: one step of the loop (see the module comment). */
export async function explorePhase(s: TaskState, run: TaskRun): Promise<PhaseOutcome> {
  const { turn, openSession: canOpen, sessionCall, closeSession: canClose } = run.steps;
  if (!turn || !canOpen || !sessionCall || !canClose)
    return {
      stop: "error",
      message: agentTexts.needsAgentSteps,
      error: new LoopsmithError("internal", "no agent steps (turn, session) in this architect"),
    };
  const root = await baseTree(s, run.steps);
  const a = s.agent?.iteration === s.iteration ? s.agent : undefined;
  if (!a) return startLoop(s, run, root);
  const max = s.task.limits.maxAgentSteps;
  if (a.step >= max) return endLoop(s, run, a, "steps");
  const over = budgetStop(s, a);
  if (over) {
    await closeSession(run.steps, run.io.log, a.session);
    return { stop: "budget", message: over, patch: { agent: { ...a, session: undefined } } };
  }
  const step = a.step + 1;
  const t0 = performance.now();
  let reply: AgentTurnReply;
  try {
    const r = await run.llm(
      "agent",
      "turn",
      async (head) => {
        const value = await turn({
          ...head,
          ...(s.recall ? { recall: s.recall } : {}),
          ...(previousOf(s) ? { previous: previousOf(s) } : {}),
          messages: a.messages,
          stepsLeft: max - a.step,
        });
        return { value, usage: value.usage, provider: value.provider };
      },
      step,
    );
    reply = r.value;
  } catch (err) {
    if (err instanceof HandBack) throw err;
    const outcome = await run.llmFailure(err, "agent");
    await closeSession(run.steps, run.io.log, a.session);
    if (outcome !== "iteration_failed") return { ...outcome, patch: { agent: { ...a, session: undefined } } };
    return {
      next: "remember",
      patch: { agent: undefined, failure: briefFromError(s.iteration, "llm_bad_reply", (err as Error).message) },
    };
  }
  const turnMs = performance.now() - t0;
  const u = reply.usage;
  const tokens = u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  const loop: AgentLoopState = {
    ...a,
    step,
    messages: [...a.messages, { role: "assistant", content: reply.content, toolCalls: reply.toolCalls }],
    lastTurn: { tokens, costUsd: u.costUsd },
  };
  const { stuck, submitted } = await answerCalls({ s, run, root, loop }, reply, step, turnMs, tokens);
  if (stuck?.action === "stop") {
    await closeSession(run.steps, run.io.log, loop.session);
    return {
      stop: "agent_stuck",
      message: agentTexts.stuckStop(stuck.rule, stuck.tool),
      patch: { agent: { ...loop, session: undefined } },
    };
  }
  if (submitted !== undefined) return endLoop(s, run, loop, "submitted", submitted);
  return { next: "explore", patch: { agent: loop } };
}

/**
 * Answers a turn's tool calls in order (a turn without one is nudged), each observation cut
 * and added to the conversation, counted by the stuck rule, and each call's event published
 * with the messages it appended (`data.agentMessages`, an {@link AgentMessagesNote}: the
 * turn's assistant message on its first call, the stuck rule's redirect on its last). Calls
 * after a `submit` are not run; a stuck `stop` ends the turn.
 */
async function answerCalls(
  ctx: LoopContext,
  reply: AgentTurnReply,
  step: number,
  turnMs: number,
  tokens: number,
): Promise<{ stuck?: StuckVerdict & { tool: string }; submitted?: string }> {
  const { s, run, loop } = ctx;
  let stuck: (StuckVerdict & { tool: string }) | undefined;
  let submitted: string | undefined;
  const calls: Array<ToolCall | undefined> = reply.toolCalls.length ? reply.toolCalls : [undefined];
  for (const [i, call] of calls.entries()) {
    const t1 = performance.now();
    let result: ToolResult;
    if (!call) result = { content: agentTexts.nudge, isError: true };
    else if (submitted !== undefined) result = { content: agentTexts.afterSubmit, isError: false };
    else result = await runTool(ctx, call);
    if (result.submitted !== undefined) submitted = result.submitted;
    const seen = cutObservation(result.content);
    const answer: AgentMessage = call
      ? { role: "tool", toolCallId: call.id, name: call.name, content: seen, isError: result.isError }
      : { role: "user", content: seen };
    const appended: AgentMessage[] = [...(i === 0 ? [loop.messages[loop.messages.length - 1] as AgentMessage] : [])];
    appended.push(answer);
    loop.messages = [...loop.messages, answer];
    const tool = call?.name ?? agentTexts.noTool;
    const counted = countStep(
      loop,
      tool,
      call?.args ?? {},
      loop.treeVersion - (call?.name === "edit" && !result.isError ? 1 : 0),
      seen,
      result.isError,
    );
    Object.assign(loop, counted.counters);
    // One verdict a turn: the model has not seen a redirect before its next turn.
    const verdict = stuck ? undefined : counted.verdict;
    if (verdict) stuck = { ...verdict, tool };
    const last = i === calls.length - 1 || stuck?.action === "stop";
    if (last && stuck && stuck.action !== "stop") {
      const redirect: AgentMessage = {
        role: "user",
        content: agentTexts.redirect(stuck.rule, stuck.tool, stuck.count),
      };
      loop.messages = [...loop.messages, redirect];
      appended.push(redirect);
    }
    const note: AgentMessagesNote = {
      iteration: s.iteration,
      step,
      messages: appended,
      tokens: i === 0 ? tokens : 0,
      costUsd: i === 0 ? reply.usage.costUsd : 0,
      durationMs: (i === 0 ? turnMs : 0) + (performance.now() - t1),
      ...(verdict ? { stuck: { rule: verdict.rule, action: verdict.action } } : {}),
    };
    await run.emit("step", agentTexts.step(step, tool, argsLine(call), seen, result.isError), {
      phase: "explore",
      data: { agentMessages: note },
    });
    run.io.heartbeat();
    if (last) break;
  }
  return { ...(stuck ? { stuck } : {}), ...(submitted !== undefined ? { submitted } : {}) };
}

/** The first execution of an iteration's loop: the iteration's events, the loop's state, the session. */
async function startLoop(s: TaskState, run: TaskRun, root: string): Promise<PhaseOutcome> {
  await run.emit("iteration", loopTexts.iteration(s.iteration, s.task.limits.maxIterations));
  await run.emit("phase", agentTexts.exploring(s.task.limits.maxAgentSteps), { phase: "explore" });
  const loop: AgentLoopState = {
    iteration: s.iteration,
    step: 0,
    messages: [],
    ...startingTree(s),
    edits: [],
    treeVersion: 0,
    calls: {},
    outputs: {},
    redirected: false,
  };
  await openSession({ s, run, root, loop }, "session_open", 0);
  return { next: "explore", patch: { agent: loop } };
}

/**
 * The loop's end (submitted, or the step budget ran out): the session closed, and the
 * candidate on to GATE; a loop that changed nothing is a failed iteration.
 */
async function endLoop(
  s: TaskState,
  run: TaskRun,
  loop: AgentLoopState,
  why: "submitted" | "steps",
  summary?: string,
): Promise<PhaseOutcome> {
  await closeSession(run.steps, run.io.log, loop.session);
  // A loop without an accepted edit changed nothing of its own (the previous candidate, when it kept one, already failed).
  const changed = loop.edits.length > 0;
  if (why === "steps")
    await run.emit("warning", agentTexts.stepsRanOut(s.task.limits.maxAgentSteps, changed), { phase: "explore" });
  if (!changed || loop.files.length > MAX_CANDIDATE_FILES) {
    const message = changed
      ? `the change touches ${loop.files.length} files; a candidate holds at most ${MAX_CANDIDATE_FILES}`
      : agentTexts.noChange(why === "submitted" ? "it submitted without an edit" : "the step budget ran out");
    await run.emit("step", message, { phase: "explore" });
    return {
      next: "remember",
      patch: { agent: undefined, failure: briefFromError(s.iteration, "no_change", message) },
    };
  }
  const candidate: Candidate = {
    files: loop.files,
    deleted: loop.deleted,
    tests: [],
    notes: summary ?? "",
    summary: (summary ?? agentTexts.stepsRanOut(s.task.limits.maxAgentSteps, true)).slice(0, 500),
    edits: loop.edits.slice(-50),
  };
  await run.emit(
    "step",
    loopTexts.repoCandidate(
      candidate.summary,
      candidate.files.map((f) => f.path),
      candidate.deleted ?? [],
    ),
    { phase: "explore", data: { stop: why, steps: loop.step } },
  );
  return { next: "gate", patch: { candidate, agent: undefined } };
}
