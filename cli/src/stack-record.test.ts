/**
 * The own-stack lock: a command that runs a stack of its own on a data directory holds it; a
 * second one waits for it (saying which process it waits for) instead of failing on the
 * embedded memory's lock, and takes over a lock whose process is gone.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ownStackLockPath, takeOwnStackLock } from "./stack-record.js";
import { waitingLine } from "./stack.js";

const dataDir = (): string => mkdtempSync(join(tmpdir(), "loopsmith-own-stack-"));

/** A live process that is not this one (a sleeping node), and how to end it. */
function otherProcess(): { pid: number; end: () => Promise<void> } {
  const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
  return {
    pid: child.pid as number,
    end: () =>
      new Promise((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGKILL");
      }),
  };
}

describe("the own-stack lock of a data directory", () => {
  it("is taken at once when free, holds this pid, and is released", async () => {
    const dir = dataDir();
    const release = await takeOwnStackLock(dir, { onWait: () => expect.unreachable("nothing to wait for") });
    expect(readFileSync(ownStackLockPath(dir), "utf8")).toBe(String(process.pid));
    release();
    expect(existsSync(ownStackLockPath(dir))).toBe(false);
  });

  it("waits while another live process holds it, says so once, and takes it when that process ends", async () => {
    const dir = dataDir();
    const other = otherProcess();
    mkdirSync(join(dir, "run"), { recursive: true });
    writeFileSync(ownStackLockPath(dir), String(other.pid));
    const waits: number[] = [];
    let taken = false;
    const pending = takeOwnStackLock(dir, { onWait: (pid) => waits.push(pid), pollMs: 50 }).then((release) => {
      taken = true;
      return release;
    });
    await new Promise((r) => setTimeout(r, 400));
    expect(taken).toBe(false);
    expect(waits).toEqual([other.pid]);
    await other.end();
    const release = await pending;
    expect(waits).toEqual([other.pid]);
    expect(readFileSync(ownStackLockPath(dir), "utf8")).toBe(String(process.pid));
    release();
    expect(waitingLine(other.pid, dir)).toBe(
      `loopsmith: another loopsmith command (process ${other.pid}) runs its own stack on ${dir}; waiting for it to finish (\`loopsmith up\` starts one stack that every command shares)`,
    );
  });

  it("takes over the lock of a process that is gone, and stops waiting when interrupted", async () => {
    const dir = dataDir();
    const gone = otherProcess();
    await gone.end();
    mkdirSync(join(dir, "run"), { recursive: true });
    writeFileSync(ownStackLockPath(dir), String(gone.pid));
    const release = await takeOwnStackLock(dir, { onWait: () => expect.unreachable("its holder is gone") });
    expect(readFileSync(ownStackLockPath(dir), "utf8")).toBe(String(process.pid));
    release();

    const other = otherProcess();
    writeFileSync(ownStackLockPath(dir), String(other.pid));
    const abort = new AbortController();
    const waiting = takeOwnStackLock(dir, { signal: abort.signal, pollMs: 50 });
    setTimeout(() => abort.abort(), 200);
    await expect(waiting).rejects.toMatchObject({ code: "cancelled" });
    await other.end();
  });
});
