/**
 * The database behind memory: PostgreSQL + pgvector at `config.databaseUrl`, or, when that is
 * unset, embedded PGlite + pgvector persisted under `<config.dataDir>/memory` and served over
 * the PostgreSQL wire protocol by `@electric-sql/pglite-socket` on 127.0.0.1. Either way the
 * rest of memory talks to one `pg` pool: one code path, two back ends.
 *
 * PGlite does not lock its data directory, so memory holds `<dataDir>/memory.lock` (the
 * owner's pid) while open; a second process gets a clear `db_error`.
 *
 * Opening applies the migrations (node-pg-migrate's runner over `../migrations`) and creates
 * one partial HNSW index (cosine) per embedder in use.
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { runner } from "node-pg-migrate";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import type { Logger } from "pino";
import { LoopsmithError, type Config } from "@loopsmith/shared";
import type { Embedder } from "./embedder.js";
import { toDbError } from "./errors.js";
import { acquireLock, type HeldLock } from "./lock.js";

/** Which back end a {@link Database} runs on. */
export type Backend = "postgres" | "pglite";

/** An open database: a `pg` pool and how to close it. */
export interface Database {
  readonly pool: pg.Pool;
  readonly backend: Backend;
  /** Where the data lives: the URL's host and database, or the PGlite data directory. */
  readonly location: string;
  /**
   * Closes the pool, then (PGlite) the socket server, then PGlite, then releases the data
   * directory's lock file. Safe to call twice; never rejects.
   */
  close(): Promise<void>;
}

/** Options of {@link openDatabase}. */
export interface OpenDatabaseOptions {
  config: Config;
  log: Logger;
  /** Embedders whose HNSW indexes must exist. */
  embedders: Embedder[];
}

/** Folder of the SQL migrations applied by node-pg-migrate. */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../migrations", import.meta.url));
/** Table where node-pg-migrate records the migrations it applied (schema `loopsmith`). */
const MIGRATIONS_TABLE = "memory_migrations";
/** Advisory lock taken while creating embedder indexes, so two services do not race. */
const INDEX_LOCK_ID = 7_241_865_325_823_965;
/** Waiting for a connection (or, with PGlite's pool of 1, for the busy one), in ms, before a call fails with `db_error`. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Client-side limit of one query, in ms (below the bus's memory timeout of 30 s). */
const QUERY_TIMEOUT_MS = 20_000;

/** FNV-1a, 32 bits, as 8 hex digits: keeps index names unique after sanitising. */
function shortHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}

/** Name of the HNSW index of one table and embedder (at most 63 bytes, PostgreSQL's limit). */
export function hnswIndexName(table: "failures" | "successes", embedderId: string): string {
  const slug = embedderId.toLowerCase().replace(/[^a-z0-9]+/g, "_").slice(0, 30);
  return `${table}_hnsw_${slug}_${shortHash(embedderId)}`;
}

/** The SQL expression the HNSW index is built on; queries must use the same expression. */
export function embeddingExpr(dimensions: number): string {
  return `(embedding::vector(${Math.trunc(dimensions)}))`;
}

async function migrate(client: pg.Client, log: Logger, embedders: Embedder[]): Promise<void> {
  const applied = await runner({
    dbClient: client,
    dir: MIGRATIONS_DIR,
    migrationsTable: MIGRATIONS_TABLE,
    migrationsSchema: "loopsmith",
    createMigrationsSchema: true,
    direction: "up",
    singleTransaction: true,
    checkOrder: true,
    logger: {
      debug: (msg: string) => log.debug({ component: "migrate" }, msg),
      info: (msg: string) => log.debug({ component: "migrate" }, msg),
      warn: (msg: string) => log.warn({ component: "migrate" }, msg),
      error: (msg: string) => log.error({ component: "migrate" }, msg),
    },
  });
  if (applied.length > 0) log.info({ migrations: applied.map((m) => m.name) }, "memory migrations applied");
  await client.query("SELECT pg_advisory_lock($1)", [INDEX_LOCK_ID]);
  try {
    for (const e of embedders) {
      const id = e.id.replace(/'/g, "''"); // ids are checked by checkEmbedder; doubled quotes anyway
      for (const table of ["failures", "successes"] as const) {
        await client.query(
          `CREATE INDEX IF NOT EXISTS ${hnswIndexName(table, e.id)} ON loopsmith.${table} ` +
            `USING hnsw (${embeddingExpr(e.dimensions)} vector_cosine_ops) WHERE embedder = '${id}'`,
        );
      }
    }
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [INDEX_LOCK_ID]);
  }
}

function createPool(connectionString: string, max: number, log: Logger): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    // pgvector 0.8: keep scanning the HNSW index until enough rows pass the WHERE filters.
    onConnect: async (client) => {
      await client.query("SET hnsw.iterative_scan = strict_order");
    },
  });
  // An idle client whose server went away: log it; the next query reconnects or fails typed.
  pool.on("error", (err) => log.warn({ err }, "memory database connection lost"));
  return pool;
}

/** Connects one client, runs migrations and indexes on it, and always ends it. */
async function prepare(connectionString: string, log: Logger, embedders: Embedder[]): Promise<void> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  client.on("error", (err) => log.warn({ err }, "memory migration connection lost"));
  try {
    await client.connect();
    await migrate(client, log, embedders);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function openPostgres(url: string, log: Logger, embedders: Embedder[]): Promise<Database> {
  let location = "postgres";
  try {
    const u = new URL(url);
    location = `postgres ${u.host}${u.pathname}`;
  } catch {
    throw new LoopsmithError("config_invalid", "DATABASE_URL is not a valid URL (expected postgres://user:password@host:port/db)");
  }
  try {
    await prepare(url, log, embedders);
  } catch (err) {
    throw toDbError(`open its database (${location})`, err);
  }
  const pool = createPool(url, 4, log);
  let closing: Promise<void> | undefined;
  return {
    pool,
    backend: "postgres",
    location,
    close: () => (closing ??= pool.end().catch((err: unknown) => log.warn({ err }, "closing the memory pool failed"))),
  };
}

async function openPglite(dataDir: string, log: Logger, embedders: Embedder[]): Promise<Database> {
  let db: PGlite;
  let lock: HeldLock | undefined;
  try {
    await mkdir(dataDir, { recursive: true });
    lock = await acquireLock(`${dataDir}.lock`, dataDir);
    db = await PGlite.create({ dataDir, extensions: { vector } });
  } catch (err) {
    await lock?.release();
    if (err instanceof LoopsmithError) throw err;
    throw new LoopsmithError("db_error", `cannot open embedded memory at ${dataDir}: ${(err as Error).message}`, {
      cause: err,
      retryable: false,
    });
  }
  const held = lock;
  // Two connections at most: the migration client may still be closing when the pool connects.
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 2 });
  const closeAll = async (pool?: pg.Pool): Promise<void> => {
    const step = async (what: string, fn: () => Promise<unknown>): Promise<void> => {
      try {
        await fn();
      } catch (err) {
        log.warn({ err, step: what }, "closing embedded memory failed");
      }
    };
    if (pool) await step("pool", () => pool.end());
    await step("socket server", () => server.stop());
    await step("pglite", () => db.close());
    await held.release();
  };
  let url: string;
  try {
    await server.start();
    url = `postgres://postgres@${server.getServerConn()}/postgres?sslmode=disable`;
    await prepare(url, log, embedders);
  } catch (err) {
    await closeAll();
    throw toDbError(`open embedded memory at ${dataDir}`, err);
  }
  // PGlite runs one query at a time and has one session: one pooled connection.
  const pool = createPool(url, 1, log);
  log.info({ dataDir, listen: server.getServerConn() }, "embedded memory (PGlite) ready");
  let closing: Promise<void> | undefined;
  return { pool, backend: "pglite", location: dataDir, close: () => (closing ??= closeAll(pool)) };
}

/**
 * Opens memory's database and brings its schema up to date.
 *
 * @returns a {@link Database}: PostgreSQL when `config.databaseUrl` is set (pool of 4), else
 *   PGlite under `<config.dataDir>/memory` behind a socket server (pool of 1)
 * @throws LoopsmithError `config_invalid` for a malformed DATABASE_URL; `db_error` when the
 *   database cannot be reached, the data directory cannot be opened, or a migration fails
 */
export async function openDatabase(opts: OpenDatabaseOptions): Promise<Database> {
  const { config, log, embedders } = opts;
  if (config.databaseUrl) return openPostgres(config.databaseUrl, log, embedders);
  return openPglite(join(config.dataDir, "memory"), log, embedders);
}
