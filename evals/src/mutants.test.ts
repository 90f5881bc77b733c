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
    expect(ms.map((m) => m.text.trim())).toEqual(["return number // 1.0", "return number % 2", "return None"]);
  });

  it("never mutates strings, comments or docstrings", () => {
    const body = '    """a < b and 0"""\n    s = "x == y"  # 1 + 1\n    return s\n';
    // Only the null-return mutator applies: nothing inside the docstring, string or comment.
    expect(mutantsOf(body).map((m) => m.text.split("\n")[2])).toEqual(["    return None"]);
  });

  it("negates conditions and mutates string separators", () => {
    const ms = mutantsOf("    return ' '.join([x for x in xs if x])\n").map((m) => m.text.trim());
    expect(ms).toContain("return ' '.join([x for x in xs if not x])");
    expect(ms).toContain("return ''.join([x for x in xs if x])");
  });
});
