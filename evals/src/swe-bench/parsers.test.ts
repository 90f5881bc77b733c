import { describe, expect, it } from "vitest";
import { isResolved, parseDjango, parsePytest, parseSympy, tally } from "./parsers.js";

describe("parsePytest (-rA short summary)", () => {
  it("reads STATUS node-id lines, drops a failure's message, ignores everything else", () => {
    const log = [
      "tests/test_more.py ..F.x                                   [100%]",
      "=================== short test summary info ===================",
      "PASSED tests/test_more.py::LastTests::test_basic",
      "FAILED tests/test_more.py::LastTests::test_reversed_is_none - TypeError: 'NoneType' object is not callable",
      "XFAIL tests/test_more.py::T::test_known - reason: flaky",
      "XPASS tests/test_more.py::T::test_lucky",
      "SKIPPED [1] tests/test_more.py:12: needs numpy",
      "ERROR tests/test_other.py::test_setup",
      "  PASSED tests/indented.py::not_a_summary_line",
      "============ 1 failed, 1 passed in 0.1s ============",
    ].join("\n");
    expect(Object.fromEntries(parsePytest(log))).toEqual({
      "tests/test_more.py::LastTests::test_basic": "PASSED",
      "tests/test_more.py::LastTests::test_reversed_is_none": "FAILED",
      "tests/test_more.py::T::test_known": "XFAIL",
      "tests/test_more.py::T::test_lucky": "XPASS",
      "tests/test_other.py::test_setup": "ERROR",
    });
  });

  it("keeps parametrized ids whole and lets the last report of a test win", () => {
    const log = "FAILED t.py::test_x[a-1] - boom\nPASSED t.py::test_x[a-1]\n";
    expect(parsePytest(log).get("t.py::test_x[a-1]")).toBe("PASSED");
  });
});

describe("parseDjango (runtests.py --verbosity 2)", () => {
  it("reads 'name (module.Class) ... outcome' lines and failure headers", () => {
    const log = [
      "test_add (utils_tests.test_text.TestUtilsText) ... ok",
      "test_skip (utils_tests.test_text.TestUtilsText) ... skipped 'no db'",
      "test_bad (utils_tests.test_text.TestUtilsText) ... FAIL",
      "test_crash (utils_tests.test_text.TestUtilsText) ... ERROR",
      "test_known (utils_tests.test_text.TestUtilsText) ... expected failure",
      "test_docstring (utils_tests.test_text.TestUtilsText)",
      "A test with a docstring. ... ok",
      "test_new_style (utils_tests.test_text.TestUtilsText.test_new_style) ... ok",
      "======================================================================",
      "ERROR: test_setup_error (admin_tests.tests.AdminTests)",
    ].join("\n");
    expect(Object.fromEntries(parseDjango(log))).toEqual({
      "test_add (utils_tests.test_text.TestUtilsText)": "PASSED",
      "test_skip (utils_tests.test_text.TestUtilsText)": "SKIPPED",
      "test_bad (utils_tests.test_text.TestUtilsText)": "FAILED",
      "test_crash (utils_tests.test_text.TestUtilsText)": "ERROR",
      "test_known (utils_tests.test_text.TestUtilsText)": "XFAIL",
      "test_docstring (utils_tests.test_text.TestUtilsText)": "PASSED",
      "test_new_style (utils_tests.test_text.TestUtilsText)": "PASSED",
      "test_setup_error (admin_tests.tests.AdminTests)": "ERROR",
    });
  });
});

describe("parseSympy (bin/test -C --verbose)", () => {
  it("reads 'test_name ok|F|E' lines and failure section headers", () => {
    const log = [
      "sympy/core/tests/test_basic.py[3]",
      "test_equality ok",
      "test_matches_basic F",
      "test_broken E",
      "__________ sympy/core/tests/test_expr.py:test_issue_1234 __________",
      "Traceback (most recent call last):",
      "tests finished: 1 passed, 1 failed, 1 exceptions",
    ].join("\n");
    expect(Object.fromEntries(parseSympy(log))).toEqual({
      test_equality: "PASSED",
      test_matches_basic: "FAILED",
      test_broken: "ERROR",
      test_issue_1234: "FAILED",
    });
  });
});

describe("the resolution rule", () => {
  const statuses = new Map([
    ["a", "PASSED"],
    ["b", "XFAIL"],
    ["c", "FAILED"],
    ["d", "XPASS"],
  ] as const);
  it("counts PASSED and XFAIL as passing, anything else (absent included) as not", () => {
    expect(tally(statuses, ["a", "b"])).toEqual({ passed: 2, total: 2, failing: [] });
    expect(tally(statuses, ["a", "c", "d", "missing"])).toEqual({
      passed: 1,
      total: 4,
      failing: ["c", "d", "missing"],
    });
  });
  it("resolves only when both lists pass whole", () => {
    const all = tally(statuses, ["a"]);
    expect(isResolved(all, tally(statuses, ["b"]))).toBe(true);
    expect(isResolved(all, tally(statuses, ["b", "missing"]))).toBe(false);
    expect(isResolved(tally(statuses, ["c"]), all)).toBe(false);
  });
});
