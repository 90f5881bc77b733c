/** The memory suite against embedded PGlite + pgvector behind pglite-socket; one data dir per test. */
import { afterAll, describe, expect, it } from "vitest";
import { existsSync, readFileSync, readdirSync, readlinkSync, statSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { loadConfig } from "@loopsmith/shared/runtime";
import { openMemoryStore } from "@loopsmith/memory";
import { runsSuite } from "./runs-suite.js";
import { freshDataDir, removeFreshDirs } from "./fresh.js";
import { log, memorySuite } from "./suite.js";

afterAll(removeFreshDirs);

describe("memory on embedded PGlite", () => {
  memorySuite((name, fn) => it(name, async () => fn(await freshDataDir())));
  runsSuite((name, fn) => it(name, async () => fn(await freshDataDir())));
});

describe("embedded PGlite that cannot open", () => {
  it("fails with a typed db_error naming the data directory, not a crash", async () => {
    const dir = (await freshDataDir()).config.dataDir;
    const blocker = join(dir, "not-a-dir");
    await writeFile(blocker, "a file where the data directory should be");
    const err = await openMemoryStore({ config: loadConfig({ env: { LOOPSMITH_DATA_DIR: blocker } }), log }).then(
      () => null,
      (e: unknown) => e as { code?: string; message?: string },
    );
    expect(err?.code).toBe("db_error");
    expect(err?.message).toContain(join(blocker, "memory"));
  });
});

describe("embedded PGlite's access", () => {
  it("keeps its data directory 0700 and listens on no TCP port (a Unix socket in a private folder), and removes that folder when closed", async () => {
    const { config } = await freshDataDir();
    const before = new Set(readdirSync(tmpdir()).filter((n) => n.startsWith("loopsmith-pglite-")));
    const store = await openMemoryStore({ config, log });
    try {
      expect(statSync(join(config.dataDir, "memory")).mode & 0o777).toBe(0o700);
      const opened = readdirSync(tmpdir()).filter((n) => n.startsWith("loopsmith-pglite-") && !before.has(n));
      expect(opened).toHaveLength(1);
      const folder = join(tmpdir(), opened[0] as string);
      expect(statSync(folder).mode & 0o777).toBe(0o700);
      expect(statSync(join(folder, ".s.PGSQL.5432")).isSocket()).toBe(true);
      // No listening TCP socket of this process (/proc/net/tcp: state 0A is LISTEN, owned by our uid).
      const inodes = new Set(
        readdirSync(`/proc/${process.pid}/fd`)
          .map((fd) => {
            try {
              return readlinkSync(`/proc/${process.pid}/fd/${fd}`);
            } catch {
              return "";
            }
          })
          .filter((l) => l.startsWith("socket:["))
          .map((l) => l.slice(8, -1)),
      );
      const listening = [
        ...readFileSync("/proc/net/tcp", "utf8").split("\n"),
        ...readFileSync("/proc/net/tcp6", "utf8").split("\n"),
      ]
        .map((l) => l.trim().split(/\s+/))
        .filter((cols) => cols[3] === "0A" && inodes.has(cols[9] ?? ""));
      expect(listening).toEqual([]);
      await store.close();
      expect(existsSync(folder)).toBe(false);
    } finally {
      await store.close().catch(() => undefined);
    }
  });
});

describe("embedded PGlite's data directory lock", () => {
  it("refuses a second opener while the first holds it, and takes over a stale lock", async () => {
    const { config } = await freshDataDir();
    const first = await openMemoryStore({ config, log });
    try {
      const err = await openMemoryStore({ config, log }).then(
        () => null,
        (e: unknown) => e as { code?: string; retryable?: boolean },
      );
      expect(err).toMatchObject({ code: "db_error", retryable: false });
    } finally {
      await first.close();
    }
    // A lock left by a process that is gone (a child that has exited) is stale.
    const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
    await writeFile(join(config.dataDir, "memory.lock"), `${dead.stdout}\n`);
    const second = await openMemoryStore({ config, log });
    await second.close();
  });
});
