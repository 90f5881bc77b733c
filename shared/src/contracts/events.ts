/** Progress events and the task result. */
import { z } from "zod";
import { ErrorData } from "../runtime/errors.js";
import { FileChange, TaskId, Usage, V1 } from "./common.js";
import { ExecutionStatus, TestCase } from "./execution.js";
import { RepoChange } from "./repo.js";
import { SubtaskId } from "./dag.js";

/** Why a task stopped. */
export const StopReason = z.enum([
  "passed", // all tests pass
  "max_iterations",
  "budget", // the USD or token budget would be passed
  "stuck", // the same error signature N times in a row (circuit breaker)
  "cancelled",
  "error", // an unrecoverable error outside the candidate (configuration, auth, …)
  "needs_approval", // repo mode, policy `ask`: the candidate changes dependencies; a person decides
  "invalid_plan", // a DAG task: the planner's plan failed validation twice
  "subtask_failed", // a DAG task: a subtask gave up (its dependents were cancelled), or the integration run failed for good
  "time_limit", // the task's wall-clock limit (`limits.timeLimitMs`) passed; not a sandbox run's `timeout`
  "agent_stuck", // agent mode: the same tool call, or the same failing output, again after the loop redirected the model
]);
export type StopReason = z.infer<typeof StopReason>;

/** Phases of one iteration, in loop order. */
export const Phase = z.enum([
  "prepare", // repo mode: the base tree, the commands, the baseline run
  "recall",
  "plan",
  "build",
  "explore", // agent mode: the model's tool loop (each call an event with `data.agentMessages`, an AgentMessagesNote)
  "gate",
  "review",
  "audit", // the security audit (`Task.audit`): static tools in the sandbox, then the audit model
  "execute",
  "remember",
  "reflect",
  "schedule", // a DAG task: subtasks run as child tasks
  "integrate", // a DAG task: the task's tests on the merged tree
  "score",
  "done",
]);
export type Phase = z.infer<typeof Phase>;

/** Usage of one task, summed in total, per role and per iteration. */
export const UsageReport = z.object({
  total: Usage,
  byRole: z.record(z.string(), Usage),
  byIteration: z.array(Usage),
});
export type UsageReport = z.infer<typeof UsageReport>;

/** The final result of a task. */
export const TaskResult = z.object({
  v: V1,
  taskId: TaskId,
  status: z.enum(["passed", "failed", "cancelled", "error"]),
  stopReason: StopReason,
  iterations: z.number().int().nonnegative(),
  files: z.array(FileChange),
  tests: z.array(FileChange),
  lastExecution: z.object({ status: ExecutionStatus, tests: z.array(TestCase), durationMs: z.number() }).nullable(),
  /** Score on the hidden tests, when the task had any. */
  hidden: z.object({ status: ExecutionStatus, passed: z.number().int(), total: z.number().int() }).nullable(),
  /** Ids of the failure records memory stored for this task. */
  failureIds: z.array(z.string()),
  usage: UsageReport,
  /** True when any reply came from the scripted provider: no model was called for it. */
  scripted: z.boolean(),
  providers: z.array(z.string()),
  durationMs: z.number().nonnegative(),
  error: ErrorData.optional(),
  message: z.string(),
  /** Repo mode: the change against the base commit (also when the task did not pass). */
  repo: RepoChange.optional(),
});
export type TaskResult = z.infer<typeof TaskResult>;

/**
 * What a rejected intake message gets on `loopsmith.rejects.<intake>.<owner>` (`rejectsSubject`): a
 * message on the submit subject that is not JSON or fails its schema is never run and never
 * dropped in silence; the conductor logs it and publishes this.
 */
export const RejectNotice = z.object({
  v: V1,
  /** The subject the message came on (`loopsmith.tasks.submit.<owner>`). */
  subject: z.string(),
  /** Its sequence number in the intake stream. */
  streamSeq: z.number().int().nonnegative().optional(),
  /** The task or run id, when the message carries a string one. */
  taskId: z.string().optional(),
  /** ISO-8601 time of the rejection. */
  at: z.string(),
  /** `bad_request`, with what is wrong (the schema's problems, or "not JSON"). */
  error: ErrorData,
  /** The message's size, in bytes. */
  bytes: z.number().int().nonnegative(),
});
export type RejectNotice = z.infer<typeof RejectNotice>;

/** A progress event on `loopsmith.events.<owner>.<taskId>`. `seq` increases by one per task. */
export const TaskEvent = z.object({
  v: V1,
  taskId: TaskId,
  seq: z.number().int().nonnegative(),
  /** ISO-8601 time. */
  at: z.string(),
  iteration: z.number().int().nonnegative(),
  /** `generation`: an improvement run's generation ended (`data.report` is its GenerationReport). */
  kind: z.enum(["accepted", "phase", "step", "iteration", "usage", "warning", "generation", "result"]),
  phase: Phase.optional(),
  message: z.string(),
  data: z.record(z.string(), z.unknown()).optional(),
  result: TaskResult.optional(),
  /** A subtask's child task: its parent task. */
  parentTaskId: TaskId.optional(),
  /** A subtask's child task, or a DAG task's event about one subtask: the subtask. */
  subtaskId: SubtaskId.optional(),
});
export type TaskEvent = z.infer<typeof TaskEvent>;

/** Most events one {@link EventsPage} carries. */
export const EVENTS_PAGE_MAX = 200;

/**
 * Ask the architect for a task's events so far (a client reads its events this way and then
 * follows new ones on a core subscription; it has no JetStream consumer rights). Pages go by
 * the events stream's sequence: the first page from `after: 0`, the next from the last
 * page's `cursor`.
 */
export const EventsRequest = z.object({
  v: V1,
  taskId: TaskId,
  /** Events stored after this stream sequence number. @defaultValue 0 */
  after: z.number().int().nonnegative().default(0),
});
export type EventsRequest = z.infer<typeof EventsRequest>;

/** One page of a task's events, in stream order: at most {@link EVENTS_PAGE_MAX}, and under 512 KiB. */
export const EventsPage = z.object({
  events: z.array(TaskEvent),
  /** The stream sequence number of the last event read (the next page's `after`). */
  cursor: z.number().int().nonnegative(),
  /** Whether more events were stored when this page was cut. */
  more: z.boolean(),
});
export type EventsPage = z.infer<typeof EventsPage>;
