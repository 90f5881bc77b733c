import { describe, expect, it } from "vitest";
import { createIdempotencyCache } from "./idempotency.js";

describe("idempotency cache", () => {
  it("joins the call in flight and answers a repeat from the kept result", async () => {
    const cache = createIdempotencyCache<number>();
    let calls = 0;
    let release!: (n: number) => void;
    const first = cache.run("t/1/build", () => (calls++, new Promise<number>((r) => (release = r))));
    const joined = cache.run("t/1/build", async () => (calls++, 2));
    release(1);
    expect(await first).toBe(1);
    expect(await joined).toBe(1);
    expect(await cache.run("t/1/build", async () => (calls++, 3))).toBe(1);
    expect(calls).toBe(1);
  });

  it("never keeps a failure, nor a result that asked to be forgotten", async () => {
    const cache = createIdempotencyCache<string>();
    await expect(cache.run("k", async () => Promise.reject(new Error("down")))).rejects.toThrow("down");
    expect(await cache.run("k", async () => "ok")).toBe("ok");
    expect(await cache.run("f", async (forget) => (forget(), "infra failure"))).toBe("infra failure");
    expect(await cache.run("f", async () => "second")).toBe("second");
  });

  it("drops results after their time and beyond its size", async () => {
    let t = 0;
    const cache = createIdempotencyCache<number>({ ttlMs: 100, maxEntries: 2, now: () => t });
    await cache.run("a", async () => 1);
    t = 150;
    expect(await cache.run("a", async () => 2)).toBe(2);
    await cache.run("b", async () => 1);
    await cache.run("c", async () => 1);
    await cache.run("d", async () => 1);
    expect(cache.size).toBeLessThanOrEqual(3);
  });

  it("keeps at most maxEntries keys, the least recently used going first", async () => {
    const cache = createIdempotencyCache<string>({ maxEntries: 2 });
    await cache.run("a", async () => "a1");
    await cache.run("b", async () => "b1");
    expect(await cache.run("a", async () => "a2")).toBe("a1"); // a is now the most recent
    await cache.run("c", async () => "c1"); // pushes out b
    expect(cache.size).toBe(2);
    expect(await cache.run("a", async () => "a3")).toBe("a1");
    expect(await cache.run("b", async () => "b2")).toBe("b2");
  });

  it("a call that expired and then fails does not remove the call that took its key", async () => {
    let t = 0;
    const cache = createIdempotencyCache<number>({ ttlMs: 100, now: () => t });
    let fail!: (err: Error) => void;
    const old = cache.run("k", () => new Promise<number>((_, reject) => (fail = reject)));
    t = 200;
    let release!: (n: number) => void;
    const fresh = cache.run("k", () => new Promise<number>((r) => (release = r)));
    fail(new Error("late"));
    await expect(old).rejects.toThrow("late");
    expect(
      await Promise.race([cache.run("k", async () => 3), new Promise((r) => setTimeout(() => r("joined"), 10))]),
    ).toBe("joined");
    release(2);
    expect(await fresh).toBe(2);
    expect(await cache.run("k", async () => 3)).toBe(2);
  });
});
