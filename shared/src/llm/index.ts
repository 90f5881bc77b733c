/** The LLM module: one provider interface, its implementations, the tolerant reader, cost and budgets. */
export {
  ROLES,
  type AnsweredBy,
  type CallContext,
  type ChatMessage,
  type ConverseReply,
  type ConverseRequest,
  type ToolSpec,
  type Completion,
  type CompletionRequest,
  type FallbackNote,
  type LlmProvider,
  type Role,
} from "./types.js";
export { createProvider, resolvePrice, type CreateProviderDeps } from "./create.js";
export {
  resolveRoutes,
  effectiveRoles,
  configuredRoleOf,
  unpricedModels,
  TASK_ROLES,
  type LlmTarget,
  type RoleRoute,
  type EffectiveRole,
} from "./roles.js";
export {
  ZERO_PRICE,
  basePriceKey,
  describePriceSource,
  flatCost,
  lookupPricing,
  refuseUnpriced,
  unpricedRefusal,
  unpricedWarning,
  type PriceQuery,
  type PriceSource,
  type Pricing,
  type UnpricedModel,
} from "./prices.js";
export { createRoutingProvider, FALLBACK_CODES, type RouterDeps } from "./router.js";
export {
  parseStructured,
  readStructured,
  validateValue,
  jsonCandidates,
  formatIssues,
  type ReplyIssue,
  type BadReplyDetails,
  type ReadResult,
} from "./parse.js";
export {
  costOf,
  estimateCost,
  SpendMeter,
  CHARS_PER_TOKEN,
  type TokenCounts,
  type EstimateInput,
  type CostEstimate,
} from "./cost.js";
export {
  NO_NEED,
  admitBudget,
  budgetError,
  budgetOver,
  budgetStopText,
  checkBudget,
  scopeOf,
  type AdmissionLimits,
  type BudgetCheck,
  type BudgetLimit,
  type BudgetNeed,
  type BudgetOver,
  type BudgetRoom,
  type BudgetScope,
  type BudgetUnit,
} from "./budget.js";
export {
  REASK_INSTRUCTION,
  agentChatLines,
  type Backend,
  type Conversation,
  type EngineDeps,
  type ToolTurn,
  type TurnReply,
} from "./engine.js";
export {
  UNPARSED_ARGS,
  TOOL_DESCRIPTIONS,
  JsonModeTurn,
  agentToolSpecs,
  jsonModeInstruction,
  readToolArgs,
  toolParameters,
} from "./agent-tools.js";
export {
  loadScript,
  ScriptFile,
  createScriptedBackend,
  createScriptlessBackend,
  scriptedTurn,
  SCRIPTLESS_MODEL,
} from "./scripted.js";
export { createSimulatedBackend, simulatedAnswer, simulatedDraw, causeMarker } from "./simulated.js";
export {
  withTaskScripts,
  taskScriptBackend,
  TASK_SCRIPT_NAME,
  TASK_SCRIPT_CACHE_MAX,
  type TaskScriptDeps,
} from "./task-script.js";
export { outputSchema, type OutputSchema } from "./schema.js";
export type { TranscriptLine } from "./transcript.js";
export {
  PROMPT_VERSIONS,
  approxTokens,
  loadPrompt,
  memoryUseText,
  renderFailure,
  renderFile,
  renderHints,
  renderHistory,
  renderTask,
  section,
  trimToTokens,
} from "./prompts.js";
export type { Prompt } from "./prompts.js";
export {
  createEmbeddingsClient,
  type EmbeddingsClient,
  type EmbeddingsClientOptions,
  type EmbeddingsReply,
} from "./embeddings.js";
export {
  LESSON_PROMPT_VERSION,
  LESSON_SCHEMA_NAME,
  LESSON_SYSTEM,
  acceptLessons,
  definedNames,
  fallbackLesson,
  lessonRecord,
  renderLessonAsk,
  renderLessons,
  scrubRule,
  type LessonAsk,
} from "./lesson-prompt.js";
export {
  DistilledLesson,
  LESSON_RULE_MAX,
  LessonReply,
  LessonSource,
  LessonsRecord,
  LessonsStored,
  MemoryKind,
  MemoryUse,
  MemoryVerdict,
  RecallUse,
  RecalledLesson,
  StoredLesson,
  UtilityRow,
  UtilityStats,
} from "../contracts/lesson.js";
export { rememberLessonsEndpoint, REMEMBER_LESSONS_SUBJECT } from "../bus/lesson-endpoint.js";
