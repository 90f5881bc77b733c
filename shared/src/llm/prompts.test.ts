import { describe, expect, it } from "vitest";
import { ROLES } from "./types.js";
import { loadPrompt, memoryUseText, renderHints, renderHistory, trimToTokens } from "./prompts.js";

describe("prompts", () => {
  it("loads a versioned prompt with a worked example for every role", () => {
    for (const role of ROLES) {
      const p = loadPrompt(role);
      expect(p.role).toBe(role);
      expect(p.version).toBeGreaterThanOrEqual(1);
      expect(p.system).toMatch(/Worked example/);
    }
  });

  it("loads the repo-mode and DAG variants, each with its own rules", () => {
    expect(loadPrompt("plan", "repo")).toMatchObject({ role: "plan", version: 2 });
    expect(loadPrompt("plan", "repo").system).toContain('"decompose": true');
    expect(loadPrompt("plan", "dag").system).toMatch(/subtasks[\s\S]*Worked example/);
    expect(loadPrompt("reflect", "dag").system).toContain("subtaskId");
    // A role without a DAG variant falls back to its common prompt.
    expect(loadPrompt("build", "dag").system).toBe(loadPrompt("build").system);
  });

  it("the agent prompt names every tool and the edit and submit rules", () => {
    const p = loadPrompt("agent");
    expect(p).toMatchObject({ role: "agent", version: 1 });
    for (const tool of ["list", "read", "search", "symbol", "run", "edit", "submit"])
      expect(p.system).toContain(`\`${tool}\``);
    expect(p.system).toMatch(/must occur exactly once/);
    expect(p.system).toMatch(/Explore before you edit/);
    expect(p.system).toMatch(/one-line summary/);
  });

  it("trims long output keeping head and tail", () => {
    const text = `HEAD${"x".repeat(10_000)}TAIL`;
    const out = trimToTokens(text, 100);
    expect(out.length).toBeLessThanOrEqual(400);
    expect(out.startsWith("HEAD")).toBe(true);
    expect(out.endsWith("TAIL")).toBe(true);
    const [head = "", tail = ""] = out.split(/\n\[… [\d,]+ characters cut …\]\n/);
    expect(head.length + Number(/([\d,]+) characters cut/.exec(out)?.[1]?.replace(/,/g, "")) + tail.length).toBe(
      text.length,
    );
    expect(tail.length).toBeGreaterThan(head.length);
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

  it("names each recalled memory's source task and measured use; an old reply without a use still renders", () => {
    const use = { recalledIn: 4, passedAfter: 3, utility: 0.2, stderr: 0.15, demoted: false };
    const text = renderHints({
      embedder: "hash-v1",
      failures: [
        {
          id: "f8",
          taskId: "t-src",
          goal: "sum a list",
          signature: "AssertionError",
          failingTests: [],
          reflection: null,
          similarity: 0.9,
          use,
        },
        { id: "f9", taskId: "t-old", goal: "g", signature: "E", failingTests: [], reflection: null, similarity: 0.5 },
      ],
      successes: [{ id: "s3", taskId: "t-ok", goal: "sum", files: [], similarity: 0.7 }],
    });
    expect(text).toContain(
      '- [memory:failure:f8] from task t-src; recalled in 4 finished tasks, 3 of them passed (utility +0.20, s.e. 0.15); similarity 0.90; signature "AssertionError"',
    );
    expect(text).toContain("- [memory:failure:f9] from task t-old; use not measured; similarity 0.50");
    expect(text).toContain("- [memory:success:s3] from task t-ok; similarity 0.70");
  });

  it("says a memory's use: none yet, one task, a negative utility, no utility", () => {
    expect(memoryUseText({ recalledIn: 0, passedAfter: 0, utility: null, stderr: null, demoted: false })).toBe(
      "not recalled by a finished task before",
    );
    expect(memoryUseText({ recalledIn: 1, passedAfter: 0, utility: -0.25, stderr: 0.3, demoted: false })).toBe(
      "recalled in 1 finished task, 0 of them passed (utility -0.25, s.e. 0.30)",
    );
    expect(memoryUseText({ recalledIn: 2, passedAfter: 2, utility: null, stderr: null, demoted: false })).toBe(
      "recalled in 2 finished tasks, 2 of them passed",
    );
    expect(memoryUseText(undefined)).toBe("use not measured");
  });

  it("carries the fix a recalled failure was followed by: the files that then passed, cut to fit", () => {
    const long = `def total(xs):\n    return sum(xs)\n${"# padding\n".repeat(2_000)}`;
    const text = renderHints({
      embedder: "hash-v1",
      successes: [],
      failures: [
        {
          id: "f2",
          taskId: "t1",
          goal: "sum a list",
          signature: "AssertionError",
          failingTests: [],
          reflection: null,
          similarity: 0.8,
          fixedBy: { successId: "s9", iteration: 2, files: [{ path: "solution.py", content: long }] },
        },
        {
          id: "f3",
          taskId: "t2",
          goal: "sum a list",
          signature: "AssertionError",
          failingTests: [],
          reflection: null,
          similarity: 0.7,
          fixedBy: null,
        },
      ],
    });
    expect(text).toContain("what then passed (iteration 2):");
    expect(text).toContain("solution.py:");
    expect(text).toContain("return sum(xs)");
    expect(text).toMatch(/\[… [\d,]+ characters cut …\]/);
    expect(text.split("what then passed")).toHaveLength(2);
  });

  it("summarises older iterations", () => {
    const lines = Array.from({ length: 9 }, (_, i) => `iteration ${i + 1}: failed`);
    const out = renderHistory(lines, 3);
    expect(out).toContain("(6 earlier iterations not shown)");
    expect(out).toContain("iteration 9: failed");
    expect(out).not.toContain("iteration 6: failed");
  });
});
