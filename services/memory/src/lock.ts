/**
 * A lock file for embedded memory: PGlite does not lock its data directory, and two
 * processes writing one directory would corrupt it. The lock holds the owner's pid; a lock
 * whose process is gone is stale and taken over.
 */
import { open, readFile, rm } from "node:fs/promises";
import { LoopsmithError, processAlive } from "@loopsmith/shared";

/** A held lock; `release` is safe to call twice and never rejects. */
export interface HeldLock {
  readonly path: string;
  release(): Promise<void>;
}

/**
 * Takes the lock file at `path` for this process.
 * @param what - what the lock guards, for the error sentence (a directory)
 * @throws LoopsmithError `db_error` (not retryable) when a live process holds it
 */
export async function acquireLock(path: string, what: string): Promise<HeldLock> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, "wx");
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      let released: Promise<void> | undefined;
      return { path, release: () => (released ??= rm(path, { force: true }).catch(() => undefined)) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const pid = Number.parseInt(await readFile(path, "utf8").catch(() => ""), 10);
    if (Number.isInteger(pid) && pid > 0 && processAlive(pid)) {
      throw new LoopsmithError(
        "db_error",
        `embedded memory at ${what} is in use by process ${pid}; stop it, or set DATABASE_URL to share a PostgreSQL server`,
        { retryable: false },
      );
    }
    await rm(path, { force: true }); // stale: its process is gone
  }
  throw new LoopsmithError("db_error", `cannot take the lock ${path} of embedded memory; remove it if no loopsmith runs`, {
    retryable: false,
  });
}
