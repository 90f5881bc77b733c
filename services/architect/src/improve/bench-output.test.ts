import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { TestCase } from "@loopsmith/shared/contracts";
import { casesFromTests, parseBenchOutput, type CaseRun } from "./bench-output.js";

function cases(stdout: string): CaseRun[] {
  const r = parseBenchOutput(stdout);
  if (!r.ok) throw new Error(`expected cases, got: ${r.error}`);
  return r.cases;
}

function error(r: ReturnType<typeof parseBenchOutput>): string {
  if (r.ok) throw new Error(`expected an error, got ${JSON.stringify(r.cases)}`);
  return r.error;
}

describe("parseBenchOutput", () => {
  it("reads case lines among log lines, prose with braces and unparseable brace lines", () => {
    const out = [
      "collecting benchmark cases...",
      '{"case": "a", "pass": true}',
      "  progress: 1/3  ",
      "{not json at all}",
      '   {"case": "b", "pass": false, "extra": [1, 2]}   ',
      'result {"case": "hidden", "pass": true}',
      "[1, 2, 3]",
      '{"case": "c", "pass": true, "score": 0.75}\r',
      "",
      "done",
    ].join("\n");
    expect(cases(out)).toEqual([
      { case: "a", pass: true },
      { case: "b", pass: false },
      { case: "c", pass: true, score: 0.75 },
    ]);
  });

  it("keeps scores, negative and zero included, and leaves score out when absent", () => {
    const got = cases(
      '{"case":"x","pass":false,"score":-2.5}\n{"case":"y","pass":true,"score":0}\n{"case":"z","pass":true}',
    );
    expect(got).toEqual([
      { case: "x", pass: false, score: -2.5 },
      { case: "y", pass: true, score: 0 },
      { case: "z", pass: true },
    ]);
    expect(got[2] && "score" in got[2]).toBe(false);
  });

  it("names the 1-based line of a JSON object that is not a case", () => {
    const log = 'hello\n{"case": "a", "pass": true}\n{"case": "b"}\n{"case": "c", "pass": true}';
    const e = error(parseBenchOutput(log));
    expect(e).toMatch(/line 3\b/);
    expect(e).toMatch(/`pass`/);
    expect(error(parseBenchOutput('{"pass": true}'))).toMatch(/line 1\b.*`case`/);
    expect(error(parseBenchOutput('x\n\n{"case": 7, "pass": true}'))).toMatch(/line 3\b.*`case` must be a string/);
    expect(error(parseBenchOutput('{"case": "a", "pass": "true"}'))).toMatch(/`pass` must be true or false/);
    expect(error(parseBenchOutput('{"case": "", "pass": true}'))).toMatch(/`case` must not be empty/);
    expect(error(parseBenchOutput('{"case": "a", "pass": true, "score": "0.5"}'))).toMatch(/`score`/);
    expect(error(parseBenchOutput('{"case": "a", "pass": true, "score": null}'))).toMatch(/`score`/);
  });

  it("refuses a non-finite score (JSON 1e999 reads as Infinity)", () => {
    expect(
      error(parseBenchOutput('{"case": "a", "pass": true, "score": 1}\n{"case": "b", "pass": true, "score": 1e999}')),
    ).toMatch(/line 2\b.*finite/);
    expect(error(parseBenchOutput('{"case": "a", "pass": true, "score": -1e999}'))).toMatch(/line 1\b.*finite/);
  });

  it("refuses a duplicate case id, naming both lines", () => {
    const e = error(
      parseBenchOutput('{"case": "a", "pass": true}\nlog\n{"case": "b", "pass": true}\n{"case": "a", "pass": false}'),
    );
    expect(e).toMatch(/"a"/);
    expect(e).toMatch(/lines 1 and 4/);
  });

  it("refuses output with no case", () => {
    expect(error(parseBenchOutput(""))).toMatch(/no case/);
    expect(error(parseBenchOutput("only\nlogs\n{broken"))).toMatch(/no case/);
  });

  it("errors are one sentence", () => {
    for (const out of ["", '{"case": 1, "pass": true}', '{"case": "a", "pass": true}\n{"case": "a", "pass": true}']) {
      const e = error(parseBenchOutput(out));
      expect(e).not.toMatch(/\n/);
      expect(e).toMatch(/\.$/);
    }
  });

  it("round-trips any set of distinct cases printed between log lines", () => {
    const caseArb = fc.record({
      pass: fc.boolean(),
      score: fc.option(fc.double({ noNaN: true, noDefaultInfinity: true }), { nil: undefined }),
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1 }), { minLength: 1, maxLength: 20 }),
        fc.array(caseArb, { minLength: 20, maxLength: 20 }),
        (ids, runs) => {
          const expected: CaseRun[] = ids.map((id, i) => {
            const r = runs[i] ?? { pass: false, score: undefined };
            // JSON has no -0: it prints as 0.
            return r.score === undefined
              ? { case: id, pass: r.pass }
              : { case: id, pass: r.pass, score: Object.is(r.score, -0) ? 0 : r.score };
          });
          const text = expected.map((c) => `log line for ${c.case.length}\n${JSON.stringify(c)}`).join("\n");
          expect(cases(text)).toEqual(expected);
        },
      ),
    );
  });
});

describe("casesFromTests", () => {
  const t = (name: string, status: TestCase["status"], classname = ""): TestCase =>
    TestCase.parse({ name, classname, status });

  it("ids are classname::name (or name); only passed passes, skipped does not", () => {
    const r = casesFromTests([
      t("test_a", "passed", "tests.test_x"),
      t("test_b", "failed", "tests.test_x"),
      t("test_c", "error"),
      t("test_d", "skipped", "k"),
    ]);
    expect(r).toEqual({
      ok: true,
      cases: [
        { case: "tests.test_x::test_a", pass: true },
        { case: "tests.test_x::test_b", pass: false },
        { case: "test_c", pass: false },
        { case: "k::test_d", pass: false },
      ],
    });
  });

  it("accepts cases without a classname", () => {
    expect(casesFromTests([{ name: "only", status: "passed" }])).toEqual({
      ok: true,
      cases: [{ case: "only", pass: true }],
    });
  });

  it("refuses an empty report and a duplicate id", () => {
    const empty = casesFromTests([]);
    expect(empty.ok).toBe(false);
    if (!empty.ok) expect(empty.error).toMatch(/no test case/);
    const dup = casesFromTests([t("a", "passed", "m"), t("a", "failed", "m")]);
    expect(dup.ok).toBe(false);
    if (!dup.ok) expect(dup.error).toMatch(/"m::a" twice/);
    // Same name in two classes is two cases.
    expect(casesFromTests([t("a", "passed", "m"), t("a", "passed", "n")]).ok).toBe(true);
  });
});
