/**
 * How a client follows a task without JetStream consumers (`watchEvents`, cli/src/watch.ts):
 * stored events come from the architect's `events` endpoint in pages, new ones live, each
 * once and in `seq` order; while the architect does not answer, the watch keeps going and asks
 * again. On real NATS JetStream, with the architect's real page reader.
 */
import { describe, expect } from "vitest";
import { connect } from "@nats-io/transport-node";
import { EVENTS_PAGE_MAX, type TaskEvent } from "@loopsmith/shared/contracts";
import { ensureStreams, publishEvent } from "@loopsmith/shared/bus";
import { startEventsEndpoint } from "./fixtures/architect-events.js";
import { it } from "./fixtures/index.js";
import { watchEvents } from "@loopsmith/cli";

const event = (taskId: string, seq: number, kind: TaskEvent["kind"] = "step"): TaskEvent => ({
  v: 1,
  taskId,
  seq,
  at: new Date().toISOString(),
  iteration: 0,
  kind,
  message: `event ${seq}`,
});

describe("watchEvents: stored events through the architect, new ones live", () => {
  it("replays more than a page of stored events, then live ones up to the result, each once and in order", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureStreams(nc);
    const service = await startEventsEndpoint(nc);
    try {
      const stored = EVENTS_PAGE_MAX + 50;
      for (let seq = 0; seq < stored; seq++) await publishEvent(nc, event("watch-1", seq));
      // Another owner's events under the same task id are not this watch's.
      await publishEvent(nc, event("watch-1", stored, "result"), "someone-else");
      const seen: number[] = [];
      const watch = (async () => {
        for await (const e of watchEvents(nc, "watch-1", { signal: AbortSignal.timeout(20_000) })) seen.push(e.seq);
      })();
      await new Promise((r) => setTimeout(r, 500));
      await publishEvent(nc, event("watch-1", stored));
      await publishEvent(nc, event("watch-1", stored + 1, "result"));
      await watch;
      expect(seen).toEqual(Array.from({ length: stored + 2 }, (_, i) => i));
    } finally {
      await service.stop();
      await nc.close();
    }
  });

  it("keeps watching while the architect does not answer, and reads the stored events once it does", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureStreams(nc);
    await publishEvent(nc, event("watch-2", 0));
    await publishEvent(nc, event("watch-2", 1));
    const seen: number[] = [];
    const watch = (async () => {
      for await (const e of watchEvents(nc, "watch-2", { pollMs: 300, signal: AbortSignal.timeout(20_000) }))
        seen.push(e.seq);
    })();
    await new Promise((r) => setTimeout(r, 800));
    expect(seen).toEqual([]);
    const service = await startEventsEndpoint(nc);
    try {
      await new Promise((r) => setTimeout(r, 800));
      expect(seen).toEqual([0, 1]);
      await publishEvent(nc, event("watch-2", 2, "result"));
      await watch;
      expect(seen).toEqual([0, 1, 2]);
    } finally {
      await service.stop();
      await nc.close();
    }
  });
});
