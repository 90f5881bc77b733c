/**
 * Fresh, empty memory databases for the memory suites: a new database on the shared
 * PostgreSQL + pgvector container, or a new PGlite data directory (removed by
 * {@link removeFreshDirs} after the file's tests).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { loadConfig } from "@loopsmith/shared";
import type { Started } from "../fixtures/index.js";
import type { Fresh } from "./suite.js";

const dirs: string[] = [];

/** A new, empty database on `postgres` (the `postgres` fixture), named `memory_<hex>`. */
export async function freshDatabase(postgres: Started): Promise<Fresh> {
  const name = `memory_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: postgres.url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(postgres.url);
  url.pathname = `/${name}`;
  return { config: loadConfig({ env: { DATABASE_URL: url.toString() } }), backend: "postgres" };
}

/** A new, empty PGlite data directory under the system's temp folder. */
export async function freshDataDir(): Promise<Fresh> {
  const dir = await mkdtemp(join(tmpdir(), "loopsmith-memory-"));
  dirs.push(dir);
  return { config: loadConfig({ env: { LOOPSMITH_DATA_DIR: dir } }), backend: "pglite" };
}

/** Removes every data directory {@link freshDataDir} made (call from `afterAll`). */
export async function removeFreshDirs(): Promise<void> {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
}
