/** @loopsmith/executor: the hardened Docker sandbox and its bus service. */
export { createExecutor, IDEMPOTENCY_TTL_MS, type DetailedResult, type Executor, type ExecutorDeps, type RunOptions } from "./executor.js";
export { executorService, type ExecutorServiceDeps } from "./service.js";
export { readWorkspaceDir, checkFiles, isSafeRelativePath, type ReadDirOptions } from "./workspace.js";
export { parseJUnit } from "./junit.js";
export { fitResult } from "./fit.js";
export { LABEL, LABEL_HOST, LABEL_PID, Sandbox, createOptions, type SandboxSpec } from "./sandbox.js";
export { PYTEST_ISOLATED, type ImageKind } from "./commands.js";
export { SHIPPED_SECCOMP_PROFILE, loadSeccompProfile } from "./seccomp.js";
