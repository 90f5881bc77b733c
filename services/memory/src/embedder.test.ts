import { describe, expect, it } from "vitest";
import { LoopsmithError } from "@loopsmith/shared";
import { checkEmbedder, combine, cosine, createHashingEmbedder } from "./embedder.js";
import { signature } from "./signature.js";

describe("createHashingEmbedder", () => {
  it("is deterministic and names its settings", async () => {
    const a = createHashingEmbedder();
    const b = createHashingEmbedder();
    expect(a.id).toBe("hash-v1-256");
    expect(a.dimensions).toBe(256);
    const [v1] = await a.embed(["NameError: name <id> is not defined"]);
    const [v2] = await b.embed(["NameError: name <id> is not defined"]);
    expect(v1).toHaveLength(256);
    expect(v1).toEqual(v2);
    expect(createHashingEmbedder({ dimensions: 64 }).id).toBe("hash-v1-64");
  });

  it("returns unit vectors, one per text, and never an all-zero vector", async () => {
    const vs = await createHashingEmbedder({ dimensions: 32 }).embed(["a b c", "", "!!!"]);
    expect(vs).toHaveLength(3);
    for (const v of vs) expect(Math.hypot(...v)).toBeCloseTo(1, 9);
  });

  it("puts the same mistake on two tasks closer than unrelated errors", async () => {
    const e = createHashingEmbedder();
    const first = signature("Traceback (most recent call last):\n  File \"/w/a.py\", line 3\nNameError: name 'totl' is not defined").signature;
    const second = signature("NameError: name 'cnt' is not defined").signature;
    const attribute = signature("AttributeError: 'list' object has no attribute 'push'").signature;
    const zero = signature("ZeroDivisionError: division by zero").signature;
    const [a, b, c, d] = await e.embed([first, second, attribute, zero]);
    expect(cosine(a!, b!)).toBeCloseTo(1, 9); // identical signatures
    const nearName = (await e.embed(["NameError: name <id> is not defined in <id>()"]))[0]!;
    expect(cosine(a!, nearName)).toBeGreaterThan(cosine(a!, c!));
    expect(cosine(a!, nearName)).toBeGreaterThan(cosine(a!, d!));
    expect(cosine(a!, nearName)).toBeGreaterThan(0.6);
    expect(cosine(a!, d!)).toBeLessThan(0.3);
  });

  it("shares character n-grams between spellings of a word", async () => {
    const e = createHashingEmbedder();
    const [x, y, z] = await e.embed(["IndexError list index", "IndexErrors list indexes", "ZeroDivisionError division"]);
    expect(cosine(x!, y!)).toBeGreaterThan(cosine(x!, z!));
  });

  it("refuses bad dimensions with config_invalid", () => {
    expect(() => createHashingEmbedder({ dimensions: 3 })).toThrow(LoopsmithError);
    let caught: unknown;
    try {
      createHashingEmbedder({ dimensions: 10.5 });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(LoopsmithError);
    expect((caught as LoopsmithError).code).toBe("config_invalid");
  });
});

describe("combine and checkEmbedder", () => {
  it("weights vectors and normalises the sum", () => {
    const v = combine([[1, 0], [0, 1]], [3, 4]);
    expect(v[0]).toBeCloseTo(0.6, 9);
    expect(v[1]).toBeCloseTo(0.8, 9);
  });

  it("rejects unsafe ids and unindexable dimensions", () => {
    const bad = { id: "x'; DROP TABLE failures; --", dimensions: 8, embed: async () => [] };
    expect(() => checkEmbedder(bad)).toThrow(/embedder id/);
    expect(() => checkEmbedder({ ...bad, id: "ok", dimensions: 3000 })).toThrow(/2000/);
    expect(() => checkEmbedder({ ...bad, id: "openai:text-embedding-3-small", dimensions: 1536 })).not.toThrow();
  });
});
