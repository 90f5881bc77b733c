/**
 * The embeddings API client (`createEmbeddingsClient`) against a fake OpenAI-compatible
 * embeddings server over local HTTP, so the real `openai` SDK runs: what it sends, how it
 * orders the answer, what it retries, and that every failure names the server.
 */
import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { createEmbeddingsClient, type EmbeddingsClientOptions } from "@loopsmith/shared/llm";
import { startFakeEmbeddings, toyVector, type FakeEmbeddings } from "../fixtures/fake-embeddings.js";

let fake: FakeEmbeddings | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

function client(url: string, opts: Partial<EmbeddingsClientOptions> = {}) {
  return createEmbeddingsClient({
    baseUrl: url,
    model: "toy-embed",
    timeoutMs: 2_000,
    maxRetries: 2,
    retryMinMs: 5,
    ...opts,
  });
}

async function errorOf(p: Promise<unknown>): Promise<LoopsmithError> {
  return p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e as LoopsmithError,
  );
}

/** A local port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("the embeddings API client", () => {
  it("posts the model and the texts as floats with the key as a bearer token, and orders the answer by index", async () => {
    fake = await startFakeEmbeddings({ dimensions: 6 });
    const reply = await client(fake.url, { apiKey: "sk-test-embeddings" }).embed(["alpha", "beta gamma", "x"]);
    expect(fake.requests).toHaveLength(1);
    const req = fake.requests[0]!;
    expect(req.path).toBe("/v1/embeddings");
    expect(req.headers.authorization).toBe("Bearer sk-test-embeddings");
    expect(req.body).toMatchObject({
      model: "toy-embed",
      input: ["alpha", "beta gamma", "x"],
      encoding_format: "float",
    });
    // The fake lists its answers last first; the client puts them back in input order.
    expect(reply.vectors).toEqual([toyVector("alpha", 6), toyVector("beta gamma", 6), toyVector("x", 6)]);
    expect(reply.model).toBe("toy-embed");
    expect(reply.promptTokens).toBe("alpha beta gamma x".length);
    // Nothing to embed: no call.
    await expect(client(fake.url).embed([])).resolves.toMatchObject({ vectors: [] });
    expect(fake.requests).toHaveLength(1);
  });

  it("retries a server error maxRetries times, then fails with unavailable naming the server", async () => {
    fake = await startFakeEmbeddings({ dimensions: 4, mode: "down" });
    const err = await errorOf(client(fake.url, { maxRetries: 2 }).embed(["a"]));
    expect(err).toBeInstanceOf(LoopsmithError);
    expect(err.code).toBe("unavailable");
    expect(err.message).toContain(`the embeddings server at ${fake.url}`);
    expect(err.message).toContain("503");
    expect(fake.requests).toHaveLength(3);
  });

  it("answers once the server is back within its retries", async () => {
    fake = await startFakeEmbeddings({ dimensions: 4, mode: "down" });
    const f = fake;
    const c = createEmbeddingsClient({
      baseUrl: f.url,
      model: "toy-embed",
      timeoutMs: 2_000,
      maxRetries: 3,
      retryMinMs: 5,
    });
    const pending = c.embed(["back"]);
    // The first try fails (503); the server is up before the retry.
    while (f.requests.length === 0) await new Promise((r) => setTimeout(r, 1));
    f.mode = "ok";
    await expect(pending).resolves.toMatchObject({ vectors: [toyVector("back", 4)] });
    expect(f.requests.length).toBeGreaterThanOrEqual(2);
  });

  it("does not retry a refused key (401) or an unknown model (404), and names the setting to check", async () => {
    fake = await startFakeEmbeddings({ dimensions: 4, apiKey: "sk-right-key" });
    const f = fake;
    const refused = await errorOf(client(f.url, { apiKey: "sk-wrong-key" }).embed(["a"]));
    expect(refused.code).toBe("llm_auth");
    expect(refused.message).toBe(
      `the embeddings server at ${f.url} rejected the API key (memory.embedder.apiKey, LOOPSMITH_EMBEDDINGS_API_KEY) (401): Incorrect API key provided; check that it is set and valid`,
    );
    expect(f.requests).toHaveLength(1);
    // The fake answers 404 to any other path: a base URL without /v1.
    const unknown = await errorOf(client(f.url.replace(/\/v1$/, ""), { apiKey: "sk-right-key" }).embed(["a"]));
    expect(unknown.code).toBe("config_invalid");
    expect(unknown.message).toContain("the embeddings server at http://127.0.0.1:");
    expect(unknown.message).toContain("memory.embedder.model");
    expect(f.requests).toHaveLength(2);
  });

  it("fails with timeout naming memory.embedder.timeoutMs when the server does not answer", async () => {
    fake = await startFakeEmbeddings({ dimensions: 4, mode: "hang" });
    const err = await errorOf(client(fake.url, { timeoutMs: 200, maxRetries: 1 }).embed(["a"]));
    expect(err.code).toBe("timeout");
    expect(err.message).toContain(`the embeddings server at ${fake.url} did not answer within 200 ms`);
    expect(err.message).toContain("memory.embedder.timeoutMs");
    expect(fake.requests).toHaveLength(2);
  });

  it("fails with unavailable naming the server when nothing listens there", async () => {
    const url = `http://127.0.0.1:${await closedPort()}/v1`;
    const err = await errorOf(client(url, { maxRetries: 1 }).embed(["a"]));
    expect(err.code).toBe("unavailable");
    expect(err.message).toBe(`cannot reach the embeddings server at ${url} (connection failed after 1 retries)`);
  });

  it("refuses an answer that is not one embedding per text", async () => {
    fake = await startFakeEmbeddings({ dimensions: 4, mode: "garbage" });
    const err = await errorOf(client(fake.url).embed(["a", "b"]));
    expect(err.code).toBe("internal");
    expect(err.message).toContain(`the embeddings server at ${fake.url} answered with no embeddings list`);
    // Not retried: a retry cannot mend a server that speaks another API.
    expect(fake.requests).toHaveLength(1);
  });
});
