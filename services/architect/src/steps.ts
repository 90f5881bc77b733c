/** What the loop needs from the outside: the step calls, and its I/O (checkpoint, events). */
import { join } from "node:path";
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  Endpoints,
  call,
  materializeSnapshot,
  type BuildReply,
  type BuildRequest,
  type Config,
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
  type SuccessRecord,
  type TaskEvent,
  type TaskRecord,
} from "@loopsmith/shared";
import type { Planner } from "./planner.js";
import type { TaskState } from "./state.js";

/** The step calls of the loop. Each throws a `LoopsmithError`. */
export interface Steps {
  recall(req: RecallRequest): Promise<Recall>;
  plan(req: PlanRequest): Promise<PlanReply>;
  build(req: BuildRequest): Promise<BuildReply>;
  gate(req: GateRequest): Promise<GateResult>;
  review(req: ReviewRequest): Promise<ReviewReply>;
  execute(req: ExecutionRequest): Promise<ExecutionResult>;
  rememberFailure(req: FailureRecord): Promise<Remembered>;
  attachFix(req: FailureFix): Promise<Remembered>;
  rememberSuccess(req: SuccessRecord): Promise<Remembered>;
  recordTask(req: TaskRecord): Promise<Remembered>;
  reflect(req: ReflectRequest): Promise<ReflectReply>;
  /**
   * Repo mode: the directory holding the base tree of a snapshot in `owner`'s store (fetched
   * and extracted once per owner and commit). @throws LoopsmithError `not_found` when the
   * snapshot is not in the store
   */
  tree(snapshot: string, owner: string): Promise<string>;
  /** Where derived per-commit data (the repo map's tags) is cached; none when absent. */
  cacheDir?: string;
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
    execute: (req) => call(nc, Endpoints.executor.run, req, { ...step, timeoutMs: Math.max(step.timeoutMs, req.timeoutMs + 60_000) }),
    rememberFailure: (req) => call(nc, Endpoints.memory.rememberFailure, req, mem),
    attachFix: (req) => call(nc, Endpoints.memory.attachFix, req, mem),
    rememberSuccess: (req) => call(nc, Endpoints.memory.rememberSuccess, req, mem),
    recordTask: (req) => call(nc, Endpoints.memory.recordTask, req, mem),
    reflect: (req) => planner.reflect(req),
    tree: (snapshot, owner) => materializeSnapshot(nc, snapshot, join(config.dataDir, "cache", "repos"), owner),
    cacheDir: join(config.dataDir, "cache", "repomap"),
  };
}
