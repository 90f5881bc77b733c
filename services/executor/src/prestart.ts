/**
 * The pre-started test runner of a warm Python container.
 *
 * A default Python run spends most of its wall time before the first test: the interpreter
 * starts and imports pytest and its built-in plugins (about 85 ms of a 160 ms run of four
 * tests in loopsmith/sandbox-python, measured there with `python3 -X importtime`). None of
 * that depends on the run, so a warm container does it while it waits in the pool: its
 * supervisor starts the runner as the sandbox user, with the default command's interpreter
 * flags and environment, and the runner imports pytest and then blocks on a pipe. When a run
 * arrives whose command is that interpreter running pytest in that environment, the
 * supervisor writes the workspace, hands the runner the run's arguments, per-run environment
 * and working directory, and the runner becomes the run's `python3 -I -B -u -m pytest …`
 * (the module run as `__main__`, as `-m` does). Any other run kills the runner first and
 * starts its command as before.
 *
 * What stays the same:
 * - every container still serves one run; the runner never saw another run's files;
 * - the runner starts before the workspace exists, so no file of the candidate can take part
 *   in its imports (loopsmith's verdict plugin is not imported early: it takes the verdict
 *   channel from the environment when pytest loads it, as in a fresh process);
 * - the verdict channel's descriptors are opened by the supervisor before the runner starts;
 *   the key is written into its read-only memory file only when the run arrives, and the
 *   controller reads it only after it forked its worker, as before (integrity.ts).
 *
 * What differs from a fresh interpreter: modules pytest imports are in `sys.modules` already
 * (they would be after `import pytest` anyway), and `/proc/self/cmdline` names `-c`
 * (`sys.orig_argv` is set to the command's argv).
 */
import { dropTo, SANDBOX_UID, type PrestartSpec } from "./bootstrap.js";
import { commandEnv, PYTEST_ISOLATED } from "./commands.js";

export type { PrestartSpec } from "./bootstrap.js";

/**
 * Variables a run may set that the runner applies when the run arrives: none is read while
 * the interpreter starts or while pytest is imported (pytest reads them when it configures).
 * Every other variable must equal the runner's own, or the run starts afresh.
 */
export const PER_RUN_ENV = [
  "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
  "PYTEST_ADDOPTS",
  "PYTEST_PLUGINS",
  "LOOPSMITH_TRIPWIRES",
  "LOOPSMITH_VERDICT_FD",
  "LOOPSMITH_VERDICT_KEY_FD",
] as const;

/** The command prefix a run must start with to use the runner: the default pytest command's interpreter and module. */
export const PRESTART_PREFIX: readonly string[] = PYTEST_ISOLATED.slice(0, PYTEST_ISOLATED.indexOf("pytest") + 1);

/**
 * The runner's program (run with the interpreter flags of {@link PRESTART_PREFIX} and `-c`).
 * argv: `<control fd> <ready fd>`. It imports pytest and the built-in plugins pytest loads,
 * writes one byte on the ready pipe, then reads the run as JSON (`{"args", "env", "cwd",
 * "argv"}`) until the control pipe's end. An empty read (the supervisor dropped it) or a
 * failed import ends it at once, silently: the supervisor then runs the command afresh.
 */
export const PYTEST_RUNNER = String.raw`
import os, sys
ctl, ready = int(sys.argv[1]), int(sys.argv[2])
try:
    import importlib, json, runpy
    import pytest
    import _pytest.config
    for name in _pytest.config.default_plugins:
        try:
            importlib.import_module("_pytest." + name)
        except Exception:
            pass
    import hashlib, hmac, select, types, warnings
    hmac.new(b"k", b"", hashlib.sha256)
except BaseException:
    os._exit(70)
os.write(ready, b"1")
os.close(ready)
chunks = []
while True:
    b = os.read(ctl, 1 << 16)
    if not b:
        break
    chunks.append(b)
os.close(ctl)
if not chunks:
    os._exit(0)
run = json.loads(b"".join(chunks))
del chunks
os.chdir(run["cwd"])
os.environ.clear()
os.environ.update(run["env"])
sys.argv = [sys.argv[0]] + run["args"]
sys.orig_argv = run["argv"]
del run
runpy.run_module("pytest", run_name="__main__", alter_sys=True)
`;

/** The pre-start of a warm Python container whose workspace is `workdir` (e.g. `/workspace`). */
export function prestartSpec(workdir: string): PrestartSpec {
  const flags = PRESTART_PREFIX.slice(0, PRESTART_PREFIX.indexOf("-m"));
  return {
    argv: [...dropTo(SANDBOX_UID), ...flags, "-c", PYTEST_RUNNER],
    prefix: [...PRESTART_PREFIX],
    env: commandEnv("python"),
    perRun: [...PER_RUN_ENV],
    cwd: workdir,
  };
}
