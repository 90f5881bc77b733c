/**
 * An agent-mode run's transcript read back from its events. The transcript is the
 * conversation: each `step` event of phase `explore` carries the messages the loop appended
 * for one tool call (`data.agentMessages`, an `AgentMessagesNote`), so the model's turns are
 * its `assistant` messages and each step is a tool call with its answer. Runs recorded before
 * that carried one `TranscriptStep` per call instead (`data.agentStep`); they are read too.
 * Pure: `show`, the reports, `replay` and the bench's transcripts read it.
 */
import { z } from "zod";
import {
  AgentMessagesNote,
  TranscriptStep,
  type AgentMessage,
  type ScriptTurn,
  type TaskEvent,
} from "@loopsmith/shared/contracts";

/**
 * The `tool` of a step the loop records for a model turn without a tool call (it nudges the
 * model): `agentTexts.noTool` in services/architect/src/event-texts.ts.
 */
export const NO_TOOL_CALL = "(no tool call)";

/** Longest thought a step keeps, in characters (the turn's text, on its first call). */
const THOUGHT_CHARS = 2_000;

/**
 * A step as people read it: one tool call of a model turn with its answer, its place in the
 * turn, and what it cost. The loop numbers its model turns (`step`, per iteration) and the
 * calls of one turn share it; `call` is the call's 1-based place in the turn; `callId` the
 * provider's `ToolCall.id` (absent from older records that did not carry it). `observation`
 * is the answer as the model saw it (older records cut it to 4 000 characters).
 */
export const RecordedStep = TranscriptStep.extend({
  thought: z.string().default(""),
  observation: z.string(),
  call: z.number().int().min(1).default(1),
  callId: z.string().min(1).max(200).optional(),
});
export type RecordedStep = z.infer<typeof RecordedStep>;

/** One model turn as its events carried it: the messages appended for it, in order. */
export interface TranscriptTurn {
  iteration: number;
  step: number;
  messages: AgentMessage[];
}

/** The old record's step (`data.agentStep`), with the call id it carried beside the contract's fields. */
const LegacyStep = TranscriptStep.extend({ callId: z.string().min(1).max(200).optional() });

/** Whether `e` is a model turn's `usage` event (the loop's model calls are the `agent` role's). */
const isAgentUsage = (e: TaskEvent): boolean => e.kind === "usage" && e.data?.role === "agent";

type StepBody = Omit<RecordedStep, "call">;

/** The step of one call's answer (the first message of the note that is not the assistant's). */
function stepOfNote(
  note: AgentMessagesNote,
  assistant: AgentMessage | undefined,
  first: boolean,
): StepBody | undefined {
  const answer = note.messages.find((m) => m.role !== "assistant");
  if (!answer) return undefined;
  const meta = {
    step: note.step,
    iteration: note.iteration,
    thought: first && assistant ? assistant.content.slice(0, THOUGHT_CHARS) : "",
    observation: answer.content,
    tokens: note.tokens,
    costUsd: note.costUsd,
    durationMs: note.durationMs,
    ...(note.stuck ? { stuck: note.stuck } : {}),
  };
  if (answer.role !== "tool") return { ...meta, tool: NO_TOOL_CALL, args: {}, isError: true };
  const calls = assistant?.role === "assistant" ? assistant.toolCalls : [];
  const call = calls.find((c) => c.id === answer.toolCallId);
  return { ...meta, tool: answer.name, args: call?.args ?? {}, isError: answer.isError, callId: answer.toolCallId };
}

/**
 * The turns and steps of a run, in the order they were taken (iteration, turn, call): from
 * each `step` event of phase `explore` that carries a valid `AgentMessagesNote` (or, in an
 * older record, a `TranscriptStep`); other events are skipped. A turn published again (a loop
 * resumed after a restart asks the model again, so a new `usage` event of role `agent` comes
 * before it) replaces the earlier publication of that turn; a record without its `usage`
 * events (truncated) keeps both.
 */
export function readTranscript(events: readonly TaskEvent[]): { turns: TranscriptTurn[]; steps: RecordedStep[] } {
  const turns = new Map<string, { mark: number; turn: TranscriptTurn; steps: RecordedStep[] }>();
  let mark = 0;
  for (const e of [...events].sort((a, b) => a.seq - b.seq)) {
    if (isAgentUsage(e)) mark++;
    if (e.kind !== "step" || e.phase !== "explore") continue;
    const note = AgentMessagesNote.safeParse(e.data?.agentMessages);
    const legacy = note.success ? undefined : LegacyStep.safeParse(e.data?.agentStep);
    if (!note.success && !legacy?.success) continue;
    const at = note.success ? note.data : (legacy?.data as z.infer<typeof LegacyStep>);
    const key = `${at.iteration}:${at.step}`;
    const known = turns.get(key);
    const entry =
      known && known.mark === mark
        ? known
        : { mark, turn: { iteration: at.iteration, step: at.step, messages: [] }, steps: [] as RecordedStep[] };
    turns.set(key, entry);
    let body: StepBody | undefined = legacy?.success ? legacy.data : undefined;
    if (note.success) {
      entry.turn.messages.push(...note.data.messages);
      const assistant = entry.turn.messages.find((m) => m.role === "assistant");
      body = stepOfNote(note.data, assistant, entry.steps.length === 0);
    }
    if (body) entry.steps.push({ ...body, call: entry.steps.length + 1 });
  }
  const order = (a: { iteration: number; step: number }, b: { iteration: number; step: number }) =>
    a.iteration - b.iteration || a.step - b.step;
  const all = [...turns.values()].sort((a, b) => order(a.turn, b.turn));
  return {
    turns: all.map((t) => t.turn).filter((t) => t.messages.length > 0),
    steps: all.flatMap((t) => t.steps),
  };
}

/** The steps of a run ({@link readTranscript}). */
export function transcriptSteps(events: readonly TaskEvent[]): RecordedStep[] {
  return readTranscript(events).steps;
}

/**
 * The agent role's script turns of an older record, rebuilt from its steps: one
 * {@link ScriptTurn} per model turn (the steps that share an iteration and a `step` number),
 * `content` the turn's thought (recorded on its first call, cut) and `toolCalls` its calls in
 * order with the recorded tool name and arguments (`id` when the step carries the provider's
 * call id). A turn without a tool call (recorded as the tool {@link NO_TOOL_CALL}, or an empty
 * name) has no calls. Pure.
 */
export function agentTurns(steps: readonly RecordedStep[]): ScriptTurn[] {
  const turns = new Map<string, ScriptTurn>();
  for (const s of steps) {
    const key = `${s.iteration}:${s.step}`;
    const turn = turns.get(key) ?? { content: "", toolCalls: [] };
    if (!turn.content && s.thought) turn.content = s.thought;
    if (s.tool && s.tool !== NO_TOOL_CALL)
      turn.toolCalls.push({ ...(s.callId ? { id: s.callId } : {}), name: s.tool, args: s.args });
    turns.set(key, turn);
  }
  return [...turns.values()];
}

/**
 * The agent role's script turns of a run (see docs/SCRIPTS.md, "From a transcript to a
 * script"), in the order the model took them: each turn's `assistant` message as the model
 * sent it (its text and its calls, ids included); for an older record, rebuilt from its steps
 * ({@link agentTurns}). Pure.
 */
export function transcriptScriptTurns(events: readonly TaskEvent[]): ScriptTurn[] {
  const { turns, steps } = readTranscript(events);
  const assistants = turns.flatMap((t) => t.messages.filter((m) => m.role === "assistant"));
  if (!assistants.length) return agentTurns(steps);
  return assistants.map((m) => ({
    content: m.content,
    toolCalls: m.toolCalls.map((c) => ({ id: c.id, name: c.name, args: c.args })),
  }));
}
