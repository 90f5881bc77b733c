/**
 * The agent-mode transcripts of a bench run, kept beside `results.jsonl` in
 * `transcripts.jsonl` (one line per task that took agent steps: `{"taskId", "steps"}`, the
 * steps `RecordedStep`s: one per tool call, read from the messages the task's events carried, with their place
 * in their turn), so `report.html` shows
 * them after `--resume` too. A task retried after an error writes a line per attempt (each
 * attempt has its own task id).
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { z } from "zod";
import type { TaskEvent } from "@loopsmith/shared/contracts";
import { RecordedStep, transcriptSteps } from "../transcript-record.js";

/** One line of `transcripts.jsonl`. */
export const TranscriptLine = z.object({ taskId: z.string().min(1), steps: z.array(RecordedStep) });
export type TranscriptLine = z.infer<typeof TranscriptLine>;

/**
 * Appends the agent steps among `events` (see `transcriptSteps`) as one line for `taskId`;
 * writes nothing when there are none.
 * @returns the number of steps written
 * @throws what `appendFileSync` throws (the folder cannot be written)
 */
export function appendTranscript(path: string, taskId: string, events: readonly TaskEvent[]): number {
  const steps = transcriptSteps(events);
  if (steps.length) appendFileSync(path, `${JSON.stringify({ taskId, steps })}\n`);
  return steps.length;
}

/**
 * The transcripts of `transcripts.jsonl` by task id (a later line for the same task wins);
 * an empty map when the file is missing. Lines that are not JSON or not a transcript line
 * (a write cut by a crash) are skipped.
 */
export function readTranscripts(path: string): Map<string, RecordedStep[]> {
  const out = new Map<string, RecordedStep[]>();
  if (!existsSync(path)) return out;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.trim()) continue;
    try {
      const parsed = TranscriptLine.safeParse(JSON.parse(line));
      if (parsed.success) out.set(parsed.data.taskId, parsed.data.steps);
    } catch {
      // a line cut short: skipped, as results.jsonl's are
    }
  }
  return out;
}
