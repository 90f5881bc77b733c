/**
 * The executor: runs an {@link ExecutionRequest} in a fresh hardened container from a warm
 * pool, under a concurrency limit with a bounded queue, and reports an {@link ExecutionResult}.
 */
import { randomBytes } from "node:crypto";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import type { Logger } from "pino";
import {
  ExecutionRequest,
  LoopsmithError,
  busyError,
  busyReason,
  createIdempotencyCache,
  hasCode,
  type Config,
  type ExecutionResult,
  type Language,
} from "@loopsmith/shared";
import { commandEnv, imageOf, kindOf, RESULT_PATH, type ImageKind } from "./commands.js";
import { describeEngine, EngineWatch, ensureImages, type EngineHealth, type EngineInfo } from "./engine.js";
import {
  removeLeftovers,
  removeSessionDirs,
  SWEEP_EVERY_MS,
  type LeftoverOptions,
  type LiveInstances,
} from "./leftovers.js";
import { Limiter } from "./limiter.js";
import { WarmPool } from "./pool.js";
import { LABEL, LABEL_HOST, LABEL_PID, Sandbox, STOPPED_REASON, type RawRun, type SandboxSpec } from "./sandbox.js";
import { loadSeccompProfile } from "./seccomp.js";
import { planRun } from "./repo-run.js";
import { TaskImages } from "./task-images.js";
import { blocked, limitsOf, precheck, resultOf, sandboxError, withoutOutput, type DetailedResult } from "./result.js";
import { PROBE, selfTest } from "./selftest.js";
import { SetupLayers } from "./setup.js";
import { SandboxTracker } from "./tracker.js";
import { SessionManager } from "./session.js";

/** Options of one run. */
export interface RunOptions {
  /** Aborting kills the run (status `killed`), or drops it from the queue. */
  signal?: AbortSignal;
}

export { MAX_TESTS_REPORTED, type DetailedResult } from "./result.js";

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

/** How long a finished run's result answers a repeated idempotency key, in ms. */
export const IDEMPOTENCY_TTL_MS = 10 * 60_000;
/** Most results kept for idempotency. */
const IDEMPOTENCY_MAX = 1_000;
/** Largest JUnit file read back from a sandbox, in bytes (about 100 000 pytest cases). */
const RESULT_LIMIT_BYTES = 16 * 1024 * 1024;
/** Memory of the warm containers, MiB (the request's default; others are updated per run). */
const POOL_MEMORY_MB = 512;
const MiB = 1024 * 1024;

/** Dependencies of {@link createExecutor}. */
export interface ExecutorDeps {
  docker: Docker;
  config: Config;
  log: Logger;
  /** Image kinds served (self-tested and pooled). @defaultValue ["python", "node"] */
  kinds?: readonly ImageKind[];
  /**
   * Repo mode: the extracted base tree of a snapshot, as a directory on this host (service.ts
   * passes `snapshotLoader(nc, <dataDir>/cache/repos)`). Absent: a request with `base` gets
   * `sandbox_error`.
   */
  loadBase?: (snapshot: string, owner: string) => Promise<string>;
  /** Pings of the engine while started, in ms (tests shorten it). @defaultValue ENGINE_PING_EVERY_MS */
  enginePingEveryMs?: number;
  /** The environment the engine's address is read from (`DOCKER_HOST`, for the report). @defaultValue process.env */
  env?: NodeJS.ProcessEnv;
  /**
   * Repo mode's setup layers (setup.ts): the longest a setup command runs, in ms
   * (@defaultValue 240000), and the environment proxies, registries and `NODE_EXTRA_CA_CERTS`
   * are read from (@defaultValue process.env).
   */
  setup?: { timeoutMs?: number; env?: NodeJS.ProcessEnv };
  /**
   * Where session host copies live (session.ts); this executor uses `<sessionsDir>/<instanceId>`.
   * @defaultValue `<os tmpdir>/loopsmith-sessions`
   */
  sessionsDir?: string;
  /** Closes sessions idle for this long, ms (tests shorten it). @defaultValue SESSION_IDLE_MS */
  sessionIdleMs?: number;
  /**
   * The executor instances alive now (service.ts asks `$SRV` PING over NATS): a container of
   * another executor that was created and never started is removed within seconds when its
   * owner is not among them (leftovers.ts). Absent: such a container waits a minute.
   */
  liveInstances?: LiveInstances;
  /**
   * Warm Python containers start the pytest runner while they wait (prestart.ts). False
   * starts every command afresh (bench:executor compares the two). @defaultValue true
   */
  prestart?: boolean;
}

/**
 * The start-up self-test in one pool's image (selftest.ts): a probe run in a fresh container
 * (not from the pool: nothing is pooled until the test has passed), removed afterwards.
 * @throws LoopsmithError `sandbox_error` when confinement is missing or the image cannot run
 */
async function selfTestPool(
  docker: Docker,
  pool: WarmPool,
  cfg: Config["executor"],
  tracker: SandboxTracker,
): Promise<void> {
  const want = { memoryBytes: pool.spec.memoryBytes, pidsLimit: cfg.pidsLimit, cpus: cfg.cpus };
  await selfTest(pool.spec.image, want, async () => {
    const sandbox = await Sandbox.create(docker, pool.spec);
    tracker.track(sandbox);
    try {
      return await sandbox.run(
        {
          argv: ["sh", "-c", PROBE],
          env: commandEnv("python"),
          files: [],
          resultPath: RESULT_PATH,
          resultLimitBytes: 1024,
        },
        { timeoutMs: 20_000, outputLimitBytes: 64 * 1024, memoryBytes: pool.spec.memoryBytes },
      );
    } finally {
      tracker.dispose(sandbox);
    }
  });
}

/**
 * Creates an executor; call `start()` before `run()` (run starts it when needed).
 * @throws LoopsmithError `config_invalid` when the seccomp profile cannot be used
 */
export function createExecutor(deps: ExecutorDeps): Executor {
  const { docker, config, log } = deps;
  const cfg = config.executor;
  const instanceId = randomBytes(6).toString("hex");
  const labels = { [LABEL]: instanceId, [LABEL_HOST]: hostname(), [LABEL_PID]: String(process.pid) };
  const limiter = new Limiter(cfg.concurrency, cfg.queueLimit);
  const tracker = new SandboxTracker(log);
  const inflight = new Set<AbortController>();
  const idempotent = createIdempotencyCache<DetailedResult>({ ttlMs: IDEMPOTENCY_TTL_MS, maxEntries: IDEMPOTENCY_MAX });
  const pools = new Map<ImageKind, WarmPool>();
  const layers = new SetupLayers({
    docker,
    log,
    track: (s) => tracker.track(s),
    dispose: (s) => tracker.dispose(s),
    ...deps.setup,
  });
  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  let sweeper: NodeJS.Timeout | undefined;
  let engine: EngineInfo | undefined;
  /** {@link removeLeftovers} with the executors the bus says are alive. */
  const sweepLeftovers = async (opts: LeftoverOptions = {}, asked = deps.liveInstances?.()): Promise<string[]> => {
    const live = await asked;
    return removeLeftovers(docker, instanceId, log, { ...opts, ...(live ? { live } : {}) });
  };
  const sessionsRoot = deps.sessionsDir ?? join(tmpdir(), "loopsmith-sessions");
  /** {@link removeSessionDirs}: the host copies of dead executors' sessions. Never throws. */
  const sweepSessionDirs = async (asked = deps.liveInstances?.()): Promise<void> => {
    const live = await asked;
    await removeSessionDirs(docker, sessionsRoot, instanceId, log, live ? { live } : {}).catch((err: unknown) =>
      log.warn({ err }, "could not sweep the session directories of dead executors"),
    );
  };
  // A dead engine's warm containers died with it: when it answers again they are replaced.
  const watch = new EngineWatch(docker, log, (health: EngineHealth) => {
    if (!health.healthy) return;
    for (const pool of pools.values()) pool.fill();
    // Tracked with the removals, so `settled()` and `stop()` wait for it.
    tracker.after(
      sweepLeftovers({ own: "stopped" }).then(
        () => undefined,
        (err: unknown) => log.warn({ err }, "could not remove the sandboxes the engine's stop left"),
      ),
    );
  });

  const images = new TaskImages(docker, {
    engine: () => engine,
    log,
    ...(cfg.imageArchive ? { archive: cfg.imageArchive } : {}),
  });
  const seccomp = loadSeccompProfile(cfg.seccompProfile);
  const specFor = (kind: ImageKind): SandboxSpec => ({
    image: imageOf(config, kind),
    kind,
    memoryBytes: POOL_MEMORY_MB * MiB,
    cpus: cfg.cpus,
    pidsLimit: cfg.pidsLimit,
    tmpfsMb: cfg.tmpfsMb,
    labels,
    seccomp,
    ...(cfg.runtime ? { runtime: cfg.runtime } : {}),
  });
  const sessions = new SessionManager({
    docker,
    config,
    log,
    layers,
    images,
    specFor,
    instanceId,
    labels,
    // A session's `run` takes one of the slots verdict runs take (docs/ARCHITECTURE.md, "Session containers").
    slots: limiter,
    dir: join(sessionsRoot, instanceId),
    ...(deps.loadBase ? { loadBase: deps.loadBase } : {}),
    ...(deps.sessionIdleMs !== undefined ? { idleMs: deps.sessionIdleMs } : {}),
  });
  for (const kind of deps.kinds ?? (["python", "node"] as const)) {
    const spec = kind === "python" && deps.prestart !== false ? { ...specFor(kind), prestart: true } : specFor(kind);
    pools.set(kind, new WarmPool(docker, spec, cfg.warmPoolSize, log, (s) => tracker.track(s)));
  }
  /** @throws LoopsmithError `sandbox_error` when this executor does not serve the language's image */
  const poolOf = (language: Language): WarmPool => {
    const pool = pools.get(kindOf(language));
    if (!pool)
      throw new LoopsmithError("sandbox_error", `this executor does not run ${language}`, { retryable: false });
    return pool;
  };

  const start = (): Promise<void> => {
    starting ??= (async () => {
      // The ping's collection window (0.5 s) passes while the engine is asked.
      const asked = deps.liveInstances?.();
      engine = await describeEngine(docker, deps.env ? { env: deps.env } : {});
      await ensureImages(
        docker,
        [...pools.values()].map((p) => p.spec.image),
        { engine, log, ...(cfg.imageArchive ? { archive: cfg.imageArchive } : {}) },
      );
      await sweepLeftovers({}, asked);
      // The host copies of the sessions a killed executor held (its containers went just above).
      await sweepSessionDirs(asked);
      await Promise.all([...pools.values()].map((pool) => selfTestPool(docker, pool, cfg, tracker)));
      for (const pool of pools.values()) pool.fill();
      // Sandboxes of an executor that died end by themselves; remove them as they do.
      sweeper = setInterval(() => {
        const asked = deps.liveInstances?.();
        void sweepLeftovers({}, asked)
          .catch((err: unknown) => log.warn({ err }, "leftover sweep failed"))
          .then(() => sweepSessionDirs(asked));
      }, SWEEP_EVERY_MS);
      sweeper.unref();
      watch.start(deps.enginePingEveryMs);
      sessions.start();
      log.info(
        { instanceId, engine, warmPoolSize: cfg.warmPoolSize, concurrency: cfg.concurrency },
        "executor started",
      );
    })();
    return starting;
  };

  /** Plans, runs and judges one request (the caller holds a slot). */
  const execute = async (req: ExecutionRequest, signal: AbortSignal): Promise<DetailedResult> => {
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
    const pool = poolOf(req.language);
    // A run with a setup layer mounted, or in a task's own image, needs a container of its own.
    const own = plan.ownImage === true;
    if (own) {
      const missing = await images.ensure(plan.spec.image, signal);
      if (missing) return withoutOutput(sandboxError(missing));
    }
    const sandbox =
      plan.mounts || own
        ? await Sandbox.create(docker, {
            ...plan.spec,
            memoryBytes: req.memoryMb * MiB,
            ...(plan.mounts ? { mounts: plan.mounts } : {}),
          })
        : await pool.take();
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
  };

  /** Runs `req`; calls `forget` when the result must not answer a repeated key (infrastructure failure, cancel). */
  const runOnce = async (req: ExecutionRequest, opts: RunOptions, forget: () => void): Promise<DetailedResult> => {
    const empty = withoutOutput;
    if (stopping) return empty(sandboxError("the executor is stopping"));
    const controller = new AbortController();
    const onAbort = (): void => controller.abort();
    if (opts.signal?.aborted) controller.abort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    inflight.add(controller);
    let release: (() => void) | undefined;
    try {
      await start();
      if (!watch.health.healthy) throw engineDown();
      release = await limiter.acquire(controller.signal);
      const done = await execute(req, controller.signal);
      if (done.result.status === "sandbox_error") {
        forget();
        // The engine went away under the run: another executor's engine takes it.
        if (!controller.signal.aborted && !(await watch.check())) throw engineDown();
      }
      return done;
    } catch (err) {
      forget();
      // Busy (no free slot, queueing none) or engine down: the caller asks another replica.
      if (busyReason(err)) throw err;
      if (hasCode(err, "cancelled")) return empty({ ...sandboxError(err.message), status: "killed" });
      if (!controller.signal.aborted && !(await watch.check())) throw engineDown();
      log.error({ err }, "sandbox run failed");
      return empty(sandboxError(err instanceof Error ? err.message : String(err)));
    } finally {
      release?.();
      if (controller.signal.aborted) forget();
      inflight.delete(controller);
      opts.signal?.removeEventListener("abort", onAbort);
    }
  };

  const runDetailed = (input: ExecutionRequest, opts: RunOptions = {}): Promise<DetailedResult> => {
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
    return idempotent.run(req.idempotencyKey, (forget) => runOnce(req, opts, forget));
  };

  const settled = (): Promise<void> => tracker.settled(() => [...pools.values()].map((p) => p.settled()));

  /** The refusal while the engine does not answer: a busy answer, so the caller goes elsewhere. */
  const engineDown = (): LoopsmithError =>
    busyError(
      `the Docker engine at ${engine?.endpoint ?? "its address"} does not answer (${watch.health.error ?? "no answer"}): this executor takes no runs until it does`,
      "engine_down",
    );

  const load = (): ExecutorLoad => {
    const health = watch.health;
    return {
      engine: engine?.id ?? "",
      running: limiter.running,
      queued: limiter.queued,
      concurrency: cfg.concurrency,
      queueLimit: cfg.queueLimit,
      freeSlots: health.healthy ? Math.max(0, cfg.concurrency - limiter.running) : 0,
      healthy: health.healthy,
      ...(health.error && !health.healthy ? { error: health.error } : {}),
    };
  };

  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      watch.stop();
      limiter.close();
      layers.close();
      clearInterval(sweeper);
      for (const c of inflight) c.abort(STOPPED_REASON);
      await starting?.catch(() => undefined);
      await sessions.closeAll().catch((err: unknown) => log.warn({ err }, "could not close every session"));
      clearInterval(sweeper);
      await Promise.all([...pools.values()].map((p) => p.close()));
      while (inflight.size) await new Promise((resolve) => setTimeout(resolve, 20));
      tracker.disposeAll();
      await settled();
      // Whatever still carries this executor's label (a container created while its engine
      // went away, so never tracked) is removed: nothing of it stays on the engine.
      await sweepLeftovers({ own: "all" }).catch((err: unknown) =>
        log.warn({ err }, "could not sweep this executor's containers"),
      );
      log.info({ instanceId }, "executor stopped");
    })();
    return stopping;
  };

  return {
    instanceId,
    sessions,
    get engine() {
      return engine;
    },
    load,
    start,
    runDetailed,
    run: async (req, opts) => (await runDetailed(req, opts)).result,
    stop,
    settled,
  };
}
