/**
 * The stuck rule of the agent loop: an agent that repeats itself is redirected
 * once, then stopped. Two counters, both over the iteration's loop:
 * - `repeat_call`: the same tool with the same arguments on the same tree (the count of
 *   accepted edits is part of the key: running the tests again after an edit is progress,
 *   running them again on the same tree is not);
 * - `repeat_output`: the same failing observation, whatever call made it.
 * When either reaches {@link STUCK_REPEATS}, the first time the model is told to try something
 * else (`redirect`); any time after that, the loop stops (`stop`, the task's `agent_stuck`).
 */
import { createHash } from "node:crypto";

/** Repeats that fire the rule. */
export const STUCK_REPEATS = 3;

/** The counters, as the checkpoint keeps them (keys are short hashes). */
export interface StuckCounters {
  calls: Record<string, number>;
  outputs: Record<string, number>;
  redirected: boolean;
}

/** What the rule did on a step. */
export interface StuckVerdict {
  rule: "repeat_call" | "repeat_output";
  action: "redirect" | "stop";
  /** The count that fired it. */
  count: number;
}

const hash = (text: string): string => createHash("sha256").update(text).digest("base64url").slice(0, 16);

/** JSON with object keys sorted, so the same arguments give the same key in any order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object")
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(value) ?? "null";
}

/**
 * Counts one step and says whether the rule fires. Pure: returns the new counters.
 * @param tool - the tool's name as called
 * @param args - its arguments as called
 * @param treeVersion - edits accepted so far in this loop
 * @param observation - what the model was shown
 * @param failed - whether the observation is an error (only failing outputs are counted)
 */
export function countStep(
  c: StuckCounters,
  tool: string,
  args: unknown,
  treeVersion: number,
  observation: string,
  failed: boolean,
): { counters: StuckCounters; verdict?: StuckVerdict } {
  const callKey = hash(`${tool}\n${treeVersion}\n${canonicalJson(args)}`);
  const calls = { ...c.calls, [callKey]: (c.calls[callKey] ?? 0) + 1 };
  const outputs = { ...c.outputs };
  let outputCount = 0;
  if (failed) {
    const outKey = hash(observation);
    outputCount = outputs[outKey] = (outputs[outKey] ?? 0) + 1;
  }
  const callCount = calls[callKey] ?? 0;
  const fired =
    callCount >= STUCK_REPEATS
      ? { rule: "repeat_call" as const, count: callCount }
      : outputCount >= STUCK_REPEATS
        ? { rule: "repeat_output" as const, count: outputCount }
        : undefined;
  if (!fired) return { counters: { calls, outputs, redirected: c.redirected } };
  const action = c.redirected ? ("stop" as const) : ("redirect" as const);
  return { counters: { calls, outputs, redirected: true }, verdict: { ...fired, action } };
}
