import { mkdirSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NATS_ROLES } from "@loopsmith/shared/bus";
import {
  natsServerFiles,
  newStackUsers,
  readStackUsers,
  roleEnv,
  stackUsersPath,
  writeStackUsers,
} from "./stack-auth.js";

describe("the NATS users of a CLI-started stack", () => {
  it("makes a distinct password per role that nats-server reads as a string: a letter, then letters and digits", () => {
    const users = newStackUsers();
    const values = NATS_ROLES.map((r) => users.passwords[r]);
    for (const v of values) expect(v).toMatch(/^[A-Za-z][A-Za-z0-9]{40,}$/);
    expect(new Set(values).size).toBe(NATS_ROLES.length);
    expect(newStackUsers().passwords.client).not.toBe(users.passwords.client);
  });

  it("keeps them in a 0600 file in a 0700 folder, and reads them back", () => {
    const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-stack-users-"));
    // The stack record made the folder first, with the usual 0755.
    mkdirSync(join(dataDir, "run"), { mode: 0o755 });
    const users = newStackUsers();
    const path = writeStackUsers(dataDir, users);
    expect(path).toBe(stackUsersPath(dataDir));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, "run")).mode & 0o777).toBe(0o700);
    expect(readStackUsers(path)).toEqual(users);
    expect(readStackUsers(join(dataDir, "none.json"))).toBeUndefined();
  });

  it("starts each service as its own user with its own inbox prefix, and gives the server every password in its environment", async () => {
    const users = newStackUsers();
    expect(roleEnv(users, "executor")).toEqual({
      NATS_USER: "executor",
      NATS_PASSWORD: users.passwords.executor,
      NATS_INBOX_PREFIX: "_INBOX_executor",
    });
    const files = await natsServerFiles(users);
    expect(files.env).toContain(`LOOPSMITH_NATS_ADMIN_PASSWORD=${users.passwords.admin}`);
    expect(files.env).toHaveLength(NATS_ROLES.length);
    // The configuration itself holds no password.
    for (const r of NATS_ROLES) expect(files.tar.toString("latin1")).not.toContain(users.passwords[r]);
  });
});
