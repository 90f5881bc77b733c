/**
 * Closing an agent loop's session, apart from the loop (`session.ts`) so the run (`run.ts`),
 * which closes it when a task ends mid-loop, needs nothing else of the loop.
 */
import type { Logger } from "pino";
import type { Steps } from "../steps.js";
import type { AgentLoopState } from "./loop-state.js";

/**
 * Closes a session, best effort: a replica that is gone took its container with it (its
 * sweep removes it). Never throws; a failure is logged.
 */
export async function closeSession(
  steps: Pick<Steps, "closeSession">,
  log: Logger,
  session: AgentLoopState["session"],
): Promise<void> {
  const close = steps.closeSession;
  if (!session || !close) return;
  try {
    await close(session.executorId, { v: 1, sessionId: session.sessionId });
  } catch (err) {
    log.warn({ err, session }, "could not close the agent session; the executor's sweep removes it");
  }
}
