/**
 * The executor's parts and their lifecycle: what {@link createExecutor} builds (pools, setup
 * layers, sessions, the engine's watch), its start (self-tests, warm pools, sweeps) and its stop.
 */
import { randomBytes } from "node:crypto";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import type { Logger } from "pino";
import { createIdempotencyCache, type IdempotencyCache } from "@loopsmith/shared/bus";
import { type Config } from "@loopsmith/shared/runtime";
import { commandEnv, imageOf, RESULT_PATH, type ImageKind } from "./commands.js";
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
import { LABEL, LABEL_HOST, LABEL_PID, Sandbox, STOPPED_REASON, type SandboxSpec } from "./sandbox.js";
import { loadSeccompProfile } from "./seccomp.js";
import { TaskImages } from "./task-images.js";
import type { DetailedResult } from "./result.js";
import { PROBE, selfTest } from "./selftest.js";
import { SetupLayers } from "./setup.js";
import { SandboxTracker } from "./tracker.js";
import { SessionManager } from "./session.js";

/** How long a finished run's result answers a repeated idempotency key, in ms. */
export const IDEMPOTENCY_TTL_MS = 10 * 60_000;
/** Most results kept for idempotency. */
const IDEMPOTENCY_MAX = 1_000;
/** Memory of the warm containers, MiB (the request's default; others are updated per run). */
const POOL_MEMORY_MB = 512;
/** Bytes in a MiB. */
export const MiB = 1024 * 1024;

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

/** The mutable part of an executor: its start and stop in flight, its sweep timer, its engine. */
export interface ExecutorState {
  starting: Promise<void> | undefined;
  stopping: Promise<void> | undefined;
  sweeper: NodeJS.Timeout | undefined;
  engine: EngineInfo | undefined;
}

/** What one executor holds, shared by the functions that make up {@link createExecutor}. */
export interface ExecutorCore {
  deps: ExecutorDeps;
  docker: Docker;
  config: Config;
  cfg: Config["executor"];
  log: Logger;
  instanceId: string;
  limiter: Limiter;
  tracker: SandboxTracker;
  inflight: Set<AbortController>;
  idempotent: IdempotencyCache<DetailedResult>;
  pools: Map<ImageKind, WarmPool>;
  layers: SetupLayers;
  images: TaskImages;
  specFor: (kind: ImageKind) => SandboxSpec;
  sessions: SessionManager;
  watch: EngineWatch;
  sessionsRoot: string;
  state: ExecutorState;
}

/** {@link removeLeftovers} with the executors the bus says are alive. */
async function sweepLeftovers(
  core: ExecutorCore,
  opts: LeftoverOptions = {},
  asked = core.deps.liveInstances?.(),
): Promise<string[]> {
  const live = await asked;
  return removeLeftovers(core.docker, core.instanceId, core.log, { ...opts, ...(live ? { live } : {}) });
}

/** {@link removeSessionDirs}: the host copies of dead executors' sessions. Never throws. */
async function sweepSessionDirs(core: ExecutorCore, asked = core.deps.liveInstances?.()): Promise<void> {
  const { docker, sessionsRoot, instanceId, log } = core;
  const live = await asked;
  await removeSessionDirs(docker, sessionsRoot, instanceId, log, live ? { live } : {}).catch((err: unknown) =>
    log.warn({ err }, "could not sweep the session directories of dead executors"),
  );
}

/**
 * The engine's watch: a dead engine's warm containers died with it, so when it answers again
 * they are replaced and the sandboxes its stop left are removed.
 */
function engineWatchOf(
  core: Pick<ExecutorCore, "docker" | "log" | "tracker" | "pools">,
  sweep: () => Promise<string[]>,
): EngineWatch {
  const { docker, log, tracker, pools } = core;
  return new EngineWatch(docker, log, (health: EngineHealth) => {
    if (!health.healthy) return;
    for (const pool of pools.values()) pool.fill();
    // Tracked with the removals, so `settled()` and `stop()` wait for it.
    tracker.after(
      sweep().then(
        () => undefined,
        (err: unknown) => log.warn({ err }, "could not remove the sandboxes the engine's stop left"),
      ),
    );
  });
}

/**
 * The sandbox spec of each image kind: the pool's memory, the executor's limits, its labels
 * and seccomp profile.
 * @throws LoopsmithError `config_invalid` when the seccomp profile cannot be used
 */
function specsOf(config: Config, labels: Record<string, string>): (kind: ImageKind) => SandboxSpec {
  const cfg = config.executor;
  const seccomp = loadSeccompProfile(cfg.seccompProfile);
  return (kind) => ({
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
}

/** Agent mode's session manager, its `run` taking the executor's slots. */
function sessionsOf(
  core: Pick<ExecutorCore, "deps" | "layers" | "images" | "specFor" | "instanceId" | "limiter" | "sessionsRoot">,
  labels: Record<string, string>,
): SessionManager {
  const { deps } = core;
  return new SessionManager({
    docker: deps.docker,
    config: deps.config,
    log: deps.log,
    layers: core.layers,
    images: core.images,
    specFor: core.specFor,
    instanceId: core.instanceId,
    labels,
    // A session's `run` takes one of the slots verdict runs take (docs/PROTOCOL.md, "Session containers").
    slots: core.limiter,
    dir: join(core.sessionsRoot, core.instanceId),
    ...(deps.loadBase ? { loadBase: deps.loadBase } : {}),
    ...(deps.sessionIdleMs !== undefined ? { idleMs: deps.sessionIdleMs } : {}),
  });
}

/**
 * Builds an executor's parts, in the order they depend on each other; nothing is started.
 * @throws LoopsmithError `config_invalid` when the seccomp profile cannot be used
 */
export function coreOf(deps: ExecutorDeps): ExecutorCore {
  const { docker, config, log } = deps;
  const cfg = config.executor;
  const instanceId = randomBytes(6).toString("hex");
  const labels = { [LABEL]: instanceId, [LABEL_HOST]: hostname(), [LABEL_PID]: String(process.pid) };
  const limiter = new Limiter(cfg.concurrency, cfg.queueLimit);
  const tracker = new SandboxTracker(log);
  const pools = new Map<ImageKind, WarmPool>();
  const layers = new SetupLayers({
    docker,
    log,
    track: (s) => tracker.track(s),
    dispose: (s) => tracker.dispose(s),
    ...deps.setup,
  });
  const state: ExecutorState = { starting: undefined, stopping: undefined, sweeper: undefined, engine: undefined };
  const sessionsRoot = deps.sessionsDir ?? join(tmpdir(), "loopsmith-sessions");
  const watch = engineWatchOf({ docker, log, tracker, pools }, () => sweepLeftovers(core, { own: "stopped" }));
  const images = new TaskImages(docker, {
    engine: () => state.engine,
    log,
    ...(cfg.imageArchive ? { archive: cfg.imageArchive } : {}),
  });
  const specFor = specsOf(config, labels);
  const sessions = sessionsOf({ deps, layers, images, specFor, instanceId, limiter, sessionsRoot }, labels);
  for (const kind of deps.kinds ?? (["python", "node"] as const)) {
    const spec = kind === "python" && deps.prestart !== false ? { ...specFor(kind), prestart: true } : specFor(kind);
    pools.set(kind, new WarmPool(docker, spec, cfg.warmPoolSize, log, (s) => tracker.track(s)));
  }
  const inflight = new Set<AbortController>();
  const idempotent = createIdempotencyCache<DetailedResult>({ ttlMs: IDEMPOTENCY_TTL_MS, maxEntries: IDEMPOTENCY_MAX });
  // The watch's sweep reads it only when the engine comes back, after this has returned.
  const core: ExecutorCore = {
    deps,
    docker,
    config,
    cfg,
    log,
    instanceId,
    limiter,
    tracker,
    inflight,
    idempotent,
    pools,
    layers,
    images,
    specFor,
    sessions,
    watch,
    sessionsRoot,
    state,
  };
  return core;
}

/**
 * Starts the executor once (later calls join the first): the engine asked, the images there,
 * leftovers swept, each pool self-tested then filled, the sweeper, the watch and the sessions
 * started.
 * @throws LoopsmithError `sandbox_error` when confinement is missing or an image cannot run
 */
export function startExecutor(core: ExecutorCore): Promise<void> {
  const { deps, docker, cfg, log, pools, tracker, state } = core;
  state.starting ??= (async () => {
    // The ping's collection window (0.5 s) passes while the engine is asked.
    const asked = deps.liveInstances?.();
    state.engine = await describeEngine(docker, deps.env ? { env: deps.env } : {});
    const engine = state.engine;
    await ensureImages(
      docker,
      [...pools.values()].map((p) => p.spec.image),
      { engine, log, ...(cfg.imageArchive ? { archive: cfg.imageArchive } : {}) },
    );
    await sweepLeftovers(core, {}, asked);
    // The host copies of the sessions a killed executor held (its containers went just above).
    await sweepSessionDirs(core, asked);
    await Promise.all([...pools.values()].map((pool) => selfTestPool(docker, pool, cfg, tracker)));
    for (const pool of pools.values()) pool.fill();
    // Sandboxes of an executor that died end by themselves; remove them as they do.
    state.sweeper = setInterval(() => {
      const asked = deps.liveInstances?.();
      void sweepLeftovers(core, {}, asked)
        .catch((err: unknown) => log.warn({ err }, "leftover sweep failed"))
        .then(() => sweepSessionDirs(core, asked));
    }, SWEEP_EVERY_MS);
    state.sweeper.unref();
    core.watch.start(deps.enginePingEveryMs);
    core.sessions.start();
    const { instanceId } = core;
    log.info({ instanceId, engine, warmPoolSize: cfg.warmPoolSize, concurrency: cfg.concurrency }, "executor started");
  })();
  return state.starting;
}

/** Resolves when used containers are removed and the warm pools are refilled. */
export function settledOf(core: ExecutorCore): Promise<void> {
  return core.tracker.settled(() => [...core.pools.values()].map((p) => p.settled()));
}

/**
 * Stops the executor once (later calls join the first): refuses new runs, kills the runs in
 * flight, closes the sessions and pools, and removes every container of its label.
 */
export function stopExecutor(core: ExecutorCore): Promise<void> {
  const { log, state, inflight } = core;
  state.stopping ??= (async () => {
    core.watch.stop();
    core.limiter.close();
    core.layers.close();
    clearInterval(state.sweeper);
    for (const c of inflight) c.abort(STOPPED_REASON);
    await state.starting?.catch(() => undefined);
    await core.sessions.closeAll().catch((err: unknown) => log.warn({ err }, "could not close every session"));
    clearInterval(state.sweeper);
    await Promise.all([...core.pools.values()].map((p) => p.close()));
    while (inflight.size) await new Promise((resolve) => setTimeout(resolve, 20));
    core.tracker.disposeAll();
    await settledOf(core);
    // Whatever still carries this executor's label (a container created while its engine
    // went away, so never tracked) is removed: nothing of it stays on the engine.
    await sweepLeftovers(core, { own: "all" }).catch((err: unknown) =>
      log.warn({ err }, "could not sweep this executor's containers"),
    );
    log.info({ instanceId: core.instanceId }, "executor stopped");
  })();
  return state.stopping;
}
