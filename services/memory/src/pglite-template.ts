/**
 * A fresh PGlite data directory from a template instead of `initdb`: PGlite's first start in
 * an empty directory creates the whole cluster (9.3 s on a loaded 2-core machine against
 * 2.8 s from a template), which every new data directory
 * (`loopsmith up` on a new machine, each test) would otherwise pay. The template is the
 * cluster PGlite just created, before any migration, dumped once with `dumpDataDir("gzip")`
 * to `<cacheDir>/pglite-<version>.tar.gz`; migrations then run on the copy as on any
 * database. A template that fails to load is deleted and the directory created the usual way.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import type { Logger } from "pino";

const require = createRequire(import.meta.url);

/**
 * PGlite's version, which keys the template (a cluster is only valid for its own build): read
 * from the package.json above its entry point (the package does not export that file).
 * @throws Error when no package.json with a version is found
 */
function pgliteVersion(): string {
  let dir = dirname(require.resolve("@electric-sql/pglite"));
  for (;;) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "@electric-sql/pglite" && pkg.version) return pkg.version;
    }
    const up = dirname(dir);
    if (up === dir) throw new Error("cannot find @electric-sql/pglite's package.json");
    dir = up;
  }
}

/**
 * Where templates live: `LOOPSMITH_CACHE_DIR`, else `$XDG_CACHE_HOME/loopsmith`, else
 * `~/.cache/loopsmith`.
 */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.LOOPSMITH_CACHE_DIR ?? join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "loopsmith");
}

/** The template file of this PGlite build. */
export function templatePath(dir = cacheDir()): string {
  return join(dir, `pglite-${pgliteVersion()}.tar.gz`);
}

/** True when `dataDir` holds no cluster yet (no `PG_VERSION`). */
function fresh(dataDir: string): boolean {
  return !existsSync(join(dataDir, "PG_VERSION"));
}

/**
 * Opens PGlite (with pgvector) in `dataDir`; a new directory starts from the template when
 * there is one, and the first new directory without one writes it.
 * @throws what `PGlite.create` throws for a directory it cannot open
 */
export async function createPglite(dataDir: string, log: Logger, templateFile?: string): Promise<PGlite> {
  if (!fresh(dataDir)) return PGlite.create({ dataDir, extensions: { vector } });
  let template: string;
  try {
    template = templateFile ?? templatePath();
  } catch (err) {
    log.debug({ err }, "no PGlite template: its version is unknown");
    return PGlite.create({ dataDir, extensions: { vector } });
  }
  if (existsSync(template)) {
    try {
      const blob = new Blob([await readFile(template)]);
      const db = await PGlite.create({ dataDir, extensions: { vector }, loadDataDir: blob });
      log.debug({ template }, "embedded memory created from the template");
      return db;
    } catch (err) {
      log.warn({ err, template }, "the PGlite template could not be loaded; deleting it and creating the cluster");
      await rm(template, { force: true });
      for (const entry of existsSync(dataDir) ? readdirSync(dataDir) : [])
        await rm(join(dataDir, entry), { recursive: true, force: true });
    }
  }
  const db = await PGlite.create({ dataDir, extensions: { vector } });
  try {
    const dump = await db.dumpDataDir("gzip");
    await mkdir(join(template, ".."), { recursive: true });
    // Written under another name, then renamed: a reader never sees half a template.
    const partial = `${template}.${process.pid}.partial`;
    await writeFile(partial, Buffer.from(await dump.arrayBuffer()));
    await rename(partial, template);
    log.debug({ template, bytes: dump.size }, "PGlite template written");
  } catch (err) {
    log.warn(
      { err, template },
      "the PGlite template could not be written; new data directories will create their cluster",
    );
  }
  return db;
}
