/**
 * A task's durable state, checkpointed in the KV bucket after every step with
 * revision-checked updates: a conductor that crashes mid-task resumes from here.
 */
import { z } from "zod";
import type { KV } from "@nats-io/kv";
import { JetStreamApiError } from "@nats-io/jetstream";
import { InvalidArgumentError } from "@nats-io/transport-node";
import {
  Candidate,
  DagState,
  ExecutionResult,
  FailureBrief,
  Finding,
  LoopsmithError,
  Phase,
  Plan,
  Recall,
  Reflection,
  Task,
  TaskResult,
  UsageReport,
  V1,
  type Usage,
  addUsage,
  emptyUsage,
} from "@loopsmith/shared";

/** The conductor's checkpoint of one task. */
export const TaskState = z.object({
  v: V1,
  task: Task,
  status: z.enum(["running", "final"]),
  phase: Phase,
  /** 1-based once building starts; 0 before. */
  iteration: z.number().int().nonnegative(),
  recall: Recall.optional(),
  plan: Plan.optional(),
  candidate: Candidate.optional(),
  lastExecution: ExecutionResult.optional(),
  /** The failure of the latest iteration, while it is being remembered and reflected on. */
  failure: FailureBrief.optional(),
  failureId: z.string().optional(),
  reflection: Reflection.optional(),
  /**
   * The gate's non-blocking evaluation-tampering findings on the current candidate: they send
   * it to review (even with the task's review off) and go to the reviewer with it.
   */
  concerns: z.array(Finding).optional(),
  /** One line per finished iteration. */
  history: z.array(z.string()),
  failures: z.array(FailureBrief),
  failureIds: z.array(z.string()),
  usage: UsageReport,
  lastSignature: z.string().optional(),
  sameSignatureCount: z.number().int().nonnegative(),
  replanned: z.boolean(),
  scripted: z.boolean(),
  providers: z.array(z.string()),
  /** Sandbox infrastructure failures in a row (never counted against the candidate). */
  sandboxErrors: z.number().int().nonnegative(),
  eventSeq: z.number().int().nonnegative(),
  startedAt: z.string(),
  startedAtMs: z.number(),
  result: TaskResult.optional(),
  /** Repo mode: the commands in use and the base commit's own test outcome (the prepare phase). */
  repo: z
    .object({
      testCommand: z.string(),
      setupCommand: z.string(),
      failingAtBase: z.array(z.string()),
      baseStatus: z.string(),
    })
    .optional(),
  /** A DAG task (`decompose`): its validated plan of subtasks and each subtask's progress. */
  dag: DagState.optional(),
});
export type TaskState = z.infer<typeof TaskState>;

/** A fresh state for a newly accepted task. */
export function initialState(task: Task, nowMs = Date.now()): TaskState {
  return {
    v: 1,
    task,
    status: "running",
    phase: task.repo ? "prepare" : "recall",
    iteration: 0,
    history: [],
    failures: [],
    failureIds: [],
    usage: { total: emptyUsage(), byRole: {}, byIteration: [] },
    sameSignatureCount: 0,
    replanned: false,
    scripted: false,
    providers: [],
    sandboxErrors: 0,
    eventSeq: 0,
    startedAt: new Date(nowMs).toISOString(),
    startedAtMs: nowMs,
  };
}

/** Adds one step's usage to the task's totals, per role and per iteration (a new report). */
export function addStepUsage(report: UsageReport, role: string, iteration: number, usage: Usage): UsageReport {
  const byIteration = [...report.byIteration];
  while (byIteration.length <= iteration) byIteration.push(emptyUsage());
  byIteration[iteration] = addUsage(byIteration[iteration] ?? emptyUsage(), usage);
  return {
    total: addUsage(report.total, usage),
    byRole: { ...report.byRole, [role]: addUsage(report.byRole[role] ?? emptyUsage(), usage) },
    byIteration,
  };
}

/** The KV store of task states, with revision-checked writes, and cancel markers. */
export interface StateStore {
  /** The state and its revision, or null when the task is unknown. */
  get(taskId: string): Promise<{ state: TaskState; revision: number } | null>;
  /** Creates the state; returns its revision. @throws LoopsmithError `unavailable` (retryable) when it exists. */
  create(state: TaskState): Promise<number>;
  /**
   * Writes the state if nobody wrote since `revision` (the revision this runner last wrote);
   * returns the new revision.
   * @throws LoopsmithError `unavailable` (retryable) when another runner wrote in between;
   *   `internal` (not retryable) when the state is too large for the bucket.
   */
  update(state: TaskState, revision: number): Promise<number>;
  /**
   * Marks `owner`'s task as cancelled; works before its first checkpoint too. The marker is
   * per owner, so a cancel sent for another owner's task id stops nothing.
   */
  requestCancel(taskId: string, owner: string): Promise<void>;
  /** True once `owner` asked to cancel the task. */
  cancelRequested(taskId: string, owner: string): Promise<boolean>;
}

/** JetStream's API error code for a write whose expected last sequence does not match. */
const WRONG_LAST_SEQUENCE = 10071;

function writeError(err: unknown, taskId: string): LoopsmithError {
  if (err instanceof JetStreamApiError && err.code === WRONG_LAST_SEQUENCE) {
    return new LoopsmithError("unavailable", `the checkpoint of task ${taskId} was written by another runner`, { cause: err, retryable: true });
  }
  // A state larger than the server's max_payload, or a request the server refuses: retrying cannot help.
  if (err instanceof JetStreamApiError || err instanceof InvalidArgumentError) {
    return new LoopsmithError("internal", `the checkpoint of task ${taskId} could not be written: ${(err as Error).message}`, { cause: err, retryable: false });
  }
  return new LoopsmithError("unavailable", `the checkpoint of task ${taskId} could not be written: ${(err as Error)?.message ?? err}`, { cause: err, retryable: true });
}

const cancelKey = (taskId: string, owner: string): string => `cancel.${owner}.${taskId}`;

/** A {@link StateStore} over a JetStream KV bucket. */
export function kvStateStore(kv: KV): StateStore {
  return {
    async get(taskId) {
      const entry = await kv.get(taskId);
      if (!entry || entry.operation !== "PUT" || entry.length === 0) return null;
      const parsed = TaskState.safeParse(entry.json());
      if (!parsed.success) {
        throw new LoopsmithError("internal", `the checkpoint of task ${taskId} fails its schema`, { details: parsed.error.issues });
      }
      return { state: parsed.data, revision: entry.revision };
    },
    async create(state) {
      try {
        return await kv.create(state.task.taskId, JSON.stringify(state));
      } catch (err) {
        throw writeError(err, state.task.taskId);
      }
    },
    async update(state, revision) {
      try {
        return await kv.update(state.task.taskId, JSON.stringify(state), revision);
      } catch (err) {
        throw writeError(err, state.task.taskId);
      }
    },
    async requestCancel(taskId, owner) {
      await kv.put(cancelKey(taskId, owner), "1");
    },
    async cancelRequested(taskId, owner) {
      const entry = await kv.get(cancelKey(taskId, owner));
      // Exactly the marker requestCancel writes: any other value there (a message a JetStream
      // push consumer delivered to the subject, say) cancels nothing.
      return !!entry && entry.operation === "PUT" && entry.string() === "1";
    },
  };
}
