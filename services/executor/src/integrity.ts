/**
 * Verdicts the code under test cannot forge (docs/SANDBOX.md, "Verdicts").
 *
 * The code under test runs inside the test runner's process and can do anything there: write
 * the JUnit file, exit 0 early, patch the runner. So a run whose runner loopsmith knows
 * (pytest, node's test runner) is judged from what the runner's **controller** reports, never
 * from files or exit codes a test process can produce:
 * - The controller is the runner's process that never imports a test module: pytest under
 *   loopsmith's plugin `loopsmith_verdict` (it forks the worker that collects and runs the tests), or
 *   `node --test` (each test file runs in a child) with loopsmith's reporter. Both ship in
 *   the sandbox image (deploy/rootfs).
 * - It reports on the **verdict channel**, a pipe (or socket) the supervisor opens for the
 *   command; each record is signed with HMAC-SHA256 under a per-run key that no test process
 *   sees. A line that fails the check is a write by something else: `tampering`.
 * - **Tripwires**: tests with random names, written into the sandbox by the executor after the
 *   candidate was fixed, some that must pass and some that must fail. They run after every
 *   other test. A blanket rewrite of outcomes, or a session that stopped early, shows on them.
 *
 * {@link judgeIntegrity} turns a run's channel bytes into the run's test cases and, when they
 * do not add up, a `tampering` verdict with a message saying what was seen.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { TestCase } from "@loopsmith/shared/contracts";
import type { ExtraEntry } from "./archive.js";

/** Directory of the tripwire test files inside the container (outside the workspace). */
export const TRIPWIRE_DIR = "/tmp/.loopsmith/loopsmith-tripwires";
/** pytest node ids of tripwires start with this (the plugin's `TRIPWIRE_DIR`). */
const PYTEST_TRIPWIRE_PREFIX = "loopsmith-tripwires/";
/** Longest message kept per test case, in characters. */
const MESSAGE_LIMIT = 8_000;

/** One run's integrity material: the key and the tripwires, made after the candidate was fixed. */
export interface IntegrityPlan {
  /** HMAC key, 64 hex digits (32 random bytes). */
  key: string;
  /**
   * The tripwire files: absolute paths in the container and their text. pytest: one test
   * module. node: one wrapper module per test file (aligned with `testFiles`), which the
   * runner is given instead of the test file.
   */
  files: { path: string; content: string }[];
  /** Names of the tripwire tests that must pass. */
  mustPass: string[];
  /** Names of the tripwire tests that must fail. */
  mustFail: string[];
  /** The runner whose records are expected. */
  runner: "pytest" | "node";
  /**
   * node: the test files (workspace-relative), each run through its wrapper in `files`: each
   * file's child must report the tripwires (their names end in ` @<the file>`). Empty for pytest.
   */
  testFiles: string[];
  /**
   * node: the seal's token. Each wrapper's root `after` hook runs after the file's tests,
   * checks that `node:assert` still throws, and always fails with `<seal> ok @<file>` (or
   * `<seal> patched: …`), so each file must report that failure.
   */
  seal?: string;
}

/** A random identifier for a tripwire: `lsw_` and 12 hex digits. */
function tripwireName(): string {
  return `lsw_${randomBytes(6).toString("hex")}`;
}

/**
 * Makes a run's key and tripwires, with random names and random constants, under
 * {@link TRIPWIRE_DIR}. Each kind of assertion a candidate could patch wholesale has a
 * must-fail check: a plain `assert` and `unittest.TestCase.assertEqual` (pytest);
 * `node:assert`'s `strictEqual`, `deepStrictEqual`, `equal` and `ok` (node).
 * - pytest: a test module the plugin appends after every collected test (same worker process).
 * - node: a wrapper module per test file, given to the runner instead of the file: it imports
 *   the test file (so the file's tests register first), then registers a must-pass tripwire
 *   and the seal, a root `after` hook that runs after the file's tests, in the same child
 *   process, and always fails with its finding. An early exit, a patched `node:assert` or
 *   failures rewritten as passes in that process show on them.
 * @param runner - pytest (a Python module) or node (ES modules)
 * @param testFiles - node: the test files the runner would be given (workspace-relative)
 */
export function planIntegrity(runner: "pytest" | "node", testFiles: readonly string[] = []): IntegrityPlan {
  const key = randomBytes(32).toString("hex");
  const [p1, p2, f1, f2] = [tripwireName(), tripwireName(), tripwireName(), tripwireName()];
  const n = () => randomBytes(3).readUIntBE(0, 3);
  const stem = `tw_${randomBytes(6).toString("hex")}`;
  const [a, b, c, d] = [n(), n(), n(), n()];
  if (runner === "pytest") {
    const cls = `TestLsw${randomBytes(4).toString("hex")}`;
    const content = [
      '"""loopsmith tripwires: written by the executor for this run; see docs/SANDBOX.md."""',
      "import unittest",
      "",
      `def test_${p1}():`,
      `    assert ${a} + 1 == ${a + 1}`,
      "",
      `def test_${f1}():`,
      `    assert ${b} == ${b + 1}, "loopsmith tripwire: this test must fail"`,
      "",
      `class ${cls}(unittest.TestCase):`,
      `    def test_${p2}(self):`,
      `        self.assertEqual(${c} + 1, ${c + 1})`,
      "",
      `    def test_${f2}(self):`,
      `        self.assertEqual(${d}, ${d + 1}, "loopsmith tripwire: this test must fail")`,
      "",
    ].join("\n");
    return {
      key,
      runner,
      testFiles: [],
      mustPass: [`test_${p1}`, `test_${p2}`],
      mustFail: [`test_${f1}`, `test_${f2}`],
      files: [{ path: `${TRIPWIRE_DIR}/test_${stem}.py`, content }],
    };
  }
  const seal = tripwireName();
  const files = testFiles.map((file, i) => {
    const at = JSON.stringify(` @${file}`);
    const content = [
      `// loopsmith: runs /workspace/${file} and then this run's tripwires in the same process; see docs/SANDBOX.md.`,
      'import test, { after } from "node:test";',
      'import assert from "node:assert";',
      `await import(${JSON.stringify(`/workspace/${file}`)});`,
      `test(${JSON.stringify(p1)} + ${at}, () => { if (${a} + 1 !== ${a + 1}) throw new Error("unreachable"); });`,
      // The seal: a root hook that runs after the file's tests, checks that assertions still
      // throw, and always fails with its finding, so failures rewritten as passes show too.
      "after(() => {",
      "  const bad = [];",
      `  try { assert.strictEqual(${b}, ${b + 1}); bad.push("strictEqual"); } catch {}`,
      `  try { assert.deepStrictEqual([${c}], [${c + 1}]); bad.push("deepStrictEqual"); } catch {}`,
      `  try { assert.equal(${d}, ${d + 1}); bad.push("equal"); } catch {}`,
      '  try { assert.ok(false); bad.push("ok"); } catch {}',
      `  throw new Error(${JSON.stringify(`${seal} `)} + (bad.length ? "patched: node:assert's " + bad.join(", ") + " did not throw" : "ok") + ${at});`,
      "});",
      "",
    ].join("\n");
    return { path: `${TRIPWIRE_DIR}/${stem}/${i}-${file.replace(/[^A-Za-z0-9._-]/g, "_")}.mjs`, content };
  });
  return { key, runner, testFiles: [...testFiles], mustPass: [p1], mustFail: [], seal, files };
}

/** The tripwire files as archive members (extracted at `/`, owned by the sandbox user). */
export function tripwireEntries(plan: IntegrityPlan): ExtraEntry[] {
  return plan.files.map((f) => ({ path: f.path, content: Buffer.from(f.content, "utf8"), mode: 0o644 }));
}

/** What the command's environment gets for the controller: the tripwire file (the key goes through the supervisor). */
export function integrityEnv(plan: IntegrityPlan): Record<string, string> {
  return plan.runner === "pytest" ? { LOOPSMITH_TRIPWIRES: plan.files[0]!.path } : {};
}

/** One test as the controller reported it. */
interface ReportedTest {
  id: string;
  outcome: "passed" | "failed" | "error" | "skipped";
  message?: string;
  ms?: number;
  /** node: the test file and the test's own name. */
  file?: string;
  name?: string;
  /** node: the file's child reported no test of its own. */
  fileOnly?: boolean;
  /** node: the failure of a wrapper's seal hook (its message holds the finding). */
  seal?: boolean;
}

/** One test session (one `pytest` or `node --test` process) read from the channel. */
export interface Session {
  /** False when `start` came and `end` did not. */
  ended: boolean;
  exitstatus?: number;
  tests: ReportedTest[];
  /** Ids the worker collected (pytest), or null when not reported. */
  collected: string[] | null;
  collectErrors: { id: string; message: string }[];
  crashed: string[];
  /**
   * pytest: tests whose code changed between their collection and their call, or whose
   * function runs code from another file than its module's (the worker's code identity check).
   */
  tampered: { id: string; message: string }[];
}

/** The channel read: the sessions, and the lines that failed the signature check. */
export interface ChannelRead {
  sessions: Session[];
  /** Lines whose signature did not match, or that were not records (count). */
  foreign: number;
}

/**
 * Reads the verdict channel's bytes: one record a line, `<hmac hex> <json>`. Records are
 * checked with `key`; a line that fails (or is not a record) counts as foreign. A `start`
 * opens a session, an `end` closes the oldest open one.
 */
export function readChannel(bytes: Buffer, key: string): ChannelRead {
  const sessions: Session[] = [];
  let foreign = 0;
  const k = Buffer.from(key, "utf8");
  for (const line of bytes.toString("utf8").split("\n")) {
    if (!line) continue;
    const space = line.indexOf(" ");
    const mac = Buffer.from(line.slice(0, space), "utf8");
    const payload = line.slice(space + 1);
    const want = Buffer.from(createHmac("sha256", k).update(payload).digest("hex"), "utf8");
    if (space !== 64 || mac.length !== want.length || !timingSafeEqual(mac, want)) {
      foreign += 1;
      continue;
    }
    let rec: Record<string, unknown>;
    try {
      rec = JSON.parse(payload) as Record<string, unknown>;
    } catch {
      foreign += 1;
      continue;
    }
    if (rec.t === "start") {
      sessions.push({ ended: false, tests: [], collected: null, collectErrors: [], crashed: [], tampered: [] });
    } else if (rec.t === "end") {
      const open = sessions.find((s) => !s.ended);
      if (!open) {
        foreign += 1;
        continue;
      }
      open.ended = true;
      open.exitstatus = typeof rec.exitstatus === "number" ? rec.exitstatus : undefined;
      open.tests = Array.isArray(rec.tests) ? (rec.tests as ReportedTest[]) : [];
      open.collected = Array.isArray(rec.collected) ? (rec.collected as string[]) : null;
      open.collectErrors = Array.isArray(rec.collectErrors) ? (rec.collectErrors as Session["collectErrors"]) : [];
      open.crashed = Array.isArray(rec.crashed) ? (rec.crashed as string[]) : [];
      open.tampered = Array.isArray(rec.tampered)
        ? (rec.tampered as unknown[]).map((t) => ({
            id: String((t as { id?: unknown })?.id ?? ""),
            message: String((t as { message?: unknown })?.message ?? ""),
          }))
        : [];
    } else {
      foreign += 1;
    }
  }
  return { sessions, foreign };
}

/** What a run's controller said, judged. */
export interface IntegrityJudgement {
  /** The run's test cases, tripwires left out. */
  tests: TestCase[];
  /** Set when the verdict cannot be trusted: what was seen. */
  tampering?: string;
  /** Set when the sessions ran but could not collect or had errors outside any test. */
  error?: string;
}

function isTripwire(t: ReportedTest, plan: IntegrityPlan): boolean {
  if (plan.runner === "pytest") return t.id.startsWith(PYTEST_TRIPWIRE_PREFIX);
  return t.seal === true || (NODE_TRIPWIRE.test(t.name ?? "") && plan.mustPass.includes(nameOf(t)));
}

/**
 * Checks the tripwires of one process's tests (pytest: the session's worker; node: one test
 * file's child): each must be there with its outcome.
 * @returns what was wrong, or undefined
 */
function checkTripwires(
  wires: readonly ReportedTest[],
  plan: IntegrityPlan,
  failing: boolean,
  where: string,
): string | undefined {
  const byName = new Map(wires.map((t) => [nameOf(t), t]));
  const wrong: string[] = [];
  const missing: string[] = [];
  for (const [names, want] of [
    [plan.mustPass, "passed"],
    [plan.mustFail, "failed"],
  ] as const) {
    for (const name of names) {
      const got = byName.get(name);
      if (!got) missing.push(name);
      else if (got.outcome !== want) wrong.push(`${name} must have ${want} and ${got.outcome}`);
    }
  }
  if (wrong.length)
    return `tripwire tests${where} had the wrong outcome (${wrong.join("; ")}): test outcomes or assertions were rewritten`;
  if (missing.length && !failing)
    return `${missing.length} of ${plan.mustPass.length + plan.mustFail.length} tripwire tests${where} were not reported: the tests did not run to their end, or their results were replaced`;
  return undefined;
}

/** A node tripwire's name: its own and ` @` and the test file whose child ran it. */
const NODE_TRIPWIRE = /^(lsw_[0-9a-f]{12}) @(.*)$/s;

/** A workspace path without the `/workspace/` prefix. */
const relative = (p: string) => p.replace(/^\/workspace\//, "");

/** The tripwire's test name (pytest: the function; node: the test's name before ` @`). */
function nameOf(t: ReportedTest): string {
  const own = t.name ?? t.id.slice(t.id.lastIndexOf("::") + 2);
  return NODE_TRIPWIRE.exec(own)?.[1] ?? own;
}

/** A reported test as a {@link TestCase} (pytest: `file::Class::name` split into classname and name). */
function toCase(t: ReportedTest, runner: "pytest" | "node"): TestCase {
  let name: string;
  let classname: string;
  if (runner === "node") {
    name = t.name ?? t.id;
    classname = (t.file ?? "").replace(/^\/workspace\//, "");
  } else {
    const at = t.id.lastIndexOf("::");
    name = at >= 0 ? t.id.slice(at + 2) : t.id;
    classname =
      at >= 0
        ? t.id
            .slice(0, at)
            .replace(/\.py(?=::|$)/, "")
            .replace(/::/g, ".")
            .replace(/\//g, ".")
        : "";
  }
  const status: TestCase["status"] = ["passed", "failed", "error", "skipped"].includes(t.outcome) ? t.outcome : "error";
  const c: TestCase = { name, classname, status, durationMs: Math.round((Number(t.ms) || 0) * 1000) / 1000 };
  if (t.message) c.message = String(t.message).slice(0, MESSAGE_LIMIT);
  return c;
}

/**
 * Checks node's seal for one test file: the failure `<seal> ok @<file>` must be there.
 * @returns what was wrong, or undefined
 */
function checkSeal(
  seals: readonly ReportedTest[],
  plan: IntegrityPlan,
  file: string,
  failing: boolean,
): string | undefined {
  const patched = seals.find((t) => (t.message ?? "").includes(`${plan.seal} patched`));
  if (patched)
    return `in ${file}, ${/patched: ([^@\n]*)/.exec(patched.message ?? "")?.[1]?.trim() ?? "assertions were patched"}: assertions were rewritten`;
  if (seals.some((t) => (t.message ?? "").includes(`${plan.seal} ok`) && t.outcome === "failed")) return undefined;
  if (seals.length)
    return `the end-of-file check in ${file} had the wrong outcome (it must fail): test outcomes were rewritten`;
  return failing
    ? undefined
    : `the end-of-file check in ${file} was not reported: the tests did not run to their end, or their results were replaced`;
}

/** What a session's `tampered` list says (pytest: tests whose code was swapped), or undefined when it is empty. */
function swappedTests(s: Session): string | undefined {
  if (!s.tampered.length) return undefined;
  const named = s.tampered.slice(0, 3).map((t) => t.message || t.id);
  return `the code of ${s.tampered.length === 1 ? "a test" : `${s.tampered.length} tests`} was swapped while the tests ran (${named.join("; ")}${s.tampered.length > 3 ? "; …" : ""}): code under test replaced what a test runs`;
}

/** What one session of the verdict channel adds to the judgement. */
interface SessionJudgement {
  /** Its real tests (tripwires left out), as reported. */
  tests: TestCase[];
  /** True when a real test failed or errored, collection failed, or a worker crashed. */
  failing: boolean;
  /** Errors of the run (not tampering): collection errors, crashes, a silent test file. */
  errors: string[];
  /** Signs of tampering. */
  problems: string[];
}

/** The errors a session's collection errors and crashed workers make. */
function sessionErrors(s: Session): string[] {
  const errors: string[] = [];
  if (s.collectErrors.length)
    errors.push(
      ...s.collectErrors.map(
        (e) => `${e.id ? `${e.id}: ` : ""}${e.message.split("\n").slice(-3).join(" ").slice(0, 500)}`,
      ),
    );
  if (s.crashed.length)
    errors.push(
      `a test worker ended before its session did (${[...new Set(s.crashed)].map((c) => c.slice(0, 200)).join("; ")}): the code under test exited early, or crashed`,
    );
  return errors;
}

/**
 * A finished node session's checks: each test file's child runs its wrapper's tripwires and
 * seal, checked per file; a file whose child reported no test is an error of its own.
 */
function nodeFileChecks(
  real: ReportedTest[],
  wires: ReportedTest[],
  plan: IntegrityPlan,
  failing: boolean,
  testFileOf: ReadonlyMap<string, string>,
): { errors: string[]; problems: string[] } {
  const ranIn = (t: ReportedTest) =>
    relative((t.seal ? / @(\S+)\s*$/m.exec(t.message ?? "")?.[1] : NODE_TRIPWIRE.exec(t.name ?? "")?.[2]) ?? "");
  // A file whose child reported no test is an error of its own, not a tripwire's.
  const silent = new Map(
    real
      .filter((t) => t.fileOnly)
      .map((t) => [testFileOf.get(t.file ?? "") ?? relative(t.file ?? ""), t.message ?? "reported no test"]),
  );
  const errors = [...silent].map(([file, message]) => `${file}: ${message}`);
  const problems: string[] = [];
  for (const file of plan.testFiles) {
    if (silent.has(file)) continue;
    const mine = wires.filter((t) => ranIn(t) === file);
    const problem =
      checkTripwires(
        mine.filter((t) => !t.seal),
        plan,
        failing,
        ` in ${file}`,
      ) ??
      checkSeal(
        mine.filter((t) => t.seal),
        plan,
        file,
        failing,
      );
    if (problem) problems.push(problem);
  }
  return { errors, problems };
}

/** A finished pytest session's results against what its workers collected: invented, or missing. */
function collectionProblems(s: Session, failing: boolean): string[] {
  if (!s.collected) return [];
  const problems: string[] = [];
  const collected = new Set(s.collected);
  const reported = new Set(s.tests.map((t) => t.id));
  const invented = [...reported].filter((id) => !collected.has(id) && !s.crashed.length);
  const unreported = s.collected.filter((id) => !reported.has(id));
  if (invented.length)
    problems.push(
      `results were reported for tests no worker collected (${invented.slice(0, 3).join(", ")}${invented.length > 3 ? ", …" : ""})`,
    );
  if (unreported.length && !failing)
    problems.push(
      `${unreported.length} collected test(s) reported no result (${unreported.slice(0, 3).join(", ")}${unreported.length > 3 ? ", …" : ""})`,
    );
  return problems;
}

/** Judges one session: its real tests, whether they fail, its errors and its signs of tampering. */
function judgeSession(s: Session, plan: IntegrityPlan, testFileOf: ReadonlyMap<string, string>): SessionJudgement {
  const wires = s.tests.filter((t) => isTripwire(t, plan));
  const real = s.tests.filter((t) => !isTripwire(t, plan));
  const tests: TestCase[] = [];
  for (const t of real) {
    const file = t.fileOnly ? testFileOf.get(t.file ?? "") : undefined;
    tests.push(toCase(file ? { ...t, name: file, file: `/workspace/${file}` } : t, plan.runner));
  }
  const failing =
    real.some((t) => t.outcome === "failed" || t.outcome === "error") ||
    s.collectErrors.length > 0 ||
    s.crashed.length > 0;
  const errors = sessionErrors(s);
  const problems: string[] = [];
  if (s.ended && plan.runner === "pytest") {
    // A session that ran no test at all (pytest stopped before: an internal error, an
    // interrupt) is an error whatever made it stop; it is never a pass.
    const ranNothing = real.length === 0 && wires.length === 0;
    const problem = checkTripwires(wires, plan, failing || ranNothing, "");
    if (problem) problems.push(problem);
    if (ranNothing && !failing && s.exitstatus !== undefined && s.exitstatus !== 0 && s.exitstatus !== 5)
      errors.push(`pytest ended with exit status ${s.exitstatus} before any test ran (see its output)`);
  }
  if (s.ended && plan.runner === "node") {
    const node = nodeFileChecks(real, wires, plan, failing, testFileOf);
    errors.push(...node.errors);
    problems.push(...node.problems);
  }
  const swapped = swappedTests(s);
  if (swapped) problems.push(swapped);
  if (plan.runner === "pytest" && s.ended) problems.push(...collectionProblems(s, failing));
  return { tests, failing, errors, problems };
}

/**
 * Judges the controller's report of a run against its tripwires. The run is `tampering` when:
 * - a line on the channel failed the signature check (something other than the controller wrote);
 * - `required` and no session reported, or a session started and did not end;
 * - a tripwire has the wrong outcome, or is missing while nothing else failed;
 * - pytest: a test was reported that no worker collected, or a collected one was not reported
 *   while nothing else failed;
 * - pytest: a test's code was swapped (the worker's code identity check named it in `tampered`).
 * Failures of the code under test are never `tampering`: a run with real failures stays failed.
 * @param required - the command is one of loopsmith's own test commands (a session must report);
 *   false for a repo's shell line, where a line that runs no known runner has no session
 * @returns undefined when no session reported and none was required (the caller falls back to
 *   the result file and the exit code, and says the verdict is unverified)
 */
export function judgeIntegrity(
  read: ChannelRead,
  plan: IntegrityPlan,
  required: boolean,
): IntegrityJudgement | undefined {
  if (read.sessions.length === 0 && read.foreign === 0 && !required) return undefined;
  const judgement: IntegrityJudgement = { tests: [] };
  const say = (why: string): IntegrityJudgement => ({ ...judgement, tampering: why });
  if (read.foreign > 0)
    return say(
      `${read.foreign} line(s) on the verdict channel were not signed by the test runner's controller: something else in the sandbox wrote to it`,
    );
  if (read.sessions.length === 0)
    return say(
      "the test runner's controller reported no session: it was stopped, or the runner was replaced, before it could start",
    );
  const unfinished = read.sessions.filter((s) => !s.ended).length;
  const tests: TestCase[] = [];
  const problems: string[] = [];
  let realFailures = false;
  const errors: string[] = [];
  // node: a wrapper's path → the test file it runs.
  const testFileOf = new Map(plan.files.map((f, i) => [f.path, plan.testFiles[i]!]));
  for (const s of read.sessions) {
    const one = judgeSession(s, plan, testFileOf);
    tests.push(...one.tests);
    realFailures ||= one.failing;
    errors.push(...one.errors);
    problems.push(...one.problems);
  }
  judgement.tests = tests;
  if (unfinished > 0) {
    if (!realFailures)
      return say(
        `the test runner's controller started ${unfinished === 1 ? "a session" : `${unfinished} sessions`} and did not report ${unfinished === 1 ? "its" : "their"} end: the process was ended from inside (an early exit) before the tests finished`,
      );
  }
  if (problems.length) return say(problems.join("; "));
  if (errors.length) judgement.error = errors.slice(0, 5).join("; ");
  return judgement;
}
