/**
 * A task's durable state, checkpointed in the KV bucket after every step with
 * revision-checked updates (its large parts in the checkpoint blob store): a conductor that
 * crashes mid-task resumes from here.
 */
import { z } from "zod";
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  Candidate,
  DagState,
  ExecutionResult,
  FailureBrief,
  Finding,
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
} from "@loopsmith/shared/contracts";
import { openCheckpointBlobs, openTaskStates, type StreamOptions } from "@loopsmith/shared/bus";
import { AgentLoopState } from "./agent/loop-state.js";
import { checkpointStore, maxPayloadOf, type BlobStore, type CheckpointStore } from "./durable/index.js";

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
  /**
   * Repo mode: the latest candidate that was run (the policy, the gate and the review let it
   * through). After a blocked iteration the next one starts from this tree, never from the
   * blocked change (`treeBase` in requests.ts).
   */
  lastRunCandidate: Candidate.optional(),
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
      /** The limit of each later run of the repository's tests, ms: the user's, or derived from the baseline's time. */
      runTimeoutMs: z.number().int().positive().optional(),
    })
    .optional(),
  /** A DAG task (`decompose`): its validated plan of subtasks and each subtask's progress. */
  dag: DagState.optional(),
  /** Agent mode (`RepoSpec.mode`): the current iteration's tool loop, checkpointed after every step. */
  agent: AgentLoopState.optional(),
});
export type TaskState = z.infer<typeof TaskState>;

/**
 * The wall-clock limit of the task's next sandbox run, in ms: in repo mode the one PREPARE
 * set (the user's `testTimeoutMs`, or derived from the baseline run), else the task's
 * `limits.runTimeoutMs`.
 */
export function runTimeoutOf(s: Pick<TaskState, "task" | "repo">): number {
  return s.repo?.runTimeoutMs ?? s.task.limits.runTimeoutMs;
}

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

/**
 * The store of task states: revision-checked checkpoints in the task-state KV bucket (key =
 * task id), their large parts in the checkpoint blob store, and cancel markers
 * (`durable/checkpoints.ts`).
 */
export type StateStore = CheckpointStore<TaskState>;

/** A {@link StateStore} over the task-state bucket and the blob store; `maxPayload` is the server's (`nc.info.max_payload`), bytes. */
export function kvStateStore(kv: KV, blobs: BlobStore, maxPayload: number): StateStore {
  return checkpointStore({ kv, blobs, maxPayload, schema: TaskState, keyOf: (s) => s.task.taskId, label: "task" });
}

/**
 * Opens the task-state bucket and the checkpoint blob store (creating them when missing).
 * @throws LoopsmithError `permission_denied` when one is missing and this user may not create it
 */
export async function openStateStore(nc: NatsConnection, opts: StreamOptions = {}): Promise<StateStore> {
  return kvStateStore(await openTaskStates(nc, opts), await openCheckpointBlobs(nc, opts), maxPayloadOf(nc));
}
