/**
 * @loopsmith/cli as a library: the local stack, building a task, exit codes and how a client
 * follows a task's events, for benches and tests. Datasets, HumanEval, mutants, the oracle and
 * SWE-bench grading are @loopsmith/evals' (evals/src/index.ts): import them from there.
 */
export { startLocalStack, answeringServices, type LocalStack, type StackOptions } from "./stack.js";
export { buildTask, type SolveOptions } from "./solve.js";
export { flagsOf } from "./steering.js";
export { ExitCode, EXIT_CODE_MEANINGS, exitCodeForError, exitCodeForResult, type ErrorObject } from "./exit-codes.js";
export { WATCH_POLL_MS, watchEvents, type WatchOptions } from "./watch.js";
