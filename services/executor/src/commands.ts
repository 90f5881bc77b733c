/**
 * Per-language defaults: the supervisor, the default test command, the environment
 * allowlist the command runs with (nothing comes from the host), and which image.
 */
import { isTestFile } from "@loopsmith/shared/workspace";
import { type Config } from "@loopsmith/shared/runtime";
import { type FileChange, type Language } from "@loopsmith/shared/contracts";
import { encodePrestart, NODE_BOOTSTRAP, PYTHON_BOOTSTRAP, type PrestartSpec } from "./bootstrap.js";

/** Where the node verdict reporter is installed in the sandbox image (deploy/rootfs/sandbox-node). */
export const NODE_VERDICT_REPORTER = "/opt/loopsmith/verdict-reporter.mjs";

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

/**
 * The container's main command: the supervisor, waiting on stdin. A Python supervisor given
 * `prestart` (prestart.ts, as {@link encodePrestart}) starts the pytest runner before the run arrives.
 */
export function supervisorCmd(kind: ImageKind, prestart?: PrestartSpec): string[] {
  if (kind === "node") return ["node", "-e", NODE_BOOTSTRAP];
  return ["python3", "-I", "-S", "-c", PYTHON_BOOTSTRAP, ...(prestart ? [encodePrestart(prestart)] : [])];
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

/** Test files node's runner should run, by its naming conventions (plus `test_*.js`). */
export function nodeTestFiles(files: readonly FileChange[], language: Language): string[] {
  return files
    .map((f) => f.path)
    .filter((p) => isTestFile(p, language))
    .sort();
}

/** Node options that let it run TypeScript with no build step (see the sandbox image). */
export const TS_NODE_OPTIONS = ["--import", "/opt/loopsmith/ts-register.mjs"];

/**
 * pytest with a runner configuration that no file in the workspace can change:
 * - `python3 -I`: isolated mode — no `PYTHON*` variables, no user site directory, and the
 *   workspace is not on `sys.path` at start-up, so a workspace `sitecustomize.py`,
 *   `usercustomize.py` or `.pth` file is never run and plugins load only from the image;
 *   `-B` and `-u` stand in for the `PYTHONDONTWRITEBYTECODE`/`PYTHONUNBUFFERED` that `-I` ignores;
 * - `-c /dev/null --rootdir=/workspace`: an empty ini file, so `pytest.ini`, `.pytest.ini`,
 *   `pyproject.toml`, `tox.ini` and `setup.cfg` are not read (no `addopts`, no `-p`);
 * - `--noconftest`: no `conftest.py` is loaded (the task's own included: tests must be
 *   self-contained);
 * - `-p no:cacheprovider`: nothing is read from or written to `.pytest_cache`.
 */
export const PYTEST_ISOLATED = [
  "python3",
  "-I",
  "-B",
  "-u",
  "-m",
  "pytest",
  "-q",
  "-c",
  "/dev/null",
  "--rootdir=/workspace",
  "--noconftest",
  "-p",
  "no:cacheprovider",
];

/**
 * pytest options that make the verdict the controller's (integrity.ts): loopsmith's plugin,
 * which forks the worker that collects and runs the tests (the process the sandbox started
 * only replays their reports), reports on the verdict channel and adds the run's tripwire
 * tests (deploy/rootfs/sandbox-python/loopsmith_verdict.py). `-p` loads it also where plugin
 * autoloading is off.
 */
export const PYTEST_CONTROLLER = ["-p", "loopsmith_verdict"];

/**
 * Python files that use hypothesis (`import hypothesis` or `from hypothesis …`): only then is
 * its pytest plugin loaded (see {@link defaultCommand}).
 */
const USES_HYPOTHESIS = /^\s*(?:import|from)\s+hypothesis\b/m;

/** The pytest plugin module of hypothesis, the one plugin the sandbox image registers by entry point. */
export const HYPOTHESIS_PLUGIN = "_hypothesis_pytestplugin";

/**
 * The default test command of a language, its runner and its environment (over
 * {@link commandEnv}).
 * - python: pytest ({@link PYTEST_ISOLATED}) with the controller ({@link PYTEST_CONTROLLER}:
 *   its signed report is the verdict, so no JUnit file is written), over `tests`
 *   when given, else every file pytest's naming conventions find. When `files` is the whole
 *   workspace (no repository base under it), plugin autoloading is off
 *   (`PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`) and hypothesis's plugin is loaded by name (`-p`)
 *   only when a file uses hypothesis: importing it for every run cost 0.15–0.2 s of CPU of a
 *   0.45 s pytest start in the sandbox image (measured there with `time`), about a third of a
 *   scripted HumanEval task's sandbox CPU (`npm run bench:throughput`). A test that uses
 *   hypothesis runs with the plugin as before; `@given` works without it in any case.
 * - javascript/typescript: node's test runner with loopsmith's verdict reporter
 *   ({@link NODE_VERDICT_REPORTER}: the spec view on stdout, the verdict on the supervisor's
 *   channel), over `tests` when given, else the files that look like tests.
 * @param tests - exactly the test files to run (workspace-relative), or undefined
 * @param opts.wholeWorkspace - `files` is every file of the workspace (false over a repository's base tree)
 */
export function defaultCommand(
  language: Language,
  files: readonly FileChange[],
  tests?: readonly string[],
  opts: { wholeWorkspace?: boolean } = {},
): { argv: string[]; runner: Runner; env: Record<string, string> } {
  const env = commandEnv(language);
  if (language === "python") {
    const lean = opts.wholeWorkspace ?? true;
    const hypothesis = !lean || files.some((f) => f.path.endsWith(".py") && USES_HYPOTHESIS.test(f.content));
    return {
      argv: [
        ...PYTEST_ISOLATED,
        ...PYTEST_CONTROLLER,
        ...(lean && hypothesis ? ["-p", HYPOTHESIS_PLUGIN] : []),
        ...(tests ? ["--", ...tests] : []),
      ],
      runner: "pytest",
      env: lean ? { ...env, PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1" } : env,
    };
  }
  const argv = [
    "node",
    ...(language === "typescript" ? TS_NODE_OPTIONS : []),
    "--test",
    `--test-reporter=${NODE_VERDICT_REPORTER}`,
    "--test-reporter-destination=stdout",
    ...(tests ?? nodeTestFiles(files, language)),
  ];
  return { argv, runner: "node", env };
}

/**
 * A custom command for `language`: for TypeScript, `node …` gets the TypeScript loader so
 * `.ts` files run as they are.
 */
export function customCommand(language: Language, argv: readonly string[]): string[] {
  if (language === "typescript" && argv[0] === "node") return ["node", ...TS_NODE_OPTIONS, ...argv.slice(1)];
  return [...argv];
}
