/**
 * The checkpointed part of an agent loop (`TaskState.agent`): everything a resumed
 * conductor needs to go on from the last finished step, and nothing it can recompute.
 */
import { z } from "zod";
import { AgentMessage, Edit, FileChange } from "@loopsmith/shared/contracts";

/** One iteration's agent loop, as checkpointed after every step. */
export const AgentLoopState = z.object({
  /** The iteration the loop belongs to: a loop of an earlier iteration is never resumed. */
  iteration: z.number().int().min(1),
  /** Model turns done (the step budget counts these). */
  step: z.number().int().nonnegative(),
  /** The conversation after the opening message, oldest first. */
  messages: z.array(AgentMessage),
  /** The session container (absent before it is opened and after it is closed). */
  session: z.object({ sessionId: z.string(), executorId: z.string() }).optional(),
  /** The candidate so far against the base: every changed file in full, the removed paths. */
  files: z.array(FileChange),
  deleted: z.array(z.string()),
  /** The accepted edits in order (the last 50 go with the candidate). */
  edits: z.array(Edit),
  /** Edits accepted so far: the stuck rule's tree version. */
  treeVersion: z.number().int().nonnegative(),
  /** The stuck rule's counters (`stuck.ts`). */
  calls: z.record(z.string(), z.number().int()),
  outputs: z.record(z.string(), z.number().int()),
  redirected: z.boolean(),
  /** What the last model turn cost: the estimate of the next (the conversation only grows). */
  lastTurn: z.object({ tokens: z.number().int().nonnegative(), costUsd: z.number().nonnegative() }).optional(),
});
export type AgentLoopState = z.infer<typeof AgentLoopState>;
