/**
 * Per-test statuses from a SWE-bench test run's output, and the official resolution rule.
 * Written from the documented output formats the official harness's log parsers read
 * (swebench/harness/log_parsers): pytest's `-rA` short summary, Django's `runtests.py
 * --verbosity 2` (unittest's verbose lines), and sympy's `bin/test --verbose`.
 */
import type { LogParser } from "./env.js";

/** A test's status, with the official harness's names. */
export type TestStatus = "PASSED" | "FAILED" | "SKIPPED" | "ERROR" | "XFAIL" | "XPASS";

/** Test id → status; a test reported twice keeps the last. */
export type StatusMap = Map<string, TestStatus>;

const PYTEST_STATUSES: readonly TestStatus[] = ["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS"];

/**
 * pytest with `-rA`: the short test summary has one line per test, `STATUS node-id`, and a
 * failure's line goes on with ` - message` (`FAILED tests/t.py::T::test_x - AssertionError`).
 * The node id is the second whitespace-separated word. Lines that start with anything else
 * (progress, tracebacks, `SKIPPED [1] file:line: reason` for a skip's location) are ignored.
 */
export function parsePytest(log: string): StatusMap {
  const out: StatusMap = new Map();
  for (const raw of log.split("\n")) {
    const line = raw.trimEnd();
    const status = PYTEST_STATUSES.find((s) => line.startsWith(`${s} `));
    if (!status) continue;
    const node = line
      .slice(status.length + 1)
      .split(" - ")[0]
      ?.trim()
      .split(/\s+/)[0];
    // `SKIPPED [2] tests/x.py:10: reason` names a location, not a test.
    if (!node || node.startsWith("[")) continue;
    out.set(node, status);
  }
  return out;
}

/** unittest's verbose outcome words → status. */
const DJANGO_OUTCOMES: readonly (readonly [RegExp, TestStatus])[] = [
  [/ \.\.\. ok$/, "PASSED"],
  [/ \.\.\. OK$/, "PASSED"],
  [/ \.\.\. skipped\b.*$/, "SKIPPED"],
  [/ \.\.\. expected failure$/, "XFAIL"],
  [/ \.\.\. unexpected success$/, "FAILED"],
  [/ \.\.\. FAIL$/, "FAILED"],
  [/ \.\.\. ERROR$/, "ERROR"],
];

/** `test_name (dotted.module.Class)` or Python 3.11+'s `test_name (dotted.module.Class.test_name)`. */
const DJANGO_TEST = /^(\w+) \(([\w.]+)\)/;

/**
 * Django's `runtests.py --verbosity 2`: unittest prints `test_name (module.Class) ... ok`
 * (or `... skipped 'why'`, `... FAIL`, `... ERROR`, `... expected failure`,
 * `... unexpected success`); the test id is `test_name (module.Class)` as the official lists
 * name it. A test with a docstring prints its name on one line and `docstring ... ok` on the
 * next: the outcome goes to the name above. The failure report's headers `FAIL: test_name
 * (module.Class)` and `ERROR: ...` also set the status. Python 3.11+ adds the method's name
 * to the class path (`(module.Class.test_name)`); it is dropped so ids match the lists.
 */
export function parseDjango(log: string): StatusMap {
  const out: StatusMap = new Map();
  let pending: string | undefined;
  const idOf = (m: RegExpMatchArray): string => {
    const name = m[1] ?? "";
    const path = m[2] ?? "";
    return `${name} (${path.endsWith(`.${name}`) ? path.slice(0, -name.length - 1) : path})`;
  };
  for (const raw of log.split("\n")) {
    const line = raw.trimEnd();
    const header = /^(FAIL|ERROR): (\w+ \([\w.]+\))/.exec(line);
    if (header) {
      const m = DJANGO_TEST.exec(header[2] ?? "");
      if (m) out.set(idOf(m), header[1] === "FAIL" ? "FAILED" : "ERROR");
      continue;
    }
    const outcome = DJANGO_OUTCOMES.find(([re]) => re.test(line));
    const test = DJANGO_TEST.exec(line);
    if (outcome && test) {
      out.set(idOf(test), outcome[1]);
      pending = undefined;
    } else if (outcome && pending) {
      out.set(pending, outcome[1]);
      pending = undefined;
    } else if (test && !line.includes(" ... ")) {
      pending = idOf(test);
    }
  }
  return out;
}

/**
 * sympy's `bin/test -C --verbose`: one line per test, `test_name ok`, `test_name F` (failed)
 * or `test_name E` (error), indented under its file; a test whose name starts with `test_`.
 * The failure sections' headers `____ sympy/x/tests/test_y.py:test_name ____` also mark a
 * test failed. Ids are the bare function names, as the official lists give them.
 */
export function parseSympy(log: string): StatusMap {
  const out: StatusMap = new Map();
  for (const raw of log.split("\n")) {
    const header = /^_+ [^ ]+\.py:(\w+) _+$/.exec(raw.trim());
    if (header?.[1]) {
      out.set(header[1], "FAILED");
      continue;
    }
    const line = raw.trim();
    if (!line.startsWith("test_")) continue;
    const name = line.split(/\s+/)[0] ?? "";
    if (line.endsWith(" ok")) out.set(name, "PASSED");
    else if (line.endsWith(" F")) out.set(name, "FAILED");
    else if (line.endsWith(" E")) out.set(name, "ERROR");
  }
  return out;
}

/** The parser named `name`. */
export function parseLog(name: LogParser, log: string): StatusMap {
  return name === "django" ? parseDjango(log) : name === "sympy" ? parseSympy(log) : parsePytest(log);
}

/** A test counts as passing when it is `PASSED` or `XFAIL` (the official `test_passed`); absent tests do not. */
export function testPassed(statuses: StatusMap, test: string): boolean {
  const s = statuses.get(test);
  return s === "PASSED" || s === "XFAIL";
}

/** Passing and listed tests of one list. */
export interface Tally {
  passed: number;
  total: number;
  /** The listed tests that did not pass (for the report), at most 20. */
  failing: string[];
}

/** How many of `tests` pass in `statuses`. */
export function tally(statuses: StatusMap, tests: readonly string[]): Tally {
  const failing = tests.filter((t) => !testPassed(statuses, t));
  return { passed: tests.length - failing.length, total: tests.length, failing: failing.slice(0, 20) };
}

/**
 * The official resolution rule (`ResolvedStatus.FULL`): every FAIL_TO_PASS test and every
 * PASS_TO_PASS test passes.
 */
export function isResolved(failToPass: Tally, passToPass: Tally): boolean {
  return failToPass.passed === failToPass.total && passToPass.passed === passToPass.total;
}
