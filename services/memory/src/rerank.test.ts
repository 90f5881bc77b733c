import { describe, expect, it } from "vitest";
import { bm25Scores, causeOrder, causeWords } from "./rerank.js";
import { shapeWords } from "./code-shape.js";

describe("cause words", () => {
  it("abstract the task's names and values out of the code's shape", () => {
    expect(shapeWords("for i in range(len(xs) - 1):")).toBe(shapeWords("for k in range(len(ys) - 2):"));
    expect(shapeWords("for i in range(len(xs) - 1):")).not.toBe(shapeWords("for i in range(len(xs)):"));
  });
  it("join the mismatch words (prefixed) to the shape words, comments and docstrings left out", () => {
    const words = causeWords("E   assert None == 4", 'def f(x):\n    """Doc."""\n    x + 1  # no return\n');
    expect(words.slice(0, 2)).toEqual(["mreturned", "mnone"]);
    expect(words.slice(2)).toEqual(shapeWords("def f(x):\n    x + 1\n").split(" "));
  });
});

describe("causeOrder", () => {
  it("weighs rare shared words above common ones (BM25 over the pool)", () => {
    const s = bm25Scores(
      ["a", "rare"],
      [
        ["a", "b"],
        ["a", "rare"],
        ["a", "c"],
      ],
    );
    expect(s[1]).toBeGreaterThan(s[0] ?? 0);
    expect(s[0]).toBeCloseTo(s[2] ?? 0);
  });
  it("lifts a row sharing the query's cause over a row with a slightly higher fused score", () => {
    const rows = [
      { score: 0.033, words: ["x", "y"] },
      { score: 0.032, words: ["mreturned", "mnone", "x"] },
      { score: 0.01, words: ["z"] },
    ];
    expect(causeOrder(["mreturned", "mnone"], rows, 60)).toEqual([1, 0, 2]);
  });
  it("keeps the fused order when the query has no word in common with any row", () => {
    const rows = [
      { score: 0.02, words: ["a"] },
      { score: 0.03, words: ["b"] },
    ];
    expect(causeOrder(["q"], rows, 60)).toEqual([1, 0]);
  });
});
