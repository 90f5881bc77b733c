/** History pages and windowed statistics on both back ends: embedded PGlite and real PostgreSQL + pgvector. */
import { afterAll, describe, it as plainIt } from "vitest";
import { it } from "../fixtures/index.js";
import { freshDataDir, freshDatabase, removeFreshDirs } from "./fresh.js";
import { statsSuite } from "./stats-suite.js";

afterAll(removeFreshDirs);

describe("history and stats on embedded PGlite", () => {
  statsSuite((name, fn) => plainIt(name, async () => fn(await freshDataDir())));
});

describe("history and stats on PostgreSQL + pgvector", () => {
  statsSuite((name, fn) => it(name, async ({ postgres }) => fn(await freshDatabase(postgres))));
});
