/**
 * @loopsmith/shared, by concern, each with its own index that names its public API:
 * - `contracts/`: every message on the bus, as zod schemas with their types;
 * - `bus/`: subjects, endpoints, the typed bus over `$SRV` services, NATS options, errors and
 *   permissions, JetStream streams, buckets and object stores, idempotency;
 * - `llm/`: providers, the tolerant reader, cost and budgets, the prompts;
 * - `runtime/`: errors, configuration, logging, the service runtime, installed assets;
 * - `workspace/`: search/replace edits, tar archives, the runner-configuration rules.
 * Each is also a subpath export (`@loopsmith/shared/bus`, …). This index re-exports them by name.
 */
export {
  BenchFormat, Budget, BuildReply, BuildRequest, CancelRequest, Candidate, CaseOutcome, CheckCounts, CommitId,
  DEFAULT_IMPROVE_GOAL, DEFAULT_PROTECTED, DagPlan, DagPlanProblem, DagProgress, DagState, DecisionReason,
  DependencyPolicy, EVENTS_PAGE_MAX, Edit, EditFailure, EditFailureReason, EditReply, Empty, EventsPage,
  EventsRequest, ExecutionBase, ExecutionRequest, ExecutionResult, ExecutionStatus, FailureBrief, FailureFix,
  FailureFixedBy, FailureRecord, Failures, FailuresRequest, FileChange, Finding, GateRequest, GateResult,
  GenerationReport, HISTORY_GOAL_CHARS, HISTORY_PAGE_MAX, History, HistoryRequest, Hypothesis, IdempotencyKey,
  ImproveRequest, ImproveSettings, ImproveSummary, IntegrationReflection, InterfaceName, Language,
  LlmStepReply, MemoryStats, Owner, Phase, Plan, PlanReply, PlanRequest, ProvidedInterface, ProviderInfo,
  RUN_EVENTS_CAP, Recall, RecallRequest, RecallStats, RecalledFailure, RecalledSuccess, ReflectReply,
  ReflectRequest, Reflection, RejectNotice, RelativePath, Remembered, Reply, RepoBrief, RepoChange, RepoSpec,
  Review, ReviewReply, ReviewRequest, RoleReplies, RunId, RunPart, RunRecord, RunRequest, RunStopReason,
  SELF_PROTECTED, STEP_NAME_PATTERN, ScriptFile, SimulatedWrong, Simulation, Statistic, StatsRequest,
  StatusRequest, StepHeader, StopReason, StoredFailure, Subtask, SubtaskChange, SubtaskId, SubtaskProgress,
  SubtaskState, SubtaskStatus, SuccessRecord, Task, TaskBrief, TaskEvent, TaskId, TaskLimits, TaskRecord,
  TaskResult, TaskScript, TaskSource, TestCase, TestSummary, Usage, UsageReport, V1, addUsage, childTaskId,
  dagProgress, dependenciesOf, dependencyOrder, dependentsOf, emptyUsage, idempotencyKey, snapshotName,
  summarizeTests, testSummary, trimTests, validateDagPlan, type DagPlanInput, type ImproveRequestInput,
  type ImproveSettingsInput, type TaskInput,
} from "./contracts/index.js";
export {
  BEATS_PREFIX, CHECKPOINT_BLOBS_BUCKET, CLUSTER_SETTLE_MS, DEFAULT_OWNER, EVENTS_MAX_AGE_MS, Endpoints,
  HEARTBEAT_EVERY_MS, HEARTBEAT_HEADER, IMPROVE_MAX_DELIVER, MAX_SNAPSHOT_BYTES, NATS_ROLES, OWNER_PATTERN,
  REPLY_HEADER, REPOS_BUCKET, SNAPSHOT_TTL_MS, SUBJECT_PREFIX, ServiceNames, Streams, Subjects,
  TASK_ACK_WAIT_MS, TASK_DUPLICATE_WINDOW_MS, TASK_MAX_DELIVER, answer, call, checkClientNames, checkOwner,
  clientPasswordVariable, clientPermission, clusterNotReady, createIdempotencyCache, differingSettings,
  ensureImproveIntake, ensureImproveStreams, ensureReplicas, ensureStreams, ensureTaskIntake, eventsSubject,
  extractTar, followEvents, getSnapshot, handle, improveSubmitSubject, inboxPrefixOf, isTransientNatsError,
  lastEventSeq, materializeSnapshot, metaMembership, natsConnectOptions, natsIdentity, natsPermissions,
  natsRefusal, natsServers, openBucket, openCheckpointBlobs, openImproveStates, openSnapshots, openTaskStates,
  ownerOfSubject, ownerOfTask, passwordVariable, permissionDenied, pingService, publishEvent, putSnapshot,
  rejectIntakeMessage, rejectsSubject, renderNatsServerConfig, requestSubject, retryWhileClusterSettles,
  servedSubject, settleMembership, setupBus, snapshotBucket, startService, submitImprove, submitTask,
  tasksSubmitSubject, type CallOptions, type EndpointDef, type ExtractedTree, type Handler,
  type HandlerContext, type IdempotencyCache, type IdempotencyOptions, type IntakeMessage,
  type MembershipOutcome, type MetaMembership, type MetaNodeView, type NatsPermission, type NatsRole,
  type NatsServerConfigOptions, type Registration, type ReplyLink, type ServiceName, type ServiceOptions,
  type ServicePing, type SetupBusOptions, type StreamOptions, type Submitted,
} from "./bus/index.js";
export {
  CHARS_PER_TOKEN, FALLBACK_CODES, PROMPT_VERSIONS, REASK_INSTRUCTION, ROLES, SCRIPTLESS_MODEL,
  SpendMeter, TASK_SCRIPT_CACHE_MAX, TASK_SCRIPT_NAME, approxTokens, basePriceKey, causeMarker, checkBudget,
  costOf, createProvider, createRoutingProvider, createScriptedBackend, createScriptlessBackend,
  createSimulatedBackend, effectiveRoles, estimateCost, formatIssues, jsonCandidates, loadPrompt, loadScript,
  outputSchema, parseStructured, readStructured, renderFailure, renderFile, renderHints, renderHistory,
  renderTask, resolvePrice, resolveRoutes, section, simulatedAnswer, simulatedDraw, taskScriptBackend,
  trimToTokens, validateValue, withTaskScripts, type AnsweredBy, type Backend, type BadReplyDetails,
  type BudgetCheck, type ChatMessage, type Completion, type CompletionRequest, type Conversation,
  type CostEstimate, type CreateProviderDeps, type EffectiveRole, type EngineDeps, type EstimateInput,
  type FallbackNote, type LlmProvider, type LlmTarget, type OutputSchema, type Prompt, type ReadResult,
  type ReplyIssue, type Role, type RoleRoute, type RouterDeps, type TaskScriptDeps, type TokenCounts,
  type TranscriptLine, type TurnReply,
} from "./llm/index.js";
export {
  Config, DEFAULT_PRICES, ENV_KEYS, ErrorCode, ErrorData, FallbackTarget, LOOPSMITH_VERSION, LoopsmithError,
  ModelPrice, ProviderName, REDACT_PATHS, RETRYABLE_BY_DEFAULT, RoleLlm, SERVICE_NATS_WAIT_MS, assetPath,
  busyError, busyReason, configFromEnv, connectNats, createLogger, exitOnSignals, hasCode, installRoot,
  loadConfig, logConnectionStatus, maskConfig, maskUrl, mergeConfig, ownerOf, priceOf, processAlive,
  runService, serviceMain, toErrorData, withProviderCredentials, type BusyReason, type ConfigInput,
  type LoadConfigOptions, type LoggerOptions, type PreparedStart, type RunningService, type ServiceDeps,
  type ServiceIdentityFile, type ServiceModule, type ShutdownHook,
} from "./runtime/index.js";
export {
  applyEdits, checkEditPath, forEachTarEntry, isDependencyManifest, isRunnerConfig, isTestFile, readTar,
  renderEditFailures, safeTarPath, unifiedPatch, type ApplyResult, type PathCheck, type ReadBase,
  type ReadTarOptions, type TarEntry,
} from "./workspace/index.js";
