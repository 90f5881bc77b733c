/** @loopsmith/cli as a library: HumanEval tasks, mutants and the local stack, for benches and tests. */
export * from "./humaneval.js";
export * from "./mutants.js";
export { startLocalStack, answeringServices, type LocalStack, type StackOptions } from "./stack.js";
export { buildTask, flagsOf, type SolveOptions } from "./solve.js";
export * from "./oracle.js";
export { ExitCode, EXIT_CODE_MEANINGS, exitCodeForError, exitCodeForResult, type ErrorObject } from "./exit-codes.js";
