/**
 * Removal of sandbox containers that an earlier executor left behind (it crashed or was
 * killed). A sandbox's life is tied to its executor's attach connection (`StdinOnce`): when
 * the executor dies, the engine closes the supervisor's stdin and the container exits, in
 * the middle of a run too (bootstrap.ts; the supervisor's own deadline, the run's timeout
 * plus `SUPERVISOR_GRACE_MS`, bounds a run besides). So a container of another executor that
 * is still running belongs to a live executor (or ends soon by itself), and one that has
 * stopped is a leftover, whoever and wherever its owner was. No pid is consulted: a pid
 * says nothing across pid namespaces (every executor in compose is pid 1) or hosts.
 *
 * A container that was created and never started has no supervisor, so nothing ends it: its
 * owner was killed between create and start. It is told apart from one a live owner is about
 * to start by asking the bus which executor instances are alive (`$SRV` PING, see
 * {@link LiveInstances}): one whose owner does not answer is removed after
 * {@link ORPHAN_GRACE_S}; without an answer from the bus, after {@link CREATED_GRACE_S}. Setup
 * helpers (label `org.loopsmith.setup`) are never started, by design (setup.ts reads and
 * writes a volume through them): they always get {@link CREATED_GRACE_S}.
 */
import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type Docker from "dockerode";
import type { Logger } from "pino";
import { LABEL_SETUP } from "./layer.js";
import { LABEL } from "./sandbox.js";

/**
 * Label on agent mode's session containers (session.ts), whose value is the session's id. A
 * session container idles between runs on its executor's attach connection and ends when it
 * closes, like a sandbox, so the rules above remove a dead executor's sessions too. A running
 * one is never removed by another executor: executors on other buses may share the engine,
 * and the bus's answer says nothing about them.
 */
export const LABEL_SESSION = "org.loopsmith.executor.session";

/**
 * How long a created-but-not-started container is left alone when it is not known whether
 * its owner lives (a live owner may be about to start it), in s.
 */
export const CREATED_GRACE_S = 60;

/**
 * How long a created-but-not-started container of an owner that the bus says is not alive
 * is left alone, in s. An executor creates containers while it starts, before its `$SRV`
 * service answers pings; its create→attach→start takes well under a second on an idle
 * engine, and a start that loses the race is retried (`Sandbox.create`).
 */
export const ORPHAN_GRACE_S = 5;

/** How often a running executor sweeps leftovers, in ms. */
export const SWEEP_EVERY_MS = 60_000;

/**
 * The instance ids (`org.loopsmith.executor` labels) of the executors alive now, or
 * `undefined` when that cannot be known (the bus does not answer). Never throws.
 */
export type LiveInstances = () => Promise<ReadonlySet<string> | undefined>;

/** Options of {@link removeLeftovers}. */
export interface LeftoverOptions {
  /**
   * Also remove this executor's own containers: `stopped` (exited or dead: after its engine
   * stopped and came back, the containers it had are stopped and could not be removed while
   * the engine was away), or `all` (whatever their state: the last step of stopping, when
   * none of them serves a run any more).
   */
  own?: "stopped" | "all";
  /** The executor instances alive now (other than this one); unknown when absent. */
  live?: ReadonlySet<string>;
  /** Overrides {@link ORPHAN_GRACE_S}, in s (tests). */
  orphanGraceS?: number;
}

/**
 * Removes leftover sandbox containers: every labelled container of another executor that
 * has stopped (exited or dead), or was created and never started: after
 * {@link ORPHAN_GRACE_S} when `opts.live` is given and does not hold its owner, else after
 * {@link CREATED_GRACE_S}. Running containers of others are never touched.
 * @param ownId - this executor's instance id (its containers are not touched, unless `opts.own`)
 * @returns the ids removed
 * @throws whatever the engine throws when it cannot list containers
 */
export async function removeLeftovers(
  docker: Docker,
  ownId: string,
  log: Logger,
  opts: LeftoverOptions = {},
): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [LABEL] } });
  const removed: string[] = [];
  const nowS = Date.now() / 1000;
  await Promise.all(
    list.map(async (c) => {
      const owner = c.Labels?.[LABEL] ?? "";
      if (owner === ownId) {
        if (opts.own === undefined) return;
        if (opts.own === "stopped" && c.State !== "exited" && c.State !== "dead") return;
      } else if (c.State === "running" || c.State === "restarting") {
        return;
      } else if (c.State === "created") {
        // A setup helper is created and never started by design: it gets the full minute.
        const orphaned = opts.live !== undefined && !opts.live.has(owner) && c.Labels?.[LABEL_SETUP] === undefined;
        const grace = orphaned ? (opts.orphanGraceS ?? ORPHAN_GRACE_S) : CREATED_GRACE_S;
        if (nowS - c.Created < grace) return;
      }
      try {
        await docker.getContainer(c.Id).remove({ force: true, v: true });
        removed.push(c.Id);
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode !== 404)
          log.warn({ err, id: c.Id }, "could not remove a leftover sandbox");
      }
    }),
  );
  if (removed.length) log.info({ count: removed.length }, "removed sandbox containers an earlier executor left behind");
  return removed;
}

/** Options of {@link removeSessionDirs}. */
export interface SessionDirOptions {
  /** The executor instances alive now (other than this one); unknown when absent. */
  live?: ReadonlySet<string>;
  /** Overrides {@link CREATED_GRACE_S} for an owner whose life is unknown, in s (tests). */
  unknownGraceS?: number;
}

/**
 * Removes the session host copies (session.ts) that an earlier executor left behind: every
 * directory `<sessionsDir>/<instanceId>` but this executor's own whose owner is dead. An owner
 * is taken as alive while it has a session container on the engine that is running,
 * restarting or created (an executor with an open session has its running session container,
 * whatever bus it is on; its warm-pool containers say nothing, since a killed executor's
 * pre-created ones stay until the leftover sweep finds their heartbeat stale), or while the bus lists it in `opts.live`; when the bus cannot say, a directory
 * changed within {@link CREATED_GRACE_S} is also left (an executor opening its first session
 * creates the directory before its container). The session containers themselves are
 * {@link removeLeftovers}'s: a dead executor's end by themselves and are removed as stopped.
 * @param sessionsDir - the parent of every executor's session directory (`<dataDir>/sessions`)
 * @param ownId - this executor's instance id (its directory is never touched)
 * @returns the instance ids whose directories were removed
 * @throws whatever the engine throws when it cannot list containers
 */
export async function removeSessionDirs(
  docker: Docker,
  sessionsDir: string,
  ownId: string,
  log: Logger,
  opts: SessionDirOptions = {},
): Promise<string[]> {
  let owners: string[];
  try {
    owners = (await readdir(sessionsDir, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  owners = owners.filter((id) => id !== ownId && !opts.live?.has(id));
  if (!owners.length) return [];
  const containers = await docker.listContainers({ all: true, filters: { label: [LABEL] } });
  const withContainers = new Set(
    containers
      .filter((c) => c.Labels?.[LABEL_SESSION] !== undefined)
      .filter((c) => c.State === "running" || c.State === "restarting" || c.State === "created")
      .map((c) => c.Labels?.[LABEL] ?? ""),
  );
  const graceMs = (opts.unknownGraceS ?? CREATED_GRACE_S) * 1000;
  const removed: string[] = [];
  for (const owner of owners) {
    if (withContainers.has(owner)) continue;
    const dir = join(sessionsDir, owner);
    if (!opts.live) {
      const changed = await stat(dir).then(
        (s) => s.mtimeMs,
        () => undefined,
      );
      if (changed === undefined || Date.now() - changed < graceMs) continue;
    }
    try {
      await rm(dir, { recursive: true, force: true });
      removed.push(owner);
    } catch (err) {
      log.warn({ err, dir }, "could not remove a session directory an earlier executor left");
    }
  }
  if (removed.length) log.info({ owners: removed }, "removed session directories an earlier executor left behind");
  return removed;
}
