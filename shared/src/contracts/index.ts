/**
 * The contracts: every message on the bus as a zod schema with its inferred type, `v: 1` on each.
 * An explicit list per file, so what a contract module adds is exported on purpose.
 */
export {
  Budget, FileChange, IdempotencyKey, Language, Owner, RelativePath, Reply, STEP_NAME_PATTERN, StepHeader,
  TaskId, Usage, V1, addUsage, emptyUsage, idempotencyKey,
} from "./common.js";
export {
  CommitId, DependencyPolicy, Edit, EditFailure, EditFailureReason, EditReply, RepoBrief, RepoChange,
  RepoSpec, snapshotName,
} from "./repo.js";
export {
  RoleReplies, ScriptFile, SimulatedWrong, Simulation, TaskScript,
} from "./script.js";
export {
  CancelRequest, StatusRequest, Task, TaskLimits, TaskSource, type TaskInput,
} from "./task.js";
export {
  Candidate, Finding, GateResult, Plan, Reflection, Review,
} from "./plan.js";
export {
  ExecutionBase, ExecutionRequest, ExecutionResult, ExecutionStatus, TestCase, TestSummary, summarizeTests,
  testSummary, trimTests,
} from "./execution.js";
export {
  Empty, FailureFix, FailureFixedBy, FailureRecord, Failures, FailuresRequest, HISTORY_GOAL_CHARS,
  HISTORY_PAGE_MAX, History, HistoryRequest, MemoryStats, RUN_EVENTS_CAP, Recall, RecallRequest, RecallStats,
  RecalledFailure, RecalledSuccess, Remembered, RunPart, RunRecord, RunRequest, StatsRequest, StoredFailure,
  SuccessRecord, TaskRecord,
} from "./memory.js";
export {
  BuildReply, BuildRequest, FailureBrief, GateRequest, LlmStepReply, PlanReply, PlanRequest, ProviderInfo,
  ReflectReply, ReflectRequest, ReviewReply, ReviewRequest, TaskBrief,
} from "./steps.js";
export {
  EVENTS_PAGE_MAX, EventsPage, EventsRequest, Phase, RejectNotice, StopReason, TaskEvent, TaskResult,
  UsageReport,
} from "./events.js";
export {
  BenchFormat, CaseOutcome, CheckCounts, DEFAULT_IMPROVE_GOAL, DEFAULT_PROTECTED, DecisionReason,
  GenerationReport, Hypothesis, ImproveRequest, ImproveSettings, ImproveSummary, RunId, RunStopReason,
  SELF_PROTECTED, Statistic, type ImproveRequestInput, type ImproveSettingsInput,
} from "./improve.js";
export {
  DagPlan, DagPlanProblem, DagProgress, DagState, IntegrationReflection, InterfaceName, ProvidedInterface,
  Subtask, SubtaskChange, SubtaskId, SubtaskProgress, SubtaskState, SubtaskStatus, childTaskId, dagProgress,
  dependenciesOf, dependencyOrder, dependentsOf, validateDagPlan, type DagPlanInput,
} from "./dag.js";
