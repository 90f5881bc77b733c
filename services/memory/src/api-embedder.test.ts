import { describe, expect, it } from "vitest";
import { LoopsmithError, loadConfig } from "@loopsmith/shared/runtime";
import type { EmbeddingsClient } from "@loopsmith/shared/llm";
import { apiEmbedderId, configuredEmbedder, createApiEmbedder, fitVector } from "./api-embedder.js";
import { checkEmbedder } from "./embedder.js";

/** A client that answers `[length, 1, 2, …]`-shaped vectors of `width` and records each call's texts. */
function recordingClient(width: number): EmbeddingsClient & { calls: string[][] } {
  const calls: string[][] = [];
  return {
    baseUrl: "http://127.0.0.1:1/v1",
    model: "m",
    calls,
    embed: async (texts) => {
      calls.push([...texts]);
      return {
        vectors: texts.map((t) => Array.from({ length: width }, (_, i) => (i === 0 ? t.length : i))),
        model: "m",
        promptTokens: 0,
      };
    },
  };
}

const norm = (v: number[]): number => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

describe("apiEmbedderId", () => {
  it("names the model and the dimensions, and keeps models whose names differ apart", () => {
    expect(apiEmbedderId("text-embedding-3-small", 512)).toBe("api:text-embedding-3-small:512");
    const slashed = apiEmbedderId("BAAI/bge-small-en-v1.5", 384);
    expect(slashed).toMatch(/^api:BAAI_bge-small-en-v1\.5-[0-9a-f]{8}:384$/);
    // The same characters after sanitising, yet two models: two ids.
    expect(apiEmbedderId("BAAI_bge-small-en-v1.5", 384)).not.toBe(slashed);
    const long = apiEmbedderId("x".repeat(300), 2000);
    expect(long.length).toBeLessThanOrEqual(100);
    for (const id of [slashed, long, apiEmbedderId("nomic-embed-text:latest", 768)]) {
      expect(() => checkEmbedder({ id, dimensions: 8, embed: async () => [] })).not.toThrow();
    }
  });
});

describe("fitVector", () => {
  it("normalises a vector of the right length", () => {
    const v = fitVector([3, 4], 2, false, "the server");
    expect(v[0]).toBeCloseTo(0.6, 12);
    expect(v[1]).toBeCloseTo(0.8, 12);
  });

  it("cuts a longer vector to its first dimensions and normalises that part, with truncate", () => {
    const v = fitVector([3, 4, 12, 100], 2, true, "the server");
    expect(v).toHaveLength(2);
    expect(v[0]).toBeCloseTo(0.6, 12);
    expect(v[1]).toBeCloseTo(0.8, 12);
  });

  it("refuses another length, naming the server, both lengths and the setting", () => {
    const err = (() => {
      try {
        fitVector([1, 2, 3], 2, false, "the embeddings server at http://s/v1 (model m)");
      } catch (e) {
        return e as LoopsmithError;
      }
      throw new Error("expected a throw");
    })();
    expect(err).toBeInstanceOf(LoopsmithError);
    expect(err.code).toBe("config_invalid");
    expect(err.message).toContain(
      "the embeddings server at http://s/v1 (model m) returned vectors of 3 dimensions, but memory.embedder.dimensions is 2",
    );
    expect(err.message).toContain("memory.embedder.truncate");
    // Shorter than configured: truncation cannot lengthen it.
    expect(() => fitVector([1], 2, true, "s")).toThrow(/returned vectors of 1 dimensions/);
    expect(() => fitVector([0, 0, 5], 2, true, "s")).toThrow(/all-zero/);
  });
});

describe("createApiEmbedder", () => {
  it("sends batchSize texts per call, in order, with empty texts stood in for, and returns unit vectors", async () => {
    const client = recordingClient(4);
    const e = createApiEmbedder({ baseUrl: client.baseUrl, model: "m", dimensions: 4, batchSize: 2, client });
    expect(e.id).toBe("api:m:4");
    expect(e.dimensions).toBe(4);
    const vs = await e.embed(["a", "bb", "", "dddd", "eeeee"]);
    expect(client.calls).toEqual([["a", "bb"], ["(empty)", "dddd"], ["eeeee"]]);
    expect(vs).toHaveLength(5);
    for (const v of vs) expect(norm(v)).toBeCloseTo(1, 12);
    // Element 0 carries the text's length: the order survived the batching.
    const firsts = vs.map((v) => Math.round(v[0]! / v[1]!));
    expect(firsts).toEqual([1, 2, 7, 4, 5]);
  });

  it("fails a whole call when one answer has the wrong length (no truncate), and truncates with it", async () => {
    const long = recordingClient(6);
    const strict = createApiEmbedder({ baseUrl: "http://s/v1", model: "m", dimensions: 4, client: long });
    await expect(strict.embed(["a"])).rejects.toMatchObject({ code: "config_invalid" });
    const cut = createApiEmbedder({ baseUrl: "http://s/v1", model: "m", dimensions: 4, truncate: true, client: long });
    const [v] = await cut.embed(["abc"]);
    const raw = [3, 1, 2, 3];
    expect(v).toEqual(raw.map((x) => x / norm(raw)));
  });

  it("refuses dimensions out of pgvector's HNSW range", () => {
    expect(() => createApiEmbedder({ baseUrl: "http://s/v1", model: "m", dimensions: 2001 })).toThrow(/1 to 2000/);
    expect(() => createApiEmbedder({ baseUrl: "http://s/v1", model: "m", dimensions: 0 })).toThrow(/1 to 2000/);
  });
});

describe("configuredEmbedder", () => {
  it("is the hashing embedder by default and the api embedder when configured", () => {
    expect(configuredEmbedder(loadConfig({ env: {}, discover: false })).id).toBe("hash-v1-256");
    const config = loadConfig({
      env: {
        LOOPSMITH_EMBEDDER: "api",
        LOOPSMITH_EMBEDDINGS_BASE_URL: "http://127.0.0.1:8080/v1",
        LOOPSMITH_EMBEDDINGS_MODEL: "nomic-embed-text",
        LOOPSMITH_EMBEDDINGS_DIMENSIONS: "768",
      },
      discover: false,
    });
    const e = configuredEmbedder(config);
    expect(e.id).toBe("api:nomic-embed-text:768");
    expect(e.dimensions).toBe(768);
  });
});
