/**
 * @loopsmith/evals: what loopsmith is measured against, with no stack of its own. The
 * datasets `loopsmith bench` reads (HumanEval, MBPP, the JavaScript set) as cases, HumanEval
 * as tasks, the mutants and the sandbox oracle that scores them, and SWE-bench: instances,
 * environments, the official log parsers and the grader (the official rule, run through the
 * executor's code). The CLI runs them against a stack; bench/ and tests/ import them here.
 * An explicit list: what is not named here is internal to the package.
 */
export { BenchCase, DatasetFormat, type SkippedLine } from "./case.js";
export { JsbenchRecord, MbppRecord, detectFormat, loadDataset, parseDataset, type LoadedDataset } from "./datasets.js";
export {
  HUMANEVAL_CHECK_PATH,
  HumanEvalRecord,
  findHumanEval,
  humanevalId,
  humanevalTask,
  humanevalTaskId,
  humanevalTestFiles,
  loadHumanEval,
  solutionFile,
} from "./humaneval.js";
export { docstringExamples, type DocExample } from "./humaneval-examples.js";
export { mutantsOf, type Mutant } from "./mutants.js";
export { firstFailingMutant, makeRequest, plainRequest, runCompletion, type RunsExecutions } from "./oracle.js";
export {
  BUILTIN_ENV,
  EnvFile,
  EnvSpec,
  LogParser,
  instanceImage,
  loadEnvFile,
  mergeEnv,
  officialImage,
  resolveEnv,
  setupCommandOf,
  type ResolvedEnv,
} from "./swe-bench/env.js";
export {
  SweInstance,
  SwePrediction,
  filesOfPatch,
  loadInstances,
  loadPredictions,
  parseInstances,
  testDirectives,
} from "./swe-bench/instances.js";
export {
  isResolved,
  parseDjango,
  parseLog,
  parsePytest,
  parseSympy,
  tally,
  type StatusMap,
  type Tally,
  type TestStatus,
} from "./swe-bench/parsers.js";
export { checkoutInstance, repoSource } from "./swe-bench/repos.js";
export {
  createGrader,
  setupNote,
  shellWord,
  type Grade,
  type Grader,
  type GraderOptions,
  type SweStatus,
} from "./swe-bench/grade.js";
