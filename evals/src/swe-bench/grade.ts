/**
 * Grading one SWE-bench instance, as the official harness does (swebench/harness's
 * evaluation script and `get_eval_report`):
 *
 * 1. check the repository out at `base_commit` (repos.ts);
 * 2. apply the model's patch: `git apply --verbose`, else `patch --batch --fuzz=5 -p1`
 *    (the official fallbacks); neither applies → `patch_failed`;
 * 3. put every file `test_patch` touches back to `base_commit` (a file new in `test_patch`
 *    is removed), so a model's change to a test file never reaches the run, then apply
 *    `test_patch`;
 * 4. run the environment's `test_cmd` with the test files as arguments ({@link testDirectives})
 *    in the hardened sandbox (the executor library, the Python image, no network), installing
 *    through the executor's setup layer when the environment has an install step;
 * 5. parse per-test statuses from the output (parsers.ts) and call the instance resolved when
 *    every FAIL_TO_PASS and every PASS_TO_PASS test passes (`PASSED` or `XFAIL`).
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Docker from "dockerode";
import type { Logger } from "pino";
import { LoopsmithError, type Config } from "@loopsmith/shared/runtime";
import { type ExecutionResult } from "@loopsmith/shared/contracts";
import { git } from "@loopsmith/shared/git";
import { createExecutor, engineEndpoint, type Executor } from "@loopsmith/executor";
import { instanceImage, resolveEnv, setupCommandOf, type EnvFile } from "./env.js";
import { filesOfPatch, testDirectives, type SweInstance } from "./instances.js";
import { isResolved, parseLog, tally, type Tally } from "./parsers.js";
import { checkoutInstance } from "./repos.js";

const execFileAsync = promisify(execFile);

/** An instance's grade. */
export type SweStatus = "resolved" | "unresolved" | "patch_failed" | "error";

/** What {@link Grader.grade} found. */
export interface Grade {
  status: SweStatus;
  failToPass: Tally;
  passToPass: Tally;
  /** The sandbox run's wall time, ms (0 when no test ran). */
  testMs: number;
  /** The executor's status of the test run, when one ran. */
  execution?: ExecutionResult["status"];
  /**
   * The test run's output (stdout, then stderr), after one {@link setupNote} line when the
   * environment has an install step; or the apply step's messages.
   */
  log: string;
  /** The executor's setup layer of the test run, when the environment has an install step. */
  setup?: ExecutionResult["setup"];
  /** Why the status is `patch_failed` or `error`. */
  message?: string;
}

/** Options of {@link createGrader}. */
export interface GraderOptions {
  config: Config;
  log: Logger;
  /** The environment spec (built-in merged with `--env`). */
  env: EnvFile;
  /** `--repos`. */
  reposDir: string;
  /** Wall-clock limit of one instance's test run, ms. @defaultValue 300000 */
  testTimeoutMs?: number;
  /** Memory of the test run's container, MiB. @defaultValue 2048 */
  memoryMb?: number;
  /** Keep the checkouts (for debugging) instead of removing them. */
  keep?: boolean;
  /** `--images`: `official`, or a template of `{instance_id}`, `{repo}`, `{version}` (`instanceImage`). */
  images?: string;
}

/** Grades instances in the sandbox; `stop()` when done. */
export interface Grader {
  /**
   * Grades `modelPatch` (a unified diff; `""`: no change) on `inst`.
   * @throws LoopsmithError `not_found`/`repo_invalid` (no repository, no base commit),
   *   `bad_request` (no test command for the instance's repo and version), `cancelled`
   */
  grade(inst: SweInstance, modelPatch: string, signal?: AbortSignal): Promise<Grade>;
  stop(): Promise<void>;
}

/** Applies a patch file in `dir` the official way; undefined when it applied, else the messages. */
async function applyPatch(dir: string, file: string): Promise<string | undefined> {
  try {
    await git(dir).raw(["apply", "--verbose", file]);
    return undefined;
  } catch (err) {
    const gitMessage = (err as Error).message.trim();
    try {
      await execFileAsync("patch", ["--batch", "--fuzz=5", "-p1", "-i", file], { cwd: dir });
      return undefined;
    } catch (perr) {
      const out = (perr as { stdout?: string }).stdout ?? (perr as Error).message;
      return `git apply: ${gitMessage}\npatch --fuzz=5: ${out.trim()}`;
    }
  }
}

/** A shell word for `s` (single-quoted unless plainly safe). */
export function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

const NO_TALLY: Tally = { passed: 0, total: 0, failing: [] };

/**
 * The line an instance's log starts with when its environment has an install step: what the
 * executor's setup layer did for the test run (`built`, `reused`, `failed`, `skipped`; the
 * layer key's first 12 hex digits; the time the run spent on it, ms; the reason, if any), so
 * the log shows whether an instance reused the cached install (docs/SWE-BENCH.md).
 */
export function setupNote(setup: NonNullable<ExecutionResult["setup"]>): string {
  const reason = setup.message ? `: ${setup.message.trim().split("\n")[0]}` : "";
  return `loopsmith: setup layer ${setup.status} (key ${setup.key.slice(0, 12)}, ${Math.round(setup.durationMs)} ms)${reason}\n`;
}

/**
 * Checks `inst` out at base_commit into `dir/tree`, applies the model patch, restores the
 * test files the test patch touches and applies the test patch (as the official harness
 * does).
 * @returns the tree's path, or the grade that ends the instance (`patch_failed`, `error`)
 */
async function prepareTree(
  reposDir: string,
  inst: SweInstance,
  dir: string,
  modelPatch: string,
): Promise<{ tree: string } | { grade: Grade }> {
  const tree = join(dir, "tree");
  await checkoutInstance(reposDir, inst, tree);
  if (modelPatch.trim()) {
    const file = join(dir, "model.diff");
    await writeFile(file, modelPatch.endsWith("\n") ? modelPatch : `${modelPatch}\n`);
    const failed = await applyPatch(tree, file);
    if (failed)
      return {
        grade: {
          status: "patch_failed",
          failToPass: tally(new Map(), inst.FAIL_TO_PASS),
          passToPass: tally(new Map(), inst.PASS_TO_PASS),
          testMs: 0,
          log: failed,
          message: "the model patch does not apply at base_commit",
        },
      };
  }
  const g = git(tree);
  for (const f of filesOfPatch(inst.test_patch)) {
    const atBase = await g.raw(["cat-file", "-e", `HEAD:${f}`]).then(
      () => true,
      () => false,
    );
    if (atBase) await g.raw(["checkout", "-q", "HEAD", "--", f]);
    else await rm(join(tree, f), { force: true, recursive: true });
  }
  const testFile = join(dir, "test.diff");
  await writeFile(testFile, inst.test_patch);
  try {
    await g.raw(["apply", "--verbose", testFile]);
  } catch (err) {
    return {
      grade: {
        status: "error",
        failToPass: NO_TALLY,
        passToPass: NO_TALLY,
        testMs: 0,
        log: (err as Error).message,
        message: "test_patch does not apply after the model patch",
      },
    };
  }
  return { tree };
}

/** The executions that end an instance in `error`: no test statuses to read. */
const ENDED = new Set(["timeout", "oom", "output_limit", "killed", "blocked", "command_not_found", "sandbox_error"]);

/** The grade of a test run: the statuses its log parser reads, against FAIL_TO_PASS and PASS_TO_PASS. */
function gradeOfRun(
  inst: SweInstance,
  logParser: Parameters<typeof parseLog>[0],
  result: ExecutionResult,
  testMs: number,
): Grade {
  const output = `${result.stdout}${result.stderr ? `\n${result.stderr}` : ""}`;
  const log = `${result.setup ? setupNote(result.setup) : ""}${output}`;
  const setup = result.setup ? { setup: result.setup } : {};
  if (ENDED.has(result.status))
    return {
      status: "error",
      failToPass: tally(new Map(), inst.FAIL_TO_PASS),
      passToPass: tally(new Map(), inst.PASS_TO_PASS),
      testMs,
      execution: result.status,
      log,
      ...setup,
      message: `the test run ended ${result.status}${result.reason ? `: ${result.reason}` : ""}`,
    };
  const statuses = parseLog(logParser, output);
  const failToPass = tally(statuses, inst.FAIL_TO_PASS);
  const passToPass = tally(statuses, inst.PASS_TO_PASS);
  return {
    status: isResolved(failToPass, passToPass) ? "resolved" : "unresolved",
    failToPass,
    passToPass,
    testMs,
    execution: result.status,
    log,
    ...setup,
    ...(statuses.size === 0 ? { message: "the test run reported no per-test status" } : {}),
  };
}

/**
 * Starts the sandbox (Python image only, no warm pool) and returns a grader.
 * @throws LoopsmithError `unavailable` when no Docker engine answers, `sandbox_error` when
 *   the sandbox's self-test fails
 */
export async function createGrader(o: GraderOptions): Promise<Grader> {
  const docker = new Docker();
  try {
    await docker.ping();
  } catch (err) {
    throw new LoopsmithError(
      "unavailable",
      `no Docker engine answers at ${engineEndpoint().endpoint} (DOCKER_HOST): grading runs the tests in the sandbox`,
      { cause: err },
    );
  }
  const trees = new Map<string, string>();
  const executor: Executor = createExecutor({
    docker,
    config: {
      ...o.config,
      executor: {
        ...o.config.executor,
        warmPoolSize: 0,
        // The -rA summary of a big test file is long; a cut summary would lose statuses.
        outputLimitBytes: Math.max(o.config.executor.outputLimitBytes, 16 * 1024 * 1024),
      },
    },
    log: o.log,
    kinds: ["python"],
    loadBase: (snapshot) => {
      const dir = trees.get(snapshot);
      return dir ? Promise.resolve(dir) : Promise.reject(new Error(`no checkout for ${snapshot}`));
    },
  });
  await executor.start();
  const work = await mkdtemp(join(tmpdir(), "loopsmith-swe-"));

  async function grade(inst: SweInstance, modelPatch: string, signal?: AbortSignal): Promise<Grade> {
    const env = resolveEnv(o.env, inst.repo, inst.version);
    const image = instanceImage(inst, env, o.images);
    const id = randomBytes(4).toString("hex");
    const dir = join(work, `${inst.instance_id.replace(/[^\w.-]/g, "_")}-${id}`);
    try {
      const prepared = await prepareTree(o.reposDir, inst, dir, modelPatch);
      if ("grade" in prepared) return prepared.grade;
      const snapshot = `swe-${id}`;
      trees.set(snapshot, prepared.tree);
      const shell = [env.testCmd, ...testDirectives(inst).map(shellWord)].join(" ");
      const setupCommand = setupCommandOf(env);
      const started = performance.now();
      const result = await executor.run(
        {
          v: 1,
          taskId: `swe-${id}`,
          iteration: 0,
          idempotencyKey: `swe-${id}/0/grade`,
          language: "python",
          files: [],
          base: { snapshot, commit: inst.base_commit, deleted: [], ...(setupCommand ? { setupCommand } : {}) },
          shell,
          timeoutMs: o.testTimeoutMs ?? 300_000,
          memoryMb: o.memoryMb ?? 2048,
          ...(image ? { image } : {}),
        },
        signal ? { signal } : {},
      );
      trees.delete(snapshot);
      const testMs = Math.round(performance.now() - started);
      if (result.setup) o.log.info({ instanceId: inst.instance_id, setup: result.setup }, "swe-bench: setup layer");
      return gradeOfRun(inst, env.logParser, result, testMs);
    } finally {
      if (!o.keep) await rm(dir, { recursive: true, force: true });
    }
  }

  return {
    grade,
    stop: async () => {
      await executor.stop();
      if (!o.keep) await rm(work, { recursive: true, force: true });
    },
  };
}
