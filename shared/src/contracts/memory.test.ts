import { describe, expect, it } from "vitest";
import { Recall } from "./memory.js";

const failure = {
  id: "12",
  taskId: "t-src",
  goal: "sum a list",
  signature: "AssertionError",
  failingTests: [],
  reflection: null,
  similarity: 0.8,
};

describe("the recall reply", () => {
  it("parses a reply written before failures carried their use", () => {
    const parsed = Recall.parse({ failures: [failure], successes: [], embedder: "hash-v1" });
    expect(parsed.failures[0]?.use).toBeUndefined();
  });

  it("carries a recalled failure's measured use, and refuses a malformed one", () => {
    const use = { recalledIn: 4, passedAfter: 3, utility: 0.2, stderr: 0.15, demoted: false };
    expect(Recall.parse({ failures: [{ ...failure, use }], successes: [], embedder: "e" }).failures[0]?.use).toEqual(
      use,
    );
    const bad = Recall.safeParse({ failures: [{ ...failure, use: { recalledIn: -1 } }], successes: [], embedder: "e" });
    expect(bad.success).toBe(false);
  });
});
