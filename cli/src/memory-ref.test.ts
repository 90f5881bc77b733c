import { describe, expect, it } from "vitest";
import { memoryRef } from "./history.js";
import { failuresText } from "./output.js";

describe("failures --promote and --demote", () => {
  it("takes lesson:<id> or failure:<id>, as a hint names a memory", () => {
    expect(memoryRef("lesson:12", "--promote")).toEqual({ kind: "lesson", id: "12" });
    expect(memoryRef(" failure:7 ", "--demote")).toEqual({ kind: "failure", id: "7" });
  });

  it("refuses anything else, naming the flag and what it takes", () => {
    for (const bad of ["12", "lesson:", "lesson:x", "success:3", "lesson:12:1"]) {
      expect(() => memoryRef(bad, "--promote")).toThrow(
        `--promote takes lesson:<id> or failure:<id>, not ${JSON.stringify(bad)}`,
      );
    }
  });
});

describe("failures for people", () => {
  it("lists lessons with their source and use, a task's recall uses, and the utility table", () => {
    const text = failuresText({
      failures: [],
      lessons: [
        {
          id: "3",
          taskId: "t-1",
          signature: "NameError: name <id> is not defined",
          rule: "Spell the name as it was defined.",
          source: "fallback",
          promptVersion: 1,
          createdAt: "2026-12-02T10:00:00.000Z",
          use: { recalledIn: 0, passedAfter: 0, utility: null, stderr: null, demoted: false },
        },
      ],
      uses: [
        {
          kind: "lesson",
          memoryId: "3",
          taskId: "t-2",
          iteration: 1,
          nextPassed: true,
          taskPassed: true,
          taskIterations: 2,
          createdAt: "2026-12-02T10:05:00.000Z",
        },
      ],
      utility: [],
    });
    expect(text).toBe(
      [
        "no failures stored",
        "2026-12-02T10:00:00.000Z  lesson 3 · from task t-1 · from the last reflection",
        "  signature: NameError: name <id> is not defined",
        "  rule: Spell the name as it was defined.",
        "  use: not recalled by a finished task yet",
        "what the task's recalls showed it:",
        "  iteration 1 recalled lesson 3: next iteration passed; task passed in 2 iterations",
        "utility: no memory was recalled by a finished task yet",
        "",
      ].join("\n"),
    );
  });
});
