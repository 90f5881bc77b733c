/**
 * The task side of the chaos bench: tasks submitted the way the CLI does (`submitTask`,
 * then `watchEvents` per task), a watcher that survives NATS restarts, an audit of the
 * whole events stream at the end, and the figures (silences around kills, percentiles).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { quantile } from "simple-statistics";
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Streams, Subjects, submitTask } from "@loopsmith/shared/bus";
import { TaskEvent, type TaskInput, type TaskResult } from "@loopsmith/shared/contracts";
import { watchEvents } from "@loopsmith/cli";

/** One submitted task as the bench saw it. */
export interface Tracked {
  taskId: string;
  /** When the submit was first tried (ms since the epoch, host clock). */
  submittedAt: number;
  /** Its events by `seq`, first copy kept, with the time the bench received each. */
  events: Map<number, { event: TaskEvent; receivedAt: number }>;
  result?: TaskResult;
  /** Time of the result event (its `at`), ms since the epoch. */
  resultAt?: number;
  /** Times the watcher had to start over (NATS went away under it). */
  rewatches: number;
  /** Resolves when the result arrived (never rejects). */
  done: Promise<void>;
}

/** A kill, as the figures need it. */
export interface KillMark {
  service: string;
  at: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The bench's task: examples/roman's task with its own id (the chaos script passes it on the first build). */
export function chaosTask(repo: string, taskId: string): TaskInput {
  const base = JSON.parse(readFileSync(join(repo, "examples", "roman", "task.json"), "utf8")) as Omit<
    TaskInput,
    "v" | "taskId" | "submittedAt"
  >;
  return { ...base, v: 1, taskId, submittedAt: new Date().toISOString() };
}

/**
 * Submits a task (retrying while NATS is away: the message id is the task id, so a retry
 * is a duplicate, not a second task) and follows its events until the result, starting
 * the watch over when it fails. `stop` ends the watch early.
 */
export function submitAndWatch(nc: NatsConnection, task: TaskInput, stop: AbortSignal): Tracked {
  const t: Tracked = {
    taskId: task.taskId,
    submittedAt: Date.now(),
    events: new Map(),
    rewatches: 0,
    done: Promise.resolve(),
  };
  t.done = (async () => {
    for (;;) {
      try {
        await submitTask(nc, task);
        break;
      } catch {
        if (stop.aborted) return;
        await sleep(500);
      }
    }
    while (!t.result && !stop.aborted) {
      try {
        for await (const event of watchEvents(nc, task.taskId, { signal: stop })) {
          if (!t.events.has(event.seq)) t.events.set(event.seq, { event, receivedAt: Date.now() });
          if (event.kind === "result" && event.result) {
            t.result = event.result;
            t.resultAt = Date.parse(event.at);
          }
        }
      } catch {
        /* the watch broke (NATS restarted): start over from the first event */
      }
      if (!t.result && !stop.aborted) {
        t.rewatches++;
        await sleep(500);
      }
    }
  })();
  return t;
}

/** What the events stream holds for one task. */
export interface Audit {
  results: number;
  accepted: number;
  /** Events published after the first result (the task ran on after it ended). */
  afterResult: number;
  /** `seq` numbers seen more than once. */
  repeatedSeqs: number;
  /** Statuses of the results, in stream order. */
  statuses: string[];
  /** `at` of the first result, ms since the epoch. */
  resultAt?: number;
}

/**
 * Reads the whole events stream once (every task of the project) and counts, per task,
 * results, acceptances, events after the result and repeated `seq` numbers: a task run
 * twice shows up here even where a per-task watcher stops at the first result.
 */
export async function auditEvents(nc: NatsConnection): Promise<Map<string, Audit>> {
  const out = new Map<string, Audit>();
  const info = await (await jetstreamManager(nc)).streams.info(Streams.events);
  const last = info.state.last_seq;
  if (info.state.messages === 0) return out;
  const consumer = await jetstream(nc).consumers.get(Streams.events, {
    filter_subjects: [Subjects.eventsAll],
    deliver_policy: DeliverPolicy.All,
  });
  const messages = await consumer.consume();
  // Bounded: a consumer that stops delivering ends the audit (with what it read so far).
  const giveUp = setTimeout(() => void messages.close(), 60_000);
  const seen = new Map<string, Set<number>>();
  for await (const m of messages) {
    const parsed = TaskEvent.safeParse(m.json());
    if (parsed.success) {
      const e = parsed.data;
      const a = out.get(e.taskId) ?? { results: 0, accepted: 0, afterResult: 0, repeatedSeqs: 0, statuses: [] };
      const seqs = seen.get(e.taskId) ?? new Set<number>();
      if (seqs.has(e.seq)) a.repeatedSeqs++;
      seqs.add(e.seq);
      seen.set(e.taskId, seqs);
      if (a.results > 0 && e.kind !== "result") a.afterResult++;
      if (e.kind === "accepted") a.accepted++;
      if (e.kind === "result") {
        a.results++;
        a.statuses.push(e.result?.status ?? "?");
        a.resultAt ??= Date.parse(e.at);
      }
      out.set(e.taskId, a);
    }
    if (m.seq >= last) break;
  }
  clearTimeout(giveUp);
  await messages.close();
  return out;
}

/**
 * Longest silence per killed service: the largest gap between consecutive events (by their
 * `at`) of any task, accepted and not yet finished, that spans a kill of that service.
 * Gaps are in ms; a service killed while no task was between events gets no entry.
 */
export function silences(tasks: Tracked[], kills: KillMark[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of tasks) {
    const times = [...t.events.values()].map((e) => Date.parse(e.event.at)).sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) {
      const from = times[i - 1] as number;
      const to = times[i] as number;
      for (const k of kills) {
        if (k.at >= from && k.at <= to) out.set(k.service, Math.max(out.get(k.service) ?? 0, to - from));
      }
    }
  }
  return out;
}

/** The p-th percentile (0..100) of `values` (simple-statistics' quantile: nearest rank, the mean of two at an exact rank), or NaN when empty. */
export function percentile(values: number[], p: number): number {
  return values.length === 0 ? Number.NaN : quantile(values, p / 100);
}
