/** How an improvement run publishes its events: on its owner's events subject, numbered by its state. */
import type { NatsConnection } from "@nats-io/transport-node";
import { ownerOfTask } from "@loopsmith/shared/bus";
import { type GenerationReport, type TaskEvent } from "@loopsmith/shared/contracts";
import { publishJobEvent } from "../durable/index.js";
import type { ImproveState } from "./state.js";

/** Largest report sent whole in an event, in characters; a larger one goes without its patch (the KV copy keeps it). */
const EVENT_REPORT_MAX_CHARS = 400_000;

/** The kinds of event a run publishes. */
export type RunEventKind = "step" | "generation" | "warning" | "result";

/**
 * One event of a run as its machine publishes it (`DurableRun.publish` numbers it): the run's
 * id as its task id, the generation as its iteration. A generation report over
 * {@link EVENT_REPORT_MAX_CHARS} goes without its patch. Pure.
 */
export function runEvent(
  state: ImproveState,
  kind: RunEventKind,
  message: string,
  data?: Record<string, unknown>,
): Omit<TaskEvent, "v" | "at" | "seq"> {
  let payload = data;
  const report = data?.report as GenerationReport | undefined;
  if (report?.change && JSON.stringify(report).length > EVENT_REPORT_MAX_CHARS) {
    payload = {
      ...data,
      report: {
        ...report,
        change: {
          ...report.change,
          patch: `(patch of ${report.change.patch.length} characters: loopsmith.architect.improve_status has it)`,
        },
      },
    };
  }
  const iteration = Math.min(state.generation, 10_000);
  return { taskId: state.request.runId, iteration, kind, message, ...(payload ? { data: payload } : {}) };
}

/**
 * Publishes one event of a run outside its machine (its acceptance, its result published
 * again) and waits for JetStream to take it; returns the state with the next seq.
 * @throws as `publishEvent`
 */
export async function publishRunEvent(
  nc: NatsConnection,
  state: ImproveState,
  kind: RunEventKind,
  message: string,
  data?: Record<string, unknown>,
): Promise<ImproveState> {
  await publishJobEvent(nc, ownerOfTask(state.request), {
    ...runEvent(state, kind, message, data),
    seq: state.eventSeq,
  });
  return { ...state, eventSeq: state.eventSeq + 1 };
}
