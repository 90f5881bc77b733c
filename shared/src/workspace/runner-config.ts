/**
 * Which files configure a language's test runner or its module resolution. A candidate's
 * files of this kind are never put in a verdict's workspace: they would change how the
 * acceptance and hidden tests run (a `conftest.py` hook that reports every test as passed,
 * an `addopts = --collect-only` in `pytest.ini`, a `node_modules/` shim of an assertion
 * library). The executor's isolated pytest invocation ignores the Python ones anyway
 * (`services/executor/src/commands.ts`, `PYTEST_ISOLATED`); this list is the second layer,
 * and the only one for Node.js, whose resolution reads `package.json` and `node_modules`.
 * See docs/SANDBOX.md, "Verdicts".
 */
import type { Language } from "../contracts/common.js";

/**
 * Python: pytest's configuration and plugin files (pytest docs, "Configuration file
 * formats" and "conftest.py"), and the files Python's `site` module runs at start-up
 * (`sitecustomize`, `usercustomize`, `*.pth`).
 */
const PYTHON_RUNNER_CONFIG =
  /(^|\/)(conftest\.py|pytest\.ini|\.pytest\.ini|pyproject\.toml|tox\.ini|setup\.cfg|sitecustomize\.py|usercustomize\.py|[^/]*\.pth)$/;

/**
 * Node.js: package scopes (`package.json`: `type`, `imports`, `exports`, `main`), installed
 * modules (`node_modules/`), and npm's configuration (`.npmrc`).
 */
const NODE_RUNNER_CONFIG = /(^|\/)(package\.json|\.npmrc)$|(^|\/)node_modules(\/|$)/;

/**
 * True when `path` (workspace-relative) configures the test runner or module resolution of
 * `language`, so a candidate may not supply it.
 */
export function isRunnerConfig(path: string, language: Language): boolean {
  return language === "python" ? PYTHON_RUNNER_CONFIG.test(path) : NODE_RUNNER_CONFIG.test(path);
}

/** pytest's default `python_files`: `test_*.py` and `*_test.py`. */
const PYTHON_TEST_FILE = /(^|\/)(test_[^/]*|[^/]*_test)\.py$/;
/** node's test runner's naming conventions (plus `test_*`), JavaScript or TypeScript files. */
const NODE_TEST_FILE =
  /(^|\/)(test\/.*\.(c|m)?[jt]s$|[^/]*[._-]test\.(c|m)?[jt]s$|test[._-][^/]*\.(c|m)?[jt]s$|test_[^/]*\.(c|m)?[jt]s$)/;

/**
 * True when the language's runner would collect `path` as a test file by its naming
 * conventions (pytest's default `python_files`; node's `--test` patterns), outside
 * `node_modules`, with the language's own extension.
 */
export function isTestFile(path: string, language: Language): boolean {
  if (language === "python") return PYTHON_TEST_FILE.test(path);
  if (!NODE_TEST_FILE.test(path) || path.split("/").includes("node_modules")) return false;
  return language === "typescript" ? /\.(c|m)?ts$/.test(path) : /\.(c|m)?js$/.test(path);
}

/**
 * Dependency manifests and lock files of pip, setuptools, Pipenv, Poetry, npm, yarn and pnpm,
 * by file name anywhere in a tree. One rule for what a setup layer's key covers (executor)
 * and what repo mode's dependency policy looks at (architect). `pyproject.toml`, `setup.cfg`
 * and `package.json` hold more than dependencies; the policy tells their parts apart.
 */
const DEPENDENCY_MANIFEST =
  /^(requirements[^/]*\.txt|constraints[^/]*\.txt|Pipfile|Pipfile\.lock|poetry\.lock|pyproject\.toml|setup\.py|setup\.cfg|package\.json|package-lock\.json|npm-shrinkwrap\.json|yarn\.lock|pnpm-lock\.yaml)$/;

/** True when `path` (workspace-relative) is a dependency manifest or lock file. */
export function isDependencyManifest(path: string): boolean {
  return DEPENDENCY_MANIFEST.test(path.slice(path.lastIndexOf("/") + 1));
}
