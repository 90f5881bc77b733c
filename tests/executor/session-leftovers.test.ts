/**
 * The leftovers sweep and session containers (label `org.loopsmith.executor.session`): a
 * running one of another executor is never taken, whatever the bus says; a stopped one is.
 */
import { describe, expect, it } from "vitest";
import { LABEL, LABEL_SESSION, removeLeftovers } from "@loopsmith/executor";
import { docker, log, testConfig } from "./helpers.js";

describe("the leftovers sweep and session containers", () => {
  it("keeps a running session container of any other executor (other buses share the engine), removes a stopped one", async () => {
    const make = async (owner: string, sessionId: string) => {
      const c = await docker.createContainer({
        Image: testConfig().images.python,
        Cmd: ["sleep", "300"],
        Entrypoint: [],
        Labels: { [LABEL]: owner, [LABEL_SESSION]: sessionId },
        HostConfig: { NetworkMode: "none" },
      });
      await c.start();
      return c;
    };
    const unknown = await make("otherbus00001", "t-other-1");
    const stopped = await make("deadexecutor1", "t-dead-1");
    try {
      await stopped.kill();
      const removed = await removeLeftovers(docker, "me", log, { live: new Set(), orphanGraceS: 0 });
      expect(removed).toContain(stopped.id);
      expect(removed).not.toContain(unknown.id);
      expect((await unknown.inspect()).State.Running).toBe(true);
    } finally {
      await unknown.remove({ force: true }).catch(() => undefined);
      await stopped.remove({ force: true }).catch(() => undefined);
    }
  });
});
