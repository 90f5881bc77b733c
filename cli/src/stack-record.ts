/**
 * The record of a stack started by `loopsmith up`: `<dataDir>/run/stack.json`, written when
 * every service answered, removed by `loopsmith down`. Commands that need the stack (`solve`,
 * `history`, `stats`, `show`, `improve`) use the NATS it names when it answers and no NATS URL
 * is configured, so the services already running serve them and nothing starts cold. Also
 * the lock a command holds while it runs a stack of its own ({@link takeOwnStackLock}).
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { connect } from "@nats-io/transport-node";
import { LoopsmithError, processAlive } from "@loopsmith/shared/runtime";
import { natsServers } from "@loopsmith/shared/bus";
import { readStackUsers, roleConnectOptions, type StackUsers } from "./stack-auth.js";

/** The record's shape. */
export const StackRecord = z.object({
  v: z.literal(1),
  /** `nats://127.0.0.1:<port>` (or the configured NATS the stack runs on). */
  natsUrl: z.string().min(1),
  /** The NATS container `up` started; absent when it ran on a configured NATS. */
  natsContainerId: z.string().optional(),
  /** The file with the passwords of its NATS users (stack-auth.ts); absent on a configured NATS. */
  usersFile: z.string().optional(),
  /** The pid of each service `up` started. */
  pids: z.record(z.string(), z.number().int().positive()),
  /** The flags layer the services were started with (provider, model, script …). */
  flags: z.record(z.string(), z.unknown()).default({}),
  /** Where the services write their logs. */
  logDir: z.string(),
  /** ISO-8601 time the stack answered. */
  startedAt: z.string(),
  /** Time from `up` to every service answering, in ms. */
  readyMs: z.number().nonnegative(),
});
export type StackRecord = z.infer<typeof StackRecord>;

/** Where the record of the stack of `dataDir` lives. */
export function stackRecordPath(dataDir: string): string {
  return join(dataDir, "run", "stack.json");
}

/** The record, or undefined when there is none or it cannot be read as one. */
export function readStackRecord(dataDir: string): StackRecord | undefined {
  let text: string;
  try {
    text = readFileSync(stackRecordPath(dataDir), "utf8");
  } catch {
    return undefined;
  }
  try {
    const parsed = StackRecord.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Writes the record atomically (a temp file renamed over it). @throws Error from the file system */
export function writeStackRecord(dataDir: string, record: StackRecord): void {
  const path = stackRecordPath(dataDir);
  mkdirSync(join(dataDir, "run"), { recursive: true });
  writeFileSync(`${path}.tmp`, `${JSON.stringify(record, null, 2)}\n`);
  renameSync(`${path}.tmp`, path);
}

/** Removes the record; never throws. */
export function removeStackRecord(dataDir: string): void {
  rmSync(stackRecordPath(dataDir), { force: true });
}

/** A running stack's record, with its NATS users when it has them. */
export type LiveStack = StackRecord & { users?: StackUsers };

/**
 * The record of a stack whose NATS answers a handshake (as its `client` user when it has
 * users) within `timeoutMs` (ms), or undefined (no record, a stale one: the stack was killed
 * without `down`, or its users file is gone).
 */
export async function liveStack(dataDir: string, timeoutMs = 1_000): Promise<LiveStack | undefined> {
  const record = readStackRecord(dataDir);
  if (!record) return undefined;
  const users = record.usersFile ? readStackUsers(record.usersFile) : undefined;
  if (record.usersFile && !users) return undefined;
  try {
    const nc = await connect({
      ...(users ? roleConnectOptions(users, "client") : {}),
      servers: natsServers(record.natsUrl),
      timeout: timeoutMs,
      reconnect: false,
    });
    await nc.close();
    return users ? { ...record, users } : record;
  } catch {
    return undefined;
  }
}

/**
 * Where the command that runs a stack of its own on `dataDir` (a `solve` or `improve` without
 * `up`, or an `up` while it starts) writes its pid: the embedded memory under `dataDir` can be
 * open in one process only, so a second such command waits for the first instead of failing.
 */
export function ownStackLockPath(dataDir: string): string {
  return join(dataDir, "run", "own-stack.pid");
}

/** Options of {@link takeOwnStackLock}. */
export interface OwnStackLockOptions {
  /** Called once, when another live process holds the lock and this one starts waiting. */
  onWait?: (holderPid: number) => void;
  /** Stops waiting: the promise rejects with `cancelled`. */
  signal?: AbortSignal;
  /** How often the holder is checked again, in ms. @defaultValue 500 */
  pollMs?: number;
}

/**
 * Takes the own-stack lock of `dataDir` (a pid file made with `wx`, which only one process
 * can win), waiting while a live process holds it; a lock whose process is gone (killed) is
 * removed and taken.
 * @returns the release function (removes the file if it still holds this pid; never throws)
 * @throws LoopsmithError `cancelled` when `opts.signal` aborts while waiting; the file system's
 *   error when the file cannot be made
 */
export async function takeOwnStackLock(dataDir: string, opts: OwnStackLockOptions = {}): Promise<() => void> {
  const path = ownStackLockPath(dataDir);
  mkdirSync(join(dataDir, "run"), { recursive: true });
  let told = false;
  for (;;) {
    if (opts.signal?.aborted)
      throw new LoopsmithError("cancelled", "interrupted while waiting for another command's stack");
    try {
      writeFileSync(path, String(process.pid), { flag: "wx" });
      return () => {
        try {
          if (readFileSync(path, "utf8") === String(process.pid)) rmSync(path, { force: true });
        } catch {
          /* gone already */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const text = readText(path);
    const holder = Number.parseInt(text, 10);
    if (!processAlive(holder)) {
      // Its holder died without releasing it (or it is not a pid): stale. Removed only if it
      // still names that holder, so a lock another waiter has just taken stays.
      if (readText(path) === text) rmSync(path, { force: true });
      continue;
    }
    if (!told) {
      told = true;
      opts.onWait?.(holder);
    }
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 500));
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
