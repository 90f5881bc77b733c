/** @loopsmith/cli as a library: HumanEval tasks, mutants, the local stack and how a client follows a task's events, for benches and tests. */
export {
  HUMANEVAL_CHECK_PATH,
  HumanEvalRecord,
  findHumanEval,
  humanevalTask,
  humanevalTaskId,
  humanevalTestFiles,
  loadHumanEval,
  solutionFile,
} from "./humaneval.js";
export { mutantsOf, type Mutant } from "./mutants.js";
export { startLocalStack, answeringServices, type LocalStack, type StackOptions } from "./stack.js";
export { buildTask, type SolveOptions } from "./solve.js";
export { flagsOf } from "./steering.js";
export { firstFailingMutant, makeRequest, plainRequest, runCompletion, type RunsExecutions } from "./oracle.js";
export { ExitCode, EXIT_CODE_MEANINGS, exitCodeForError, exitCodeForResult, type ErrorObject } from "./exit-codes.js";
export { WATCH_POLL_MS, watchEvents, type WatchOptions } from "./watch.js";
