import { describe, expect, it } from "vitest";
import { countStep, type StuckCounters } from "./stuck.js";
import { syntaxError } from "./syntax.js";

const fresh = (): StuckCounters => ({ calls: {}, outputs: {}, redirected: false });

describe("the stuck rule", () => {
  it("redirects on the third same call on the same tree, and stops on the next", () => {
    let c = fresh();
    const verdicts = [];
    for (let i = 0; i < 4; i++) {
      // Arguments in another key order are the same call.
      const args = i % 2 ? { path: "a.py", startLine: 1 } : { startLine: 1, path: "a.py" };
      const r = countStep(c, "read", args, 0, `content ${i}`, false);
      c = r.counters;
      verdicts.push(r.verdict);
    }
    expect(verdicts.slice(0, 2)).toEqual([undefined, undefined]);
    expect(verdicts[2]).toEqual({ rule: "repeat_call", action: "redirect", count: 3 });
    expect(verdicts[3]).toEqual({ rule: "repeat_call", action: "stop", count: 4 });
  });

  it("does not count the same call on a changed tree", () => {
    let c = fresh();
    for (let v = 0; v < 5; v++) {
      const r = countStep(c, "run", { command: "pytest" }, v, `exit code 1\nfailure ${v}`, true);
      expect(r.verdict).toBeUndefined();
      c = r.counters;
    }
  });

  it("redirects on the same failing output three times, whatever the calls", () => {
    let c = fresh();
    const out = [];
    for (let v = 0; v < 3; v++) {
      const r = countStep(c, "run", { command: `pytest -k t${v}` }, v, "exit code 1\nSame", true);
      c = r.counters;
      out.push(r.verdict?.rule);
    }
    expect(out).toEqual([undefined, undefined, "repeat_output"]);
    // A passing output is never counted.
    let d = fresh();
    for (let v = 0; v < 4; v++) d = countStep(d, "run", { command: "true" }, v, "exit code 0", false).counters;
    expect(Object.keys(d.outputs)).toHaveLength(0);
  });
});

describe("syntaxError", () => {
  it("gives the line and column of the first error of a Python or TypeScript file, and nothing for one that parses", () => {
    expect(syntaxError("m.py", "def f():\n    return 1\n")).toBeUndefined();
    expect(syntaxError("m.py", "def f(:\n    return 1\n")).toMatch(/^m\.py:1:\d+: /);
    expect(syntaxError("m.ts", "export const a: number = 1;\n")).toBeUndefined();
    expect(syntaxError("m.ts", "export const a = {;\n")).toMatch(/^m\.ts:1:\d+: /);
    expect(syntaxError("notes.txt", "def f(:")).toBeUndefined();
  });
});
