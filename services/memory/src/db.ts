/**
 * The database behind memory: PostgreSQL + pgvector at `config.databaseUrl`, or, when that is
 * unset, embedded PGlite + pgvector persisted under `<config.dataDir>/memory` and served over
 * the PostgreSQL wire protocol by `@electric-sql/pglite-socket`. Either way the rest of
 * memory talks to one `pg` pool: one code path, two back ends.
 *
 * PGlite's wire server has no authentication, so it listens on no TCP port: its Unix socket is
 * in a folder only this user can enter (a fresh `mkdtemp`, mode 0700), and the data directory
 * is made 0700 too; no other local user can connect to memory or read its files.
 *
 * A new PGlite data directory starts from a template of an empty cluster when one is cached
 * (`pglite-template.ts`), instead of paying PGlite's `initdb` again.
 *
 * PGlite does not lock its data directory, so memory holds `<dataDir>/memory.lock` (the
 * owner's pid) while open; a second process gets a clear `db_error`.
 *
 * Opening applies the migrations (node-pg-migrate's runner over `../migrations`), creates
 * one partial HNSW index (cosine; `m` and `ef_construction` from `config.memory`) per embedder
 * in use and any missing full-text index ({@link FAILURES_TEXT_INDEXES}), then analyses the
 * tables that need it ({@link analyseStale}), so the planner has
 * statistics and uses the HNSW index: PGlite has no autovacuum, and on a table analysed when
 * empty the planner reads every row of the language and sorts them (292 ms at 89k rows before;
 * see bench/memory.ts). Every pooled
 * connection sets `hnsw.ef_search` to `config.memory.efSearch`.
 */
import { chmod, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { runner } from "node-pg-migrate";
import type { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import type { Logger } from "pino";
import { LoopsmithError, assetPath, type Config } from "@loopsmith/shared/runtime";
import type { Embedder } from "./embedder.js";
import { toDbError } from "./errors.js";
import { acquireLock, type HeldLock } from "./lock.js";
import { createPglite } from "./pglite-template.js";

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
export const MIGRATIONS_DIR = assetPath("services", "memory", "migrations");
/** Table where node-pg-migrate records the migrations it applied (schema `loopsmith`). */
const MIGRATIONS_TABLE = "memory_migrations";
/** Advisory lock taken while creating embedder indexes, so two services do not race. */
const INDEX_LOCK_ID = 7_241_865_325_823_965;
/** Waiting for a connection (or, with PGlite's pool of 1, for the busy one), in ms, before a call fails with `db_error`. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Client-side limit of one query, in ms (below the bus's memory timeout of 30 s). */
const QUERY_TIMEOUT_MS = 20_000;

/** The tables memory analyses when their statistics are stale. */
export type AnalysedTable = "failures" | "successes" | "tasks" | "runs";
const ANALYSED_TABLES: readonly AnalysedTable[] = ["failures", "successes", "tasks", "runs"];
/** Rows changed since the last ANALYZE before a table is analysed again: autovacuum's defaults. */
const ANALYZE_BASE_ROWS = 50;
const ANALYZE_SCALE = 0.1;

/** Something that runs a query: a pool or a client. */
type Queryable = Pick<pg.Pool, "query">;

/**
 * Analyses each of `tables` (schema `loopsmith`) whose statistics are stale, by the rule of
 * PostgreSQL's autovacuum with its default settings: a table is analysed when it never was
 * (`pg_class.reltuples` < 0), when it has rows but no column statistics (an index was built
 * over rows never analysed), or when its live row count differs from the count the last
 * ANALYZE saw by at least 50 + 10 % of that count. Memory applies it after opening (once the
 * migrations and indexes are in place) and after every bulk insert ({@link insertFailures});
 * PGlite has no autovacuum, so without it the planner never learns a table grew and scans
 * it in full instead of using the HNSW index. Counting costs a scan of the table (about
 * 10 ms per 100,000 rows on PostgreSQL).
 *
 * @param tables - which tables to check. @defaultValue all of memory's tables
 * @returns the tables it analysed, in order
 * @throws the database's error, untyped (callers wrap it in `db_error`)
 */
export async function analyseStale(
  db: Queryable,
  tables: readonly AnalysedTable[] = ANALYSED_TABLES,
): Promise<AnalysedTable[]> {
  const analysed: AnalysedTable[] = [];
  for (const table of tables) {
    const { rows } = await db.query<{ reltuples: number; live: string; has_stats: boolean }>(
      `SELECT c.reltuples::float8 AS reltuples, (SELECT count(*) FROM loopsmith.${table})::text AS live,
              EXISTS (SELECT 1 FROM pg_stats s WHERE s.schemaname = 'loopsmith' AND s.tablename = $1) AS has_stats
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'loopsmith' AND c.relname = $1`,
      [table],
    );
    const row = rows[0];
    if (!row) continue;
    const seen = Number(row.reltuples);
    const live = Number(row.live);
    // CREATE INDEX sets reltuples but gathers no column statistics: rows without statistics are stale too.
    if (seen < 0 || (live > 0 && !row.has_stats) || Math.abs(live - seen) >= ANALYZE_BASE_ROWS + ANALYZE_SCALE * seen) {
      await db.query(`ANALYZE loopsmith.${table}`);
      analysed.push(table);
    }
  }
  return analysed;
}

/** FNV-1a, 32 bits, as 8 hex digits: keeps index names unique after sanitising. */
function shortHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}

/** Name of the HNSW index of one table and embedder (at most 63 bytes, PostgreSQL's limit). */
export function hnswIndexName(table: "failures" | "successes", embedderId: string): string {
  const slug = embedderId
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .slice(0, 30);
  return `${table}_hnsw_${slug}_${shortHash(embedderId)}`;
}

/**
 * The full-text (GIN) indexes of `failures`, as the migration recall-hybrid creates them. A bulk
 * load may drop them and build them again after (`insertFailures` with `rebuildIndex`); opening
 * builds any that is missing, as after a load that died before its build.
 */
export const FAILURES_TEXT_INDEXES: ReadonlyArray<{ readonly name: string; readonly create: string }> = (
  ["goal", "error", "code"] as const
).map((part) => ({
  name: `failures_fts_${part}_idx`,
  create: `CREATE INDEX IF NOT EXISTS failures_fts_${part}_idx ON loopsmith.failures USING gin (fts_${part})`,
}));

/** The SQL expression the HNSW index is built on; queries must use the same expression. */
export function embeddingExpr(dimensions: number): string {
  return `(embedding::vector(${Math.trunc(dimensions)}))`;
}

/** The HNSW settings of `config.memory` that {@link openDatabase} applies. */
type HnswSettings = Config["memory"];

/**
 * Warns when an existing HNSW index was built with other `m`/`ef_construction` than configured:
 * `CREATE INDEX IF NOT EXISTS` keeps it as it is; dropping it rebuilds it at the next open.
 */
async function checkIndexOptions(client: pg.Client, log: Logger, name: string, hnsw: HnswSettings): Promise<void> {
  const { rows } = await client.query<{ reloptions: string[] | null }>(
    `SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'loopsmith' AND c.relname = $1`,
    [name],
  );
  const opts = new Map((rows[0]?.reloptions ?? []).map((o) => o.split("=") as [string, string]));
  const m = Number(opts.get("m") ?? 16);
  const efConstruction = Number(opts.get("ef_construction") ?? 64);
  if (m !== hnsw.hnswM || efConstruction !== hnsw.hnswEfConstruction) {
    log.warn(
      { index: name, m, efConstruction, configured: { m: hnsw.hnswM, efConstruction: hnsw.hnswEfConstruction } },
      `HNSW index ${name} keeps the parameters it was built with; DROP INDEX loopsmith.${name} to rebuild it with the configured ones at the next open`,
    );
  }
}

async function migrate(client: pg.Client, log: Logger, embedders: Embedder[], hnsw: HnswSettings): Promise<void> {
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
        const name = hnswIndexName(table, e.id);
        // Integers checked by the configuration schema.
        await client.query(
          `CREATE INDEX IF NOT EXISTS ${name} ON loopsmith.${table} ` +
            `USING hnsw (${embeddingExpr(e.dimensions)} vector_cosine_ops) ` +
            `WITH (m = ${hnsw.hnswM}, ef_construction = ${hnsw.hnswEfConstruction}) WHERE embedder = '${id}'`,
        );
        await checkIndexOptions(client, log, name, hnsw);
      }
    }
    const { rows: text } = await client.query<{ name: string }>(
      "SELECT indexname AS name FROM pg_indexes WHERE schemaname = 'loopsmith' AND indexname = ANY($1::text[])",
      [FAILURES_TEXT_INDEXES.map((i) => i.name)],
    );
    for (const index of FAILURES_TEXT_INDEXES) {
      if (text.some((r) => r.name === index.name)) continue;
      log.info(
        { index: index.name },
        "building a missing full-text index of memory (a bulk load stopped before its build)",
      );
      await client.query(index.create);
    }
    const analysed = await analyseStale(client);
    if (analysed.length > 0) log.debug({ tables: analysed }, "memory tables analysed");
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [INDEX_LOCK_ID]);
  }
}

function createPool(connectionString: string, max: number, log: Logger, hnsw: HnswSettings): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    // pgvector 0.8: keep scanning the HNSW index until enough rows pass the WHERE filters;
    // ef_search (an integer checked by the configuration schema) trades speed for recall.
    onConnect: async (client) => {
      await client.query(`SET hnsw.iterative_scan = strict_order; SET hnsw.ef_search = ${hnsw.efSearch}`);
    },
  });
  // An idle client whose server went away: log it; the next query reconnects or fails typed.
  pool.on("error", (err) => log.warn({ err }, "memory database connection lost"));
  return pool;
}

/** Connects one client, runs migrations and indexes on it, and always ends it. */
async function prepare(
  connectionString: string,
  log: Logger,
  embedders: Embedder[],
  hnsw: HnswSettings,
): Promise<void> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  client.on("error", (err) => log.warn({ err }, "memory migration connection lost"));
  try {
    await client.connect();
    await migrate(client, log, embedders, hnsw);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function openPostgres(url: string, log: Logger, embedders: Embedder[], hnsw: HnswSettings): Promise<Database> {
  let location = "postgres";
  try {
    const u = new URL(url);
    location = `postgres ${u.host}${u.pathname}`;
  } catch {
    throw new LoopsmithError(
      "config_invalid",
      "DATABASE_URL is not a valid URL (expected postgres://user:password@host:port/db)",
    );
  }
  try {
    await prepare(url, log, embedders, hnsw);
  } catch (err) {
    throw toDbError(`open its database (${location})`, err);
  }
  const pool = createPool(url, 4, log, hnsw);
  let closing: Promise<void> | undefined;
  return {
    pool,
    backend: "postgres",
    location,
    close: () => (closing ??= pool.end().catch((err: unknown) => log.warn({ err }, "closing the memory pool failed"))),
  };
}

async function openPglite(dataDir: string, log: Logger, embedders: Embedder[], hnsw: HnswSettings): Promise<Database> {
  let db: PGlite;
  let lock: HeldLock | undefined;
  try {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    await chmod(dataDir, 0o700);
    lock = await acquireLock(`${dataDir}.lock`, dataDir);
    db = await createPglite(dataDir, log);
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
  // A Unix socket in a private folder (see the top of this file); `.s.PGSQL.5432` is the name
  // a PostgreSQL client derives from `host=<folder>` and port 5432.
  const socketDir = await mkdtemp(join(tmpdir(), "loopsmith-pglite-"));
  const server = new PGLiteSocketServer({ db, path: join(socketDir, ".s.PGSQL.5432"), maxConnections: 2 });
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
    await step("socket folder", () => rm(socketDir, { recursive: true, force: true }));
    await held.release();
  };
  let url: string;
  try {
    await server.start();
    url = `postgres://postgres@/postgres?host=${encodeURIComponent(socketDir)}&port=5432&sslmode=disable`;
    await prepare(url, log, embedders, hnsw);
  } catch (err) {
    await closeAll();
    throw toDbError(`open embedded memory at ${dataDir}`, err);
  }
  // PGlite runs one query at a time and has one session: one pooled connection.
  const pool = createPool(url, 1, log, hnsw);
  log.info({ dataDir, listen: server.getServerConn() }, "embedded memory (PGlite) ready");
  let closing: Promise<void> | undefined;
  return { pool, backend: "pglite", location: dataDir, close: () => (closing ??= closeAll(pool)) };
}

/**
 * Opens memory's database and brings its schema up to date.
 *
 * @returns a {@link Database}: PostgreSQL when `config.databaseUrl` is set (pool of 4), else
 *   PGlite under `<config.dataDir>/memory` behind a socket server (pool of 1); every pooled
 *   connection has `hnsw.ef_search = config.memory.efSearch`
 * @throws LoopsmithError `config_invalid` for a malformed DATABASE_URL; `db_error` when the
 *   database cannot be reached, the data directory cannot be opened, or a migration fails
 */
export async function openDatabase(opts: OpenDatabaseOptions): Promise<Database> {
  const { config, log, embedders } = opts;
  if (config.databaseUrl) return openPostgres(config.databaseUrl, log, embedders, config.memory);
  return openPglite(join(config.dataDir, "memory"), log, embedders, config.memory);
}
