import { describe, expect, it } from "vitest";
import { parseJUnit } from "./junit.js";

describe("parseJUnit", () => {
  it("reads pytest's JUnit XML", () => {
    const xml = `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="4" time="0.05">
      <testcase classname="test_math" name="test_add" time="0.001" />
      <testcase classname="test_math" name="test_check" time="0.002"><failure message="AssertionError: two &amp; two">def test_check(): assert 4 == 5</failure></testcase>
      <testcase classname="test_math" name="test_fixture" time="0"><error message="fixture 'db' not found">E fixture</error></testcase>
      <testcase classname="test_math" name="test_later[1-2]" time="0"><skipped type="pytest.skip" message="later">skip</skipped></testcase>
    </testsuite></testsuites>`;
    const cases = parseJUnit(xml);
    expect(cases?.map((c) => [c.name, c.status])).toEqual([
      ["test_add", "passed"],
      ["test_check", "failed"],
      ["test_fixture", "error"],
      ["test_later[1-2]", "skipped"],
    ]);
    expect(cases?.[1]?.message).toContain("two & two");
    expect(cases?.[1]?.message).toContain("assert 4 == 5");
    expect(cases?.[0]?.durationMs).toBe(1);
    expect(cases?.[0]?.classname).toBe("test_math");
  });

  it("reads node's nested suites", () => {
    const xml = `<testsuites><testsuite name="math"><testcase name="adds" time="0.0005" classname="test"/>
      <testsuite name="inner"><testcase name="subtracts" time="0.001" classname="test"><failure type="testCodeFailure" message="Expected 1 to equal 2">stack</failure></testcase></testsuite>
      </testsuite><testcase name="top" time="0" classname="test"/></testsuites>`;
    expect(parseJUnit(xml)?.map((c) => `${c.name}:${c.status}`)).toEqual([
      "top:passed",
      "adds:passed",
      "subtracts:failed",
    ]);
  });

  it("caps messages, and gives null for text that is not XML", () => {
    const long = "x".repeat(20_000);
    const cases = parseJUnit(
      `<testsuites><testsuite><testcase name="t"><failure message="${long}"/></testcase></testsuite></testsuites>`,
    );
    expect(cases?.[0]?.message?.length).toBe(8_000);
    expect(parseJUnit("<testsuites><testcase name='a'>")).toBeNull();
    expect(parseJUnit("<testsuites></testsuites>")).toEqual([]);
  });
});
