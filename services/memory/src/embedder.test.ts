import { describe, expect, it } from "vitest";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { checkEmbedder, combine, cosine, createHashingEmbedder, tokens } from "./embedder.js";
import { signature } from "./signature.js";

/** The hashing embedder as first written (feature strings hashed one by one): the vectors must not change. */
function referenceEmbed(text: string, dimensions: number): number[] {
  const fnv1a = (t: string): number => {
    let h = 0x811c9dc5;
    for (let i = 0; i < t.length; i++) {
      h ^= t.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    return h >>> 0;
  };
  const toks = tokens(text.slice(0, 8_000));
  const feats: Array<[string, number]> = [];
  toks.forEach((t, i) => {
    feats.push([`w:${t}`, 1]);
    const next = toks[i + 1];
    if (next !== undefined) feats.push([`b:${t} ${next}`, 0.7]);
    if (!t.startsWith("<")) {
      const padded = `^${t}$`;
      for (let j = 0; j + 3 <= padded.length; j++) feats.push([`c:${padded.slice(j, j + 3)}`, 0.3]);
    }
  });
  if (feats.length === 0) feats.push(["w:<empty>", 1]);
  const v = new Array<number>(dimensions).fill(0);
  for (const [f, w] of feats) {
    const h = fnv1a(f);
    const bucket = h % dimensions;
    v[bucket] = (v[bucket] ?? 0) + ((h & 0x80000000) === 0 ? 1 : -1) * w;
  }
  let norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  if (norm === 0) {
    v[0] = 1;
    norm = 1;
  }
  return v.map((x) => x / norm);
}

describe("createHashingEmbedder", () => {
  it("makes exactly the vectors of the reference implementation (stored rows stay comparable)", async () => {
    const texts = [
      "",
      "!!!",
      "a",
      "NameError: name <id> is not defined",
      "Traceback (most recent call last):\n  File \"/w/a.py\", line 3\nNameError: name 'totl' is not defined",
      "write sum_pairs numbers k return the numbers in ascending order ople opeq <num> <str>",
      "ZÉRO División ıİ straße ﬁ 123_abc x".repeat(3),
      "word ".repeat(2_500),
    ];
    let seed = 1;
    const rand = (): number => ((seed = Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32;
    const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_ <>:.'\"()[]=+-\n\t";
    for (let n = 0; n < 300; n++) {
      texts.push(
        Array.from({ length: Math.floor(rand() * 200) }, () => alphabet[Math.floor(rand() * alphabet.length)]).join(""),
      );
    }
    for (const dimensions of [16, 256, 1000]) {
      const got = await createHashingEmbedder({ dimensions }).embed(texts);
      texts.forEach((t, i) => expect(got[i], JSON.stringify(t.slice(0, 60))).toEqual(referenceEmbed(t, dimensions)));
    }
  });

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
    const first = signature(
      "Traceback (most recent call last):\n  File \"/w/a.py\", line 3\nNameError: name 'totl' is not defined",
    ).signature;
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
    const [x, y, z] = await e.embed([
      "IndexError list index",
      "IndexErrors list indexes",
      "ZeroDivisionError division",
    ]);
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
    const v = combine(
      [
        [1, 0],
        [0, 1],
      ],
      [3, 4],
    );
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
