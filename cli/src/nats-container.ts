/**
 * The NATS container a CLI starts when no NATS URL is configured, and the clean-up of ones
 * whose CLI died.
 *
 * Ownership and heartbeat. A CLI that starts a container labels it with its instance id (a
 * random UUID per process) and the absolute path of its heartbeat file,
 * `<dataDir>/run/nats-<instance>.heartbeat`, written before the container is created and
 * touched every {@link HEARTBEAT_EVERY_MS} while it runs; it deletes both when it stops. A
 * later CLI removes another's container only when it can read that file and its mtime is
 * older than {@link ORPHAN_AFTER_MS}, i.e. the owner stopped beating without cleaning up (it
 * was killed). When the file cannot be seen (the owner runs on another host sharing the
 * engine, in another mount namespace, or with a data directory this CLI cannot read), the
 * container is not this CLI's to judge and is left alone; any later CLI that shares the
 * owner's file system removes it. Containers of older CLIs (labelled with a pid only) are
 * left alone too: a pid says nothing across pid namespaces or hosts.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { basename, isAbsolute, join } from "node:path";
import Docker from "dockerode";
import type { Logger } from "pino";
import { LoopsmithError, type Config } from "@loopsmith/shared/runtime";
import { NATS_CONFIG_PATH, natsServerFiles, type StackUsers } from "./stack-auth.js";

/** Label on NATS containers the CLI starts; its value is the owner's pid (informational). */
export const CLI_LABEL = "org.loopsmith.cli";
/** Label: the owner CLI's instance id. */
export const INSTANCE_LABEL = "org.loopsmith.cli.instance";
/** Label: the absolute path of the owner's heartbeat file. */
export const HEARTBEAT_LABEL = "org.loopsmith.cli.heartbeat";
/** How often the owner touches its heartbeat file, in ms. */
export const HEARTBEAT_EVERY_MS = 10_000;
/** A heartbeat older than this, in ms, marks the container as orphaned. */
export const ORPHAN_AFTER_MS = 30_000;
/** This process's instance id. */
export const INSTANCE_ID = randomUUID();

const HEARTBEAT_NAME = /^nats-([0-9a-f-]{36})\.heartbeat$/;

/** A heartbeat file kept fresh until `stop()`. */
export interface Heartbeat {
  path: string;
  /** Stops touching the file and deletes it; safe to call twice. */
  stop(): void;
}

/**
 * Writes `<dir>/nats-<instance>.heartbeat` and touches it every `everyMs` (an unref'd timer,
 * so it never keeps the process alive).
 * @throws Error from the file system when the directory cannot be created or written
 */
export function startHeartbeat(dir: string, instance = INSTANCE_ID, everyMs = HEARTBEAT_EVERY_MS): Heartbeat {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `nats-${instance}.heartbeat`);
  writeFileSync(
    path,
    `${JSON.stringify({ instance, pid: process.pid, host: hostname(), startedAt: new Date().toISOString() })}\n`,
  );
  const timer = setInterval(() => {
    try {
      const now = new Date();
      utimesSync(path, now, now);
    } catch {
      /* the data directory went away: the container will look orphaned, which it then is */
    }
  }, everyMs);
  timer.unref();
  return {
    path,
    stop: () => {
      clearInterval(timer);
      rmSync(path, { force: true });
    },
  };
}

/** Age of a heartbeat file in ms, or undefined when it cannot be read here. */
function heartbeatAgeMs(path: string, now: number): number | undefined {
  try {
    return now - statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Options of {@link removeOrphanedNats}. */
export interface OrphanOptions {
  /** Heartbeat age beyond which a container is orphaned, in ms. @defaultValue {@link ORPHAN_AFTER_MS} */
  orphanAfterMs?: number;
  /** This CLI's instance id, never judged. @defaultValue {@link INSTANCE_ID} */
  self?: string;
}

/**
 * Removes NATS containers started by CLIs whose heartbeat is older than the limit (see the
 * module comment for what is left alone). Errors removing one container are logged, not thrown.
 * @returns the ids of the containers removed
 */
export async function removeOrphanedNats(docker: Docker, log: Logger, opts: OrphanOptions = {}): Promise<string[]> {
  const limit = opts.orphanAfterMs ?? ORPHAN_AFTER_MS;
  const self = opts.self ?? INSTANCE_ID;
  const removed: string[] = [];
  const now = Date.now();
  for (const c of await docker.listContainers({ all: true, filters: { label: [CLI_LABEL] } })) {
    const instance = c.Labels[INSTANCE_LABEL];
    const path = c.Labels[HEARTBEAT_LABEL];
    // Only a heartbeat file named after the container's own instance is read (or deleted).
    if (
      !instance ||
      instance === self ||
      !path ||
      !isAbsolute(path) ||
      HEARTBEAT_NAME.exec(basename(path))?.[1] !== instance
    )
      continue;
    const age = heartbeatAgeMs(path, now);
    if (age === undefined || age <= limit) continue;
    log.debug(
      { id: c.Id.slice(0, 12), instance, ageMs: Math.round(age) },
      "removing a NATS container whose CLI stopped beating",
    );
    try {
      await docker.getContainer(c.Id).remove({ force: true });
      removed.push(c.Id);
      rmSync(path, { force: true });
    } catch (err) {
      log.warn({ err, id: c.Id.slice(0, 12) }, "could not remove an orphaned NATS container");
    }
  }
  return removed;
}

/** A started NATS container. */
export interface NatsContainer {
  /** `nats://127.0.0.1:<port>`. */
  url: string;
  id: string;
  /** Stops and removes the container, then the heartbeat; never throws. */
  stop(): Promise<void>;
}

/** Label on the NATS container of a stack started by `loopsmith up`; its value is the data directory. */
export const STACK_LABEL = "org.loopsmith.stack";

/**
 * Starts nats-server with JetStream in a container on the local engine, owned by this CLI
 * (labels and heartbeat as described above), after removing orphans of other CLIs. With
 * `users` it runs the permission matrix with those passwords (stack-auth.ts). With
 * `keep` (`loopsmith up`) the container outlives this CLI: it carries {@link STACK_LABEL}
 * instead of an owner and a heartbeat, so no orphan clean-up removes it; `loopsmith down` does.
 * @throws LoopsmithError `unavailable` when no Docker engine answers or the image is missing,
 *   `sandbox_error` when the container has no mapped port
 */
export async function startNatsContainer(
  config: Config,
  log: Logger,
  opts: { keep?: boolean; users?: StackUsers } = {},
): Promise<NatsContainer> {
  const docker = new Docker();
  try {
    await docker.ping();
  } catch (err) {
    throw new LoopsmithError(
      "unavailable",
      "no Docker engine answers; start dockerd, or set NATS_URL to a running NATS server",
      { cause: err },
    );
  }
  try {
    await docker.getImage(config.images.nats).inspect();
  } catch (err) {
    throw new LoopsmithError(
      "unavailable",
      `the NATS image ${config.images.nats} is missing; build it with \`npm run images\` or set LOOPSMITH_NATS_IMAGE`,
      { cause: err },
    );
  }
  await removeOrphanedNats(docker, log);
  let heartbeat: Heartbeat;
  try {
    heartbeat = opts.keep ? { path: "", stop: () => undefined } : startHeartbeat(join(config.dataDir, "run"));
  } catch (err) {
    throw new LoopsmithError(
      "config_invalid",
      `cannot write under the data directory ${config.dataDir}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  let container: Docker.Container | undefined;
  try {
    const auth = opts.users ? await natsServerFiles(opts.users) : undefined;
    container = await docker.createContainer({
      Image: config.images.nats,
      // With users: the permission matrix (stack-auth.ts), the passwords in the environment.
      Cmd: auth ? ["-c", NATS_CONFIG_PATH] : ["-js", "-sd", "/tmp/js"],
      ...(auth ? { Env: auth.env } : {}),
      Labels: opts.keep
        ? { [STACK_LABEL]: config.dataDir }
        : { [CLI_LABEL]: String(process.pid), [INSTANCE_LABEL]: INSTANCE_ID, [HEARTBEAT_LABEL]: heartbeat.path },
      ExposedPorts: { "4222/tcp": {} },
      HostConfig: { AutoRemove: true, PortBindings: { "4222/tcp": [{ HostIp: "127.0.0.1", HostPort: "" }] } },
    });
    if (auth) await container.putArchive(auth.tar, { path: "/" });
    await container.start();
    const info = await container.inspect();
    const port = info.NetworkSettings.Ports["4222/tcp"]?.[0]?.HostPort;
    if (!port) throw new LoopsmithError("sandbox_error", "the NATS container has no mapped port");
    const url = `nats://127.0.0.1:${port}`;
    log.debug({ url, id: info.Id.slice(0, 12), instance: INSTANCE_ID }, "started a NATS container");
    const started = container;
    return {
      url,
      id: info.Id,
      stop: async () => {
        await started.stop({ t: 1 }).catch(() => undefined);
        await started.remove({ force: true }).catch(() => undefined);
        heartbeat.stop();
      },
    };
  } catch (err) {
    await container?.remove({ force: true }).catch(() => undefined);
    heartbeat.stop();
    throw err;
  }
}
