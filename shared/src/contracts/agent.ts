/**
 * Agent mode for repo tasks: the model explores the repository through tools in
 * a bounded loop before it submits. Three groups of messages:
 *
 * - **Tool calls**, as the model makes them ({@link ToolCall}) and their arguments per tool.
 * - **A model turn** (architect → builder, `loopsmith.builder.turn`): the conversation so far
 *   goes in, the model's next message (text and tool calls) comes out ({@link AgentTurnRequest},
 *   {@link AgentTurnReply}).
 * - **A session** (architect → executor): one sandbox container kept for a task attempt, with
 *   the candidate tree beside it. `loopsmith.executor.session_open` goes to any executor (queue
 *   group) and names the replica that holds it; `session_call` and `session_close` go to that
 *   replica's own subject (`<subject>.<executorId>`). A replica that died answers nothing
 *   (`no_responders`): the architect opens the session again elsewhere and writes the
 *   candidate's files into it.
 *
 * The tools themselves (arguments, descriptions, where each runs) are the table in
 * `agent-tools.ts`. See docs/PROTOCOL.md, "The agent loop".
 */
import { z } from "zod";
import { Budget, FileChange, Language, Owner, RelativePath, StepHeader, Usage } from "./common.js";
import { CommitId, SandboxImage } from "./repo.js";
import { ProviderInfo, TaskBrief } from "./steps.js";
import { Recall } from "./memory.js";
import { TaskScript } from "./script.js";
import { RunLimits } from "./execution.js";
import { AGENT_TOOLS, ListArgs, ReadArgs, RunArgs, SearchArgs, type AgentToolName } from "./agent-tools.js";

export { EditArgs, ListArgs, ReadArgs, RunArgs, SearchArgs, SubmitArgs, SymbolArgs } from "./agent-tools.js";

/** The tools of agent mode: the keys of the tool table ({@link AGENT_TOOLS}), in its order. */
export const ToolName = z.enum(Object.keys(AGENT_TOOLS) as [AgentToolName, ...AgentToolName[]]);
export type ToolName = z.infer<typeof ToolName>;

/** Each tool's arguments schema, by name (the table's `args`). */
export const ToolArgs = Object.fromEntries(Object.entries(AGENT_TOOLS).map(([name, t]) => [name, t.args])) as {
  [N in AgentToolName]: (typeof AGENT_TOOLS)[N]["args"];
};

/**
 * One tool call as the model made it. `args` is validated against {@link ToolArgs} by the
 * loop, which answers bad arguments with an error observation (never a crash).
 */
export const ToolCall = z.object({
  /** The provider's call id (Anthropic `tool_use.id`, OpenAI `tool_calls[].id`), or `call_<n>`. */
  id: z.string().min(1).max(200),
  name: z.string().min(1).max(100),
  args: z.record(z.string(), z.unknown()).default({}),
});
export type ToolCall = z.infer<typeof ToolCall>;

/** One message of an agent conversation. */
export const AgentMessage = z.discriminatedUnion("role", [
  z.object({ role: z.literal("user"), content: z.string() }),
  z.object({
    role: z.literal("assistant"),
    content: z.string().default(""),
    toolCalls: z.array(ToolCall).max(20).default([]),
  }),
  z.object({
    role: z.literal("tool"),
    toolCallId: z.string().min(1).max(200),
    name: z.string().max(100),
    /** The observation as the model sees it (already cut, see `cutObservation`). */
    content: z.string(),
    isError: z.boolean().default(false),
  }),
]);
export type AgentMessage = z.infer<typeof AgentMessage>;

/**
 * Ask the builder for the model's next message (`loopsmith.builder.turn`). The builder renders
 * the system prompt (`prompts/agent.md`) and the opening message from `task`, `recall` and
 * `previous`, then appends `messages`.
 */
export const AgentTurnRequest = z.object({
  ...StepHeader,
  /** Calls the task already made for the `agent` role: a scripted provider replays by it. */
  callsBefore: z.number().int().nonnegative().optional(),
  script: TaskScript.optional(),
  task: TaskBrief,
  recall: Recall.optional(),
  /** The failing verdict of the previous iteration (its output cut) and the reflection on it. */
  previous: z.string().max(40_000).optional(),
  /** The conversation after the opening message, oldest first. */
  messages: z.array(AgentMessage).max(2_000),
  /** Steps left in the step budget, told to the model. */
  stepsLeft: z.number().int().nonnegative(),
  budget: Budget.default({}),
});
export type AgentTurnRequest = z.infer<typeof AgentTurnRequest>;

/** The model's next message. No tool call means it answered in text only (the loop nudges it). */
export const AgentTurnReply = z.object({
  content: z.string().default(""),
  toolCalls: z.array(ToolCall).max(20).default([]),
  usage: Usage,
  provider: ProviderInfo,
});
export type AgentTurnReply = z.infer<typeof AgentTurnReply>;

/**
 * Open a session: a container kept for one task attempt (no network, the verdict run's
 * limits, seccomp and user), its workspace the base tree with `files` over it and `deleted`
 * removed. Opening an id that is open replaces its files (after a resume).
 */
export const SessionOpen = z.object({
  ...StepHeader,
  /** `<taskId>-<iteration>`: one per task attempt. */
  sessionId: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/),
  owner: Owner.optional(),
  language: Language,
  base: z.object({
    snapshot: z.string().min(1).max(255),
    commit: CommitId,
    setupCommand: z.string().max(4_000).optional(),
  }),
  files: z.array(FileChange).max(500).default([]),
  deleted: z.array(RelativePath).max(500).default([]),
  /** Memory of the container, MB. */
  memoryMb: z.number().int().min(64).max(16_384),
  /** Default and cap of one `run`, ms. */
  timeoutMs: z.number().int().min(100).max(600_000),
  /** The image of the session container (the task's `repo.image`); absent: loopsmith's image of the language. */
  image: SandboxImage.optional(),
});
export type SessionOpen = z.infer<typeof SessionOpen>;

/** The session an open made, and which replica holds it. */
export const SessionOpened = z.object({
  sessionId: z.string(),
  /** Subject token of the replica: calls go to `session_call.<executorId>`. */
  executorId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  /** Files in the workspace. */
  files: z.number().int().nonnegative(),
  /** ms the open took (image, archive, container start). */
  durationMs: z.number().nonnegative(),
});
export type SessionOpened = z.infer<typeof SessionOpened>;

/** One call in a session. `write` puts the candidate's changed files (and removals) in both trees. */
export const SessionCall = z.object({
  v: z.literal(1),
  sessionId: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/),
  call: z.discriminatedUnion("tool", [
    ListArgs.extend({ tool: z.literal("list") }),
    ReadArgs.extend({ tool: z.literal("read") }),
    SearchArgs.extend({ tool: z.literal("search") }),
    RunArgs.extend({ tool: z.literal("run") }),
    z.object({
      tool: z.literal("write"),
      files: z.array(FileChange).max(500),
      deleted: z.array(RelativePath).max(500).default([]),
    }),
  ]),
});
export type SessionCall = z.infer<typeof SessionCall>;

/**
 * A session call's observation, uncut: the architect cuts it for the model. `list`, `read`
 * and `search` answer from the candidate tree (base plus writes), never from files a `run`
 * left in the container; `run` answers with the command's exit code and output.
 */
export const SessionObservation = z.object({
  /** The text (for `read`, numbered lines `<n>: <line>`; for `search`, `<path>:<n>: <line>`). */
  output: z.string(),
  /** False when the call failed (no such file, a bad pattern, a non-zero exit). */
  ok: z.boolean(),
  /** `run`: the command's exit code; `null` when it was killed (timeout, memory). */
  exitCode: z.number().int().nullable().optional(),
  /** `run`: it passed its timeout and was killed. */
  timedOut: z.boolean().optional(),
  /**
   * Bytes of output before any cut the executor made (a run's output is capped at 1 MiB, and
   * any call's output is cut so that the reply fits the bus's `max_payload`).
   */
  totalBytes: z.number().int().nonnegative(),
  /** `read`: lines in the file; `search`: matches found (beyond `maxResults` too, up to 10 000). */
  total: z.number().int().nonnegative().optional(),
  durationMs: z.number().nonnegative(),
  /** `run`: the limits the command ran under (the session container's, and this call's timeout); absent from an older executor. */
  limits: RunLimits.optional(),
});
export type SessionObservation = z.infer<typeof SessionObservation>;

/** Close a session: its container is removed. Closing an unknown id is not an error. */
export const SessionClose = z.object({
  v: z.literal(1),
  sessionId: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/),
});
export type SessionClose = z.infer<typeof SessionClose>;

/** Why an agent loop ended. */
export const AgentStop = z.enum([
  /** The model called `submit`. */
  "submitted",
  /** The step budget (`TaskLimits.maxAgentSteps`) ran out. */
  "steps",
  /** The same call with the same arguments, or the same failing output, three times after a redirect. */
  "stuck",
  /** The task's token or USD budget would be passed by the next model call. */
  "budget",
]);
export type AgentStop = z.infer<typeof AgentStop>;

/**
 * The messages one step event of agent mode carries (`data.agentMessages` of a `step` event
 * of phase `explore`): what the loop appended to the conversation for one tool call, exactly
 * as the model sees it and the checkpoint keeps it, with what the call cost. In order: the
 * turn's `assistant` message (on the event of its first call only), then the call's answer
 * (a `tool` message, or the `user` nudge when the turn called no tool), then, on the turn's
 * last event, the stuck rule's redirect (a `user` message) when it fired. The run record's
 * transcript is these messages: `show`, the reports and `replay` read them.
 */
export const AgentMessagesNote = z.object({
  iteration: z.number().int().min(1),
  /** The model turn (1-based within the iteration's loop); a turn's calls share it. */
  step: z.number().int().min(1),
  messages: z.array(AgentMessage).min(1).max(3),
  /** Tokens of the model call that made the turn (the event of its first call carries them). */
  tokens: z.number().int().nonnegative().default(0),
  costUsd: z.number().nonnegative().default(0),
  /** ms: the model call (on the first call's event) and the tool. */
  durationMs: z.number().nonnegative(),
  /** Set on the call the stuck rule fired on: `repeat_call` or `repeat_output`, and what it did. */
  stuck: z.object({ rule: z.enum(["repeat_call", "repeat_output"]), action: z.enum(["redirect", "stop"]) }).optional(),
});
export type AgentMessagesNote = z.infer<typeof AgentMessagesNote>;

/**
 * One step of a transcript as runs recorded before the transcript became the messages kept
 * it (`data.agentStep` of a `step` event of phase `explore`; today's events carry
 * {@link AgentMessagesNote}): the tool, its arguments, the observation as the model saw it,
 * and what the step cost. Read to show and replay those older runs.
 */
export const TranscriptStep = z.object({
  /** 1-based step number within the iteration's loop. */
  step: z.number().int().min(1),
  iteration: z.number().int().min(1),
  /** The model's text beside the call (its reasoning, when it gave any), cut to 2 000 characters. */
  thought: z.string().max(2_000).default(""),
  tool: z.string().max(100),
  args: z.record(z.string(), z.unknown()),
  /** The observation exactly as the model saw it (cut to 4 000 characters in the event). */
  observation: z.string().max(4_000),
  isError: z.boolean().default(false),
  /** Tokens of the model call that made this step (the first call of a turn carries them). */
  tokens: z.number().int().nonnegative().default(0),
  costUsd: z.number().nonnegative().default(0),
  /** ms: the model call and the tool. */
  durationMs: z.number().nonnegative(),
  /** Set on the step the stuck rule fired on: `repeat_call` or `repeat_output`, and what it did. */
  stuck: z.object({ rule: z.enum(["repeat_call", "repeat_output"]), action: z.enum(["redirect", "stop"]) }).optional(),
});
export type TranscriptStep = z.infer<typeof TranscriptStep>;
