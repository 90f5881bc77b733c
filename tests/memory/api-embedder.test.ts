/**
 * Memory with the embeddings-API embedder, on embedded PGlite and on PostgreSQL + pgvector,
 * against a fake OpenAI-compatible embeddings server (tests/fixtures/fake-embeddings.ts):
 * stores and recalls with the server's vectors, a model of another length, the server down,
 * and switching embedders. The fake's vectors are character counts, no model: these tests
 * check what is sent, stored, indexed and compared, not how well a real model recalls
 * (`npm run bench:transfer -- --embedder api` against a real server measures that).
 */
import { createServer } from "node:net";
import { afterAll, afterEach, describe, expect } from "vitest";
import pino from "pino";
import { Config } from "@loopsmith/shared/runtime";
import { FailureRecord, type Language } from "@loopsmith/shared/contracts";
import {
  buildEmbedText,
  cosine,
  embedParts,
  openDatabase,
  openMemoryStore,
  prepareFailure,
  type Embedder,
  type MemoryStore,
} from "@loopsmith/memory";
import { it } from "../fixtures/index.js";
import { startFakeEmbeddings, toyVector, type FakeEmbeddings } from "../fixtures/fake-embeddings.js";
import { freshDatabase, freshDataDir, removeFreshDirs } from "./fresh.js";
import { GOAL_A, GOAL_B, log, nameErrorFailure, type Fresh, type TestWithFresh } from "./suite.js";

afterAll(removeFreshDirs);

let fakes: FakeEmbeddings[] = [];
afterEach(async () => {
  for (const f of fakes) await f.close();
  fakes = [];
});

async function fakeServer(dimensions: number, mode: "ok" | "down" = "ok"): Promise<FakeEmbeddings> {
  const fake = await startFakeEmbeddings({ dimensions, mode, apiKey: "sk-embeddings-test" });
  fakes.push(fake);
  return fake;
}

/** `fresh`'s configuration with the api embedder over `url` (validated by the schema). */
function apiConfig(fresh: Fresh, url: string, embedder: Record<string, unknown> = {}): Config {
  return Config.parse({
    ...fresh.config,
    memory: {
      ...fresh.config.memory,
      embedder: {
        kind: "api",
        baseUrl: url,
        model: "toy-embed",
        apiKey: "sk-embeddings-test",
        dimensions: 32,
        timeoutMs: 2_000,
        maxRetries: 1,
        cooldownMs: 0,
        ...embedder,
      },
    },
  });
}

/** `fresh`'s configuration with the hashing embedder and `reembed`. */
function hashingConfig(fresh: Fresh, reembed = true): Config {
  return Config.parse({
    ...fresh.config,
    memory: { ...fresh.config.memory, embedder: { ...fresh.config.memory.embedder, reembed } },
  });
}

/**
 * What memory must store and compare with the fake at `native` dimensions: its first
 * `dimensions` numbers, L2-normalised (written out here, not memory's own `fitVector`).
 */
function toyEmbedder(dimensions: number, native = dimensions): Embedder {
  const unit = (v: number[]): number[] => {
    const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    return v.map((x) => x / norm);
  };
  return {
    id: "toy",
    dimensions,
    embed: async (texts) =>
      texts.map((t) => unit(toyVector(t.trim() === "" ? "(empty)" : t, native).slice(0, dimensions))),
  };
}

/** A failure's record as the store validates it. */
const record = (taskId: string, goal: string, name: string) =>
  FailureRecord.parse(nameErrorFailure(taskId, goal, name));

const zeroDivision = (taskId: string) =>
  FailureRecord.parse({
    ...nameErrorFailure(taskId, "Write mean(xs): the average of a list.", "x"),
    errorText: `Traceback (most recent call last):\n  File "/workspace/${taskId}/solution.py", line 3, in mean\n    return sum(xs) / 0\nZeroDivisionError: division by zero`,
  });

/** The vector memory stores for a failure record, made with `embedder`. */
async function storedVector(embedder: Embedder, rec: FailureRecord): Promise<number[]> {
  return embedParts(embedder, prepareFailure(rec).parts);
}

/** The query vector of a recall of `text` and `errorText`, made with `embedder`. */
async function queryVector(embedder: Embedder, text: string, errorText: string, language: Language = "python") {
  return embedParts(embedder, buildEmbedText({ goal: text, errorText, language }));
}

interface Row {
  kind: "failures" | "successes";
  task: string;
  embedder: string;
  vector: string;
}

/** Every stored failure and success with its embedder and vector (as text), read with memory closed. */
async function storedRows(config: Config): Promise<Row[]> {
  const db = await openDatabase({ config, log, embedders: [] });
  try {
    const { rows } = await db.pool.query<Row>(
      `SELECT 'failures' AS kind, task_id AS task, embedder, embedding::text AS vector FROM loopsmith.failures
       UNION ALL
       SELECT 'successes', task_id, embedder, embedding::text FROM loopsmith.successes
       ORDER BY 1, 2`,
    );
    return rows;
  } finally {
    await db.close();
  }
}

const parseVector = (text: string): number[] => JSON.parse(text) as number[];

function expectClose(actual: number[], expected: number[]): void {
  expect(actual).toHaveLength(expected.length);
  // Stored as 4-byte floats.
  actual.forEach((x, i) => expect(x).toBeCloseTo(expected[i] as number, 6));
}

/** A logger whose warnings a test can read. */
function capturingLog(): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: pino({ level: "warn" }, { write: (s: string) => void lines.push(s) }), lines };
}

/** A local port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const recallB = (taskId = "task-b") => {
  const b = nameErrorFailure(taskId, GOAL_B, "balanse");
  return { v: 1 as const, taskId, language: "python" as const, text: GOAL_B, errorText: b.errorText, k: 5 };
};

async function withStore<T>(store: MemoryStore, fn: (s: MemoryStore) => Promise<T>): Promise<T> {
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

function embedderSuite(test: TestWithFresh): void {
  test("stores and recalls with the server's vectors, sending the model and the key", async (f) => {
    const fake = await fakeServer(32);
    const config = apiConfig(f, fake.url);
    const toy = toyEmbedder(32);
    const a = record("task-a", GOAL_A, "numbrs");
    const c = zeroDivision("task-c");
    await withStore(await openMemoryStore({ config, log }), async (store) => {
      expect(store.embedder.id).toBe("api:toy-embed:32");
      await store.rememberFailure(a);
      await store.rememberFailure(c);
      await store.rememberSuccess({
        v: 1,
        taskId: "task-a",
        iteration: 2,
        idempotencyKey: "task-a/2/remember_success",
        language: "python",
        goal: GOAL_A,
        files: [{ path: "solution.py", content: "def has_close_elements(numbers, threshold): ..." }],
      });
      const q = recallB();
      const r = await store.recall(q);
      expect(r.embedder).toBe("api:toy-embed:32");
      expect(r.failures.map((x) => x.taskId)).toEqual(["task-a", "task-c"]);
      // The similarity is the cosine of the server's vectors, as stored and as queried.
      const query = await queryVector(toy, q.text, q.errorText);
      expect(r.failures[0]!.similarity).toBeCloseTo(cosine(await storedVector(toy, a), query), 5);
      expect(r.failures[1]!.similarity).toBeCloseTo(cosine(await storedVector(toy, c), query), 5);
      const goalQuery = await embedParts(toy, { goal: buildEmbedText({ goal: q.text }).goal, error: "", code: "" });
      const goalA = await embedParts(toy, { goal: buildEmbedText({ goal: GOAL_A }).goal, error: "", code: "" });
      expect(r.successes.map((s) => s.taskId)).toEqual(["task-a"]);
      expect(r.successes[0]!.similarity).toBeCloseTo(cosine(goalA, goalQuery), 5);
    });
    expect(fake.requests.length).toBeGreaterThan(0);
    for (const req of fake.requests) {
      expect(req.headers.authorization).toBe("Bearer sk-embeddings-test");
      expect(req.body).toMatchObject({ model: "toy-embed", encoding_format: "float" });
    }
    // The failure's parts went to the server as memory builds them.
    expect(fake.texts()).toEqual(
      expect.arrayContaining(Object.values(prepareFailure(a).parts).filter((p) => typeof p === "string" && p !== "")),
    );
    const rows = await storedRows(config);
    expect(rows.map((r) => [r.kind, r.task, r.embedder])).toEqual([
      ["failures", "task-a", "api:toy-embed:32"],
      ["failures", "task-c", "api:toy-embed:32"],
      ["successes", "task-a", "api:toy-embed:32"],
    ]);
    expectClose(parseVector(rows[0]!.vector), await storedVector(toy, a));
    expectClose(parseVector(rows[1]!.vector), await storedVector(toy, c));
  });

  test("a model of another length: stored with the hashing embedder, the server named; cut to length with truncate", async (f) => {
    const fake = await fakeServer(48);
    const config = apiConfig(f, fake.url);
    const a = record("task-a", GOAL_A, "numbrs");
    const captured = capturingLog();
    await withStore(await openMemoryStore({ config, log: captured.log }), async (store) => {
      await expect(store.rememberFailure(a)).resolves.toMatchObject({
        signature: "NameError: name <id> is not defined",
      });
      const r = await store.recall(recallB());
      expect(r.embedder).toBe("hash-v1-256");
      expect(r.failures.map((x) => x.taskId)).toEqual(["task-a"]);
    });
    // One call for the store, one for the recall: a wrong length is not retried.
    expect(fake.requests).toHaveLength(2);
    const warned = captured.lines.join("\n");
    expect(warned).toContain(
      `the embeddings server at ${fake.url} (model toy-embed) returned vectors of 48 dimensions, but memory.embedder.dimensions is 32`,
    );
    expect(warned).toContain("using hash-v1-256");
    expect((await storedRows(config)).map((r) => r.embedder)).toEqual(["hash-v1-256"]);

    // With truncate (a Matryoshka model): the first 32 numbers, normalised; the row stored
    // meanwhile is re-embedded so.
    const cut = apiConfig(f, fake.url, { truncate: true });
    await withStore(await openMemoryStore({ config: cut, log }), async (store) => {
      await expect(store.reembed()).resolves.toEqual({ failures: 1, successes: 0 });
      const r = await store.recall(recallB());
      expect(r.embedder).toBe("api:toy-embed:32");
      expect(r.failures.map((x) => x.taskId)).toEqual(["task-a"]);
    });
    const rows = await storedRows(cut);
    expect(rows.map((r) => r.embedder)).toEqual(["api:toy-embed:32"]);
    expectClose(parseVector(rows[0]!.vector), await storedVector(toyEmbedder(32, 48), a));
  });

  test("the server down: nothing is lost, the hashing embedder stands in, and the rows are re-embedded once it answers", async (f) => {
    const fake = await fakeServer(32, "down");
    const config = apiConfig(f, fake.url, { cooldownMs: 400 });
    const captured = capturingLog();
    await withStore(await openMemoryStore({ config, log: captured.log }), async (store) => {
      const a = await store.rememberFailure(record("task-a", GOAL_A, "numbrs"));
      expect(a.id).toMatch(/^\d+$/);
      // One try and one retry, both 503.
      expect(fake.requests).toHaveLength(2);
      expect(captured.lines.join("\n")).toContain(
        `the embeddings server at ${fake.url} failed with a server error (503)`,
      );
      // Within the cooldown memory does not wait for the server again.
      await store.rememberFailure(zeroDivision("task-c"));
      const during = await store.recall(recallB());
      expect(fake.requests).toHaveLength(2);
      expect(during.embedder).toBe("hash-v1-256");
      expect(during.failures.map((x) => x.taskId)).toEqual(["task-a", "task-c"]);

      fake.mode = "ok";
      await new Promise((r) => setTimeout(r, 450));
      // The server answers: this failure is stored with its vectors, and the two stored
      // meanwhile are re-embedded in the background (joined here).
      await store.rememberFailure(record("task-d", "Write triple(x): three times x.", "tripel"));
      await store.reembed();
      const after = await store.recall(recallB());
      expect(after.embedder).toBe("api:toy-embed:32");
      // The two NameErrors before the ZeroDivisionError.
      expect(after.failures.map((x) => x.taskId).sort()).toEqual(["task-a", "task-c", "task-d"]);
      expect(after.failures[2]?.taskId).toBe("task-c");
    });
    expect((await storedRows(config)).map((r) => [r.task, r.embedder])).toEqual([
      ["task-a", "api:toy-embed:32"],
      ["task-c", "api:toy-embed:32"],
      ["task-d", "api:toy-embed:32"],
    ]);

    // Nothing listening, and no fallback (as bench:transfer opens memory): the call fails
    // with the server named, and stores nothing.
    const url = `http://127.0.0.1:${await closedPort()}/v1`;
    await withStore(await openMemoryStore({ config: apiConfig(f, url), log, fallback: null }), async (store) => {
      await expect(store.rememberFailure(record("task-e", GOAL_A, "e"))).rejects.toMatchObject({
        code: "unavailable",
        message: `cannot reach the embeddings server at ${url} (connection failed after 1 retries)`,
      });
      expect((await store.failures({ v: 1, taskId: "task-e" })).failures).toEqual([]);
    });
  });

  test("switching embedders: rows of the other one are never compared, and are re-embedded from their stored text", async (f) => {
    const fake = await fakeServer(32);
    const hashing = hashingConfig(f);
    const a = record("task-a", GOAL_A, "numbrs");
    const c = zeroDivision("task-c");
    await withStore(await openMemoryStore({ config: hashing, log }), async (store) => {
      await store.rememberFailure(a);
      await store.rememberFailure(c);
      await store.rememberSuccess({
        v: 1,
        taskId: "task-a",
        iteration: 2,
        idempotencyKey: "task-a/2/remember_success",
        language: "python",
        goal: GOAL_A,
        files: [],
      });
    });
    const before = await storedRows(hashing);
    expect(before.map((r) => r.embedder)).toEqual(["hash-v1-256", "hash-v1-256", "hash-v1-256"]);

    // Without re-embedding, the api embedder's recall sees none of the hashing rows.
    await withStore(
      await openMemoryStore({ config: apiConfig(f, fake.url, { reembed: false }), log }),
      async (store) => {
        const r = await store.recall(recallB());
        expect(r.embedder).toBe("api:toy-embed:32");
        expect(r.failures).toEqual([]);
        expect(r.successes).toEqual([]);
      },
    );
    expect((await storedRows(hashing)).map((r) => r.embedder)).toEqual(before.map((r) => r.embedder));

    // With it (the default), memory re-embeds them when it opens.
    const api = apiConfig(f, fake.url);
    await withStore(await openMemoryStore({ config: api, log }), async (store) => {
      await expect(store.reembed()).resolves.toEqual({ failures: 2, successes: 1 });
      const r = await store.recall(recallB());
      expect(r.failures.map((x) => x.taskId)).toEqual(["task-a", "task-c"]);
      expect(r.successes.map((x) => x.taskId)).toEqual(["task-a"]);
      await expect(store.reembed()).resolves.toEqual({ failures: 0, successes: 0 });
    });
    const toy = toyEmbedder(32);
    const converted = await storedRows(api);
    expect(converted.map((r) => r.embedder)).toEqual(["api:toy-embed:32", "api:toy-embed:32", "api:toy-embed:32"]);
    expectClose(parseVector(converted[0]!.vector), await storedVector(toy, a));
    expectClose(parseVector(converted[1]!.vector), await storedVector(toy, c));

    // Back to the hashing embedder: the same vectors as when first stored.
    await withStore(await openMemoryStore({ config: hashing, log }), async (store) => {
      await expect(store.reembed()).resolves.toEqual({ failures: 2, successes: 1 });
    });
    const back = await storedRows(hashing);
    expect(back.map((r) => [r.embedder, r.vector])).toEqual(before.map((r) => [r.embedder, r.vector]));
  });
}

describe("memory with the embeddings-API embedder, on embedded PGlite", () => {
  embedderSuite((name, fn) => it(name, async () => fn(await freshDataDir())));
});

describe("memory with the embeddings-API embedder, on PostgreSQL + pgvector", () => {
  embedderSuite((name, fn) => it(name, async ({ postgres }) => fn(await freshDatabase(postgres))));
});
