/**
 * @loopsmith/shared: contracts, subjects, the typed bus, configuration, logging, errors, the
 * process runtime, LLM providers, prompts, JetStream set-up, idempotency and runner rules.
 * An explicit list: what is not named here is internal to the package.
 */
export {
  ErrorCode, ErrorData, LoopsmithError, RETRYABLE_BY_DEFAULT, busyError, busyReason, hasCode, toErrorData,
  type BusyReason,
} from "./errors.js";
export { assetPath, installRoot } from "./assets.js";
export { natsConnectOptions, natsIdentity, natsRefusal, natsServers } from "./nats-options.js";
export {
  NATS_ROLES, checkClientNames, clientPasswordVariable, clientPermission, inboxPrefixOf, natsPermissions, passwordVariable,
  renderNatsServerConfig,
} from "./nats-permissions.js";
export type { NatsPermission, NatsRole, NatsServerConfigOptions } from "./nats-permissions.js";
export { CLUSTER_SETTLE_MS, clusterNotReady, retryWhileClusterSettles, setupBus } from "./bus-setup.js";
export type { SetupBusOptions } from "./bus-setup.js";
export { metaMembership, settleMembership } from "./meta-group.js";
export type { MembershipOutcome, MetaMembership, MetaNodeView } from "./meta-group.js";
export {
  Budget, BuildReply, BuildRequest, CancelRequest, Candidate, CommitId, DependencyPolicy, Edit,
  EditFailure, EditFailureReason, EditReply, Empty, ExecutionBase, ExecutionRequest, ExecutionResult,
  EVENTS_PAGE_MAX, EventsPage, EventsRequest, ExecutionStatus, FailureBrief, FailureFix, FailureFixedBy, FailureRecord, Failures, FailuresRequest, FileChange,
  Finding, GateRequest, GateResult, HISTORY_GOAL_CHARS, HISTORY_PAGE_MAX, History, HistoryRequest,
  IdempotencyKey, Language, LlmStepReply, Owner, MemoryStats, Phase, Plan, PlanReply, PlanRequest, ProviderInfo, Recall, RecallRequest,
  RecallStats, RecalledFailure, RecalledSuccess, ReflectReply, ReflectRequest, Reflection, RelativePath, Remembered,
  RepoBrief, RepoChange, RepoSpec, RoleReplies, SimulatedWrong, Simulation, TaskScript, RUN_EVENTS_CAP, RunPart, RunRecord, RunRequest, snapshotName,
  Reply, Review, ReviewReply, ReviewRequest, STEP_NAME_PATTERN, StatsRequest, StatusRequest, StepHeader, StopReason,
  RejectNotice, StoredFailure, SuccessRecord, Task, TaskBrief, TaskEvent, TaskId, TaskLimits, TaskRecord, TaskResult,
  TaskSource, TestCase, TestSummary, Usage, UsageReport, V1, addUsage, emptyUsage, idempotencyKey,
  summarizeTests, testSummary, trimTests,
} from "./contracts/index.js";
export type { TaskInput } from "./contracts/index.js";
export {
  BenchFormat, CaseOutcome, CheckCounts, DEFAULT_IMPROVE_GOAL, DEFAULT_PROTECTED, DecisionReason,
  GenerationReport, Hypothesis, ImproveRequest, ImproveSettings, ImproveSummary, RunId, RunStopReason,
  SELF_PROTECTED, Statistic,
} from "./contracts/index.js";
export type { ImproveRequestInput, ImproveSettingsInput } from "./contracts/index.js";
export {
  DagPlan, DagPlanProblem, DagProgress, DagState, IntegrationReflection, InterfaceName, ProvidedInterface, Subtask, SubtaskChange,
  SubtaskId, SubtaskProgress, SubtaskState, SubtaskStatus, childTaskId, dagProgress, dependenciesOf, dependencyOrder, dependentsOf,
  validateDagPlan,
} from "./contracts/index.js";
export type { DagPlanInput } from "./contracts/index.js";
export {
  BEATS_PREFIX, DEFAULT_OWNER, OWNER_PATTERN, SUBJECT_PREFIX, ServiceNames, Streams, Subjects, checkOwner, eventsSubject,
  improveSubmitSubject, ownerOfSubject, ownerOfTask, rejectsSubject, tasksSubmitSubject,
} from "./subjects.js";
export type { ServiceName } from "./subjects.js";
export { Endpoints, requestSubject, servedSubject } from "./endpoints.js";
export type { EndpointDef } from "./endpoints.js";
export { HEARTBEAT_EVERY_MS, HEARTBEAT_HEADER, REPLY_HEADER, answer, call, handle, pingService, startService } from "./bus.js";
export { isTransientNatsError, permissionDenied } from "./nats-errors.js";
export type { CallOptions, Handler, HandlerContext, Registration, ReplyLink, ServiceOptions, ServicePing } from "./bus.js";
export { Config, DEFAULT_PRICES, FallbackTarget, ModelPrice, ProviderName, RoleLlm, loadConfig, ownerOf, priceOf } from "./config.js";
export { ENV_KEYS, configFromEnv, mergeConfig, withProviderCredentials } from "./config-layers.js";
export { maskConfig, maskUrl } from "./mask.js";
export type { ConfigInput, LoadConfigOptions } from "./config.js";
export { REDACT_PATHS, createLogger } from "./log.js";
export type { LoggerOptions } from "./log.js";
export {
  LOOPSMITH_VERSION, SERVICE_NATS_WAIT_MS, connectNats, exitOnSignals, logConnectionStatus, processAlive, runService, serviceMain,
} from "./runtime.js";
export type { PreparedStart, RunningService, ServiceDeps, ServiceIdentityFile, ServiceModule, ShutdownHook } from "./runtime.js";
export {
  CHARS_PER_TOKEN, FALLBACK_CODES, REASK_INSTRUCTION, ROLES, SCRIPTLESS_MODEL, ScriptFile, SpendMeter,
  TASK_SCRIPT_CACHE_MAX, TASK_SCRIPT_NAME, basePriceKey, causeMarker, checkBudget, costOf, createProvider,
  createRoutingProvider, createScriptedBackend, createScriptlessBackend, createSimulatedBackend,
  effectiveRoles, estimateCost, formatIssues, jsonCandidates, loadScript, outputSchema, parseStructured,
  readStructured, resolvePrice, resolveRoutes, simulatedAnswer, simulatedDraw, taskScriptBackend,
  validateValue, withTaskScripts,
} from "./llm/index.js";
export type {
  AnsweredBy, Backend, BadReplyDetails, BudgetCheck, ChatMessage, Completion, CompletionRequest, Conversation,
  CostEstimate, CreateProviderDeps, EffectiveRole, EngineDeps, EstimateInput, FallbackNote, LlmProvider,
  LlmTarget, OutputSchema, ReadResult, ReplyIssue, Role, RoleRoute, RouterDeps, TaskScriptDeps, TokenCounts,
  TranscriptLine, TurnReply,
} from "./llm/index.js";
export {
  PROMPT_VERSIONS, approxTokens, loadPrompt, renderFailure, renderFile, renderHints, renderHistory,
  renderTask, section, trimToTokens,
} from "./prompts.js";
export type { Prompt } from "./prompts.js";
export {
  CHECKPOINT_BLOBS_BUCKET, openCheckpointBlobs,
} from "./streams.js";
export {
  EVENTS_MAX_AGE_MS, TASK_ACK_WAIT_MS, TASK_DUPLICATE_WINDOW_MS, TASK_MAX_DELIVER, differingSettings, ensureReplicas,
  ensureStreams, ensureTaskIntake, followEvents, lastEventSeq, openBucket, openTaskStates, publishEvent, rejectIntakeMessage,
  submitTask,
} from "./streams.js";
export { WATCH_POLL_MS, watchEvents } from "./watch.js";
export type { WatchOptions } from "./watch.js";
export type { IntakeMessage, StreamOptions, Submitted } from "./streams.js";
export { IMPROVE_MAX_DELIVER, ensureImproveIntake, ensureImproveStreams, openImproveStates, submitImprove } from "./improve-streams.js";
export { createIdempotencyCache } from "./idempotency.js";
export type { IdempotencyCache, IdempotencyOptions } from "./idempotency.js";
export { isDependencyManifest, isRunnerConfig, isTestFile } from "./runner-config.js";
export {
  MAX_SNAPSHOT_BYTES, REPOS_BUCKET, SNAPSHOT_TTL_MS, extractTar, getSnapshot, materializeSnapshot, openSnapshots, snapshotBucket,
  putSnapshot,
} from "./snapshot.js";
export type { ExtractedTree } from "./snapshot.js";
export { forEachTarEntry, readTar, safeTarPath, type ReadTarOptions, type TarEntry } from "./tar.js";
export { applyEdits, checkEditPath, renderEditFailures, unifiedPatch } from "./edits.js";
export type { ApplyResult, PathCheck, ReadBase } from "./edits.js";
