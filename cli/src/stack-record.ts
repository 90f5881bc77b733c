/**
 * The record of a stack started by `loopsmith up`: `<dataDir>/run/stack.json`, written when
 * every service answered, removed by `loopsmith down`. Commands that need the stack (`solve`,
 * `history`, `stats`, `show`, `improve`) use the NATS it names when it answers and no NATS URL
 * is configured, so the services already running serve them and nothing starts cold.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { connect } from "@nats-io/transport-node";
import { natsServers } from "@loopsmith/shared";
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
