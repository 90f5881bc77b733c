/**
 * Fresh, empty memory databases for the memory suites: a new database on the shared
 * PostgreSQL + pgvector container, or a new PGlite data directory (removed by
 * {@link removeFreshDirs} after the file's tests).
 */
import { randomBytes } from "node:crypto";
import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { loadConfig } from "@loopsmith/shared/runtime";
import { openMemoryStore } from "@loopsmith/memory";
import type { Started } from "../fixtures/index.js";
import { log, type Fresh } from "./suite.js";

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

let template: Promise<string> | undefined;

/**
 * A PGlite data directory made once per test file: initialised, migrated and closed (about
 * 2.5 s on 2 cores). Each {@link freshDataDir} copies it (about 0.3 s) instead of running
 * initdb and the migrations again; the copy is as empty as a new one.
 */
function pgliteTemplate(): Promise<string> {
  template ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-memory-template-"));
    dirs.push(dir);
    const store = await openMemoryStore({ config: loadConfig({ env: { LOOPSMITH_DATA_DIR: dir } }), log });
    await store.close();
    return dir;
  })();
  return template;
}

/**
 * A new, empty PGlite data directory under the system's temp folder: a copy of the file's
 * template, or with `{ blank: true }` a directory never opened, for a test whose own
 * configuration shapes what the first open creates (the HNSW index's m and ef_construction).
 */
export async function freshDataDir(opts: { blank?: boolean } = {}): Promise<Fresh> {
  const from = opts.blank ? undefined : await pgliteTemplate();
  const dir = await mkdtemp(join(tmpdir(), "loopsmith-memory-"));
  dirs.push(dir);
  if (from) await cp(from, dir, { recursive: true, preserveTimestamps: true });
  return { config: loadConfig({ env: { LOOPSMITH_DATA_DIR: dir } }), backend: "pglite" };
}

/** Removes every data directory {@link freshDataDir} made, and the template (call from `afterAll`). */
export async function removeFreshDirs(): Promise<void> {
  template = undefined;
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
}
