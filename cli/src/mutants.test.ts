import { describe, expect, it } from "vitest";
import { mutantsOf } from "./mutants.js";

describe("mutantsOf", () => {
  it("changes one operator at one place", () => {
    const body = "    if a < b:\n        return a + b\n    return 0\n";
    const ms = mutantsOf(body);
    expect(ms.length).toBeGreaterThan(2);
    for (const m of ms) {
      const changed = m.text.split("\n").filter((l, i) => l !== body.split("\n")[i]);
      expect(changed).toHaveLength(1);
    }
    expect(ms[0]?.text).toContain("if a <= b:");
    expect(ms.some((m) => m.text.includes("return a - b"))).toBe(true);
    expect(ms.some((m) => m.text.includes("return 1"))).toBe(true);
  });

  it("mutates float constants and the modulo operator", () => {
    const ms = mutantsOf("    return number % 1.0\n");
    expect(ms.map((m) => m.text.trim())).toEqual(["return number // 1.0", "return number % 2"]);
  });

  it("never mutates strings, comments or docstrings", () => {
    const body = '    """a < b and 0"""\n    s = "x == y"  # 1 + 1\n    return s\n';
    expect(mutantsOf(body)).toEqual([]);
  });
});
