/**
 * The life of a service process: load configuration, log, connect to NATS, register the
 * endpoints, and on SIGTERM/SIGINT stop in order (stop taking work, drain in-flight work,
 * run named shutdown hooks, close the connection) within a deadline, then exit 128 + signal.
 */
import { PermissionViolationError, connect, type NatsConnection } from "@nats-io/transport-node";
import type { Service } from "@nats-io/services";
import { rename, writeFile } from "node:fs/promises";
import pRetry from "p-retry";
import type { Logger } from "pino";
import { loadConfig, type Config } from "./config.js";
import { createLogger } from "./log.js";
import { startService, type Registration } from "../bus/bus.js";
import { ServiceNames, type ServiceName } from "../bus/subjects.js";
import { LoopsmithError } from "./errors.js";
import { maskUrl } from "./mask.js";
import { natsConnectOptions, natsIdentity, natsRefusal, natsServers } from "../bus/nats-options.js";

/** Version reported in `$SRV` INFO. */
export const LOOPSMITH_VERSION = "0.1.0";

/**
 * True when a process with this pid runs on this host (EPERM: it exists but belongs to
 * someone else). Used to tell leftovers of dead processes (locks, containers) from live ones.
 */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A named step of shutdown. */
export interface ShutdownHook {
  name: string;
  run: () => Promise<void>;
}

/** What a service module gives the runtime. */
export interface ServiceModule {
  registrations: Registration[];
  /** Run after the endpoints are registered (e.g. the conductor's consumer loop). */
  start?: () => Promise<void>;
  /** Hooks run after the endpoints stop, in order. */
  hooks?: ShutdownHook[];
  metadata?: Record<string, string>;
  /** Each endpoint's `data` in `$SRV` STATS (see `ServiceOptions.stats`). */
  stats?: (subject: string) => unknown;
}

/** A running service process. */
export interface RunningService {
  nc: NatsConnection;
  service: Service;
  config: Config;
  log: Logger;
  /** Stops everything; safe to call twice; resolves with the error that stopped it, if any. */
  stop: () => Promise<Error | null>;
}

/**
 * How long a starting service keeps trying to reach NATS, in ms: under compose the server may
 * still be opening its port when the services start (they start together), and a service that
 * exits at once only to be restarted would make every start noisy.
 */
export const SERVICE_NATS_WAIT_MS = 30_000;

/**
 * Connects to NATS, with a clear error when it cannot. Once connected the client reconnects
 * on its own, forever (`maxReconnectAttempts: -1`).
 * @param opts.waitMs how long to keep retrying a first connection that fails (backoff 200 ms
 *   doubling to 2 s, by p-retry); 0 (the default) tries once. Refused credentials are not retried.
 * @param opts.config where the credentials and TLS files come from (`config.nats`)
 * @throws LoopsmithError `unavailable` naming the URL (passwords masked); `config_invalid` when
 *   NATS refuses the credentials
 */
export async function connectNats(
  url: string,
  name: string,
  opts: { waitMs?: number; log?: Logger; config?: Pick<Config, "nats" | "natsUrl"> } = {},
): Promise<NatsConnection> {
  const auth = opts.config ? natsConnectOptions(opts.config) : {};
  const identity = opts.config ? natsIdentity(opts.config) : "no credentials";
  const once = (): Promise<NatsConnection> =>
    connect({ ...auth, servers: natsServers(url), name, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
  try {
    if (!opts.waitMs) return await once();
    return await pRetry(once, {
      retries: Number.POSITIVE_INFINITY,
      maxRetryTime: opts.waitMs,
      // A local stack starts its services while its NATS container starts: retry soon at first.
      minTimeout: 100,
      factor: 1.5,
      maxTimeout: 2_000,
      // Refused credentials do not get better by waiting.
      shouldRetry: ({ error }) => !natsRefusal(error, url, identity),
      onFailedAttempt: ({ error, attemptNumber }) => {
        if (attemptNumber === 1 && !natsRefusal(error, url, identity))
          opts.log?.warn({ url: maskUrl(url), err: error.message }, "NATS does not answer yet; retrying");
      },
    });
  } catch (err) {
    const refused = natsRefusal(err, url, identity);
    if (refused) throw refused;
    throw new LoopsmithError("unavailable", `cannot connect to NATS at ${maskUrl(url)}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * Logs what happens to a connection until it closes: a disconnect (warn, with the server), a
 * reconnect (info), a server error (error), a stale connection or a slow consumer (warn), and
 * a server entering lame-duck mode (warn). Pings and cluster updates are not logged.
 * @returns a promise that settles when the connection is closed
 */
export async function logConnectionStatus(nc: NatsConnection, log: Logger): Promise<void> {
  for await (const s of nc.status()) {
    switch (s.type) {
      case "disconnect":
        log.warn({ server: s.server }, "NATS disconnected; reconnecting");
        break;
      case "reconnect":
        log.info({ server: s.server }, "NATS reconnected");
        break;
      case "error":
        if (s.error instanceof PermissionViolationError) {
          // The refusal of this user's publish or subscription: typed, with the subject; the
          // user is on the logger (natsIdentity), never a secret.
          log.error(
            {
              code: "permission_denied",
              operation: s.error.operation,
              subject: s.error.subject,
              ...(s.error.queue ? { queue: s.error.queue } : {}),
            },
            `NATS refused a ${s.error.operation} on ${s.error.subject}: this user's permissions forbid it`,
          );
        } else log.error({ err: s.error }, "NATS reported an error");
        break;
      case "staleConnection":
        log.warn("NATS connection is stale (no pong); reconnecting");
        break;
      case "slowConsumer":
        log.warn({ subject: s.sub.getSubject(), pending: s.pending }, "slow consumer: messages are piling up");
        break;
      case "ldm":
        log.warn({ server: s.server }, "the NATS server is shutting down (lame duck mode)");
        break;
      default:
        break;
    }
  }
}

/**
 * Start-up work of a service that needs no NATS connection (memory opens its database): it
 * runs while the connection is made, so a service started beside its NATS server (a local
 * stack's cold `up`) does not do the two one after the other.
 */
export interface PreparedStart<T> {
  /** Starts at once, in parallel with connecting to NATS; its value goes to `build` as `prepared`. */
  open(deps: { config: Config; log: Logger }): Promise<T>;
  /** Undoes `open` when the connection cannot be made (the process then exits). */
  close(value: T): Promise<void>;
}

/** What a service's `build` gets. */
export interface ServiceDeps<T = undefined> {
  nc: NatsConnection;
  config: Config;
  log: Logger;
  /** The value of {@link PreparedStart.open}, when the service has one. */
  prepared: T;
}

/**
 * Starts a service: `build` gets the connection, configuration and logger (and what
 * `opts.prepare` opened, while the connection was made) and returns its endpoints and hooks.
 * @throws LoopsmithError `config_invalid` when NATS_URL is missing, `unavailable` when NATS is
 *   down; what `opts.prepare.open` throws (the connection is closed first)
 */
export async function runService<T = undefined>(
  name: ServiceName,
  build: (deps: ServiceDeps<T>) => Promise<ServiceModule>,
  opts: { config?: Config; log?: Logger; prepare?: PreparedStart<T> } = {},
): Promise<RunningService> {
  const config = opts.config ?? loadConfig();
  const log = opts.log ?? createLogger({ service: name });
  if (!config.natsUrl) throw new LoopsmithError("config_invalid", "NATS_URL is not set; a service needs a NATS server");
  const { prepare } = opts;
  const opening = prepare ? prepare.open({ config, log }) : Promise.resolve(undefined as T);
  // Settled either way before anything awaits it (no unhandled rejection while connecting).
  const opened = opening.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  let nc: NatsConnection;
  try {
    nc = await connectNats(config.natsUrl, ServiceNames[name], { waitMs: SERVICE_NATS_WAIT_MS, log, config });
  } catch (err) {
    const o = await opened;
    if (o.ok && prepare)
      await prepare.close(o.value).catch((e: unknown) => log.warn({ err: e }, "undoing the start-up work failed"));
    throw err;
  }
  const o = await opened;
  if (!o.ok) {
    await nc.close().catch(() => undefined);
    throw o.err;
  }
  void logConnectionStatus(nc, log.child({ natsIdentity: natsIdentity(config) })).catch((err: unknown) =>
    log.warn({ err }, "the NATS status watch ended"),
  );
  const mod = await build({ nc, config, log, prepared: o.value });
  const service = await startService(nc, {
    name: ServiceNames[name],
    version: LOOPSMITH_VERSION,
    description: `loopsmith ${name}`,
    log,
    registrations: mod.registrations,
    ...(mod.metadata ? { metadata: mod.metadata } : {}),
    ...(mod.stats ? { stats: mod.stats } : {}),
  });
  // The endpoints' subscriptions are at the server before the service says it started: a
  // caller told so (a test, a stack waiting for it) reaches it, not "no responders".
  await nc.flush();
  log.info({ endpoints: mod.registrations.map((r) => r.def.subject) }, "service started");
  const idFile = process.env.LOOPSMITH_SERVICE_ID_FILE;
  if (idFile) await writeServiceIdFile(idFile, { name: ServiceNames[name], id: service.info().id }, log);
  let stopping: Promise<Error | null> | undefined;
  const stop = (): Promise<Error | null> => {
    stopping ??= (async () => {
      let firstError: Error | null = null;
      const step = async (what: string, fn: () => Promise<unknown>): Promise<void> => {
        try {
          await fn();
        } catch (err) {
          log.error({ err, step: what }, "shutdown step failed");
          firstError ??= err as Error;
        }
      };
      await step("service", () => service.stop());
      for (const hook of mod.hooks ?? []) await step(hook.name, hook.run);
      await step("nats", () => nc.drain());
      log.info("service stopped");
      return firstError;
    })();
    return stopping;
  };
  if (mod.start) await mod.start();
  return { nc, service, config, log, stop };
}

/** What {@link writeServiceIdFile} writes: the `$SRV` name and id of this process's service. */
export interface ServiceIdentityFile {
  name: string;
  id: string;
}

/**
 * Writes this process's `$SRV` name and id to `file` (JSON, mode 0644), so a health check in
 * the same container (`loopsmith health --id-file <file>`) pings this instance, not any
 * replica of the service. Written to a temporary name and renamed, so a reader never sees
 * half a file. A failure is logged, never fatal: the service runs, its health check fails.
 */
async function writeServiceIdFile(file: string, identity: ServiceIdentityFile, log: Logger): Promise<void> {
  try {
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(identity)}\n`, { mode: 0o644 });
    await rename(tmp, file);
  } catch (err) {
    log.error(
      { err, file },
      "cannot write the service id file (LOOPSMITH_SERVICE_ID_FILE); the health check will fail",
    );
  }
}

/**
 * Installs the one signal handler of a process: on SIGTERM or SIGINT, runs `stop` within
 * `deadlineMs`, then exits with 128 + the signal number (143 for SIGTERM, 130 for SIGINT).
 */
export function exitOnSignals(stop: () => Promise<unknown>, log: Logger, deadlineMs = 10_000): void {
  const numbers: Record<string, number> = { SIGINT: 2, SIGTERM: 15 };
  let handled = false;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (handled) return;
      handled = true;
      log.info({ signal }, "stopping");
      const timer = setTimeout(() => {
        log.error({ deadlineMs }, "shutdown deadline passed; exiting");
        process.exit(128 + (numbers[signal] ?? 0));
      }, deadlineMs);
      timer.unref();
      void stop().finally(() => process.exit(128 + (numbers[signal] ?? 0)));
    });
  }
}

/**
 * The `main` of a service process: runs it, installs the signal handler, and exits 1 with
 * one clear sentence when it cannot start.
 */
export async function serviceMain<T = undefined>(
  name: ServiceName,
  build: (deps: ServiceDeps<T>) => Promise<ServiceModule>,
  prepare?: PreparedStart<T>,
): Promise<void> {
  const log = createLogger({ service: name });
  // The handler is installed before start-up: a SIGTERM while the service is still starting
  // (a `docker compose down` during the executor's self-test and pool fill) waits for the
  // start to finish and then stops it in order, so nothing it created is left behind.
  const starting = runService(name, build, { log, ...(prepare ? { prepare } : {}) });
  exitOnSignals(async () => (await starting.catch(() => undefined))?.stop(), log);
  try {
    const running = await starting;
    // Started by a parent with an IPC channel (the CLI): when the parent is gone, stop.
    if (process.connected) {
      process.on("disconnect", () => {
        log.info("the parent process is gone; stopping");
        void running.stop().finally(() => process.exit(0));
      });
    }
    const err = await running.service.stopped;
    if (err) log.error({ err }, "service stopped with an error");
  } catch (err) {
    log.fatal({ err }, err instanceof Error ? err.message : String(err));
    process.exit(1);
  }
}
