/**
 * The pre-started pytest runner of warm Python containers (prestart.ts), on the real Docker
 * engine: a default run uses it, sees what a fresh `python3 -I -B -u -m pytest` sees
 * (environment, working directory, argv, import path, flags, `__main__`), keeps the verdict
 * (a forged pass is still caught), and any other command kills it and runs afresh.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createExecutor, type Executor } from "@loopsmith/executor";
import { docker, log, py, request, testConfig } from "./helpers.js";

/** A test that reports what its interpreter looks like, as JSON in its failure message (pytest captures what a passing test prints). */
const PROBE = `
import json, os, sys, __main__

def test_probe():
    with open("/proc/self/cmdline", "rb") as f:
        cmdline = f.read().split(b"\\0")
    seen = {
        "cwd": os.getcwd(),
        "env": dict(sorted(os.environ.items())),
        "argv": sys.argv[1:],
        "argv0": os.path.basename(sys.argv[0]),
        "orig_argv": sys.orig_argv,
        "path": [p for p in sys.path if not p.startswith("/workspace")],
        "flags": [sys.flags.isolated, sys.flags.dont_write_bytecode, sys.flags.ignore_environment, sys.flags.safe_path],
        "main": getattr(__main__.__spec__, "name", None),
        "uid": os.getuid(),
        "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
        "runner": cmdline[4] == b"-c",
    }
    assert False, "PROBE " + json.dumps(seen) + " EBORP"
`;

interface Seen {
  cwd: string;
  env: Record<string, string>;
  argv: string[];
  argv0: string;
  orig_argv: string[];
  path: string[];
  flags: unknown[];
  main: string | null;
  uid: number;
  fds: number[];
  runner: boolean;
}

function probeOf(stdout: string): Seen {
  const found = /PROBE (\{.*\}) EBORP/.exec(stdout);
  if (!found?.[1]) throw new Error(`no probe in:\n${stdout}`);
  return JSON.parse(found[1]) as Seen;
}

let warm: Executor;
let fresh: Executor;

beforeAll(async () => {
  warm = createExecutor({ docker, config: testConfig({ warmPoolSize: 1, concurrency: 1 }), log, kinds: ["python"] });
  fresh = createExecutor({
    docker,
    config: testConfig({ warmPoolSize: 1, concurrency: 1 }),
    log,
    kinds: ["python"],
    prestart: false,
  });
  await Promise.all([warm.start(), fresh.start()]);
  await Promise.all([warm.settled(), fresh.settled()]);
});

afterAll(async () => {
  await Promise.all([warm?.stop(), fresh?.stop()]);
});

describe("the pre-started pytest runner", () => {
  it("runs a default pytest run, and the run sees what a fresh interpreter sees", async () => {
    const files = [{ path: "test_probe.py", content: PROBE }];
    const a = await warm.run(request("python", files));
    const b = await fresh.run(request("python", files));
    expect(a.status, a.stdout).toBe("failed");
    expect(b.status, b.stdout).toBe("failed");
    expect(a.tests.map((t) => [t.name, t.status])).toEqual([["test_probe", "failed"]]);
    const viaRunner = probeOf(a.stdout);
    const afresh = probeOf(b.stdout);
    expect(viaRunner.runner).toBe(true);
    expect(afresh.runner).toBe(false);
    // Everything but what differs between any two runs: the tripwire module's random name.
    const channel = (s: Seen) => ({
      ...s,
      runner: undefined,
      env: { ...s.env, LOOPSMITH_TRIPWIRES: s.env.LOOPSMITH_TRIPWIRES?.replace(/[^/]+$/, "") },
    });
    expect(channel(viaRunner)).toEqual(channel(afresh));
    expect(viaRunner.orig_argv.slice(0, 6)).toEqual(["python3", "-I", "-B", "-u", "-m", "pytest"]);
    expect(viaRunner.argv0).toBe("__main__.py");
    expect(viaRunner.main).toBe("pytest.__main__");
  });

  it("keeps the verdict: a test run that rewrites its own outcome is not a pass", async () => {
    const forged = [
      "import os, sys",
      "def test_fails():",
      "    assert 1 == 2",
      "def test_forge():",
      "    # The process that runs the tests claims success for the whole session.",
      "    os.write(1, b'1 passed\\n')",
      "    os._exit(0)",
    ].join("\n");
    const files = [{ path: "test_forge.py", content: forged }];
    const [a, b] = await Promise.all([warm.run(request("python", files)), fresh.run(request("python", files))]);
    expect(a.status, a.stdout).toBe("error");
    expect(a.reason).toMatch(/ended before its session did/);
    expect([a.status, a.reason]).toEqual([b.status, b.reason]);
  });

  it("steps aside for any other command, which runs afresh with nothing of the runner left", async () => {
    const result = await warm.run(
      py(
        [
          "import os",
          "procs = [p for p in os.listdir('/proc') if p.isdigit()]",
          "cmds = [open('/proc/%s/cmdline' % p, 'rb').read() for p in procs]",
          "print('RUNNERS', sum(1 for c in cmds if b'ctl, ready = int(sys.argv[1])' in c and b'-S' not in c))",
        ].join("\n"),
      ),
    );
    expect(result.status, result.stdout).toBe("passed");
    expect(result.stdout).toContain("RUNNERS 0");
  });
});
