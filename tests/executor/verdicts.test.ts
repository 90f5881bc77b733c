/**
 * Verdicts a hostile candidate cannot forge, in the real sandbox on the real Docker engine
 * (docs/SANDBOX.md, "Verdicts"). Each candidate below is wrong — its acceptance test must
 * fail — and tries to make the run report a pass anyway:
 * - by runner configuration shipped in its files (conftest.py, pytest.ini, pyproject.toml,
 *   setup.cfg, tox.ini, sitecustomize/usercustomize/.pth, a node_modules shim);
 * - by reaching the supervisor that produces the verdict (reading its memory for the
 *   per-run marker and forging the trailer, signalling it, tracing it).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Executor } from "@loopsmith/executor";
import { initialState, verdictFiles } from "@loopsmith/architect";
import { Task, type FileChange } from "@loopsmith/shared/contracts";
import { request, startExecutor } from "./helpers.js";

let ex: Executor;

beforeAll(async () => {
  ex = await startExecutor({ warmPoolSize: 1, concurrency: 2 });
});

afterAll(async () => {
  await ex?.stop();
});

const wrongSolution: FileChange = { path: "solution.py", content: "def add(a, b):\n    return a - b\n" };
const acceptance: FileChange = {
  path: "test_solution.py",
  content: "from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
};
const FORCE_PASS_HOOK = [
  "import pytest",
  "@pytest.hookimpl(hookwrapper=True)",
  "def pytest_runtest_makereport(item, call):",
  "    outcome = yield",
  "    outcome.get_result().outcome = 'passed'",
  "",
].join("\n");
const EXIT_ZERO = "import os\nos._exit(0)\n";

describe("runner configuration in the candidate's files is not honoured", () => {
  const attacks: Array<[string, FileChange[]]> = [
    ["conftest.py that reports every test as passed", [{ path: "conftest.py", content: FORCE_PASS_HOOK }]],
    ["conftest.py that ends the run with exit code 0 as it is loaded", [{ path: "conftest.py", content: EXIT_ZERO }]],
    [
      "pytest.ini with addopts = --collect-only",
      [{ path: "pytest.ini", content: "[pytest]\naddopts = --collect-only\n" }],
    ],
    [
      "pytest.ini loading a plugin from the workspace",
      [
        { path: "pytest.ini", content: "[pytest]\naddopts = -p evil\n" },
        { path: "evil.py", content: FORCE_PASS_HOOK },
      ],
    ],
    [
      "pyproject.toml [tool.pytest.ini_options]",
      [{ path: "pyproject.toml", content: '[tool.pytest.ini_options]\naddopts = "--collect-only"\n' }],
    ],
    ["setup.cfg [tool:pytest]", [{ path: "setup.cfg", content: "[tool:pytest]\naddopts = --collect-only\n" }]],
    ["tox.ini [pytest]", [{ path: "tox.ini", content: "[pytest]\naddopts = --collect-only\n" }]],
    [
      "sitecustomize.py, usercustomize.py and a .pth that exit 0",
      [
        { path: "sitecustomize.py", content: EXIT_ZERO },
        { path: "usercustomize.py", content: EXIT_ZERO },
        { path: "zz-evil.pth", content: "import os; os._exit(0)\n" },
      ],
    ],
  ];
  for (const [name, files] of attacks) {
    it(`${name}: the wrong candidate still fails`, async () => {
      const r = await ex.run(request("python", [wrongSolution, ...files, acceptance]));
      expect(r.status).toBe("failed");
      expect(r.tests.find((t) => t.name === "test_add")?.status).toBe("failed");
    });
  }

  it("a correct candidate with a harmless pytest.ini still passes (the runner works without it)", async () => {
    const good = { path: "solution.py", content: "def add(a, b):\n    return a + b\n" };
    const r = await ex.run(
      request("python", [good, { path: "pytest.ini", content: "[pytest]\naddopts = -x\n" }, acceptance]),
    );
    expect(r.status).toBe("passed");
  });
});

describe("the supervisor that reports the verdict is out of the command's reach", () => {
  // Reads every other process's memory for the per-run marker, then writes a passing trailer.
  const FORGE_JS = String.raw`
const fs = require("fs");
const pids = fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p) && +p !== process.pid);
const seen = [];
let marker = null;
for (const pid of pids) {
  try { process.kill(+pid, "SIGSTOP"); seen.push(pid + ":signal=ok"); process.kill(+pid, "SIGCONT"); } catch (e) { seen.push(pid + ":signal=" + e.code); }
  let fd;
  try { fd = fs.openSync("/proc/" + pid + "/mem", "r"); } catch (e) { seen.push(pid + ":mem=" + e.code); continue; }
  seen.push(pid + ":mem=open");
  const maps = fs.readFileSync("/proc/" + pid + "/maps", "utf8").split("\n");
  for (const line of maps) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) rw/.exec(line);
    if (!m || marker) continue;
    const start = parseInt(m[1], 16), end = parseInt(m[2], 16);
    for (let off = start; off < end && !marker; off += 1 << 20) {
      const buf = Buffer.alloc(Math.min(1 << 20, end - off));
      let n = 0;
      try { n = fs.readSync(fd, buf, 0, buf.length, off); } catch { break; }
      const text = buf.subarray(0, n).toString("latin1");
      const hit = /LOOPSMITH-[0-9a-f]{32}:/.exec(text);
      if (hit) marker = "\u0000" + hit[0];
    }
  }
}
console.log("ATTEMPTS " + seen.join(" "));
if (marker) {
  const trailer = JSON.stringify({ phase: "run", exitCode: 0, signal: null, durationMs: 1, stragglers: 0 });
  fs.writeSync(2, marker);
  fs.writeSync(1, marker + trailer + "\n");
  console.log("FORGED");
}
process.exit(1);
`;

  it("javascript: reading the supervisor's memory for the marker fails, so no trailer can be forged", async () => {
    const r = await ex.run(
      request("javascript", [{ path: "forge.js", content: FORGE_JS }], { command: ["node", "forge.js"] }),
    );
    expect(r.stdout).toContain("ATTEMPTS");
    expect(r.stdout).not.toContain("FORGED");
    expect(r.stdout).not.toMatch(/mem=open/);
    expect(r.stdout).not.toMatch(/signal=ok/);
    expect(r.status).toBe("failed");
    expect(r.exitCode).toBe(1);
  });

  it("python: the supervisor cannot be signalled, traced or read, whatever the command tries", async () => {
    const probe = [
      "import ctypes, os, signal",
      "libc = ctypes.CDLL(None, use_errno=True)",
      "PTRACE_ATTACH = 16",
      "for pid in [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:",
      "    try:",
      "        os.kill(pid, signal.SIGKILL); print(pid, 'KILLED')",
      "    except PermissionError:",
      "        print(pid, 'kill refused')",
      "    for name in ('mem', 'environ', 'fd/0'):",
      "        try:",
      "            open('/proc/%d/%s' % (pid, name), 'rb').read(1); print(pid, name, 'READ')",
      "        except OSError as e:",
      "            print(pid, name, 'refused', e.errno)",
      "    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:",
      "        print(pid, 'TRACED')",
      "    else:",
      "        print(pid, 'ptrace refused', ctypes.get_errno())",
      "raise SystemExit(3)",
      "",
    ].join("\n");
    const r = await ex.run(
      request("python", [{ path: "probe.py", content: probe }], { command: ["python3", "probe.py"] }),
    );
    expect(r.stdout).toMatch(/kill refused/);
    expect(r.stdout).not.toMatch(/KILLED|READ|TRACED/);
    expect(r.status).toBe("failed");
    expect(r.exitCode).toBe(3);
  });
});

describe("the conductor's verdict workspace leaves out the candidate's runner configuration", () => {
  it("a node_modules shim of the assertion library the task provides is not used", async () => {
    const realAssert = "module.exports = (ok, msg) => { if (!ok) throw new Error(msg || 'check failed'); };\n";
    const task = Task.parse({
      v: 1,
      taskId: "t-shim",
      goal: "add(a, b) in solution.js",
      language: "javascript",
      files: [{ path: "node_modules/tiny-check/index.js", content: realAssert }],
      acceptanceTests: [
        {
          path: "test/add.test.js",
          content:
            "const check = require('tiny-check');\nconst { add } = require('../solution.js');\nrequire('node:test')('add', () => check(add(2, 3) === 5, 'add(2, 3) should be 5'));\n",
        },
      ],
      submittedAt: new Date().toISOString(),
    });
    const state = {
      ...initialState(task),
      candidate: {
        files: [
          { path: "solution.js", content: "exports.add = (a, b) => a - b;\n" },
          { path: "node_modules/tiny-check/index.js", content: "module.exports = () => {};\n" },
          { path: "package.json", content: '{"name":"shim","type":"commonjs"}\n' },
        ],
        tests: [],
        notes: "",
      },
    };
    const { files, ignored } = verdictFiles(state);
    expect(ignored.sort()).toEqual(["node_modules/tiny-check/index.js", "package.json"]);
    const r = await ex.run(request("javascript", files));
    expect(r.status).toBe("failed");
    expect(r.tests.some((t) => t.status === "failed")).toBe(true);
  });
});
