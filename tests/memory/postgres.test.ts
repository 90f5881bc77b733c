/** The memory suite against real PostgreSQL 17 + pgvector (testcontainers); one database per test. */
import { describe } from "vitest";
import { it } from "../fixtures/index.js";
import { freshDatabase } from "./fresh.js";
import { runsSuite } from "./runs-suite.js";
import { memorySuite } from "./suite.js";

describe("memory on PostgreSQL + pgvector", () => {
  memorySuite((name, fn) => it(name, async ({ postgres }) => fn(await freshDatabase(postgres))));
  runsSuite((name, fn) => it(name, async ({ postgres }) => fn(await freshDatabase(postgres))));
});
