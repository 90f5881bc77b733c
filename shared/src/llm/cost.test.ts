import { describe, expect, it } from "vitest";
import { costOf, estimateCost } from "./cost.js";

const sonnet = { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 };

describe("costOf", () => {
  it("prices each kind of token per million", () => {
    expect(costOf(sonnet, { inputTokens: 1_000_000, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 })).toBe(
      3,
    );
    expect(costOf(sonnet, { inputTokens: 0, outputTokens: 2_000_000, cacheReadTokens: 0, cacheWriteTokens: 0 })).toBe(
      30,
    );
    expect(
      costOf(sonnet, { inputTokens: 1200, outputTokens: 300, cacheReadTokens: 1000, cacheWriteTokens: 200 }),
    ).toBeCloseTo((1200 * 3 + 300 * 15 + 1000 * 0.3 + 200 * 3.75) / 1e6, 12);
  });

  it("is zero for a free model", () => {
    const free = { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 };
    expect(costOf(free, { inputTokens: 5e6, outputTokens: 5e6, cacheReadTokens: 1, cacheWriteTokens: 1 })).toBe(0);
  });
});

describe("estimateCost", () => {
  it("estimates ceil(chars / 4) input tokens and the full output limit, and says it is an estimate", () => {
    const est = estimateCost(sonnet, {
      system: "x".repeat(10),
      messages: [{ content: "y".repeat(21) }, { content: "z".repeat(4) }],
      extraChars: 5,
      maxOutputTokens: 1000,
    });
    expect(est.estimated).toBe(true);
    expect(est.inputTokens).toBe(10); // ceil(40 / 4)
    expect(est.outputTokens).toBe(1000);
    expect(est.tokens).toBe(1010);
    expect(est.usd).toBeCloseTo((10 * 3 + 1000 * 15) / 1e6, 12);
  });
});
