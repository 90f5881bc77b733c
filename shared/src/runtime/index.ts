/**
 * The process: errors, configuration and its layers, logging, the service runtime (start, signals,
 * shutdown) and where installed assets are.
 * An explicit list: what is not named here is internal to the package.
 */
export {
  ErrorCode,
  ErrorData,
  LoopsmithError,
  RETRYABLE_BY_DEFAULT,
  busyError,
  busyReason,
  hasCode,
  toErrorData,
  type BusyReason,
} from "./errors.js";
export { assetPath, installRoot } from "./assets.js";
export {
  Config,
  FallbackTarget,
  ModelPrice,
  ProviderName,
  RoleLlm,
  checkConfig,
  checkImproveSection,
  loadConfig,
  loadConfigWithSources,
  ownerOf,
  priceOf,
} from "./config.js";
export {
  ENV_KEYS,
  configFromEnv,
  describeSource,
  findConfigFiles,
  mergeConfig,
  repositoryRoot,
  withProviderCredentials,
} from "./config-layers.js";
export type { ConfigFiles, ConfigSource } from "./config-layers.js";
export { maskConfig, maskUrl } from "./mask.js";
export type { CheckedConfig, ConfigInput, ConfigProblem, LoadConfigOptions, LoadedConfig } from "./config.js";
export { strictObject } from "./unknown-keys.js";
export { REDACT_PATHS, createLogger } from "./log.js";
export type { LoggerOptions } from "./log.js";
export {
  LOOPSMITH_VERSION,
  SERVICE_NATS_WAIT_MS,
  connectNats,
  exitOnSignals,
  logConnectionStatus,
  processAlive,
  runService,
  serviceMain,
} from "./runtime.js";
export type {
  PreparedStart,
  RunningService,
  ServiceDeps,
  ServiceIdentityFile,
  ServiceModule,
  ShutdownHook,
} from "./runtime.js";
