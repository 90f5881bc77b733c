/** What the loop needs from the outside: the step calls, and its I/O (checkpoint, events). */
import { join } from "node:path";
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  Endpoints,
  ServiceNames,
  call,
  onReplica,
  followEvents,
  getSnapshot,
  materializeSnapshot,
  pingService,
  putSnapshot,
  submitTask,
} from "@loopsmith/shared/bus";
import { LoopsmithError, type Config } from "@loopsmith/shared/runtime";
import {
  type BuildReply,
  type BuildRequest,
  type ExecutionRequest,
  type ExecutionResult,
  type FailureFix,
  type FailureRecord,
  type GateRequest,
  type GateResult,
  type PlanReply,
  type PlanRequest,
  type Recall,
  type RecallRequest,
  type ReflectReply,
  type ReflectRequest,
  type Remembered,
  type ReviewReply,
  type ReviewRequest,
  type AuditReply,
  type AuditRequest,
  type SuccessRecord,
  type DagPlan,
  type DagPlanProblem,
  type IntegrationReflection,
  type TaskEvent,
  type TaskInput,
  type TaskRecord,
  type TaskResult,
  type AgentTurnReply,
  type AgentTurnRequest,
  type SessionCall,
  type SessionClose,
  type SessionObservation,
  type SessionOpen,
  type SessionOpened,
} from "@loopsmith/shared/contracts";
import {
  rememberLessonsEndpoint,
  type LessonReply,
  type LessonsRecord,
  type LessonsStored,
} from "@loopsmith/shared/llm";
import type { ApprovalBox } from "./approvals.js";
import type { IntegrationReflectRequest, LessonRequest, LlmValue, Planner } from "./planner.js";
import type { TaskState } from "./state.js";

/** The step calls of the loop. Each throws a `LoopsmithError`. */
export interface Steps {
  recall(req: RecallRequest): Promise<Recall>;
  plan(req: PlanRequest): Promise<PlanReply>;
  build(req: BuildRequest): Promise<BuildReply>;
  gate(req: GateRequest): Promise<GateResult>;
  review(req: ReviewRequest): Promise<ReviewReply>;
  /**
   * The security audit's model (`Task.audit`, the reviewer's audit endpoint). Absent where
   * no reviewer serves it: an audit then has the static tools' findings only, with a warning.
   */
  audit?(req: AuditRequest): Promise<AuditReply>;
  execute(req: ExecutionRequest): Promise<ExecutionResult>;
  rememberFailure(req: FailureRecord): Promise<Remembered>;
  attachFix(req: FailureFix): Promise<Remembered>;
  rememberSuccess(req: SuccessRecord): Promise<Remembered>;
  recordTask(req: TaskRecord): Promise<Remembered>;
  reflect(req: ReflectRequest): Promise<ReflectReply>;
  /** A DAG task's plan of subtasks; `problems` are those of the plan refused before. */
  decompose(req: PlanRequest, problems: readonly DagPlanProblem[]): Promise<LlmValue<DagPlan>>;
  /** After a failed integration run: the subtask to re-open. */
  reflectIntegration(req: IntegrationReflectRequest): Promise<LlmValue<IntegrationReflection>>;
  /**
   * A task passed after failing: its failures as lessons (role `reflect`, the lesson prompt).
   * Absent: the lesson is the last reflection's (`fallbackLesson`).
   */
  distil?(req: LessonRequest): Promise<LlmValue<LessonReply>>;
  /** Stores a task's lessons in memory. Absent: nothing is stored. */
  rememberLessons?(req: LessonsRecord): Promise<LessonsStored>;
  /** A DAG task's child tasks and trees; absent where DAG tasks cannot run (they then stop with an error). */
  children?: ChildTasks;
  /**
   * Repo mode: the directory holding the base tree of a snapshot in `owner`'s store (fetched
   * and extracted once per owner and commit). @throws LoopsmithError `not_found` when the
   * snapshot is not in the store
   */
  tree(snapshot: string, owner: string): Promise<string>;
  /**
   * Repo mode, dependency policy `ask`: the task's approval requests and their answers
   * (`approvals.ts`). Absent: nobody can answer, and a change that needs approval stops the
   * task with `needs_approval`.
   */
  approvals?: ApprovalBox;
  /** Where derived per-commit data (the repo map's tags) is cached; none when absent. */
  cacheDir?: string;
  /**
   * Agent mode: the model's next message in a tool loop (the builder). Absent
   * where agent tasks cannot run: such a task stops with an error.
   */
  turn?(req: AgentTurnRequest): Promise<AgentTurnReply>;
  /** Agent mode: opens a session container on any executor replica; the reply names the replica. */
  openSession?(req: SessionOpen): Promise<SessionOpened>;
  /**
   * Agent mode: one call in a session, on the replica that holds it. @throws LoopsmithError
   * `unavailable` or `timeout` when the replica is gone, `not_found` when it no longer has the session
   */
  sessionCall?(executorId: string, req: SessionCall): Promise<SessionObservation>;
  /** Agent mode: removes a session's container (an unknown session is not an error). */
  closeSession?(executorId: string, req: SessionClose): Promise<{ closed: boolean }>;
}

/** What a DAG task needs besides the steps: its child tasks, their trees, and how many builders there are. */
export interface ChildTasks {
  /** Submits a child task under `owner` (a resubmitted id is run once: the intake deduplicates it, the conductor answers with its result). */
  submit(task: TaskInput, owner: string): Promise<void>;
  /**
   * Follows a child task's events until its result; `onEvent` sees each event before it.
   * @throws the signal's reason when it aborts; LoopsmithError `unavailable` (retryable) when the events are lost
   */
  result(taskId: string, owner: string, signal: AbortSignal, onEvent: (event: TaskEvent) => void): Promise<TaskResult>;
  /** Cancels a child task (its marker is read at its next step). */
  cancel(taskId: string, owner: string): Promise<void>;
  /** A snapshot tar from `owner`'s store. @throws LoopsmithError `not_found` */
  getTree(name: string, owner: string): Promise<Uint8Array>;
  /** Stores a snapshot tar under `name` in `owner`'s store (kept when it exists). */
  putTree(name: string, tar: Uint8Array, owner: string): Promise<void>;
  /** Builder instances answering a `$SRV` ping now (at least 1). */
  builderReplicas(): Promise<number>;
}

/** Child tasks over the bus; `cancel` is the conductor's (it runs them). */
export function busChildTasks(nc: NatsConnection, cancel: ChildTasks["cancel"]): ChildTasks {
  return {
    submit: async (task, owner) => void (await submitTask(nc, task, owner)),
    async result(taskId, owner, signal, onEvent) {
      try {
        for await (const e of followEvents(nc, owner, taskId, signal)) {
          onEvent(e);
          if (e.kind === "result" && e.result) return e.result;
        }
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        throw new LoopsmithError(
          "unavailable",
          `lost the events of child task ${taskId}: ${(err as Error)?.message ?? err}`,
          { cause: err, retryable: true },
        );
      }
      if (signal.aborted) throw signal.reason;
      throw new LoopsmithError("unavailable", `the events of child task ${taskId} ended without a result`, {
        retryable: true,
      });
    },
    cancel,
    getTree: (name, owner) => getSnapshot(nc, name, owner),
    putTree: async (name, tar, owner) => void (await putSnapshot(nc, name, tar, owner)),
    async builderReplicas() {
      // No answer: count one (the steps still go through the builder's queue group).
      const answers = await pingService(nc, ServiceNames.builder).catch(() => []);
      return Math.max(1, answers.length);
    },
  };
}

/** The loop's I/O. */
export interface LoopIO {
  /** Writes the checkpoint (revision-checked). */
  checkpoint(state: TaskState): Promise<void>;
  /** Publishes a progress event. */
  emit(event: TaskEvent): Promise<void>;
  /** Tells the broker the task is still being worked on. */
  heartbeat(): void;
  /** True once a cancel was asked for. */
  cancelled(): boolean;
  /** True when the conductor is shutting down: the task hands back at its next step. */
  stopping(): boolean;
  /**
   * A DAG task calls this when it starts waiting on its child tasks: it no longer takes one
   * of the conductor's slots, so its children can run (a parent holding a slot while its
   * children wait for one would deadlock a full conductor).
   */
  release?(): void;
  log: Logger;
}

/**
 * Steps over the bus: builder, reviewer, executor and memory through their endpoints, with
 * the configured timeouts, retries and liveness limit; planning and reflection in-process.
 */
export function busSteps(nc: NatsConnection, config: Config, planner: Planner): Steps {
  // Every step call carries a heartbeat inbox: a service that goes silent for livenessMs
  // (it died, or NATS lost the request or its reply) gets the step sent again at once,
  // instead of the conductor waiting out the whole step timeout.
  const step = { timeoutMs: config.bus.stepTimeoutMs, retries: config.bus.retries, livenessMs: config.bus.livenessMs };
  // An LLM step may take the SDK's timeout for each attempt, twice (the one re-ask): wait
  // at least that long before calling again (the builder and reviewer join a repeated key).
  const llmWorstMs = config.llm.timeoutMs * (config.llm.maxRetries + 1) * 2 + 30_000;
  const llmStep = { ...step, timeoutMs: Math.max(step.timeoutMs, llmWorstMs) };
  const mem = { timeoutMs: config.bus.memoryTimeoutMs, retries: config.bus.retries, livenessMs: config.bus.livenessMs };
  return {
    recall: (req) => call(nc, Endpoints.memory.recall, req, mem),
    plan: (req) => planner.plan(req),
    build: (req) => call(nc, Endpoints.builder.build, req, llmStep),
    gate: (req) => call(nc, Endpoints.reviewer.gate, req, mem),
    review: (req) => call(nc, Endpoints.reviewer.review, req, llmStep),
    audit: (req) => call(nc, Endpoints.reviewer.audit, req, llmStep),
    // An executor with no free slot (or a dead engine) answers busy: ask again until one has room.
    execute: (req) =>
      call(nc, Endpoints.executor.run, req, {
        ...step,
        timeoutMs: Math.max(step.timeoutMs, req.timeoutMs + 60_000),
        busyWaitMs: config.bus.busyWaitMs,
      }),
    rememberFailure: (req) => call(nc, Endpoints.memory.rememberFailure, req, mem),
    attachFix: (req) => call(nc, Endpoints.memory.attachFix, req, mem),
    rememberSuccess: (req) => call(nc, Endpoints.memory.rememberSuccess, req, mem),
    recordTask: (req) => call(nc, Endpoints.memory.recordTask, req, mem),
    reflect: (req) => planner.reflect(req),
    decompose: (req, problems) => planner.decompose(req, problems),
    reflectIntegration: (req) => planner.reflectIntegration(req),
    ...(planner.distil ? { distil: planner.distil.bind(planner) } : {}),
    rememberLessons: (req) => call(nc, rememberLessonsEndpoint, req, mem),
    turn: (req) => call(nc, Endpoints.builder.turn, req, llmStep),
    // A replica with no free slot answers busy: ask again until one has room.
    openSession: (req) =>
      call(nc, Endpoints.executor.sessionOpen, req, {
        ...step,
        timeoutMs: Math.max(step.timeoutMs, 120_000),
        busyWaitMs: config.bus.busyWaitMs,
      }),
    // No retry: a replica that does not answer is gone, and the loop opens the session elsewhere.
    sessionCall: (executorId, req) =>
      call(nc, onReplica(Endpoints.executor.sessionCall, executorId), req, {
        ...step,
        retries: 0,
        timeoutMs: Math.max(step.timeoutMs, (req.call.tool === "run" ? (req.call.timeoutMs ?? 600_000) : 0) + 30_000),
      }),
    closeSession: (executorId, req) =>
      call(nc, onReplica(Endpoints.executor.sessionClose, executorId), req, { ...step, retries: 0 }),
    tree: (snapshot, owner) => materializeSnapshot(nc, snapshot, join(config.dataDir, "cache", "repos"), owner),
    cacheDir: join(config.dataDir, "cache", "repomap"),
  };
}
