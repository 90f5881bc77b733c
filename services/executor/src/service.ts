/**
 * The executor as a bus service: `Endpoints.executor.run` over `@nats-io/services`, with
 * the executor started before the endpoint is registered and stopped on shutdown.
 */
import { join } from "node:path";
import Docker from "dockerode";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { Endpoints, ServiceNames, handle, onReplica, pingService } from "@loopsmith/shared/bus";
import { type Config, type ServiceModule } from "@loopsmith/shared/runtime";
import { createExecutor, type Executor } from "./executor.js";
import { fitObservation, fitResult } from "./fit.js";
import type { LiveInstances } from "./leftovers.js";
import { snapshotLoader } from "./repo.js";

/** Dependencies of {@link executorService}; `docker` defaults to the local engine (DOCKER_HOST or the socket). */
export interface ExecutorServiceDeps {
  nc: NatsConnection;
  config: Config;
  log: Logger;
  docker?: Docker;
  /** An executor to serve instead of creating one (it is started and stopped here). */
  executor?: Executor;
}

/**
 * The executor instances that answer a `$SRV` PING on `nc` (their `instance` metadata), or
 * undefined when the bus cannot say (the connection is closed or refuses the request).
 */
export function liveExecutors(nc: NatsConnection, log: Logger): LiveInstances {
  return async () => {
    try {
      const answers = await pingService(nc, ServiceNames.executor);
      return new Set(answers.map((a) => a.metadata.instance).filter((id): id is string => Boolean(id)));
    } catch (err) {
      log.debug({ err }, "cannot ask which executors are alive; a created sandbox of another executor waits a minute");
      return undefined;
    }
  };
}

/** `max_payload` assumed when the server does not say, in bytes (NATS's default). */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/**
 * The service module for `runService`/`serviceMain`: starts the executor (self-test,
 * leftover cleanup, warm pools) and registers `Endpoints.executor.run`, and agent mode's
 * sessions: `sessionOpen` in the queue group, `sessionCall` and `sessionClose` on this
 * replica's subject only (`onReplica(def, instanceId)`; a call for a session it does not hold
 * fails `not_found`). Session host copies live under `<dataDir>/sessions/<instanceId>`. Repo-mode runs read
 * their base trees through `deps.nc` (`snapshotLoader`, cached under `<dataDir>/cache/repos`).
 * A reply that would pass the server's `max_payload` keeps the head and tail of stdout and
 * stderr (a run's) or of its output (a session call's), the cut said in the text. `$SRV` INFO metadata names the engine (`engine`: its id, `engineName`,
 * `engineEndpoint`, `engineTls`); `$SRV` STATS data carries its load (`ExecutorLoad`: free
 * slots, health). A busy executor (no free slot with `queueLimit` 0, or its engine down)
 * answers `unavailable` with `details.busy`, so the caller asks another.
 * @throws LoopsmithError `sandbox_error` when the executor refuses to start (confinement
 *   missing, the engine does not answer, a sandbox image is not on the engine).
 */
export async function executorService(deps: ExecutorServiceDeps): Promise<ServiceModule> {
  const executor =
    deps.executor ??
    createExecutor({
      docker: deps.docker ?? new Docker(),
      config: deps.config,
      log: deps.log,
      // Repo mode: base trees from the `loopsmith-repos` object store, extracted once per commit.
      loadBase: snapshotLoader(deps.nc, join(deps.config.dataDir, "cache", "repos")),
      // A created, never-started sandbox of an executor that does not answer is removed soon.
      liveInstances: liveExecutors(deps.nc, deps.log),
      // Agent mode's session host copies.
      sessionsDir: join(deps.config.dataDir, "sessions"),
    });
  await executor.start();
  const engine = executor.engine;
  const maxPayload = (): number => deps.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
  return {
    registrations: [
      handle(Endpoints.executor.run, async (req) => fitResult(await executor.run(req), maxPayload())),
      // Agent mode: a session opens on any replica (queue group); its calls and its close go
      // to this replica's own subject, `<subject>.<instanceId>`, which only it serves.
      handle(Endpoints.executor.sessionOpen, (req) => executor.sessions.open(req)),
      handle(onReplica(Endpoints.executor.sessionCall, executor.instanceId), async (req) =>
        fitObservation(await executor.sessions.call(req), maxPayload()),
      ),
      handle(onReplica(Endpoints.executor.sessionClose, executor.instanceId), async (req) => ({
        closed: await executor.sessions.close(req.sessionId),
      })),
    ],
    hooks: [{ name: "executor", run: () => executor.stop() }],
    // Which engine: executors with the same `engine` share one Docker engine's CPUs.
    metadata: {
      instance: executor.instanceId,
      ...(engine
        ? {
            engine: engine.id,
            engineName: engine.name,
            engineVersion: engine.version,
            engineEndpoint: engine.endpoint,
            engineTls: String(engine.tls),
          }
        : {}),
    },
    // Live: free slots and the engine's health, in `$SRV` STATS (`loopsmith status`).
    stats: () => executor.load(),
  };
}
