/**
 * Per-language defaults: the supervisor, the default test command, the environment
 * allowlist the command runs with (nothing comes from the host), and which image.
 */
import type { Config, FileChange, Language } from "@loopsmith/shared";
import { NODE_BOOTSTRAP, PYTHON_BOOTSTRAP } from "./bootstrap.js";

/** Where the default test commands write JUnit XML: outside the workspace, read back by the supervisor. */
export const RESULT_PATH = "/tmp/.loopsmith/result.xml";

/** The two sandbox image kinds: one supervisor each. */
export type ImageKind = "python" | "node";

/** Which test runner's exit codes apply. */
export type Runner = "pytest" | "node" | "custom";

/** The image kind that runs `language`. */
export function kindOf(language: Language): ImageKind {
  return language === "python" ? "python" : "node";
}

/** The configured image name of a kind. */
export function imageOf(config: Config, kind: ImageKind): string {
  return kind === "python" ? config.images.python : config.images.node;
}

/** The container's main command: the supervisor, waiting on stdin. */
export function supervisorCmd(kind: ImageKind): string[] {
  return kind === "python" ? ["python3", "-I", "-S", "-c", PYTHON_BOOTSTRAP] : ["node", "-e", NODE_BOOTSTRAP];
}

/**
 * The whole environment of a command in the sandbox: a fixed allowlist. The host's
 * environment never enters the container.
 */
export function commandEnv(language: Language): Record<string, string> {
  const env: Record<string, string> = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: "/tmp",
    TMPDIR: "/tmp",
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
  };
  if (language === "python") {
    env.PYTHONDONTWRITEBYTECODE = "1";
    env.PYTHONUNBUFFERED = "1";
  } else {
    env.NODE_ENV = "test";
    env.NO_COLOR = "1";
  }
  return env;
}

const NODE_TEST_FILE = /(^|\/)(test\/.*\.(c|m)?[jt]s$|[^/]*[._-]test\.(c|m)?[jt]s$|test[._-][^/]*\.(c|m)?[jt]s$|test_[^/]*\.(c|m)?[jt]s$)/;

/** Test files node's runner should run, by its naming conventions (plus `test_*.js`). */
export function nodeTestFiles(files: readonly FileChange[], language: Language): string[] {
  const ts = language === "typescript";
  return files
    .map((f) => f.path)
    .filter((p) => NODE_TEST_FILE.test(p) && !p.split("/").includes("node_modules"))
    .filter((p) => (ts ? /\.(c|m)?ts$/.test(p) : /\.(c|m)?js$/.test(p)))
    .sort();
}

/** Node options that let it run TypeScript with no build step (see the sandbox image). */
export const TS_NODE_OPTIONS = ["--import", "/opt/loopsmith/ts-register.mjs"];

/**
 * The default test command of a language, and its runner.
 * - python: pytest over the workspace, JUnit XML to {@link RESULT_PATH}.
 * - javascript/typescript: node's test runner with the spec reporter on stdout and the
 *   JUnit reporter to {@link RESULT_PATH}, over the files that look like tests.
 */
export function defaultCommand(language: Language, files: readonly FileChange[]): { argv: string[]; runner: Runner } {
  if (language === "python") {
    return {
      argv: ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", `--junitxml=${RESULT_PATH}`],
      runner: "pytest",
    };
  }
  const argv = [
    "node",
    ...(language === "typescript" ? TS_NODE_OPTIONS : []),
    "--test",
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=junit",
    `--test-reporter-destination=${RESULT_PATH}`,
    ...nodeTestFiles(files, language),
  ];
  return { argv, runner: "node" };
}

/**
 * A custom command for `language`: for TypeScript, `node …` gets the TypeScript loader so
 * `.ts` files run as they are.
 */
export function customCommand(language: Language, argv: readonly string[]): string[] {
  if (language === "typescript" && argv[0] === "node") return ["node", ...TS_NODE_OPTIONS, ...argv.slice(1)];
  return [...argv];
}
