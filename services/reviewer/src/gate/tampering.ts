/**
 * Evaluation tampering (docs/GATE.md "Evaluation tampering"): the static tripwires on a candidate's change.
 * Code under test can forge its verdict from inside the test process: write the JUnit result
 * file, end the process at import with status 0, print fake benchmark lines, patch the test
 * framework, or behave differently when it sees the runner. The executor defends at run time
 * (docs/SANDBOX.md); these rules flag the attempt in the code, outside the test files.
 *
 * This module holds what the Python (`pytamper.ts`) and JavaScript (`jstamper.ts`) passes
 * share: which files are tests, the names and strings each rule looks for, the evaluation's
 * own names, and the path rule (`tampering.shadow`). See docs/GATE.md, "Evaluation tampering".
 */
import { isTestFile } from "@loopsmith/shared/workspace";
import { type Finding } from "@loopsmith/shared/contracts";
import type { RuleId } from "./rules.js";
import type { SourceFile } from "./source.js";

/** The tampering rules. */
export type TamperRule = Extract<RuleId, `tampering.${string}`>;

/** What a pass knows about the file besides its text. */
export interface TamperContext {
  /** The benchmark's and the check's own names (files, a JUnit path), from the request. */
  evaluation: EvaluationNames;
  /**
   * A test-support file (under `tests/`, `test/`, `testing/` or `__tests__/`, not itself a
   * test file): helpers and plugins legitimately use the framework there, so the framework
   * and runner rules only send it to review. Exits and result files still block.
   */
  testSupport: boolean;
  /** The file starts with `#!`: a script, whose module level is its main. Import-time findings go to review. */
  script: boolean;
  /** The file is a `__main__.py`: `python -m package` runs it as the main program, so its module level is not flagged. */
  main: boolean;
}

/** Directory names whose files support the tests. */
const TEST_DIRS = new Set(["test", "tests", "testing", "__tests__"]);

/**
 * True for a test file: what pytest or node's runner collects by name ({@link isTestFile}
 * for any of the three languages), jest/vitest names (`*.test.*`, `*.spec.*`, `__tests__/`),
 * and `conftest.py` (pytest's per-directory plugin, the designated place for hooks). The
 * tampering rules (but `tampering.shadow`) do not look at test files.
 */
export function isTestCode(path: string): boolean {
  if ((["python", "javascript", "typescript"] as const).some((l) => isTestFile(path, l))) return true;
  if (/(^|\/)conftest\.py$/.test(path)) return true;
  return (
    !path.split("/").includes("node_modules") &&
    (/\.(test|spec)\.[cm]?[jt]sx?$/.test(path) || /(^|\/)__tests__\//.test(path))
  );
}

/** True for a file under a test directory (see {@link TamperContext.testSupport}). */
export function isTestSupport(path: string): boolean {
  return path
    .split("/")
    .slice(0, -1)
    .some((d) => TEST_DIRS.has(d));
}

/** Severity of a finding: the rule's (a blocker), or `warning` when `sure` is false. */
export function severityOf(sure: boolean): Finding["severity"] {
  return sure ? "blocker" : "warning";
}

/** Reports a tampering finding: a blocker when `sure`, else a warning that sends the candidate to review. */
export function reportTamper(src: SourceFile, rule: TamperRule, pos: number, message: string, sure: boolean): void {
  src.report(rule, pos, message, severityOf(sure));
}

/** Strings of the loopsmith verdict's machinery: where the result is written and how pytest is told to. */
const RESULT_NAMES: readonly [RegExp, string][] = [
  [/(?<![A-Za-z0-9_])LOOPSMITH_(JUNIT|VERDICT\w*|TRIPWIRE\w*)(?![A-Za-z0-9_])/, "loopsmith's verdict variable"],
  [/(?<![A-Za-z0-9_])PYTEST_ADDOPTS(?![A-Za-z0-9_])/, "the variable that carries pytest's JUnit option"],
  [/\/tmp\/\.loopsmith/, "the sandbox's result directory"],
  [/--junit[-_]?xml\b/, "pytest's JUnit report option"],
  [/--test-reporter(-destination)?\b/, "node's test reporter option"],
];

/** A JUnit or result XML file name: maybe the result, maybe the program's own data (review). */
const RESULT_FILE = /(^|[\\/\s"'=:])(junit[\w.-]*|TEST-[\w.-]+|results?)\.xml\b/i;

/** A benchmark case line of the `json` form (`{"case": …, "pass": …}`), written out as text. */
const BENCH_LINE = /"case"\s*:[\s\S]*"(pass|score)"\s*:/;

/** Environment variables that say a test runner is running. */
const RUNNER_ENV: readonly [RegExp, boolean][] = [
  [/(?<![A-Za-z0-9_])(PYTEST_CURRENT_TEST|PYTEST_XDIST_\w+|PYTEST_VERSION|NODE_TEST_CONTEXT)(?![A-Za-z0-9_])/, true],
  [/(?<![A-Za-z0-9_])(JEST_WORKER_ID|VITEST(_\w+)?)(?![A-Za-z0-9_])/, false],
];

/** One thing a string says, for a tampering rule. */
export interface StringHit {
  rule: TamperRule;
  /** True for the clear case (blocks); false for review. */
  sure: boolean;
  message: string;
}

/**
 * What a string literal's content names, per rule: the verdict's variables, paths and
 * options (`tampering.result_file`, blocks), a result XML file name or a benchmark case line
 * (`tampering.result_file`, review), the runner's environment (`tampering.branch_on_runner`),
 * `loopsmith_verdict` (`tampering.framework`). Evaluation names are matched by the caller,
 * which knows whether the string is in a condition.
 */
export function scanTamperString(value: string): StringHit[] {
  const hits: StringHit[] = [];
  for (const [re, what] of RESULT_NAMES) {
    const m = re.exec(value);
    if (m)
      hits.push({
        rule: "tampering.result_file",
        sure: true,
        message: `\`${m[0]}\` names ${what}: code under test has no business with where or how the verdict is written`,
      });
  }
  const file = RESULT_FILE.exec(value);
  if (file)
    hits.push({
      rule: "tampering.result_file",
      sure: false,
      message: `\`${file[2]}.xml\` looks like a test result file; code under test must not write the verdict`,
    });
  if (BENCH_LINE.test(value))
    hits.push({
      rule: "tampering.result_file",
      sure: false,
      message: 'the text of a benchmark case line (`{"case": …, "pass": …}`): only the benchmark may print its cases',
    });
  for (const [re, sure] of RUNNER_ENV) {
    const m = re.exec(value);
    if (m)
      hits.push({
        rule: "tampering.branch_on_runner",
        sure,
        message: `\`${m[0]}\` is set by the test runner: code that reads it behaves differently under test`,
      });
  }
  if (/(?<![A-Za-z0-9_])loopsmith_verdict(?![A-Za-z0-9_])/.test(value)) {
    hits.push({
      rule: "tampering.framework",
      sure: true,
      message: "`loopsmith_verdict` is loopsmith's verdict module: code under test must not reach it",
    });
  }
  return hits;
}

/** A benchmark case record built as an object or dict (`{"case": c, "pass": ok}`): review. */
export function benchRecordMessage(keys: readonly string[]): string | undefined {
  if (!keys.includes("case") || !(keys.includes("pass") || keys.includes("score"))) return undefined;
  return "builds a benchmark case record (`case` with `pass`/`score`): only the benchmark may report its cases";
}

/** Names too common to say anything about the evaluation when they appear without a directory. */
const GENERIC_NAMES = new Set([
  "__init__.py",
  "__main__.py",
  "main.py",
  "setup.py",
  "index.js",
  "index.ts",
  "main.js",
  "main.ts",
  "package.json",
  "pyproject.toml",
  "conftest.py",
]);

/**
 * The evaluation's own names (the benchmark script, the check's test files, a JUnit path):
 * a string naming one in non-test code is special-casing the evaluation. Only path-like
 * names count (with a `/` or an extension, 4 characters or more, not an option), plus each
 * path's file name when that is not a common one (`run.py` of `bench/run.py`, not
 * `__init__.py`).
 */
export class EvaluationNames {
  private readonly names: string[];

  /** @param words - words of the evaluation's command lines and its file paths, in any form */
  constructor(words: readonly string[] = []) {
    const out = new Set<string>();
    for (const w of words) {
      const name = w
        .trim()
        .replace(/^(\.\/)+/, "")
        .replace(/\/+$/, "");
      if (name.length < 4 || name.startsWith("-") || !/[/.]/.test(name) || /\s/.test(name)) continue;
      if (!name.includes("/") && GENERIC_NAMES.has(name)) continue;
      if (!/[A-Za-z]/.test(name)) continue;
      out.add(name);
      const base = name.slice(name.lastIndexOf("/") + 1);
      if (base !== name && base.length >= 5 && /\.\w+$/.test(base) && !GENERIC_NAMES.has(base)) out.add(base);
    }
    this.names = [...out].sort((a, b) => b.length - a.length);
  }

  /** The evaluation name `value` mentions (as a whole path segment sequence), if any. */
  find(value: string): string | undefined {
    for (const name of this.names) {
      let at = value.indexOf(name);
      while (at >= 0) {
        const before = value.charAt(at - 1);
        const after = value.charAt(at + name.length);
        if (
          !/[\w.-]/.test(before) &&
          !/[\w-]/.test(after) &&
          !(after === "." && /\w/.test(value.charAt(at + name.length + 1)))
        )
          return name;
        at = value.indexOf(name, at + 1);
      }
    }
    return undefined;
  }
}

/** Modules and packages that Python would import instead of the test framework or at start-up. */
const SHADOW_MODULES = new Set([
  "pytest",
  "_pytest",
  "unittest",
  "doctest",
  "xdist",
  "execnet",
  "pluggy",
  "loopsmith_verdict",
]);

/**
 * `tampering.shadow`: a Python file named like the test framework, one of its plugins,
 * loopsmith's verdict module, or a file `site` runs at start-up. A module or package shadows
 * the real one where its directory is on `sys.path`: the root, `src/`, `lib/`, or a test
 * directory (pytest's rootdir insertion) block; deeper in a package it goes to review.
 * `sitecustomize.py`, `usercustomize.py` and `*.pth` block wherever they are.
 * @returns the finding (line 1), or undefined when the path shadows nothing
 */
export function shadowFinding(path: string): Finding | undefined {
  const parts = path.split("/");
  const file = parts.at(-1) ?? "";
  const finding = (sure: boolean, message: string): Finding => ({
    severity: severityOf(sure),
    message,
    path,
    line: 1,
    rule: "tampering.shadow",
  });
  if (/^(sitecustomize|usercustomize)\.py$/.test(file) || file.endsWith(".pth")) {
    return finding(
      true,
      `\`${file}\` is run by Python's \`site\` module at start-up, before any test: a candidate may not supply it`,
    );
  }
  if (!file.endsWith(".py")) return undefined;
  let at = parts.slice(0, -1).findIndex((d) => SHADOW_MODULES.has(d));
  let what = parts[at] ?? "";
  if (at < 0 && SHADOW_MODULES.has(file.slice(0, -3))) {
    at = parts.length - 1;
    what = file.slice(0, -3);
  }
  if (at < 0) return undefined;
  const dir = parts.slice(0, at);
  const shadows =
    dir.length === 0 || (dir.length === 1 && (dir[0] === "src" || dir[0] === "lib")) || TEST_DIRS.has(dir.at(-1) ?? "");
  const where = dir.length ? `\`${dir.join("/")}/\`` : "the root";
  return finding(
    shadows,
    shadows
      ? `a module named \`${what}\` at ${where} is imported instead of the real \`${what}\` when the tests run`
      : `a module named \`${what}\` inside ${where}: it shadows the real \`${what}\` only if that directory is on the import path`,
  );
}
