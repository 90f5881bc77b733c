/**
 * The Docker engine an executor drives (executors can run on several engines). Each
 * executor replica drives the one engine its own `DOCKER_HOST` names (dockerode reads
 * `DOCKER_HOST`, `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`), so the engine is a property of
 * the sandbox backend, never of the conductor: the conductor only sees executors on the bus.
 *
 * Here: what the engine is ({@link describeEngine}), the sandbox images it must hold
 * ({@link ensureImages}), and whether it answers now ({@link EngineWatch}).
 */
import { createReadStream } from "node:fs";
import type Docker from "dockerode";
import type { Logger } from "pino";
import { LoopsmithError, maskUrl } from "@loopsmith/shared/runtime";

/** What `$SRV` INFO metadata says of an executor's engine. */
export interface EngineInfo {
  /** The engine's own id (`docker info` ID): the same for every executor on one engine. */
  id: string;
  /** The engine's host name (`docker info` Name). */
  name: string;
  /** The engine's version (`docker info` ServerVersion). */
  version: string;
  /** Where it is reached: `DOCKER_HOST` with any password masked, or `local socket`. */
  endpoint: string;
  /** True when the connection uses TLS client certificates (`DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH`). */
  tls: boolean;
}

/** How long one engine ping may take before the engine counts as not answering, in ms. */
export const ENGINE_PING_TIMEOUT_MS = 3_000;
/** How often a started executor pings its engine, in ms. */
export const ENGINE_PING_EVERY_MS = 2_000;

/** Where `env` says the engine is: `DOCKER_HOST` (password masked), or the local socket. */
export function engineEndpoint(env: NodeJS.ProcessEnv = process.env): { endpoint: string; tls: boolean } {
  const host = env.DOCKER_HOST?.trim();
  const tls = Boolean(env.DOCKER_TLS_VERIFY && env.DOCKER_TLS_VERIFY !== "0") || Boolean(env.DOCKER_CERT_PATH);
  return { endpoint: host ? maskUrl(host) : "local socket", tls };
}

/** Rejects after `ms` with `unavailable`, else settles as `p`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new LoopsmithError("unavailable", `${what} did not answer within ${ms} ms`)),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Asks the engine who it is (`GET /info`).
 * @throws LoopsmithError `sandbox_error` naming the endpoint when the engine does not answer
 *   within `timeoutMs` (default 10 000) or refuses the connection (a TLS mismatch included)
 */
export async function describeEngine(
  docker: Docker,
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<EngineInfo> {
  const { endpoint, tls } = engineEndpoint(opts.env);
  let info: { ID?: string; Name?: string; ServerVersion?: string };
  try {
    info =
      (await within(
        docker.info() as Promise<typeof info>,
        opts.timeoutMs ?? 10_000,
        `the Docker engine at ${endpoint}`,
      )) ?? {};
  } catch (err) {
    throw new LoopsmithError(
      "sandbox_error",
      `the Docker engine at ${endpoint} does not answer: ${(err as Error).message}`,
      { cause: err, retryable: false },
    );
  }
  return {
    id: info.ID ?? "unknown",
    name: info.Name ?? "unknown",
    version: info.ServerVersion ?? "unknown",
    endpoint,
    tls,
  };
}

/** True when the engine has `image` (by name or id). */
export async function hasImage(docker: Docker, image: string): Promise<boolean> {
  try {
    await docker.getImage(image).inspect();
    return true;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return false;
    throw err;
  }
}

/**
 * Makes sure the engine holds every image in `images`. A missing one is loaded from
 * `archive` (a `docker save` file, gzip allowed: `executor.imageArchive`,
 * `LOOPSMITH_SANDBOX_IMAGES`) when one is configured; no registry is ever asked.
 * @throws LoopsmithError `sandbox_error` naming the images still missing, the engine, and the
 *   two ways to bring them (load an archive, or set `LOOPSMITH_SANDBOX_IMAGES`)
 */
export async function ensureImages(
  docker: Docker,
  images: readonly string[],
  opts: { engine: EngineInfo; archive?: string; log: Logger },
): Promise<{ loaded: string[] }> {
  const missing = async (): Promise<string[]> => {
    const out: string[] = [];
    for (const image of new Set(images)) if (!(await hasImage(docker, image))) out.push(image);
    return out;
  };
  let absent = await missing();
  if (!absent.length) return { loaded: [] };
  const where = `the Docker engine ${opts.engine.name} (${opts.engine.endpoint})`;
  if (opts.archive) {
    opts.log.info(
      { images: absent, archive: opts.archive, engine: opts.engine.endpoint },
      "loading sandbox images into the engine",
    );
    try {
      const stream = await docker.loadImage(createReadStream(opts.archive), { quiet: true });
      await new Promise<void>((resolve, reject) => {
        docker.modem.followProgress(stream, (err: Error | null, out: { error?: string }[]) => {
          const failed = err ?? (out.find((o) => o.error) ? new Error(out.find((o) => o.error)?.error) : null);
          if (failed) reject(failed);
          else resolve();
        });
      });
    } catch (err) {
      throw new LoopsmithError(
        "sandbox_error",
        `could not load ${opts.archive} into ${where}: ${(err as Error).message}`,
        { cause: err, retryable: false },
      );
    }
    const before = absent;
    absent = await missing();
    if (!absent.length) return { loaded: before };
  }
  const how = opts.archive
    ? `${opts.archive} does not hold them`
    : "load them there (docker save <image> | docker --host <engine> load) or name a `docker save` archive in LOOPSMITH_SANDBOX_IMAGES";
  throw new LoopsmithError("sandbox_error", `${where} has no ${absent.join(", ")}: ${how}`, { retryable: false });
}

/** The engine's health as an executor last saw it. */
export interface EngineHealth {
  healthy: boolean;
  /** When the engine last answered a ping, ms since the epoch (0: never). */
  lastAnswerAt: number;
  /** Why the last ping failed, when it did. */
  error?: string;
}

/**
 * Pings the engine every {@link ENGINE_PING_EVERY_MS} while started. An executor whose
 * engine does not answer reports `healthy: false` in its `$SRV` stats and refuses runs, so
 * callers take them to another executor; it becomes healthy again at the first answer.
 */
export class EngineWatch {
  private state: EngineHealth = { healthy: true, lastAnswerAt: 0 };
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<boolean> | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly log: Logger,
    private readonly onChange: (health: EngineHealth) => void = () => undefined,
    private readonly timeoutMs = ENGINE_PING_TIMEOUT_MS,
  ) {}

  /** The last known health. */
  get health(): EngineHealth {
    return { ...this.state };
  }

  /** Pings now (joining a ping in flight); resolves with whether the engine answered. Never throws. */
  check(): Promise<boolean> {
    this.checking ??= within(this.docker.ping(), this.timeoutMs, "the Docker engine")
      .then(
        () => this.set({ healthy: true, lastAnswerAt: Date.now() }),
        (err: unknown) =>
          this.set({ healthy: false, lastAnswerAt: this.state.lastAnswerAt, error: (err as Error).message }),
      )
      .finally(() => {
        this.checking = undefined;
      });
    return this.checking;
  }

  private set(next: EngineHealth): boolean {
    const changed = next.healthy !== this.state.healthy;
    this.state = next;
    if (changed) {
      if (next.healthy) this.log.info("the Docker engine answers again");
      else this.log.error({ error: next.error }, "the Docker engine does not answer: refusing runs until it does");
      this.onChange(this.health);
    }
    return next.healthy;
  }

  /** Starts the periodic pings (unref'd: they never keep the process alive). */
  start(everyMs = ENGINE_PING_EVERY_MS): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), everyMs);
    this.timer.unref();
  }

  /** Stops the pings. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
