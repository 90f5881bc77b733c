/**
 * The executor: runs an {@link ExecutionRequest} in a fresh hardened container from a warm
 * pool, under a concurrency limit with a bounded queue, and reports an {@link ExecutionResult}.
 */
import { ExecutionRequest, type ExecutionResult, type Language } from "@loopsmith/shared/contracts";
import { LoopsmithError, busyError, busyReason, hasCode } from "@loopsmith/shared/runtime";
import { kindOf, RESULT_PATH } from "./commands.js";
import type { EngineInfo } from "./engine.js";
import {
  coreOf,
  MiB,
  settledOf,
  startExecutor,
  stopExecutor,
  type ExecutorCore,
  type ExecutorDeps,
} from "./executor-core.js";
import type { WarmPool } from "./pool.js";
import { Sandbox, type RawRun } from "./sandbox.js";
import { planRun, type RunPlan } from "./repo-run.js";
import { blocked, limitsOf, precheck, resultOf, sandboxError, withoutOutput, type DetailedResult } from "./result.js";
import type { SessionManager } from "./session.js";

/** Options of one run. */
export interface RunOptions {
  /** Aborting kills the run (status `killed`), or drops it from the queue. */
  signal?: AbortSignal;
}

export { MAX_TESTS_REPORTED, type DetailedResult } from "./result.js";
export { IDEMPOTENCY_TTL_MS, type ExecutorDeps } from "./executor-core.js";

/** The executor service's engine. */
export interface Executor {
  /**
   * Starts: removes containers an earlier executor left (label `org.loopsmith.executor`) and
   * the host copies of its sessions (`<sessionsDir>/<its instance id>`), runs the self-test in each image, fills the warm pools. Safe to call twice.
   * @throws LoopsmithError `sandbox_error` when confinement is missing or an image cannot run.
   */
  start(): Promise<void>;
  /**
   * Runs one request in a fresh container. Never throws for anything the candidate does:
   * returns a result with a status. Infrastructure failures return `sandbox_error`; files
   * that escape the workspace return `blocked`. A second call with the same
   * `idempotencyKey` joins the first (or gets its result, for {@link IDEMPOTENCY_TTL_MS}).
   * @throws LoopsmithError `bad_request` when `req` fails the {@link ExecutionRequest} schema;
   *   `unavailable` with `details.busy` (`busyError`) when every slot is taken and the queue
   *   is full (`full`), or the engine does not answer, before or during the run (`engine_down`):
   *   another executor may take the run.
   */
  run(req: ExecutionRequest, opts?: RunOptions): Promise<ExecutionResult>;
  /** Like {@link Executor.run}, plus stdout/stderr as exact bytes (binary output). */
  runDetailed(req: ExecutionRequest, opts?: RunOptions): Promise<DetailedResult>;
  /** Stops: refuses new runs, kills in-flight runs, removes every container. Safe to call twice. */
  stop(): Promise<void>;
  /** Resolves when used containers are removed and the warm pools are refilled. */
  settled(): Promise<void>;
  /** This executor's instance id: the value of its containers' `org.loopsmith.executor` label. */
  readonly instanceId: string;
  /** The engine it drives; undefined until `start()` has asked it. */
  readonly engine: EngineInfo | undefined;
  /** Its load and health now, as `$SRV` STATS reports them ({@link ExecutorLoad}). */
  load(): ExecutorLoad;
  /** Agent mode's session containers (session.ts); all closed by `stop()`. */
  readonly sessions: SessionManager;
}

/** An executor's load and health, reported in `$SRV` STATS (the run endpoint's `data`). */
export interface ExecutorLoad {
  /** The engine's id (`docker info` ID), or "" before start. */
  engine: string;
  /** Runs holding a slot now. */
  running: number;
  /** Runs waiting for a slot. */
  queued: number;
  /** Slots (`executor.concurrency`). */
  concurrency: number;
  /** Waiting runs accepted beyond the slots (`executor.queueLimit`). */
  queueLimit: number;
  /** Slots free now: 0 when the engine does not answer. */
  freeSlots: number;
  /** False while the engine does not answer its pings: runs are refused (busy, `engine_down`). */
  healthy: boolean;
  /** Why the engine's last ping failed, when it did. */
  error?: string;
}

/** Largest JUnit file read back from a sandbox, in bytes (about 100 000 pytest cases). */
const RESULT_LIMIT_BYTES = 16 * 1024 * 1024;

/** @throws LoopsmithError `sandbox_error` when this executor does not serve the language's image */
function poolOf(core: ExecutorCore, language: Language): WarmPool {
  const pool = core.pools.get(kindOf(language));
  if (!pool) throw new LoopsmithError("sandbox_error", `this executor does not run ${language}`, { retryable: false });
  return pool;
}

/**
 * The sandbox a planned run takes: a container of its own when a setup layer is mounted or
 * the task has its own image, else one from the language's warm pool.
 */
async function sandboxOf(core: ExecutorCore, req: ExecutionRequest, plan: RunPlan, pool: WarmPool): Promise<Sandbox> {
  return plan.mounts || plan.ownImage === true
    ? await Sandbox.create(core.docker, {
        ...plan.spec,
        memoryBytes: req.memoryMb * MiB,
        ...(plan.mounts ? { mounts: plan.mounts } : {}),
      })
    : await pool.take();
}

/** Plans, runs and judges one request (the caller holds a slot). */
async function execute(core: ExecutorCore, req: ExecutionRequest, signal: AbortSignal): Promise<DetailedResult> {
  const { docker, config, cfg, log, layers, specFor, deps, tracker } = core;
  const started = performance.now();
  const refused = precheck(req, cfg.tmpfsMb * MiB);
  if (refused) return refused;
  const prepared = await planRun(
    req,
    { docker, config, log, layers, specFor, ...(deps.loadBase ? { loadBase: deps.loadBase } : {}) },
    signal,
  );
  if ("blocked" in prepared) return blocked(prepared.blocked);
  if ("error" in prepared) return withoutOutput(sandboxError(prepared.error));
  const { plan } = prepared;
  const pool = poolOf(core, req.language);
  // A run with a setup layer mounted, or in a task's own image, needs a container of its own.
  if (plan.ownImage === true) {
    const missing = await core.images.ensure(plan.spec.image, signal);
    if (missing) return withoutOutput(sandboxError(missing));
  }
  const sandbox = await sandboxOf(core, req, plan, pool);
  tracker.track(sandbox);
  let raw: RawRun;
  try {
    raw = await sandbox.run(
      {
        argv: plan.argv,
        env: plan.env,
        files: req.files,
        ...(plan.archive ? { archive: plan.archive } : plan.extra?.length ? { extra: plan.extra } : {}),
        ...(plan.integrity ? { verdictKey: plan.integrity.key } : {}),
        resultPath: RESULT_PATH,
        resultLimitBytes: RESULT_LIMIT_BYTES,
      },
      { timeoutMs: req.timeoutMs, outputLimitBytes: cfg.outputLimitBytes, memoryBytes: req.memoryMb * MiB, signal },
    );
  } finally {
    tracker.dispose(sandbox);
    pool.fill();
  }
  const done = resultOf(raw, plan, req, limitsOf(sandbox.spec, req.memoryMb * MiB, req.timeoutMs));
  log.debug({ status: done.result.status, wallMs: Math.round(performance.now() - started) }, "run finished");
  return done;
}

/** The refusal while the engine does not answer: a busy answer, so the caller goes elsewhere. */
function engineDown(core: ExecutorCore): LoopsmithError {
  return busyError(
    `the Docker engine at ${core.state.engine?.endpoint ?? "its address"} does not answer (${core.watch.health.error ?? "no answer"}): this executor takes no runs until it does`,
    "engine_down",
  );
}

/**
 * Runs `req` in a slot; calls `forget` when the result must not answer a repeated key
 * (infrastructure failure, cancel).
 * @throws LoopsmithError `unavailable` with `details.busy` when no slot is free or the engine is down
 */
async function runOnce(
  core: ExecutorCore,
  req: ExecutionRequest,
  opts: RunOptions,
  forget: () => void,
): Promise<DetailedResult> {
  const { watch, log, inflight } = core;
  const empty = withoutOutput;
  if (core.state.stopping) return empty(sandboxError("the executor is stopping"));
  const controller = new AbortController();
  const onAbort = (): void => controller.abort();
  if (opts.signal?.aborted) controller.abort();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  inflight.add(controller);
  let release: (() => void) | undefined;
  try {
    await startExecutor(core);
    if (!watch.health.healthy) throw engineDown(core);
    release = await core.limiter.acquire(controller.signal);
    const done = await execute(core, req, controller.signal);
    if (done.result.status === "sandbox_error") {
      forget();
      // The engine went away under the run: another executor's engine takes it.
      if (!controller.signal.aborted && !(await watch.check())) throw engineDown(core);
    }
    return done;
  } catch (err) {
    forget();
    // Busy (no free slot, queueing none) or engine down: the caller asks another replica.
    if (busyReason(err)) throw err;
    if (hasCode(err, "cancelled")) return empty({ ...sandboxError(err.message), status: "killed" });
    if (!controller.signal.aborted && !(await watch.check())) throw engineDown(core);
    log.error({ err }, "sandbox run failed");
    return empty(sandboxError(err instanceof Error ? err.message : String(err)));
  } finally {
    release?.();
    if (controller.signal.aborted) forget();
    inflight.delete(controller);
    opts.signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * {@link Executor.runDetailed}: validates the request, then runs it once per idempotency key.
 * @throws LoopsmithError `bad_request` when `input` fails the {@link ExecutionRequest} schema
 */
function runDetailed(core: ExecutorCore, input: ExecutionRequest, opts: RunOptions): Promise<DetailedResult> {
  const parsed = ExecutionRequest.safeParse(input);
  if (!parsed.success) {
    const paths = parsed.error.issues.some((i) => i.path[0] === "files" && i.path[2] === "path");
    if (paths) return Promise.resolve(blocked("a file path escapes the workspace"));
    const fields = parsed.error.issues.map((i) => `${i.path.join(".") || "(request)"}: ${i.message}`).join("; ");
    return Promise.reject(
      new LoopsmithError("bad_request", `invalid execution request: ${fields}`, { details: parsed.error.issues }),
    );
  }
  const req = parsed.data;
  return core.idempotent.run(req.idempotencyKey, (forget) => runOnce(core, req, opts, forget));
}

/** {@link Executor.load}: the executor's load and health now. */
function loadOf(core: ExecutorCore): ExecutorLoad {
  const { cfg, limiter } = core;
  const health = core.watch.health;
  return {
    engine: core.state.engine?.id ?? "",
    running: limiter.running,
    queued: limiter.queued,
    concurrency: cfg.concurrency,
    queueLimit: cfg.queueLimit,
    freeSlots: health.healthy ? Math.max(0, cfg.concurrency - limiter.running) : 0,
    healthy: health.healthy,
    ...(health.error && !health.healthy ? { error: health.error } : {}),
  };
}

/**
 * Creates an executor; call `start()` before `run()` (run starts it when needed).
 * @throws LoopsmithError `config_invalid` when the seccomp profile cannot be used
 */
export function createExecutor(deps: ExecutorDeps): Executor {
  const core = coreOf(deps);
  const detailed = (req: ExecutionRequest, opts: RunOptions = {}): Promise<DetailedResult> =>
    runDetailed(core, req, opts);
  return {
    instanceId: core.instanceId,
    sessions: core.sessions,
    get engine() {
      return core.state.engine;
    },
    load: () => loadOf(core),
    start: () => startExecutor(core),
    runDetailed: detailed,
    run: async (req, opts) => (await detailed(req, opts)).result,
    stop: () => stopExecutor(core),
    settled: () => settledOf(core),
  };
}
