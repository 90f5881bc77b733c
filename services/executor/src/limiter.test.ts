import { describe, expect, it } from "vitest";
import { busyReason, hasCode } from "@loopsmith/shared/runtime";
import { Limiter } from "./limiter.js";

describe("Limiter", () => {
  it("refuses past the queue bound, but lets a caller that asks wait past it, first in first served", async () => {
    const limiter = new Limiter(1, 0);
    const first = await limiter.acquire();
    expect(limiter.running).toBe(1);
    const refused = await limiter.acquire().catch((err: unknown) => err);
    expect(busyReason(refused)).toBe("full");
    const order: string[] = [];
    const a = limiter.acquire(undefined, { pastQueueLimit: true }).then((release) => (order.push("a"), release));
    const b = limiter.acquire(undefined, { pastQueueLimit: true }).then((release) => (order.push("b"), release));
    expect(limiter.queued).toBe(2);
    first();
    (await a)();
    (await b)();
    expect(order).toEqual(["a", "b"]);
    expect(limiter.running).toBe(0);
  });

  it("drops a waiter whose signal aborts (cancelled), and fails the rest unavailable when closed", async () => {
    const limiter = new Limiter(1, 0);
    const held = await limiter.acquire();
    const timedOut = await limiter
      .acquire(AbortSignal.timeout(20), { pastQueueLimit: true })
      .catch((err: unknown) => err);
    expect(hasCode(timedOut, "cancelled")).toBe(true);
    expect(limiter.queued).toBe(0);
    const waiting = limiter.acquire(undefined, { pastQueueLimit: true }).catch((err: unknown) => err);
    limiter.close();
    expect(hasCode(await waiting, "unavailable")).toBe(true);
    held();
    expect(limiter.running).toBe(0);
  });
});
