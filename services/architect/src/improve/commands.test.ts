import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { benchShell, readBench } from "./commands.js";

describe("benchShell", () => {
  it("is the bench itself without a JUnit file", () => {
    expect(benchShell("python3 bench.py", undefined)).toBe("python3 bench.py");
  });

  it("copies the named JUnit file to $LOOPSMITH_JUNIT and keeps the benchmark's exit status, whatever the path holds", () => {
    const dir = mkdtempSync(join(tmpdir(), "bench-shell-"));
    const line = benchShell(
      "mkdir -p \"it's out\" && echo '<testsuite/>' > \"it's out/j.xml\"; exit 3",
      "it's out/j.xml",
    );
    let status = 0;
    try {
      execFileSync("sh", ["-c", line], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? "", LOOPSMITH_JUNIT: join(dir, "result.xml") },
      });
    } catch (err) {
      status = (err as { status: number }).status;
    }
    expect(status).toBe(3);
    expect(readFileSync(join(dir, "result.xml"), "utf8").trim()).toBe("<testsuite/>");
  });
});

describe("readBench", () => {
  const base = { exitCode: 0, durationMs: 1, stderr: "", truncated: false, tests: [] };
  it("has no cases for a run that timed out, whatever it printed", () => {
    expect(readBench({ ...base, status: "timeout", stdout: '{"case":"a","pass":true}' }, "json")).toMatchObject({
      ok: false,
      status: "timeout",
    });
  });
  it("reads JUnit cases in junit format and names stderr when there are none", () => {
    expect(
      readBench(
        {
          ...base,
          status: "passed",
          stdout: "",
          tests: [{ name: "t1", classname: "b", status: "passed", durationMs: 1 }],
        },
        "junit",
      ),
    ).toMatchObject({ ok: true, cases: [{ case: "b::t1", pass: true }] });
    const none = readBench({ ...base, status: "failed", stdout: "", stderr: "Traceback\nNameError: x" }, "junit");
    expect(none).toMatchObject({ ok: false });
    expect(!none.ok && none.error).toMatch(/NameError: x/);
  });
});
