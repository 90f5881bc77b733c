/**
 * The NATS users of a stack the CLI starts itself (`loopsmith up`, or `solve` without a
 * stack): the same permission matrix as compose (`renderNatsServerConfig`), with passwords
 * generated for each start. `up` keeps them in `<dataDir>/run/nats-users.json` (mode 0600, in
 * a 0700 folder) so that later commands reach its stack as the `client` user and start
 * missing services as their own users; `solve`'s own stack keeps them in memory only.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ConnectionOptions } from "@nats-io/transport-node";
import { pack } from "tar-stream";
import { z } from "zod";
import {
  NATS_ROLES,
  inboxPrefixOf,
  passwordVariable,
  renderNatsServerConfig,
  type NatsRole,
} from "@loopsmith/shared/bus";

/** The passwords of a stack's NATS users. */
export const StackUsers = z.object({
  v: z.literal(1),
  passwords: z.record(z.enum(NATS_ROLES), z.string().min(16)),
});
export type StackUsers = z.infer<typeof StackUsers>;

/** Where `up` keeps its stack's users. */
export function stackUsersPath(dataDir: string): string {
  return join(dataDir, "run", "nats-users.json");
}

/**
 * New random passwords for every role: a letter, then 24 random bytes in hex (192 bits).
 * nats-server parses the value of a `$VARIABLE` as a configuration token, so a password
 * must start with a letter and hold only letters and digits (`1e5…` would be read as a
 * number and `-…` refused).
 */
export function newStackUsers(): StackUsers {
  return {
    v: 1,
    passwords: Object.fromEntries(NATS_ROLES.map((r) => [r, `p${randomBytes(24).toString("hex")}`])) as Record<
      NatsRole,
      string
    >,
  };
}

/**
 * Writes the users file with mode 0600 (its folder 0700), atomically.
 * @throws Error from the file system
 */
export function writeStackUsers(dataDir: string, users: StackUsers): string {
  const path = stackUsersPath(dataDir);
  mkdirSync(join(dataDir, "run"), { recursive: true, mode: 0o700 });
  // An existing folder keeps its mode through mkdir: narrowed here.
  chmodSync(join(dataDir, "run"), 0o700);
  writeFileSync(`${path}.tmp`, `${JSON.stringify(users)}\n`, { mode: 0o600 });
  chmodSync(`${path}.tmp`, 0o600);
  renameSync(`${path}.tmp`, path);
  return path;
}

/** The users file, or undefined when there is none or it is not one. */
export function readStackUsers(path: string): StackUsers | undefined {
  try {
    const parsed = StackUsers.safeParse(JSON.parse(readFileSync(path, "utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Removes the users file; never throws. */
export function removeStackUsers(dataDir: string): void {
  rmSync(stackUsersPath(dataDir), { force: true });
}

/** How `role` connects: its user, password and own inbox prefix. */
export function roleConnectOptions(users: StackUsers, role: NatsRole): Partial<ConnectionOptions> {
  return { user: role, pass: users.passwords[role], inboxPrefix: inboxPrefixOf(role) };
}

/** The environment a service process of `role` gets (`NATS_USER`, `NATS_PASSWORD`, `NATS_INBOX_PREFIX`). */
export function roleEnv(users: StackUsers, role: NatsRole): Record<string, string> {
  return { NATS_USER: role, NATS_PASSWORD: users.passwords[role], NATS_INBOX_PREFIX: inboxPrefixOf(role) };
}

/** Where the server configuration goes inside the NATS container. */
export const NATS_CONFIG_PATH = "/etc/loopsmith/nats.conf";

/**
 * What the NATS container needs: the configuration file as a tar to put at `/` before the
 * start (so it works on a remote engine too), and the passwords as its environment.
 */
export async function natsServerFiles(users: StackUsers): Promise<{ tar: Buffer; env: string[] }> {
  const tar = pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const chunk of tar) chunks.push(chunk as Buffer);
  })();
  tar.entry({ name: "etc/loopsmith/", type: "directory", mode: 0o755 });
  tar.entry(
    { name: NATS_CONFIG_PATH.slice(1), mode: 0o644 },
    renderNatsServerConfig({ storeDir: "/tmp/js", httpPort: 0 }),
  );
  tar.finalize();
  await done;
  return { tar: Buffer.concat(chunks), env: NATS_ROLES.map((r) => `${passwordVariable(r)}=${users.passwords[r]}`) };
}
