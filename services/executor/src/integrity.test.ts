import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { judgeIntegrity, planIntegrity, readChannel, TRIPWIRE_DIR, type IntegrityPlan } from "./integrity.js";
import { controllerVerdict } from "./result.js";

/** A signed channel line, as the controller writes it. */
const line = (key: string, rec: unknown) => {
  const payload = JSON.stringify(rec);
  return `${createHmac("sha256", Buffer.from(key)).update(payload).digest("hex")} ${payload}\n`;
};
const pyTest = (id: string, outcome: string, message?: string) => ({
  id,
  outcome,
  ms: 1,
  ...(message ? { message } : {}),
});
const wires = (p: IntegrityPlan, flip?: "all_pass" | "drop") => [
  ...p.mustPass.map((n) => pyTest(`loopsmith-tripwires/x.py::${n}`, "passed")),
  ...(flip === "drop"
    ? []
    : p.mustFail.map((n) => pyTest(`loopsmith-tripwires/x.py::${n}`, flip === "all_pass" ? "passed" : "failed"))),
];
const session = (p: IntegrityPlan, tests: unknown[], extra: Record<string, unknown> = {}) =>
  line(p.key, { t: "start", isolated: true }) +
  line(p.key, {
    t: "end",
    isolated: true,
    exitstatus: 0,
    tests,
    collected: (tests as { id: string }[]).map((t) => t.id),
    collectErrors: [],
    crashed: [],
    ...extra,
  });
const judge = (p: IntegrityPlan, text: string, required = true) =>
  judgeIntegrity(readChannel(Buffer.from(text), p.key), p, required);

describe("planIntegrity", () => {
  it("makes a fresh key and fresh tripwire names every run, in files under the tripwire directory", () => {
    const a = planIntegrity("pytest");
    const b = planIntegrity("pytest");
    expect(a.key).toMatch(/^[0-9a-f]{64}$/);
    expect(a.key).not.toBe(b.key);
    expect(a.mustPass[0]).not.toBe(b.mustPass[0]);
    expect(a.files[0]!.path.startsWith(`${TRIPWIRE_DIR}/test_`)).toBe(true);
    for (const n of [...a.mustPass, ...a.mustFail])
      expect(a.files[0]!.content).toMatch(new RegExp(`def ${n}\\((self)?\\):`));
    expect(a.files[0]!.content).toMatch(/class TestLsw[0-9a-f]+\(unittest\.TestCase\)/);
  });

  it("wraps each node test file: the wrapper imports it, then registers the tripwire and the seal", () => {
    const node = planIntegrity("node", ["add.test.js", "lib/b.test.ts"]);
    expect(node.files).toHaveLength(2);
    expect(node.files[0]!.content).toContain('await import("/workspace/add.test.js");');
    expect(node.files[1]!.content).toContain('await import("/workspace/lib/b.test.ts");');
    expect(node.files[1]!.path).toMatch(/\/1-lib_b\.test\.ts\.mjs$/);
    expect(node.files[0]!.content).toContain(`"${node.seal} "`);
    expect(node.files[0]!.content).toContain("assert.strictEqual(");
    // The tripwire comes after the import, so the file's own tests register first.
    expect(node.files[0]!.content.indexOf("await import")).toBeLessThan(
      node.files[0]!.content.indexOf(node.mustPass[0]!),
    );
  });
});

describe("judgeIntegrity (pytest)", () => {
  const p = planIntegrity("pytest");
  const real = [pyTest("test_a.py::test_one", "passed"), pyTest("test_a.py::TestK::test_two", "passed")];

  it("passes a complete session whose tripwires held, and leaves the tripwires out of the tests", () => {
    const j = judge(p, session(p, [...real, ...wires(p)]));
    expect(j?.tampering).toBeUndefined();
    expect(j?.tests.map((t) => [t.classname, t.name])).toEqual([
      ["test_a", "test_one"],
      ["test_a.TestK", "test_two"],
    ]);
    expect(controllerVerdict(j!, 0, false).status).toBe("passed");
  });

  it("calls a must-fail tripwire reported as passing tampering (outcomes rewritten)", () => {
    const j = judge(p, session(p, [...real, ...wires(p, "all_pass")]));
    expect(j?.tampering).toMatch(/wrong outcome/);
    expect(controllerVerdict(j!, 0, false)).toMatchObject({ status: "tampering" });
  });

  it("calls missing tripwires tampering when nothing else failed, and keeps a real failure a failure", () => {
    expect(judge(p, session(p, [...real, ...wires(p, "drop")]))?.tampering).toMatch(/not reported/);
    const failing = judge(
      p,
      session(p, [pyTest("test_a.py::test_one", "failed", "assert 1 == 2"), ...wires(p, "drop")]),
    );
    expect(failing?.tampering).toBeUndefined();
    expect(controllerVerdict(failing!, 1, false).status).toBe("failed");
  });

  it("calls a line not signed with the run's key tampering (a forged record)", () => {
    const forged = session({ ...p, key: "f".repeat(64) }, [...real, ...wires(p)]);
    expect(judge(p, forged)?.tampering).toMatch(/not signed/);
    expect(judge(p, session(p, [...real, ...wires(p)]) + "garbage\n")?.tampering).toMatch(/1 line/);
  });

  it("calls a session that started and never ended tampering, and no session at all when one is required", () => {
    expect(judge(p, line(p.key, { t: "start", isolated: true }))?.tampering).toMatch(/did not report its end/);
    expect(judge(p, "")?.tampering).toMatch(/reported no session/);
    // A shell line that ran no pytest: nothing to judge (the caller says the verdict is unverified).
    expect(judge(p, "", false)).toBeUndefined();
  });

  it("calls results for tests no worker collected tampering", () => {
    const text =
      line(p.key, { t: "start", isolated: true }) +
      line(p.key, {
        t: "end",
        isolated: true,
        exitstatus: 0,
        tests: [...real, ...wires(p)],
        collected: [real[0]!.id, ...wires(p).map((t) => t.id)],
        collectErrors: [],
        crashed: [],
      });
    expect(judge(p, text)?.tampering).toMatch(/no worker collected/);
  });

  it("calls a session that names a swapped test under `tampered` tampering, naming the test, even with a real failure", () => {
    const swapped = {
      id: "test_a.py::test_one",
      message: "test_a.py::test_one: the code of test_one was replaced after it was collected",
    };
    const j = judge(p, session(p, [...real, ...wires(p)], { tampered: [swapped] }));
    expect(j?.tampering).toMatch(
      /^the code of a test was swapped while the tests ran \(test_a\.py::test_one: the code/,
    );
    expect(controllerVerdict(j!, 1, false)).toMatchObject({ status: "tampering" });
    const failing = judge(
      p,
      session(p, [pyTest("test_a.py::test_one", "failed", "loopsmith: swapped"), ...wires(p)], { tampered: [swapped] }),
    );
    expect(failing?.tampering).toMatch(/test_a\.py::test_one/);
    // An older controller sends no such field: nothing changes.
    expect(judge(p, session(p, [...real, ...wires(p)]))?.tampering).toBeUndefined();
  });

  it("makes a crashed worker or a collection error an error, never a pass", () => {
    const crashed = judge(p, session(p, [...real], { crashed: ["worker 'gw0' crashed"] }));
    expect(crashed?.tampering).toBeUndefined();
    expect(controllerVerdict(crashed!, 1, false)).toMatchObject({
      status: "error",
      reason: expect.stringMatching(/worker ended before its session/),
    });
    const collect = judge(p, session(p, [], { collectErrors: [{ id: "test_a.py", message: "SyntaxError" }] }));
    expect(controllerVerdict(collect!, 2, false)).toMatchObject({
      status: "error",
      reason: expect.stringMatching(/SyntaxError/),
    });
  });

  it("judges the exit status too: all passing with a non-zero exit is not a pass", () => {
    const j = judge(p, session(p, [...real, ...wires(p)]))!;
    expect(controllerVerdict(j, 3, false).status).toBe("error");
    expect(controllerVerdict(j, 1, true)).toMatchObject({
      status: "failed",
      reason: expect.stringMatching(/exited with code 1/),
    });
    expect(controllerVerdict(judge(p, session(p, [...wires(p)]))!, 0, false)).toMatchObject({
      status: "error",
      reason: "the test runner collected no tests",
    });
  });

  it("adds up several sessions of one shell line: one failing session fails the run", () => {
    const j = judge(
      p,
      session(p, [...real, ...wires(p)]) + session(p, [pyTest("test_b.py::test_x", "failed"), ...wires(p)]),
      false,
    );
    expect(controllerVerdict(j!, 1, true).status).toBe("failed");
  });
});

describe("judgeIntegrity (node)", () => {
  const p = planIntegrity("node", ["a.test.js", "b.test.js"]);
  const nodeTest = (file: string, name: string, outcome: string, extra: Record<string, unknown> = {}) => ({
    id: `${file}::${name}`,
    file,
    name,
    outcome,
    ms: 1,
    ...extra,
  });
  // The tripwire test's name ends in " @<the test file>"; the seal is a failure of the wrapper's
  // root hook, reported under the wrapper's path, naming the file.
  const nodeWires = (file: string, seal: "ok" | "rewritten" | "patched" = "ok") => {
    const wrapper = p.files[p.testFiles.indexOf(file.replace("/workspace/", ""))]!.path;
    return [
      ...p.mustPass.map((n) => nodeTest(wrapper, `${n} @${file.replace("/workspace/", "")}`, "passed")),
      nodeTest(wrapper, wrapper, seal === "rewritten" ? "passed" : "failed", {
        seal: true,
        message: `Error: ${p.seal} ${seal === "patched" ? "patched: node:assert's strictEqual did not throw" : "ok"} @${file.replace("/workspace/", "")}`,
      }),
    ];
  };
  const nodeSession = (tests: unknown[]) =>
    line(p.key, { t: "start", isolated: true }) +
    line(p.key, { t: "end", isolated: true, exitstatus: 0, tests, collected: null, collectErrors: [], crashed: [] });
  const a = nodeTest("/workspace/a.test.js", "adds", "passed");
  const b = nodeTest("/workspace/b.test.js", "subs", "passed");

  it("passes a run whose tripwires held in every test file's child, with the workspace file as the classname", () => {
    const j = judge(p, nodeSession([a, ...nodeWires("/workspace/a.test.js"), b, ...nodeWires("/workspace/b.test.js")]));
    expect(j?.tampering).toBeUndefined();
    expect(j?.tests).toEqual([
      { name: "adds", classname: "a.test.js", status: "passed", durationMs: 1 },
      { name: "subs", classname: "b.test.js", status: "passed", durationMs: 1 },
    ]);
    expect(controllerVerdict(j!, 0, false).status).toBe("passed");
  });

  it("makes a test file that reported no test (it exited at import) an error", () => {
    const silent = nodeTest(p.files[1]!.path, p.files[1]!.path, "error", {
      fileOnly: true,
      message: "the test file ended without reporting any test",
    });
    const j = judge(p, nodeSession([a, ...nodeWires("/workspace/a.test.js"), silent]));
    expect(controllerVerdict(j!, 0, false)).toMatchObject({
      status: "error",
      reason: expect.stringMatching(/b\.test\.js: the test file ended/),
    });
  });

  it("calls tripwires rewritten to pass tampering, and a file whose child lost its tripwires", () => {
    expect(
      judge(
        p,
        nodeSession([a, ...nodeWires("/workspace/a.test.js", "rewritten"), b, ...nodeWires("/workspace/b.test.js")]),
      )?.tampering,
    ).toMatch(/check in a\.test\.js had the wrong outcome/);
    expect(
      judge(
        p,
        nodeSession([a, ...nodeWires("/workspace/a.test.js", "patched"), b, ...nodeWires("/workspace/b.test.js")]),
      )?.tampering,
    ).toMatch(/in a\.test\.js, node:assert's strictEqual did not throw/);
    const j = judge(p, nodeSession([a, ...nodeWires("/workspace/a.test.js"), b]));
    expect(j?.tampering).toMatch(/in b\.test\.js were not reported/);
  });
});
