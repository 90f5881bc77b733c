/** @loopsmith/executor: the hardened Docker sandbox and its bus service. */
export {
  createExecutor,
  IDEMPOTENCY_TTL_MS,
  type DetailedResult,
  type Executor,
  type ExecutorDeps,
  type ExecutorLoad,
  type RunOptions,
} from "./executor.js";
export {
  describeEngine,
  engineEndpoint,
  ensureImages,
  EngineWatch,
  ENGINE_PING_EVERY_MS,
  ENGINE_PING_TIMEOUT_MS,
  type EngineHealth,
  type EngineInfo,
} from "./engine.js";
export { executorService, liveExecutors, type ExecutorServiceDeps } from "./service.js";
export {
  CREATED_GRACE_S,
  LABEL_SESSION,
  ORPHAN_GRACE_S,
  SWEEP_EVERY_MS,
  removeLeftovers,
  removeSessionDirs,
  type LeftoverOptions,
  type SessionDirOptions,
  type LiveInstances,
} from "./leftovers.js";
export { readWorkspaceDir, checkFiles, isSafeRelativePath, type ReadDirOptions } from "./workspace.js";
export { parseJUnit } from "./junit.js";
export { fitResult, RUN_OUTPUT_LIMIT_BYTES } from "./fit.js";
export { LABEL, LABEL_HOST, LABEL_PID, Sandbox, createOptions, type SandboxSpec } from "./sandbox.js";
export { PYTEST_CONTROLLER, PYTEST_ISOLATED, RESULT_PATH, type ImageKind } from "./commands.js";
export { PYTEST_RUNNER, prestartSpec, type PrestartSpec } from "./prestart.js";
export {
  judgeIntegrity,
  planIntegrity,
  readChannel,
  TRIPWIRE_DIR,
  type IntegrityPlan,
  type IntegrityJudgement,
  type ChannelRead,
  type Session,
} from "./integrity.js";
export { SHIPPED_SECCOMP_PROFILE, loadSeccompProfile } from "./seccomp.js";
export {
  repoArchive,
  snapshotLoader,
  isManifest,
  type RepoArchive,
  type TreeOverlay,
  type ArchiveLimits,
  type Manifest,
} from "./repo.js";
export type { ExtraEntry } from "./archive.js";
export { SetupLayers, type SetupOutcome, type SetupRequest, type SetupLayersDeps } from "./setup.js";
export {
  setupKey,
  volumeName,
  layerEnv,
  setupEnv,
  SETUP_NETWORK,
  SETUP_VOLUME_PREFIX,
  LABEL_SETUP,
  DEPS_DIR,
  NODE_MODULES_DIR,
  SETUP_RETRY_MS,
  PASSED_THROUGH,
} from "./layer.js";
export { PYTEST_ADDOPTS, shellOutcome } from "./shell.js";
export { SessionManager, SESSION_IDLE_MS, type SessionDeps } from "./session.js";
export { SESSION_IDLE_UID } from "./session-exec.js";
export {
  listTree,
  readLines,
  searchTree,
  MAX_SEARCH_MATCHES,
  MAX_SEARCH_FILE_BYTES,
  SEARCH_TIMEOUT_MS,
} from "./session-tools.js";
