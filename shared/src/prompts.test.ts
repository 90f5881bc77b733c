import { describe, expect, it } from "vitest";
import { ROLES } from "./llm/types.js";
import { loadPrompt, renderHints, renderHistory, trimToTokens } from "./prompts.js";

describe("prompts", () => {
  it("loads a versioned prompt with a worked example for every role", () => {
    for (const role of ROLES) {
      const p = loadPrompt(role);
      expect(p.role).toBe(role);
      expect(p.version).toBeGreaterThanOrEqual(1);
      expect(p.system).toMatch(/Worked example/);
    }
  });

  it("trims long output keeping head and tail", () => {
    const text = `HEAD${"x".repeat(10_000)}TAIL`;
    const out = trimToTokens(text, 100);
    expect(out.length).toBeLessThan(500);
    expect(out.startsWith("HEAD")).toBe(true);
    expect(out.endsWith("TAIL")).toBe(true);
    expect(out).toMatch(/characters trimmed/);
    expect(trimToTokens("short", 100)).toBe("short");
  });

  it("marks recalled failures as hints with their ids", () => {
    const text = renderHints({
      embedder: "hash-v1",
      successes: [],
      failures: [
        {
          id: "f1",
          taskId: "t0",
          goal: "sum a list",
          signature: "AssertionError",
          failingTests: ["test_check"],
          reflection: { rootCause: "off by one", hypothesis: "", fixPlan: "use range(n + 1)" },
          similarity: 0.91,
        },
      ],
    });
    expect(text).toMatch(/HINTS recalled from memory/);
    expect(text).toContain("[memory:failure:f1]");
    expect(text).toContain("use range(n + 1)");
    expect(renderHints(undefined)).toBe("");
  });

  it("summarises older iterations", () => {
    const lines = Array.from({ length: 9 }, (_, i) => `iteration ${i + 1}: failed`);
    const out = renderHistory(lines, 3);
    expect(out).toContain("(6 earlier iterations not shown)");
    expect(out).toContain("iteration 9: failed");
    expect(out).not.toContain("iteration 6: failed");
  });
});
