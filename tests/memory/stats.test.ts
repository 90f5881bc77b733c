/** History pages and windowed statistics on both back ends: embedded PGlite and real PostgreSQL + pgvector. */
import { afterAll, describe, it as plainIt } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { randomBytes } from "node:crypto";
import { loadConfig } from "@loopsmith/shared";
import { it } from "../fixtures/index.js";
import { statsSuite } from "./stats-suite.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe("history and stats on embedded PGlite", () => {
  statsSuite((name, fn) =>
    plainIt(name, async () => {
      const dir = await mkdtemp(join(tmpdir(), "loopsmith-stats-"));
      dirs.push(dir);
      await fn({ config: loadConfig({ env: { LOOPSMITH_DATA_DIR: dir } }), backend: "pglite" });
    }),
  );
});

describe("history and stats on PostgreSQL + pgvector", () => {
  statsSuite((name, fn) =>
    it(name, async ({ postgres }) => {
      const db = `stats_${randomBytes(6).toString("hex")}`;
      const admin = new pg.Client({ connectionString: postgres.url });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${db}`);
      } finally {
        await admin.end();
      }
      const url = new URL(postgres.url);
      url.pathname = `/${db}`;
      await fn({ config: loadConfig({ env: { DATABASE_URL: url.toString() } }), backend: "postgres" });
    }),
  );
});
