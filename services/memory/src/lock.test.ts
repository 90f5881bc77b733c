import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, rmdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { LOCK_STALE_MS, LOCK_UPDATE_MS, acquireLock } from "./lock.js";

const dir = mkdtempSync(join(tmpdir(), "loopsmith-lock-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const lockPath = (): string => join(dir, `memory-${++n}.lock`);
const refusal = (p: Promise<unknown>): Promise<{ code?: string; retryable?: boolean; message?: string } | null> =>
  p.then(
    () => null,
    (e: unknown) => e as { code?: string; retryable?: boolean; message?: string },
  );

describe("acquireLock", () => {
  it("refuses a second taker while held, and can be taken again once released (release twice is fine)", async () => {
    const path = lockPath();
    const held = await acquireLock(path, "/data/memory");
    expect(statSync(path).isDirectory()).toBe(true);
    const err = await refusal(acquireLock(path, "/data/memory"));
    expect(err).toMatchObject({ code: "db_error", retryable: false });
    expect(err?.message).toMatch(/embedded memory at \/data\/memory is in use by another process .*renewed 0 s ago/);
    await held.release();
    await held.release();
    expect(existsSync(path)).toBe(false);
    const again = await acquireLock(path, "/data/memory");
    await again.release();
  });

  it("never removes another process's fresh lock, and takes over one not renewed for the stale time", async () => {
    const path = lockPath();
    mkdirSync(path); // as another process's proper-lockfile lock, just renewed
    expect(await refusal(acquireLock(path, "d"))).toMatchObject({ code: "db_error" });
    expect(existsSync(path)).toBe(true);
    const old = (Date.now() - LOCK_STALE_MS - 5_000) / 1000;
    utimesSync(path, old, old); // its holder died: no renewal since
    const held = await acquireLock(path, "d");
    expect(statSync(path).mtimeMs).toBeGreaterThan(Date.now() - 5_000);
    await held.release();
  });

  it("waits for the lock of a holder that missed two renewals (it died) to go stale, then takes it: a restart after a crash does not fail", async () => {
    const path = lockPath();
    mkdirSync(path);
    const age = (Date.now() - (LOCK_STALE_MS - 1_000)) / 1000;
    utimesSync(path, age, age); // last renewed 9 s ago: its holder is gone
    const t0 = Date.now();
    const held = await acquireLock(path, "d");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(Date.now() - t0).toBeLessThan(LOCK_STALE_MS);
    await held.release();
  });

  it("reads a pid lock file of an older loopsmith: refused while that process lives, taken over when it is gone", async () => {
    const path = lockPath();
    writeFileSync(path, `${process.pid}\n`);
    const err = await refusal(acquireLock(path, "d"));
    expect(err?.message).toContain(`in use by process ${process.pid}`);
    expect(statSync(path).isFile()).toBe(true);
    const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
    writeFileSync(path, `${dead.stdout}\n`);
    const held = await acquireLock(path, "d");
    expect(statSync(path).isDirectory()).toBe(true);
    await held.release();
  });

  it("tells, without crashing, when a held lock is lost", async () => {
    const path = lockPath();
    let lost: (err: Error) => void = () => undefined;
    const compromised = new Promise<Error>((resolve) => (lost = resolve));
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const held = await acquireLock(path, "d", lost);
      rmdirSync(path); // someone removed it by hand
      await vi.advanceTimersByTimeAsync(LOCK_UPDATE_MS); // the next renewal notices
      const err = await compromised;
      expect((err as NodeJS.ErrnoException).code).toBe("ECOMPROMISED");
      await held.release(); // never rejects
    } finally {
      vi.useRealTimers();
    }
  });
});
