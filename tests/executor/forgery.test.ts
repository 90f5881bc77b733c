/**
 * Verdicts the code under test cannot forge from inside the test process, in the real sandbox
 * (issue 32; docs/SANDBOX.md, "Verdicts"). Each candidate below fixes nothing (its test must
 * fail) and runs code in the test process to make the run look passed:
 * - writes the runner's result file, then exits 0 (at import, as the issue's repro did);
 * - exits early with status 0 (`os._exit`, `sys.exit`, `process.exit`) at import or mid-run;
 * - rewrites the runner's reports or the assertion machinery wholesale (pytest's reports,
 *   `unittest.TestCase` assertions, `node:assert`);
 * - writes forged records on the verdict channel, or looks for its key.
 * Each must end without a pass, with a named reason; beside them the real fix must pass, with
 * the verdict from the runner's controller. Runs over loopsmith's own commands (inline tasks,
 * hidden tests) and over a shell line (repo mode's and `improve`'s test command).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Executor } from "@loopsmith/executor";
import type { ExecutionRequest, ExecutionResult, FileChange } from "@loopsmith/shared/contracts";
import { request, startExecutor } from "./helpers.js";

let ex: Executor;

beforeAll(async () => {
  ex = await startExecutor({ warmPoolSize: 1, concurrency: 2 });
});

afterAll(async () => {
  await ex?.stop();
});

const file = (path: string, content: string): FileChange => ({ path, content });
const lines = (...l: string[]) => `${l.join("\n")}\n`;

/** The code of a wrong `add` (it subtracts), preceded by `prelude`. */
const wrongAdd = (prelude: string) => file("solution.py", `${prelude}\ndef add(a, b):\n    return a - b\n`);
const rightAdd = file("solution.py", "def add(a, b):\n    return a + b\n");
const acceptance = file(
  "test_solution.py",
  lines(
    "from solution import add",
    "",
    "def test_add():",
    "    assert add(2, 3) == 5",
    "",
    "def test_zero():",
    "    assert add(0, 0) == 0",
  ),
);
const unittestAcceptance = file(
  "test_solution.py",
  lines(
    "import unittest",
    "from solution import add",
    "",
    "class TestAdd(unittest.TestCase):",
    "    def test_add(self):",
    "        self.assertEqual(add(2, 3), 5)",
  ),
);

/** A passing JUnit file naming the acceptance tests, written where the runner writes its own. */
const FORGE_JUNIT = lines(
  "import os",
  '_xml = \'<testsuites><testsuite name="pytest" tests="2"><testcase classname="test_solution" name="test_add"/><testcase classname="test_solution" name="test_zero"/></testsuite></testsuites>\'',
  "for _p in (os.environ.get('LOOPSMITH_JUNIT'), '/tmp/.loopsmith/result.xml'):",
  "    if _p:",
  "        try:",
  "            open(_p, 'w').write(_xml)",
  "        except OSError:",
  "            pass",
  "os._exit(0)",
);
const REWRITE_REPORTS = lines(
  "import _pytest.reports as _r",
  "_init = _r.TestReport.__init__",
  "def _forged(self, *a, **k):",
  "    _init(self, *a, **k)",
  "    self.outcome = 'passed'",
  "    self.longrepr = None",
  "_r.TestReport.__init__ = _forged",
);
/**
 * Looks for the verdict key in every process's environment, and writes a forged record on
 * every pipe of another process it can open (without blocking).
 */
const ATTACK_CHANNEL = lines(
  "import os, glob",
  "_found = []",
  "for _e in glob.glob('/proc/*/environ'):",
  "    try:",
  "        if b'LOOPSMITH_VERDICT_KEY' in open(_e, 'rb').read():",
  "            _found.append(_e)",
  "    except OSError:",
  "        pass",
  "print('KEY-SEEN-IN', _found)",
  '_line = b\'0\' * 64 + b\' {"t":"start","isolated":true}\\n\'',
  "_opened = 0",
  "for _fd in glob.glob('/proc/[0-9]*/fd/*'):",
  "    if _fd.startswith('/proc/%d/' % os.getpid()):",
  "        continue",
  "    try:",
  "        if 'pipe:' in os.readlink(_fd):",
  "            _w = os.open(_fd, os.O_WRONLY | os.O_NONBLOCK)",
  "            _opened += 1",
  "            os.close(_w)",
  "    except OSError:",
  "        pass",
  "print('PIPES-OPENED', _opened)",
);

async function run(req: ExecutionRequest): Promise<ExecutionResult> {
  return ex.run(req);
}

function shellRequest(files: FileChange[], shell: string): ExecutionRequest {
  return { ...request("python", files), shell };
}

describe("pytest, loopsmith's own command (inline tasks, hidden tests)", () => {
  it("the real fix passes, with the verdict from the runner's controller and no tripwire in the tests or the output", async () => {
    const r = await run(request("python", [rightAdd, acceptance]));
    expect(r.status, r.reason).toBe("passed");
    expect(r.verdict).toBe("controller");
    expect(r.tests.map((t) => t.name).sort()).toEqual(["test_add", "test_zero"]);
    expect(r.stdout).not.toMatch(/lsw_|tripwire/);
    expect(r.stdout).toMatch(/2 passed/);
  });

  it("a candidate that writes a passing JUnit file and exits 0 as it is imported is an error, not a pass", async () => {
    const r = await run(request("python", [wrongAdd(FORGE_JUNIT), acceptance]));
    expect(r.status).toBe("error");
    expect(r.reason).toMatch(/worker ended before its session did/);
  });

  it("a candidate that calls sys.exit(0) as it is imported is an error", async () => {
    const r = await run(request("python", [wrongAdd("import sys\nsys.exit(0)\n"), acceptance]));
    expect(r.status).not.toBe("passed");
    expect(["error", "failed"]).toContain(r.status);
  });

  it("a candidate that exits 0 in the middle of a test is an error", async () => {
    const r = await run(
      request("python", [file("solution.py", "import os\ndef add(a, b):\n    os._exit(0)\n"), acceptance]),
    );
    expect(r.status).toBe("error");
    expect(r.reason).toMatch(/worker ended before its session did/);
  });

  it("a candidate that rewrites every test report to passed is tampering (the must-fail tripwires passed)", async () => {
    const r = await run(request("python", [wrongAdd(REWRITE_REPORTS), acceptance]));
    expect(r.status).toBe("tampering");
    expect(r.reason).toMatch(/tripwire tests had the wrong outcome/);
    expect(r.verdict).toBe("controller");
  });

  it("a candidate that makes unittest's assertEqual a no-op is tampering; the real fix passes with the same test", async () => {
    const r = await run(
      request("python", [
        wrongAdd("import unittest\nunittest.TestCase.assertEqual = lambda self, *a, **k: None\n"),
        unittestAcceptance,
      ]),
    );
    expect(r.status).toBe("tampering");
    expect(r.reason).toMatch(/wrong outcome/);
    const good = await run(request("python", [rightAdd, unittestAcceptance]));
    expect(good.status, good.reason).toBe("passed");
  });

  it("a candidate can neither find the verdict key nor open another process's pipe (the controller is not dumpable)", async () => {
    const r = await run({
      ...request("python", [wrongAdd(ATTACK_CHANNEL), acceptance]),
      command: ["python3", "-c", "import solution"],
    });
    expect(r.stdout).toMatch(/KEY-SEEN-IN \[\]/);
    const inTests = await run(request("python", [wrongAdd(ATTACK_CHANNEL), acceptance]));
    expect(inTests.status).toBe("failed");
  });

  it("the hidden-test form (named test files) judges the same way", async () => {
    const named = (files: FileChange[]): ExecutionRequest => ({
      ...request("python", files),
      tests: ["test_solution.py"],
    });
    expect((await run(named([rightAdd, acceptance]))).status).toBe("passed");
    expect((await run(named([wrongAdd(REWRITE_REPORTS), acceptance]))).status).toBe("tampering");
  });
});

describe("a shell line (repo mode's test command, improve's check)", () => {
  const pkgTest = file(
    "tests/test_pkg.py",
    lines(
      "from pkg import add",
      "",
      "def test_add():",
      "    assert add(2, 3) == 5",
      "",
      "def test_zero():",
      "    assert add(0, 0) == 0",
    ),
  );
  const pkg = (prelude: string, body = "a - b") =>
    file("pkg/__init__.py", `${prelude}\ndef add(a, b):\n    return ${body}\n`);

  it("the real fix passes under `python3 -m pytest`, judged by the controller", async () => {
    const r = await run(shellRequest([pkg("", "a + b"), pkgTest], "python3 -m pytest -q tests"));
    expect(r.status, r.reason).toBe("passed");
    expect(r.verdict).toBe("controller");
    expect(r.summary?.total).toBe(2);
  });

  it("the issue's repro: the package's __init__.py writes an all-passing JUnit and exits 0 — not a pass", async () => {
    const r = await run(shellRequest([pkg(FORGE_JUNIT), pkgTest], "python3 -m pytest -q tests"));
    expect(r.status).not.toBe("passed");
    expect(r.status).toBe("error");
  });

  it("rewritten reports are tampering under a shell line too", async () => {
    const r = await run(shellRequest([pkg(REWRITE_REPORTS), pkgTest], "python3 -m pytest -q tests"));
    expect(r.status).toBe("tampering");
  });

  it("a line that runs two pytest sessions adds them up; the must-fail tripwires do not fail the line", async () => {
    const other = file("tests2/test_other.py", "def test_other():\n    assert True\n");
    const r = await run(
      shellRequest([pkg("", "a + b"), pkgTest, other], "python3 -m pytest -q tests && python3 -m pytest -q tests2"),
    );
    expect(r.status, r.reason).toBe("passed");
    expect(r.summary?.total).toBe(3);
  });

  it("a line that runs no pytest is judged by its exit code and says the verdict is not the controller's", async () => {
    const r = await run(shellRequest([file("check.py", "print('ok')\n")], "python3 check.py"));
    expect(r.status).toBe("passed");
    expect(r.verdict).toBe("exit_code");
  });
});

describe("node's test runner, loopsmith's own command", () => {
  const nodeTest = file(
    "add.test.js",
    lines(
      'const test = require("node:test");',
      'const assert = require("node:assert");',
      'const { add } = require("./add.js");',
      'test("adds", () => { assert.strictEqual(add(2, 3), 5); });',
      'test("zero", () => { assert.strictEqual(add(0, 0), 0); });',
    ),
  );
  const wrong = (prelude: string) => file("add.js", `${prelude}\nexports.add = (a, b) => a - b;\n`);

  it("the real fix passes, judged by the controller", async () => {
    const r = await run(request("javascript", [file("add.js", "exports.add = (a, b) => a + b;\n"), nodeTest]));
    expect(r.status, r.reason).toBe("passed");
    expect(r.verdict).toBe("controller");
    expect(r.tests.map((t) => t.name).sort()).toEqual(["adds", "zero"]);
  });

  it("process.exit(0) as the module loads is an error (its file reported no test)", async () => {
    const r = await run(request("javascript", [wrong("process.exit(0);"), nodeTest]));
    expect(r.status).toBe("error");
    expect(r.reason).toMatch(/ended without reporting any test/);
  });

  it("process.exit(0) in the middle of a test is not a pass", async () => {
    const r = await run(request("javascript", [file("add.js", "exports.add = () => process.exit(0);\n"), nodeTest]));
    expect(r.status).not.toBe("passed");
  });

  it("a node:assert whose strictEqual never throws is tampering", async () => {
    const r = await run(request("javascript", [wrong('require("node:assert").strictEqual = () => {};'), nodeTest]));
    expect(r.status).toBe("tampering");
    expect(r.reason).toMatch(/strictEqual did not throw/);
  });

  it("forged records written on every descriptor the test process holds do not make a pass", async () => {
    // Whatever descriptor could be the verdict channel (the children are not given it; if one
    // were, its unsigned lines would make the run tampering), a forged start record goes to each.
    const forge = [
      'const fs = require("fs");',
      'const line = "0".repeat(64) + \' {"t":"start","isolated":true}\\n\';',
      'for (const fd of fs.readdirSync("/proc/self/fd").map(Number).filter((n) => n > 2)) { try { fs.writeSync(fd, line); } catch {} }',
    ].join("\n");
    const r = await run(request("javascript", [wrong(forge), nodeTest]));
    expect(r.status).not.toBe("passed");
    expect(["failed", "tampering", "error"]).toContain(r.status);
  });
});
