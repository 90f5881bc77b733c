/** The memory suite against real PostgreSQL 17 + pgvector (testcontainers); one database per test. */
import { describe } from "vitest";
import pg from "pg";
import { randomBytes } from "node:crypto";
import { loadConfig } from "@loopsmith/shared";
import { it, type Started } from "../fixtures/index.js";
import { runsSuite } from "./runs-suite.js";
import { memorySuite, type Fresh } from "./suite.js";

async function freshDatabase(postgres: Started): Promise<Fresh> {
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

describe("memory on PostgreSQL + pgvector", () => {
  memorySuite((name, fn) => it(name, async ({ postgres }) => fn(await freshDatabase(postgres))));
  runsSuite((name, fn) => it(name, async ({ postgres }) => fn(await freshDatabase(postgres))));
});
