/**
 * A lock for embedded memory: PGlite does not lock its data directory, and two processes
 * writing one directory would corrupt it.
 *
 * The lock is proper-lockfile's: a directory at the lock path, made with `mkdir` (which only
 * one process can win), whose modification time its holder renews every
 * {@link LOCK_UPDATE_MS}. A lock not renewed for {@link LOCK_STALE_MS} is stale (its holder
 * died or hung) and the next opener takes it over; a renewed one is never removed, so a
 * takeover cannot delete another process's fresh lock. The holder's locks are removed when
 * its process exits.
 */
import { lstat, readFile, stat, unlink } from "node:fs/promises";
import lockfile from "proper-lockfile";
import { LoopsmithError, processAlive } from "@loopsmith/shared/runtime";

/**
 * A lock whose modification time is older than this many milliseconds (10 s) is stale and
 * taken over. After a crash, the data directory can be opened again once this has passed:
 * an opener that finds a lock not renewed for two renewal periods waits for it to go stale.
 */
export const LOCK_STALE_MS = 10_000;

/** How often the holder renews its lock's modification time, in milliseconds (2 s). */
export const LOCK_UPDATE_MS = 2_000;

/** Age of a lock's last renewal, in ms, or undefined when it cannot be read. */
async function ageOf(path: string): Promise<number | undefined> {
  return stat(path).then(
    (s) => Math.max(0, Date.now() - s.mtimeMs),
    () => undefined,
  );
}

/** A held lock; `release` is safe to call twice and never rejects. */
export interface HeldLock {
  readonly path: string;
  release(): Promise<void>;
}

/**
 * A lock file (not a directory) at `path` is the pid file of a loopsmith from before locks
 * were proper-lockfile's: refused while that process lives, removed when it is gone.
 * `unlink` never removes a directory, so it cannot remove a lock taken the current way.
 */
async function clearOldLock(path: string, what: string): Promise<void> {
  const info = await lstat(path).catch(() => undefined);
  if (!info?.isFile()) return;
  const pid = Number.parseInt(await readFile(path, "utf8").catch(() => ""), 10);
  if (processAlive(pid)) throw inUse(what, `process ${pid}`);
  await unlink(path).catch(() => undefined);
}

function inUse(what: string, by: string): LoopsmithError {
  return new LoopsmithError(
    "db_error",
    `embedded memory at ${what} is in use by ${by}; stop it, or set DATABASE_URL to share a PostgreSQL server`,
    { retryable: false },
  );
}

/**
 * Takes the lock at `path` for this process (proper-lockfile, stale after
 * {@link LOCK_STALE_MS} ms without renewal, renewed every {@link LOCK_UPDATE_MS} ms).
 * @param what - what the lock guards, for the error sentence (a directory)
 * @param onCompromised - called if the lock is lost while held (its renewal failed for
 *   {@link LOCK_STALE_MS}, or another process took it over). @defaultValue a process warning
 * @throws LoopsmithError `db_error` (not retryable) when a live process holds it; the file
 *   system's error when the lock cannot be made
 */
export async function acquireLock(
  path: string,
  what: string,
  onCompromised: (err: Error) => void = (err) =>
    process.emitWarning(
      `the lock ${path} of embedded memory at ${what} was lost (${err.message}); another process may open it too`,
    ),
): Promise<HeldLock> {
  await clearOldLock(path, what);
  const take = () =>
    lockfile.lock(path, {
      lockfilePath: path,
      realpath: false,
      stale: LOCK_STALE_MS,
      update: LOCK_UPDATE_MS,
      retries: 0,
      onCompromised,
    });
  let unlock: () => Promise<void>;
  try {
    unlock = await take().catch(async (err: NodeJS.ErrnoException) => {
      // A holder that missed two renewals has most likely died (killed, crashed): wait for
      // its lock to go stale and take it over, instead of failing a restart after a crash.
      const age = err.code === "ELOCKED" ? await ageOf(path) : undefined;
      if (age === undefined || age < 2 * LOCK_UPDATE_MS) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, LOCK_STALE_MS - age) + 250));
      return take();
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOCKED") {
      const renewed = await ageOf(path);
      throw inUse(
        what,
        `another process (its lock ${path} was renewed ${renewed === undefined ? "?" : Math.round(renewed / 1000)} s ago; a lock left by a process that died is taken over ${LOCK_STALE_MS / 1000} s after its last renewal)`,
      );
    }
    throw err;
  }
  let released: Promise<void> | undefined;
  return { path, release: () => (released ??= unlock().catch(() => undefined)) };
}
