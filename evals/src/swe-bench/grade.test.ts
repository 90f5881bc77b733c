import { describe, expect, it } from "vitest";
import { parsePytest } from "./parsers.js";
import { setupNote } from "./grade.js";

describe("setupNote", () => {
  const key = "2a70a5f93fbb3d95b5c453bf0000000000000000000000000000000000000000";

  it("names what the setup layer did, the key's prefix and the time spent", () => {
    expect(setupNote({ key, status: "built", durationMs: 8123.4 })).toBe(
      "loopsmith: setup layer built (key 2a70a5f93fbb, 8123 ms)\n",
    );
    expect(setupNote({ key, status: "reused", durationMs: 3 })).toBe(
      "loopsmith: setup layer reused (key 2a70a5f93fbb, 3 ms)\n",
    );
  });

  it("keeps the first line of a failure's reason", () => {
    expect(setupNote({ key, status: "failed", durationMs: 40, message: "exit code 1\nERROR: no setup.py" })).toBe(
      "loopsmith: setup layer failed (key 2a70a5f93fbb, 40 ms): exit code 1\n",
    );
  });

  it("is not read as a test status by the pytest log parser", () => {
    const log = `${setupNote({ key, status: "reused", durationMs: 3 })}PASSED tests/test_a.py::test_x\n`;
    expect([...parsePytest(log)]).toEqual([["tests/test_a.py::test_x", "PASSED"]]);
  });
});
