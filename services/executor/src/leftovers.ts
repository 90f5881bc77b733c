/**
 * Removal of sandbox containers that an earlier executor left behind (it crashed or was
 * killed). A container is a leftover when it carries the executor label and its owner
 * (the host name and pid on its labels) is this host and that process is gone, or when it
 * has exited. Containers of a live executor, here or on another host, are kept.
 */
import { hostname } from "node:os";
import type Docker from "dockerode";
import type { Logger } from "pino";
import { processAlive } from "@loopsmith/shared";
import { LABEL, LABEL_HOST, LABEL_PID } from "./sandbox.js";

/**
 * Removes leftover sandbox containers.
 * @param ownId - this executor's instance id (its containers are never touched)
 * @returns the ids removed
 * @throws whatever the engine throws when it cannot list containers
 */
export async function removeLeftovers(docker: Docker, ownId: string, log: Logger): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [LABEL] } });
  const me = hostname();
  const removed: string[] = [];
  await Promise.all(
    list.map(async (c) => {
      const labels = c.Labels ?? {};
      if (labels[LABEL] === ownId) return;
      const sameHost = labels[LABEL_HOST] === me;
      const ownerGone = sameHost && !processAlive(Number(labels[LABEL_PID]));
      const notRunning = c.State === "exited" || c.State === "dead";
      if (!ownerGone && !notRunning) return;
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
