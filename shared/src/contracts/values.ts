/**
 * The plain values the contracts are built from: the names a field accepts and the ranges of
 * the limits a user sets. The zod schemas (`Language`, `TaskLimits`, `Task`, `RepoSpec`,
 * `ImproveSettings`, the configuration's `ProviderName` and `ROLES`) are made from these, so
 * they are the one source.
 *
 * This module imports nothing, not even zod, so that the CLI can name them while it declares
 * its flags (`@loopsmith/shared/contracts/values`) and still answer `--help` or a usage error
 * before any schema is built.
 */

/** Languages the sandbox runs (`Language`). */
export const LANGUAGES = ["python", "javascript", "typescript"] as const;

/** LLM providers (`ProviderName` of the configuration). */
export const PROVIDERS = ["anthropic", "openai-compatible", "bedrock", "scripted"] as const;

/**
 * The LLM roles of the loop; each has one versioned prompt file and its own
 * `llm.roles.<role>` settings. `agent` is agent mode's model.
 */
export const ROLES = ["spec", "plan", "build", "review", "reflect", "improve", "agent"] as const;

/** `TaskLimits.maxIterations`: build/execute iterations at most. */
export const MAX_ITERATIONS = { min: 1, max: 50, default: 5 } as const;

/** `TaskLimits.subtaskAttempts`: attempts per subtask of a DAG task. */
export const SUBTASK_ATTEMPTS = { min: 1, max: 10, default: 3 } as const;

/**
 * `TaskLimits.timeLimitMs` and `subtaskTimeLimitMs`, in ms: 1 s to 7 days (the events
 * stream's retention).
 */
export const TIME_LIMIT_MS = { min: 1_000, max: 7 * 86_400_000 } as const;

/** `Task.parallel`: subtasks of a DAG task running at once. */
export const PARALLEL = { min: 1, max: 16 } as const;

/** `Task.memory`: recall from memory (`on`) or not (`off`). */
export const MEMORY_MODES = ["on", "off"] as const;

/** `DependencyPolicy`: what becomes of a candidate that changes dependencies. */
export const DEPENDENCY_POLICIES = ["reject", "ask", "allow"] as const;

/** `RepoSpec.mode`: agent mode's tool loop, or one-shot edits. */
export const REPO_MODES = ["agent", "oneshot"] as const;

/** `BenchFormat`: how an improvement run's benchmark reports its cases. */
export const BENCH_FORMATS = ["json", "junit"] as const;

/** `ImproveSettings.alphaSpending`: how a run spends its `alpha` over its tests (`testAlpha`). */
export const ALPHA_SPENDINGS = ["harmonic", "basel", "none"] as const;
