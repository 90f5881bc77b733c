/**
 * Removal of sandbox containers that an earlier executor left behind (it crashed or was
 * killed). A sandbox's life is tied to its executor's attach connection (`StdinOnce`): when
 * the executor dies, the engine closes the supervisor's stdin and a waiting container
 * exits; a container in the middle of a run ends when the supervisor's own deadline passes
 * (the run's timeout plus `SUPERVISOR_GRACE_MS`). So a container of another executor that
 * is still running belongs to a live executor (or ends soon by itself), and one that has
 * stopped is a leftover, whoever and wherever its owner was. No pid is consulted: a pid
 * says nothing across pid namespaces (every executor in compose is pid 1) or hosts.
 */
import type Docker from "dockerode";
import type { Logger } from "pino";
import { LABEL } from "./sandbox.js";

/** How long a created-but-not-started container is left alone (a live owner may start it), in s. */
const CREATED_GRACE_S = 60;

/** How often a running executor sweeps leftovers, in ms. */
export const SWEEP_EVERY_MS = 60_000;

/**
 * Removes leftover sandbox containers: every labelled container of another executor that
 * has stopped (exited, dead, or created and never started for a minute).
 * @param ownId - this executor's instance id (its containers are not touched, unless `opts.own`)
 * @param opts.own - also remove this executor's own containers: `stopped` (exited or dead:
 *   after its engine stopped and came back, the containers it had are stopped and could not
 *   be removed while the engine was away), or `all` (whatever their state: the last step of
 *   stopping, when none of them serves a run any more)
 * @returns the ids removed
 * @throws whatever the engine throws when it cannot list containers
 */
export async function removeLeftovers(docker: Docker, ownId: string, log: Logger, opts: { own?: "stopped" | "all" } = {}): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [LABEL] } });
  const removed: string[] = [];
  await Promise.all(
    list.map(async (c) => {
      if (c.Labels?.[LABEL] === ownId) {
        if (opts.own === undefined) return;
        if (opts.own === "stopped" && c.State !== "exited" && c.State !== "dead") return;
      } else if (c.State === "running" || c.State === "restarting") {
        return;
      }
      // A live executor creates, attaches, then starts: leave a young created one alone.
      const mineToGo = c.Labels?.[LABEL] === ownId && opts.own === "all";
      if (!mineToGo && c.State === "created" && Date.now() / 1000 - c.Created < CREATED_GRACE_S) return;
      try {
        await docker.getContainer(c.Id).remove({ force: true, v: true });
        removed.push(c.Id);
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode !== 404) log.warn({ err, id: c.Id }, "could not remove a leftover sandbox");
      }
    }),
  );
  if (removed.length) log.info({ count: removed.length }, "removed sandbox containers an earlier executor left behind");
  return removed;
}
