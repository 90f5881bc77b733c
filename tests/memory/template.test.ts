/**
 * A new PGlite data directory from the cached template: the first new directory writes the
 * template, the next ones load it (and work as a database), and a broken template is
 * deleted and the cluster created the usual way.
 */
import { existsSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createPglite, templatePath } from "../../services/memory/src/pglite-template.js";

const log = pino({ level: "silent" });
const dir = (): string => mkdtempSync(join(tmpdir(), "loopsmith-template-"));

describe("PGlite template", () => {
  it("is written by the first new directory and loaded by the next", async () => {
    const template = join(dir(), "cache", "pglite-test.tar.gz");
    const first = await createPglite(join(dir(), "a"), log, template);
    await first.close();
    expect(existsSync(template)).toBe(true);
    const second = await createPglite(join(dir(), "b"), log, template);
    try {
      await second.exec(
        "CREATE EXTENSION IF NOT EXISTS vector; CREATE TABLE t (v vector(3)); INSERT INTO t VALUES ('[1,2,3]');",
      );
      const r = await second.query<{ d: number }>("SELECT v <=> '[1,2,3]' AS d FROM t");
      expect(r.rows[0]?.d).toBe(0);
    } finally {
      await second.close();
    }
  });

  it("keys the default template by PGlite's version under LOOPSMITH_CACHE_DIR", async () => {
    const cache = dir();
    process.env.LOOPSMITH_CACHE_DIR = cache;
    try {
      expect(templatePath()).toMatch(new RegExp(`^${cache}/pglite-\\d+\\.\\d+\\.\\d+\\.tar\\.gz$`));
      const db = await createPglite(join(dir(), "e"), log);
      await db.close();
      expect(existsSync(templatePath())).toBe(true);
    } finally {
      delete process.env.LOOPSMITH_CACHE_DIR;
    }
  });

  it("deletes a template that does not load and creates the cluster instead", async () => {
    const template = join(dir(), "broken.tar.gz");
    writeFileSync(template, "not a tarball");
    const db = await createPglite(join(dir(), "c"), log, template);
    try {
      expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows[0]?.one).toBe(1);
    } finally {
      await db.close();
    }
    // The broken file is gone; a real template (a gzip tarball of a cluster) took its place.
    expect(statSync(template).size).toBeGreaterThan(100_000);
    const again = await createPglite(join(dir(), "d"), log, template);
    await again.close();
  });
});
