/**
 * VALIDATE: the guards a candidate change passes before any benchmark runs, so the change
 * cannot game what judges it. Each violation maps to a closed {@link DecisionReason}. Pure:
 * the only input from outside is the `exists` callback of {@link protectedGlobs}.
 *
 * Test files are those {@link isTestFile} names for any of the three languages, plus the
 * jest/vitest defaults it leaves out (`*.spec.*`, `.jsx`/`.tsx`, files under `__tests__/`).
 * Comments are ignored on both sides of a diff: commenting a marker out is not adding one,
 * and a commented-out `def test_x` does not re-add `test_x`.
 */
import { parsePatch } from "diff";
import picomatch from "picomatch";
import { DEFAULT_PROTECTED, SELF_PROTECTED, type CheckCounts, type DecisionReason } from "@loopsmith/shared/contracts";
import { isDependencyManifest, isTestFile } from "@loopsmith/shared/workspace";

/** A guard that fired: the reason code, one or two sentences with the figures, the paths involved. */
export interface Violation {
  reason: Extract<
    DecisionReason,
    | "protected"
    | "tests_deleted"
    | "tests_skipped"
    | "fewer_tests"
    | "thresholds_lowered"
    | "new_dependency"
    | "tampering"
  >;
  message: string;
  paths: string[];
}

/** A candidate's change: a git-style unified diff (`a/`, `b/` prefixes) and the changed and deleted paths. */
export interface ChangeUnderReview {
  patch: string;
  changed: string[];
  deleted: string[];
}

/** What a path in the tree is, for {@link protectedGlobs}: a file, a directory, or absent. */
export type PathKind = "file" | "dir" | undefined;

/** How many paths or findings a message lists. */
const LISTED = 5;

/** The tail of a list cut at {@link LISTED}: `" and N more"`, or "". */
const more = (n: number) => (n > LISTED ? ` and ${n - LISTED} more` : "");

/**
 * The protected globs of a run, deduplicated in this order: {@link DEFAULT_PROTECTED},
 * {@link SELF_PROTECTED} when `self`, `extra`, then the paths the benchmark and check command
 * lines name. Each command is split into words the way `sh` would for simple quoting (`'…'`,
 * `"…"`, `\`; `;`, `&`, `|`, `<`, `>`, `(`, `)` separate words), a quoted word with blanks
 * (`sh -c '…'`) is split again; a word `--opt=value` or
 * `VAR=value` also offers its value, and a dotted word after `-m` (`python -m scripts.score`)
 * offers `scripts/score.py` and `scripts/score`. A candidate is kept when it does not start
 * with `-`, is not absolute or `~`-relative and has no `..` segment; a leading `./`, empty
 * segments and a trailing `/` are dropped (`.` itself is never kept). `exists` then decides:
 * `"file"` protects the path itself, `"dir"` protects `dir/**`, `undefined` drops the word.
 * Glob characters in a named path are escaped, so it matches only itself.
 * @param opts.exists - what the path is in the parent tree
 */
export function protectedGlobs(opts: {
  self: boolean;
  extra: string[];
  commands: string[];
  exists: (path: string) => PathKind;
}): string[] {
  const out = [...DEFAULT_PROTECTED, ...(opts.self ? SELF_PROTECTED : []), ...opts.extra];
  for (const command of opts.commands) {
    const ws = shellWords(command).flatMap((w) => (/\s/.test(w) ? [w, ...shellWords(w)] : [w]));
    ws.forEach((w, i) => {
      const candidates = [w, ...(w.includes("=") ? [w.slice(w.indexOf("=") + 1)] : [])];
      if (ws[i - 1] === "-m" && /^[A-Za-z_][\w.]*$/.test(w))
        candidates.push(`${w.replaceAll(".", "/")}.py`, w.replaceAll(".", "/"));
      for (const c of candidates) {
        const path = relativePath(c);
        const kind = path === undefined ? undefined : opts.exists(path);
        if (path !== undefined && kind) out.push(kind === "dir" ? `${escapeGlob(path)}/**` : escapeGlob(path));
      }
    });
  }
  return [...new Set(out)];
}

/** The words of a command line, with simple quoting and backslash escapes resolved. */
function shellWords(command: string): string[] {
  const out: string[] = [];
  let cur = "";
  let started = false;
  let quote: string | undefined;
  for (let i = 0; i < command.length; i++) {
    const c = command.charAt(i);
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < command.length) cur += command.charAt(++i);
      else cur += c;
    } else if (c === "'" || c === '"') [quote, started] = [c, true];
    else if (c === "\\" && i + 1 < command.length) [cur, started] = [cur + command.charAt(++i), true];
    else if (/[\s;&|<>()]/.test(c)) {
      if (started) out.push(cur);
      [cur, started] = ["", false];
    } else [cur, started] = [cur + c, true];
  }
  if (started) out.push(cur);
  return out;
}

/** A command word as a normalised relative path, or undefined when it does not look like one. */
function relativePath(word: string): string | undefined {
  if (word === "" || word.startsWith("-") || word.startsWith("/") || word.startsWith("~")) return undefined;
  const segments = word.split("/").filter((s) => s !== "" && s !== ".");
  if (segments.length === 0 || segments.includes("..")) return undefined;
  return segments.join("/");
}

/** `path` with picomatch's special characters escaped. */
const escapeGlob = (path: string) => path.replace(/[\\*?[\]{}()!+@]/g, "\\$&");

/** One file of a parsed patch: its old and new paths (prefix removed; undefined for `/dev/null`) and its `-`/`+` lines. */
type FilePatch = { oldPath: string | undefined; newPath: string | undefined; removed: string[]; added: string[] };

/** A patch file name without git's prefix; undefined for `/dev/null`. */
const stripName = (name: string | undefined, prefix: string) =>
  !name || name === "/dev/null" ? undefined : name.startsWith(prefix) ? name.slice(prefix.length) : name;

/** The files of a unified diff. @throws when jsdiff cannot parse it (the caller reports an error: nothing is validated). */
function filePatches(patch: string): FilePatch[] {
  if (patch.trim() === "") return [];
  return parsePatch(patch).map((p) => {
    const lines = p.hunks.flatMap((h) => h.lines);
    const side = (sign: string) => lines.filter((l) => l.startsWith(sign)).map((l) => l.slice(1));
    return {
      oldPath: stripName(p.oldFileName, "a/"),
      newPath: stripName(p.newFileName, "b/"),
      removed: side("-"),
      added: side("+"),
    };
  });
}

/** Every path the change names: changed, deleted, and both sides of each file of the patch; no leading `./`. */
function allPaths(change: ChangeUnderReview): string[] {
  const fromPatch = filePatches(change.patch).flatMap((f) =>
    [f.oldPath, f.newPath].filter((p): p is string => p !== undefined),
  );
  return [...new Set([...change.changed, ...change.deleted, ...fromPatch].map((p) => p.replace(/^(\.\/)+/, "")))];
}

/** True for a file a test runner collects (see the module comment). */
function isTest(path: string | undefined): boolean {
  if (path === undefined) return false;
  if ((["python", "typescript", "javascript"] as const).some((l) => isTestFile(path, l))) return true;
  return (
    !path.split("/").includes("node_modules") &&
    (/\.(test|spec)\.[cm]?[jt]sx?$/.test(path) || /(^|\/)__tests__\/.*\.[cm]?[jt]sx?$/.test(path))
  );
}

/** Test-runner configuration files, by file name: where thresholds, timeouts and deselections live. */
const TEST_CONFIG =
  /(^|\/)(pytest\.ini|\.pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml|\.coveragerc|conftest\.py|package\.json|(jest\.config|vitest\.config|vitest\.workspace|karma\.conf|playwright\.config)\.[^/]*|\.mocharc[^/]*|\.nycrc[^/]*|\.c8rc[^/]*)$/;

/** True for a JavaScript/TypeScript/JSON file (`//` comments), false for the `#` family. */
const isJsLike = (path: string) => /\.([cm]?[jt]sx?|json)$/.test(path) || /(^|\/)\.(mocharc|nycrc|c8rc)$/.test(path);

/** A line's code, trimmed, without its comment (a whole-line comment gives ""). */
function code(line: string, path: string): string {
  const t = line.trim();
  if (isJsLike(path)) return /^(\/\/|\/\*|\*)/.test(t) ? "" : t.replace(/\s\/\/.*$/, "");
  return /^[#;]/.test(t) ? "" : t.replace(/\s#.*$/, "");
}

/**
 * Changed, deleted or renamed paths that are protected → `protected`: those matching `globs`
 * (picomatch, `dot: true`), then those of `code`, the judging code of loopsmith with why each
 * is protected (`judgingCode` in `judging-code.ts`: what the judging code imports). The message
 * names up to 5, each with its first matching glob (`bench/run.py (matches bench/**)`) or its
 * reason (`shared/src/contracts/alpha.ts is imported by services/architect/src/improve/decision.ts`).
 * @param code - protected files by path, each with a clause that follows the path in a sentence
 */
export function touchesProtected(
  change: ChangeUnderReview,
  globs: readonly string[],
  code: ReadonlyMap<string, string> = new Map(),
): Violation | undefined {
  const matchers = globs.map((g) => ({ glob: g, test: picomatch(g, { dot: true }) }));
  const hits = allPaths(change).flatMap((path) => {
    const m = matchers.find((x) => x.test(path));
    if (m) return [{ path, text: path === m.glob ? path : `${path} (matches ${m.glob})` }];
    const why = code.get(path);
    return why === undefined ? [] : [{ path, text: `${path} ${why}` }];
  });
  if (hits.length === 0) return undefined;
  const listed = hits
    .slice(0, LISTED)
    .map((h) => h.text)
    .join("; ");
  return {
    reason: "protected",
    message: `the change touches protected paths: ${listed}${more(hits.length)}`,
    paths: hits.map((h) => h.path),
  };
}

/** A deleted test file (or one renamed away) → `tests_deleted`. */
export function deletedTests(change: ChangeUnderReview): Violation | undefined {
  const gone = filePatches(change.patch)
    .filter((f) => f.oldPath !== undefined && f.oldPath !== f.newPath)
    .map((f) => f.oldPath ?? "");
  const tests = [...new Set([...change.deleted, ...gone].map((p) => p.replace(/^(\.\/)+/, "")))].filter(isTest);
  if (tests.length === 0) return undefined;
  return {
    reason: "tests_deleted",
    message: `the change deletes test files: ${tests.slice(0, LISTED).join(", ")}${more(tests.length)}`,
    paths: tests,
  };
}

/** Python skip/xfail markers (`pytest.importorskip` included: a module it cannot import is skipped whole). */
const PY_SKIPS = [
  /\bpytest\.mark\.(skip|skipif|xfail)\b/,
  /\bpytest\.(skip|xfail|importorskip)\s*\(/,
  /\bunittest\.(skip|skipIf|skipUnless|expectedFailure)\b/,
  /^@(skip|skipIf|skipUnless|expectedFailure)\b/,
  /\.skipTest\s*\(/,
  /\bSkipTest\b/,
  /\b__test__\s*=\s*False\b/,
  /\bcollect_ignore(_glob)?\b/,
];
/** JavaScript skips, todos and focus (`.only` skips every other test), node:test options included. */
const JS_SKIPS = [
  /(?<![\w$])(it|test|describe|suite|context|specify|bench)(\.\w+)*\.(skip|only|todo|skipIf|runIf|fails)\b/,
  /\.(skip|only|todo)\s*\(/,
  /(?<![\w$.])(x|f)(it|test|describe|context|specify)\s*\(/,
  /(^|[{,(])\s*(skip|todo|only)\s*:(?!\s*(false|null|undefined)\b)/,
];
/** Deselections in test-runner configuration. */
const CONFIG_SKIPS = [
  /--(ignore|ignore-glob|deselect)(?=[\s="']|$)/,
  /\bnorecursedirs\b/,
  /\b(testPathIgnorePatterns|modulePathIgnorePatterns)\b/,
  /\baddopts\b.*\s-[km](\s|=)/,
];
/** A Python test function definition. */
const PY_TEST_DEF = /^(?:async\s+)?def\s+(test\w*)\s*\(/;
/** A JavaScript test case with a literal name (`it("…"`, `test.each(…)("…"`). */
const JS_TEST_CASE = /(?<![\w$.])(?:it|test|specify)(?:\.\w+(?:\([^)]*\))?)*\s*\(\s*(["'`])(.+?)\1/;

/** The skip patterns that apply to `path`: none outside test files, conftest.py and test configuration. */
function skipPatterns(path: string | undefined): RegExp[] {
  if (path === undefined) return [];
  const lang = isTest(path) || /(^|\/)conftest\.py$/.test(path) ? (/\.py$/.test(path) ? PY_SKIPS : JS_SKIPS) : [];
  return TEST_CONFIG.test(path) ? [...lang, ...CONFIG_SKIPS] : lang;
}

/** The test case a line defines (`py:test_x`, `js:adds two numbers`), if any. */
function testName(line: string): string | undefined {
  const py = PY_TEST_DEF.exec(line);
  if (py) return `py:${py[1]}`;
  const js = JS_TEST_CASE.exec(line);
  return js ? `js:${js[2]}` : undefined;
}

/**
 * Added skip markers, and removed test cases. In test files, conftest.py and test
 * configuration, an ADDED line (comments ignored) with a skip, xfail, todo, focus (`.only`,
 * `fit`) or deselection (`--ignore`, `--deselect`, `-k`/`-m` in `addopts`, `collect_ignore`,
 * `testPathIgnorePatterns`) is `tests_skipped`, unless the same line is also removed somewhere
 * in the change (moved or re-indented). `pytest.importorskip` counts. Then a test case
 * removed from a test file (`def test_x(`, `it("…"`/`test("…"`) whose name is not defined as
 * often by added lines of test files is `tests_deleted`, unless its file gains as many test
 * cases as it loses (a test renamed or rewritten in place, as a behaviour change needs; what
 * the check runs is guarded by the test counts and by the rule on the check's own tests).
 */
export function addedSkips(change: ChangeUnderReview): Violation | undefined {
  const files = filePatches(change.patch);
  const removedLines = new Map<string, number>();
  const names = new Map<string, number>();
  const namePaths = new Map<string, string>();
  /** Per test file: cases removed minus cases added. */
  const net = new Map<string, number>();
  const bump = (m: Map<string, number>, k: string, by: number) => m.set(k, (m.get(k) ?? 0) + by);
  for (const f of files) {
    const path = f.oldPath ?? f.newPath ?? "";
    for (const line of f.removed.map((l) => code(l, path))) {
      if (skipPatterns(f.oldPath).some((re) => re.test(line))) bump(removedLines, line, 1);
      const name = isTest(f.oldPath) ? testName(line) : undefined;
      if (name) {
        bump(names, name, 1);
        bump(net, path, 1);
        namePaths.set(name, path);
      }
    }
  }
  const skips: { path: string; line: string }[] = [];
  for (const f of files) {
    const path = f.newPath ?? "";
    for (const line of f.added.map((l) => code(l, path))) {
      const name = isTest(f.newPath) ? testName(line) : undefined;
      if (name) {
        bump(names, name, -1);
        bump(net, path, -1);
      }
      if (!skipPatterns(f.newPath).some((re) => re.test(line))) continue;
      if ((removedLines.get(line) ?? 0) > 0) bump(removedLines, line, -1);
      else skips.push({ path, line });
    }
  }
  if (skips.length) {
    const listed = skips
      .slice(0, LISTED)
      .map((s) => `${s.path}: ${s.line}`)
      .join("; ");
    return {
      reason: "tests_skipped",
      message: `the change adds skip, focus or deselection markers to tests: ${listed}`,
      paths: [...new Set(skips.map((s) => s.path))],
    };
  }
  const lost = [...names].filter(([k, n]) => n > 0 && (net.get(namePaths.get(k) ?? "") ?? 0) > 0).map(([k]) => k);
  if (lost.length === 0) return undefined;
  const listed = lost
    .slice(0, LISTED)
    .map((k) => `${namePaths.get(k) ?? ""}: ${k.slice(3)}`)
    .join("; ");
  return {
    reason: "tests_deleted",
    message: `the change removes test cases it does not add back: ${listed}${more(lost.length)}`,
    paths: [...new Set(lost.map((k) => namePaths.get(k) ?? ""))],
  };
}

/** A number with `_` separators and an optional exponent, then an optional unit. */
const NUM = String.raw`([-+]?\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?)(ms|s|m|%)?`;
/** `key = 90`, `key: 90`, `"key": 90`, `--key=90`, `key=90` (keyword argument). */
const KEY_VALUE = new RegExp(
  String.raw`(?<![\w$.])([A-Za-z_$][\w$-]*(?:\.[A-Za-z_$][\w$-]*)*)["']?\s*[:=]\s*["']?${NUM}(?![\w.])`,
  "g",
);
/** `name(90` as a first argument: `@pytest.mark.timeout(5)`, `this.timeout(2000)`, `jest.setTimeout(5000)`. */
const CALL = new RegExp(String.raw`(?<![\w$.])([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*\(\s*${NUM}\s*[,)]`, "g");
/** `--key 90` on a command line. */
const FLAG = new RegExp(String.raw`(?<![\w-])--?([A-Za-z][\w-]*)\s+["']?${NUM}(?![\w.])`, "g");
/** Keys whose increase makes a check easier to pass (a larger limit, more retries, a wider tolerance). */
const CEILING = new Set([
  "timeout",
  "timeouts",
  "deadline",
  "retry",
  "retries",
  "reruns",
  "tolerance",
  "tol",
  "rtol",
  "atol",
  "rel",
  "abs",
  "delta",
]);
/** Keys whose decrease makes a check easier to pass; in test files only the last three (the rest are test data there). */
const FLOOR = new Set([
  "threshold",
  "thresholds",
  "min",
  "minimum",
  "coverage",
  "branches",
  "functions",
  "lines",
  "statements",
  "under",
  "examples",
  "runs",
  "places",
]);
const FLOOR_IN_TESTS = new Set(["examples", "runs", "places"]);
const UNIT: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, "%": 1 };

/** A numeric setting found on a line: its key as written and normalised (lower case, `-` as `_`), value, and value as written. */
type Setting = { name: string; key: string; value: number; text: string };

/** The numeric settings on a line. */
function settings(line: string): Setting[] {
  const out: Setting[] = [];
  for (const re of [KEY_VALUE, CALL, FLAG]) {
    for (const m of line.matchAll(re)) {
      const [, key = "", num = "", unit = ""] = m;
      out.push({
        name: key,
        key: key.toLowerCase().replaceAll("-", "_"),
        value: Number(num.replaceAll("_", "")) * (UNIT[unit] ?? 1),
        text: num + unit,
      });
    }
  }
  return out;
}

/** Whether going up (`ceiling`) or down (`floor`) makes a key more lenient, or neither. */
function direction(name: string, inTest: boolean): "ceiling" | "floor" | undefined {
  const last = name.slice(name.lastIndexOf(".") + 1);
  const tokens = last
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[_-]+/);
  if (tokens.includes("version")) return undefined;
  if (tokens.some((t) => CEILING.has(t))) return "ceiling";
  return tokens.some((t) => (inTest ? FLOOR_IN_TESTS : FLOOR).has(t)) ? "floor" : undefined;
}

/**
 * Lowered thresholds and raised limits, in test-runner configuration ({@link TEST_CONFIG}
 * names) and test files. Numeric settings (`key = n`, `key: n`, `"key": n`, `--key=n`,
 * `--key n`, `name(n`) are read from the removed and added lines of each file (comments
 * ignored); values equal on both sides cancel (moved lines), then the remaining removed and
 * added values of the same key pair up in order. The rule, both halves making a check easier
 * to pass: a **floor** key (a token `threshold(s)`, `min`, `minimum`, `coverage`, `branches`,
 * `functions`, `lines`, `statements`, `under` as in `fail_under`, `examples` as in
 * `max_examples`, `runs` as in `numRuns`, `places`) that went DOWN; a **ceiling** key
 * (`timeout`, `deadline`, `retry`/`retries`/`reruns`, `tolerance`/`tol`/`rtol`/`atol`/`rel`/
 * `abs`/`delta`) that went UP, or to 0 or below from a positive value (0 disables most
 * timeouts). A removed floor or ceiling setting with no replacement (deleted, or no longer a
 * number, as `deadline=None`) counts too. In test files only ceiling keys and `examples`,
 * `runs`, `places` are read (`lines: 3` there is test data). Keys with a `version` token are
 * ignored. Units `ms`, `s`, `m`, `%` are understood. Not caught: a setting only added.
 */
export function loweredThresholds(change: ChangeUnderReview): Violation | undefined {
  const found: { path: string; what: string }[] = [];
  for (const f of filePatches(change.patch)) {
    const path = f.oldPath ?? f.newPath ?? "";
    const inTest = isTest(path) && !TEST_CONFIG.test(path);
    if (!TEST_CONFIG.test(path) && !inTest) continue;
    const read = (lines: string[]) => lines.flatMap((l) => settings(code(l, path)));
    const added = read(f.added);
    const removed = read(f.removed).filter((r) => {
      const i = added.findIndex((a) => a.key === r.key && a.value === r.value);
      if (i >= 0) added.splice(i, 1);
      return i < 0;
    });
    for (const r of removed) {
      const dir = direction(r.name, inTest);
      if (!dir) continue;
      const i = added.findIndex((a) => a.key === r.key);
      const a = i >= 0 ? added.splice(i, 1)[0] : undefined;
      if (!a) found.push({ path, what: `${r.name} ${r.text} removed` });
      else if (dir === "floor" ? a.value < r.value : a.value > r.value || (a.value <= 0 && r.value > 0))
        found.push({ path, what: `${r.name} ${r.text} → ${a.text}` });
    }
  }
  if (found.length === 0) return undefined;
  const listed = found
    .slice(0, LISTED)
    .map((x) => `${x.path}: ${x.what}`)
    .join("; ");
  return {
    reason: "thresholds_lowered",
    message: `the change makes test thresholds or limits more lenient: ${listed}${more(found.length)}`,
    paths: [...new Set(found.map((x) => x.path))],
  };
}

/** A changed or deleted dependency manifest ({@link isDependencyManifest}) → `new_dependency`, unless `policy` is `allow`. */
export function dependencyChange(change: ChangeUnderReview, policy: "reject" | "ask" | "allow"): Violation | undefined {
  if (policy === "allow") return undefined;
  const manifests = allPaths(change).filter(isDependencyManifest);
  if (manifests.length === 0) return undefined;
  return {
    reason: "new_dependency",
    message: `the change edits dependency manifests (${manifests.slice(0, LISTED).join(", ")}) and the run's dependency policy is "${policy}"`,
    paths: manifests,
  };
}

/**
 * The check's test counts, candidate against parent: more skipped tests → `tests_skipped`;
 * fewer tests run (total − skipped) → `fewer_tests`.
 */
export function testCountViolation(parent: CheckCounts, candidate: CheckCounts): Violation | undefined {
  if (candidate.skipped > parent.skipped)
    return {
      reason: "tests_skipped",
      message: `the check skipped ${candidate.skipped} test(s) on the candidate against ${parent.skipped} on the parent`,
      paths: [],
    };
  const ran = (c: CheckCounts) => Math.max(0, c.total - c.skipped);
  if (ran(candidate) < ran(parent))
    return {
      reason: "fewer_tests",
      message: `the check ran ${ran(candidate)} test(s) on the candidate against ${ran(parent)} on the parent`,
      paths: [],
    };
  return undefined;
}

/**
 * All change guards; the first violation in this order (the most specific evidence of gaming
 * first): {@link touchesProtected} (`globs`, then the judging code `code`), {@link deletedTests}, {@link addedSkips} (skip markers,
 * then removed test cases), {@link loweredThresholds}, {@link dependencyChange}.
 * @throws when the patch cannot be parsed
 */
export function validateChange(
  change: ChangeUnderReview,
  opts: { globs: readonly string[]; code?: ReadonlyMap<string, string>; dependencies: "reject" | "ask" | "allow" },
): Violation | undefined {
  return (
    touchesProtected(change, opts.globs, opts.code) ??
    deletedTests(change) ??
    addedSkips(change) ??
    loweredThresholds(change) ??
    dependencyChange(change, opts.dependencies)
  );
}
