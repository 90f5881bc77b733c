import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import pino from "pino";
import {
  AuditRecord,
  Task,
  emptyUsage,
  type AuditRequest,
  type AuditVerdict,
  type BuildRequest,
  type ExecutionRequest,
  type ExecutionResult,
  type TaskEvent,
} from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { blockerOf, mergeFindings, parseBandit, parseEslint, staticAuditCommand, staticFindingsOf } from "./audit.js";
import { runLoop } from "./loop.js";
import { initialState } from "./state.js";
import type { LoopIO, Steps } from "./steps.js";

/** Reports bandit 1.7.10 and loopsmith's ESLint printed in the sandbox images for tests/fixtures/audit/app.py.txt and app.js.txt (as app.py and app.js). */
const FIXTURES = join(import.meta.dirname, "..", "..", "..", "tests", "fixtures", "audit");
const fixture = (name: string) => readFileSync(join(FIXTURES, name), "utf8");

const result = (over: Partial<ExecutionResult>): ExecutionResult => ({
  status: "failed",
  exitCode: 1,
  durationMs: 5,
  stdout: "",
  stderr: "",
  truncated: false,
  tests: [],
  ...over,
});

describe("the static tools' reports", () => {
  it("bandit: each result with its test id, place and severity; a doubted HIGH drops to medium", () => {
    const findings = parseBandit(fixture("bandit.json"));
    expect(findings.map((f) => [f.rule, f.file, f.line, f.severity])).toEqual([
      ["B404:blacklist", "app.py", 1, "low"],
      ["B403:blacklist", "app.py", 3, "low"],
      ["B602:subprocess_popen_with_shell_equals_true", "app.py", 6, "high"],
      ["B324:hashlib", "app.py", 9, "high"],
      ["B301:blacklist", "app.py", 12, "medium"],
    ]);
    expect(findings.every((f) => f.source === "bandit")).toBe(true);
    const doubted = JSON.stringify({
      results: [
        {
          filename: "./a.py",
          issue_severity: "HIGH",
          issue_confidence: "LOW",
          line_number: 2,
          test_id: "B608",
          issue_text: "sql",
        },
      ],
    });
    expect(parseBandit(doubted)[0]).toMatchObject({ severity: "medium", file: "a.py", line: 2, rule: "B608" });
  });

  it("ESLint: only the security plugin's messages, eval high and the file-name heuristic medium", () => {
    const findings = parseEslint(fixture("eslint.json"));
    expect(findings).toEqual([
      {
        rule: "security/detect-non-literal-fs-filename",
        file: "app.js",
        line: 3,
        severity: "medium",
        source: "eslint",
        message: 'Found readFileSync from package "fs" with non literal argument at index 0',
      },
      {
        rule: "security/detect-eval-with-expression",
        file: "app.js",
        line: 6,
        severity: "high",
        source: "eslint",
        message: "eval with argument of type Identifier",
      },
    ]);
  });

  it("a run without a report is unavailable with the reason, never a finding", () => {
    expect(staticFindingsOf("bandit", result({ status: "command_not_found", exitCode: 127 }))).toEqual({
      run: { tool: "bandit", status: "unavailable", reason: "bandit is not in the sandbox image" },
      findings: [],
    });
    const crashed = staticFindingsOf(
      "bandit",
      result({ status: "error", stderr: "Traceback\nImportError: no bandit" }),
    );
    expect(crashed.findings).toEqual([]);
    expect(crashed.run).toMatchObject({ status: "unavailable" });
    expect(crashed.run.reason).toContain("ImportError: no bandit");
    expect(staticFindingsOf("eslint-plugin-security", result({ stdout: "{}" })).run.status).toBe("unavailable");
  });

  it("runs bandit or ESLint on the language's files only, each path kept from reading as an option", () => {
    const files = [
      { path: "-x.py", content: "" },
      { path: "notes.md", content: "" },
      { path: "web/app.ts", content: "" },
    ];
    const py = staticAuditCommand("python", files);
    expect(py).toMatchObject({ tool: "bandit", files: [{ path: "-x.py" }] });
    expect("command" in py && py.command.slice(-1)).toEqual(["./-x.py"]);
    const ts = staticAuditCommand("typescript", files);
    expect("command" in ts && ts.command.slice(0, 2)).toEqual([
      "node",
      "/opt/loopsmith/metrics/node_modules/eslint/bin/eslint.js",
    ]);
    expect(staticAuditCommand("python", [{ path: "README.md", content: "" }])).toEqual({
      tool: "bandit",
      skipped: "no Python file",
    });
  });

  it("a model finding at a static one's place replaces it only when more severe; blockers name the source", () => {
    const tool = {
      rule: "B324",
      file: "a.py",
      line: 3,
      severity: "medium" as const,
      source: "bandit" as const,
      message: "md5",
    };
    const same = { ...tool, source: "model" as const, message: "md5 of a password" };
    expect(mergeFindings([tool], [{ ...same, severity: "low" }])).toEqual([tool]);
    expect(mergeFindings([tool], [{ ...same, severity: "high" }])).toEqual([{ ...same, severity: "high" }]);
    expect(blockerOf({ ...same, severity: "high" })).toEqual({
      severity: "blocker",
      message: "security audit, model B324: md5 of a password",
      path: "a.py",
      line: 3,
      rule: "audit.model.B324",
    });
  });
});

const provider = { name: "test", model: "fake", scripted: true };
const usage = { ...emptyUsage(), calls: 1 };
const passed = result({
  status: "passed",
  exitCode: 0,
  tests: [{ name: "test_add", classname: "t", status: "passed", durationMs: 1 }],
});
const BANDIT_CLEAN = JSON.stringify({ errors: [], results: [] });

/**
 * Runs one task through the loop with the audit on: the static run answers `staticStdout`
 * (a bandit report) and the model each of `verdicts` in turn (an Error: its reply could not be read).
 */
async function solve(opts: { verdicts: Array<AuditVerdict | Error>; staticStdout?: string; maxIterations?: number }) {
  const builds: BuildRequest[] = [];
  const audits: AuditRequest[] = [];
  const runs: ExecutionRequest[] = [];
  const steps: Steps = {
    recall: async () => ({ failures: [], successes: [], embedder: "test" }),
    plan: async () => ({
      value: { summary: "add", acceptanceCriteria: [], steps: [], files: ["solution.py"] },
      usage,
      provider,
    }),
    build: async (req) => (
      builds.push(req),
      {
        value: {
          files: [{ path: "solution.py", content: "def add(a, b):\n    return a + b\n" }],
          tests: [],
          notes: "",
        },
        usage,
        provider,
      }
    ),
    gate: async () => ({ blocked: false, findings: [] }),
    review: async () => ({ value: { approved: true, score: 1, findings: [] }, usage, provider }),
    audit: async (req) => {
      audits.push(req);
      const v = opts.verdicts[Math.min(audits.length - 1, opts.verdicts.length - 1)] as AuditVerdict | Error;
      if (v instanceof Error) throw new LoopsmithError("llm_bad_reply", v.message);
      return { value: v, usage, provider };
    },
    execute: async (req) => (
      runs.push(req),
      req.command ? result({ stdout: opts.staticStdout ?? BANDIT_CLEAN }) : passed
    ),
    rememberFailure: async () => ({ id: "f-1", signature: "blocked" }),
    attachFix: async (req) => ({ id: req.failureId }),
    rememberSuccess: async () => ({ id: "s-1" }),
    recordTask: async () => ({ id: "r-1" }),
    reflect: async () => ({ value: { rootCause: "insecure", hypothesis: "", fixPlan: "fix it" }, usage, provider }),
    tree: async () => {
      throw new LoopsmithError("not_found", "no trees here");
    },
    decompose: async () => {
      throw new LoopsmithError("internal", "no subtasks here");
    },
    reflectIntegration: async () => {
      throw new LoopsmithError("internal", "no subtasks here");
    },
  };
  const events: TaskEvent[] = [];
  const io: LoopIO = {
    checkpoint: async () => {},
    emit: async (e) => void events.push(e),
    heartbeat: () => {},
    cancelled: () => false,
    stopping: () => false,
    log: pino({ level: "silent" }),
  };
  const task = Task.parse({
    v: 1,
    taskId: "t-audit",
    goal: "write add",
    language: "python",
    acceptanceTests: [{ path: "test_add.py", content: "def test_add(): pass\n" }],
    audit: true,
    memory: "off",
    limits: { maxIterations: opts.maxIterations ?? 2 },
    submittedAt: new Date().toISOString(),
  });
  const final = await runLoop(initialState(task), steps, io);
  const records = events
    .filter((e) => e.phase === "audit" && e.kind === "step")
    .map((e) => AuditRecord.parse(e.data?.audit));
  return { final, builds, audits, runs, events, records, messages: events.map((e) => e.message) };
}

const injection: AuditVerdict = {
  findings: [
    {
      rule: "injection",
      file: "solution.py",
      line: 2,
      severity: "high",
      message: "the query is built from input",
    },
  ],
};

describe("the audit phase in the loop", () => {
  it("a high finding blocks the iteration: nothing runs, and the next build is told why", async () => {
    const r = await solve({ verdicts: [injection, { findings: [] }] });
    // Iteration 1: the static run only; iteration 2: the static run, then the tests.
    expect(r.runs.map((q) => (q.command ? "static" : "tests"))).toEqual(["static", "static", "tests"]);
    expect(r.final.result?.status).toBe("passed");
    expect(r.records.map((a) => a.blocked)).toEqual([true, false]);
    const previous = r.builds[1]?.previous;
    expect(previous?.failure.status).toBe("blocked");
    expect(previous?.failure.output).toContain("security audit, model injection: the query is built from input");
    expect(previous?.failure.findings[0]).toMatchObject({
      rule: "audit.model.injection",
      path: "solution.py",
      line: 2,
    });
    expect(r.messages).toContain(
      "audit: 1 finding, 1 high; bandit; blocked: high model injection (solution.py:2): the query is built from input",
    );
  });

  it("the static tools' findings go to the model, and a bandit HIGH blocks on its own", async () => {
    const stdout = JSON.stringify({
      results: [
        {
          filename: "././solution.py",
          issue_severity: "HIGH",
          issue_confidence: "HIGH",
          line_number: 1,
          test_id: "B324",
          test_name: "hashlib",
          issue_text: "Use of weak MD5 hash for security.",
        },
      ],
    });
    const r = await solve({ verdicts: [{ findings: [] }], staticStdout: stdout, maxIterations: 1 });
    expect(r.audits[0]?.staticFindings).toMatchObject([{ source: "bandit", rule: "B324:hashlib", severity: "high" }]);
    expect(r.runs.every((q) => q.command)).toBe(true);
    expect(r.final.result?.status).not.toBe("passed");
    expect(r.final.failures[0]?.output).toContain("security audit, bandit B324:hashlib: Use of weak MD5 hash");
  });

  it("lower severities warn and the candidate runs", async () => {
    const r = await solve({
      verdicts: [{ findings: [{ ...injection.findings[0]!, severity: "medium", rule: "path-traversal" }] }],
      maxIterations: 1,
    });
    expect(r.final.result?.status).toBe("passed");
    expect(r.records[0]).toMatchObject({ blocked: false, findings: [{ rule: "path-traversal", source: "model" }] });
    expect(
      r.events.some(
        (e) =>
          e.kind === "warning" &&
          e.message.startsWith("audit: 1 lower-severity finding, the candidate runs: medium model path-traversal"),
      ),
    ).toBe(true);
  });

  it("an unreadable model reply is a warning: the static findings still decide, and a clean candidate runs", async () => {
    const r = await solve({ verdicts: [new Error("the reply is not JSON: 'sure, looks fine'")], maxIterations: 1 });
    expect(r.messages).toContain("the review reply could not be read: the reply is not JSON: 'sure, looks fine'");
    expect(r.records[0]).toMatchObject({ blocked: false, modelRead: false });
    expect(r.final.result?.status).toBe("passed");
  });

  it("a sandbox whose static tool is missing leaves the model's audit, and says so", async () => {
    const r = await solve({ verdicts: [injection], staticStdout: "", maxIterations: 1 });
    expect(r.records[0]?.static).toMatchObject({ tool: "bandit", status: "unavailable" });
    expect(r.records[0]?.blocked).toBe(true);
  });
});
