/**
 * The adversarial suite: hostile code in the real sandbox on the real Docker engine —
 * resource exhaustion and escapes (the network and process cases are in
 * adversarial-processes.test.ts). Every case states the status it must get, and after every
 * case the host must be as it was: only the warm containers exist, no sandbox process lives
 * outside them, no volume appeared.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { hasCode } from "@loopsmith/shared/runtime";
import { readWorkspaceDir } from "@loopsmith/executor";
import { hostileSuite, py, request, sh } from "./helpers.js";

const OUTPUT_CAP = 256 * 1024;
// Two warm containers per image (python and node); after every case the host is as it was.
const suite = hostileSuite({ warmPoolSize: 2, outputLimitBytes: OUTPUT_CAP });

describe("resource exhaustion", () => {
  it("python fork bomb: timeout", async () => {
    const r = await suite.ex.run(
      py("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", {
        timeoutMs: 3_000,
      }),
    );
    expect(r.status).toBe("timeout");
  });

  it("shell fork bomb: timeout, the pids limit holds it", async () => {
    // The classic bomb, started with one fork of the command's shell before any bomb process
    // exists (called in the foreground, its pipeline's second fork came from the shell itself
    // and once, under CI load, met the pids limit the first half had already reached: the
    // shell could not fork and exited, `failed`). The builtin loop keeps the command alive
    // without forking.
    const r = await suite.ex.run(sh("bomb() { bomb | bomb & }\nbomb &\nwhile :; do :; done\n", { timeoutMs: 3_000 }));
    expect(r.status).toBe("timeout");
    expect(r.stderr).toMatch(/fork/i);
  });

  it("CPU spin: timeout", async () => {
    const r = await suite.ex.run(py("while True:\n    pass\n", { timeoutMs: 2_000 }));
    expect(r.status).toBe("timeout");
  });

  it("a process that ignores SIGTERM: timeout (killed with SIGKILL)", async () => {
    const r = await suite.ex.run(
      py(
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('armed', flush=True)\ntime.sleep(60)\n",
        {
          timeoutMs: 2_000,
        },
      ),
    );
    expect(r.status).toBe("timeout");
    expect(r.stdout).toContain("armed");
  });

  it("memory bomb: oom", async () => {
    const r = await suite.ex.run(
      py("blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n", {
        memoryMb: 128,
        timeoutMs: 20_000,
      }),
    );
    expect(r.status).toBe("oom");
  });

  it("infinite stdout: output_limit, stdout cut at the cap", async () => {
    const r = await suite.ex.run(
      py("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", { timeoutMs: 20_000 }),
    );
    expect(r.status).toBe("output_limit");
    expect(r.truncated).toBe(true);
    expect(Buffer.byteLength(r.stdout)).toBe(OUTPUT_CAP);
  });

  it("stderr flood: output_limit", async () => {
    const r = await suite.ex.run(
      py("import sys\nwhile True:\n    sys.stderr.write('e' * 4096)\n", { timeoutMs: 20_000 }),
    );
    expect(r.status).toBe("output_limit");
    expect(Buffer.byteLength(r.stderr)).toBe(OUTPUT_CAP);
  });

  it("a large binary output under the cap comes back byte-exact", async () => {
    const n = 200 * 1024;
    const { result, stdout } = await suite.ex.runDetailed(
      py(`import sys\ndata = bytes((i * 7 + (i >> 8)) % 256 for i in range(${n}))\nsys.stdout.buffer.write(data)\n`),
    );
    expect(result.status).toBe("passed");
    expect(result.truncated).toBe(false);
    const want = Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + (i >> 8)) % 256));
    expect(stdout.equals(want)).toBe(true);
  });

  it("a 200 MB file write: failed (the tmpfs and the file-size limit stop it)", async () => {
    const r = await suite.ex.run(
      py(
        "chunk = b'\\0' * (1024 * 1024)\nwith open('big.bin', 'wb') as f:\n    for _ in range(200):\n        f.write(chunk)\n",
        {
          timeoutMs: 20_000,
        },
      ),
    );
    expect(r.status).toBe("failed");
    expect(r.stderr).toMatch(/No space left on device|File too large/);
  });

  it("100 000 small files: failed (the tmpfs inode bound stops it)", async () => {
    const r = await suite.ex.run(
      py(
        "import os\nos.mkdir('many')\nfor i in range(100_000):\n    open(f'many/{i}', 'w').close()\nprint('all written')\n",
        {
          timeoutMs: 30_000,
        },
      ),
    );
    expect(r.status).toBe("failed");
    expect(r.stdout).not.toContain("all written");
    expect(r.stderr).toContain("No space left on device");
  });

  it("reading /dev/urandom forever: timeout", async () => {
    const r = await suite.ex.run(sh("cat /dev/urandom > /dev/null\n", { timeoutMs: 2_000 }));
    expect(r.status).toBe("timeout");
  });

  it("opening files in a loop: failed at the open-files limit", async () => {
    const r = await suite.ex.run(py("files = []\nwhile True:\n    files.append(open('/dev/null'))\n"));
    expect(r.status).toBe("failed");
    expect(r.stderr).toContain("Too many open files");
  });
});

describe("escapes", () => {
  it("writes outside the workspace and to the read-only root are refused", async () => {
    const r = await suite.ex.run(
      py(
        [
          "import os",
          "refused = []",
          "for p in ['/etc/evil', '/usr/evil', '/evil', '/home/sandbox/evil', '/var/evil', '/proc/sys/kernel/evil', '/sys/evil']:",
          "    try:",
          "        open(p, 'w').write('x')",
          "        print('WROTE', p)",
          "    except OSError as e:",
          "        refused.append(p)",
          "open('/workspace/ok', 'w').write('fine')",
          "open('/tmp/ok', 'w').write('fine')",
          "print('refused', len(refused))",
        ].join("\n"),
      ),
    );
    expect(r.status).toBe("passed");
    expect(r.stdout).not.toContain("WROTE");
    expect(r.stdout).toContain("refused 7");
  });

  it("`../`, absolute paths and a link to /etc among the input files: blocked", async () => {
    for (const path of ["../escape.py", "/etc/cron.d/evil", "sub/../../escape.py"]) {
      const r = await suite.ex.run({
        ...request("python", [{ path: "ok.py", content: "" }]),
        files: [{ path, content: "x" }],
      });
      expect(r.status, path).toBe("blocked");
    }
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-ws-"));
    try {
      writeFileSync(join(dir, "test_ok.py"), "def test_ok():\n    pass\n");
      mkdirSync(join(dir, "sub"));
      symlinkSync("/etc", join(dir, "sub", "etc"));
      const err = await readWorkspaceDir(dir).then(
        () => null,
        (e: unknown) => e,
      );
      expect(hasCode(err, "workspace_invalid")).toBe(true);
      rmSync(join(dir, "sub", "etc"));
      symlinkSync("/etc/passwd", join(dir, "passwd"));
      expect(hasCode(await readWorkspaceDir(dir).catch((e: unknown) => e), "workspace_invalid")).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a result file replaced by a link to /etc/passwd is not followed", async () => {
    // After pytest has written its JUnit file (at interpreter exit), swap it for a link.
    const swap = [
      "import atexit, os",
      "def _swap():",
      "    p = '/tmp/.loopsmith/result.xml'",
      "    os.remove(p)",
      "    os.symlink('/etc/passwd', p)",
      "atexit.register(_swap)",
      "def test_a():",
      "    pass",
      "",
    ].join("\n");
    const r = await suite.ex.run(request("python", [{ path: "test_a.py", content: swap }]));
    expect(r.status).toBe("passed");
    // The verdict is the runner's controller's (the channel), not the file: test_a is there.
    expect(r.verdict).toBe("controller");
    expect(r.tests.map((t) => t.name)).toEqual(["test_a"]);
    expect(JSON.stringify(r)).not.toContain("root:x:0:0");
  });

  it("setuid and su do not give root", async () => {
    const r = await suite.ex.run(
      sh(
        [
          "su -c id root </dev/null >/dev/null 2>&1 && echo SU-WORKED",
          "python3 -c 'import os; os.setuid(0)' 2>/dev/null && echo SETUID-WORKED",
          'find / -xdev -perm -4000 -type f 2>/dev/null | while read f; do "$f" --version >/dev/null 2>&1; done',
          "echo uid=$(id -u) euid=$(id -u)",
          "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status",
        ].join("\n"),
      ),
    );
    expect(r.status).toBe("passed");
    expect(r.stdout).not.toMatch(/SU-WORKED|SETUID-WORKED/);
    expect(r.stdout).toContain("uid=10001 euid=10001");
    expect(r.stdout).toMatch(/CapEff:\s+0+\n/);
    expect(r.stdout).toMatch(/NoNewPrivs:\s+1/);
  });

  it("the sandbox's seccomp profile denies io_uring and reaching into processes, even its own", async () => {
    // Each call would succeed on this kernel without the profile (the targets are the process itself).
    const r = await suite.ex.run(
      py(
        [
          "import ctypes, os",
          "libc = ctypes.CDLL(None, use_errno=True)",
          "def call(name, nr, *args):",
          "    rc = libc.syscall(nr, *args)",
          "    print(name, 'ALLOWED' if rc >= 0 else 'denied', ctypes.get_errno())",
          "params = ctypes.create_string_buffer(120)",
          "call('io_uring_setup', 425, 4, params)",
          "pidfd = libc.syscall(434, os.getpid(), 0)",
          "call('pidfd_getfd', 438, pidfd, 1, 0)",
          "buf = ctypes.create_string_buffer(8); iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)",
          "call('process_vm_readv', 310, os.getpid(), iov, 1, iov, 1, 0)",
          "call('userfaultfd', 323, 0)",
          "print(open('/proc/self/status').read().split('Seccomp:')[1].split()[0])",
        ].join("\n"),
      ),
    );
    expect(r.status).toBe("passed");
    expect(r.stdout).toMatch(/io_uring_setup denied 1/);
    expect(r.stdout).toMatch(/pidfd_getfd denied 1/);
    expect(r.stdout).toMatch(/process_vm_readv denied 1/);
    expect(r.stdout).toMatch(/userfaultfd denied 1/);
    expect(r.stdout).not.toContain("ALLOWED");
  });

  it("mount and unshare are refused", async () => {
    const r = await suite.ex.run(
      py(
        [
          "import os, subprocess",
          "for flag in ('CLONE_NEWUSER', 'CLONE_NEWNS', 'CLONE_NEWNET'):",
          "    try:",
          "        os.unshare(getattr(os, flag))",
          "        print('UNSHARED', flag)",
          "    except OSError as e:",
          "        print('refused', flag, e.errno)",
          "rc = subprocess.call(['mount', '-t', 'tmpfs', 'none', '/tmp'], stderr=subprocess.DEVNULL)",
          "print('mount rc', rc)",
          "rc = subprocess.call(['unshare', '-r', 'id'], stderr=subprocess.DEVNULL)",
          "print('unshare rc', rc)",
        ].join("\n"),
      ),
    );
    expect(r.status).toBe("passed");
    expect(r.stdout).not.toContain("UNSHARED");
    expect(r.stdout).toMatch(/mount rc [1-9]/);
    expect(r.stdout).toMatch(/unshare rc [1-9]/);
  });

  it("the Docker socket is not there", async () => {
    const r = await suite.ex.run(
      py(
        [
          "import os, socket",
          "for p in ['/var/run/docker.sock', '/run/docker.sock', '/run/containerd/containerd.sock']:",
          "    print(p, os.path.exists(p))",
          "s = socket.socket(socket.AF_UNIX)",
          "try:",
          "    s.connect('/var/run/docker.sock')",
          "    print('CONNECTED')",
          "except OSError as e:",
          "    print('refused', e.errno)",
        ].join("\n"),
      ),
    );
    expect(r.status).toBe("passed");
    expect(r.stdout).not.toContain("True");
    expect(r.stdout).not.toContain("CONNECTED");
  });

  it("the host's environment does not reach the command", async () => {
    process.env.LOOPSMITH_TEST_SECRET = "canary-7f3a9c";
    try {
      const r = await suite.ex.run(
        sh(
          "env\ncat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n'\ncat /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n'\n",
        ),
      );
      expect(r.status).toBe("passed");
      expect(r.stdout).not.toContain("canary-7f3a9c");
      for (const name of ["ANTHROPIC_API_KEY", "NATS_URL", "DATABASE_URL", "DOCKER_HOST", "LOOPSMITH_TEST_SECRET"]) {
        expect(r.stdout).not.toContain(`${name}=`);
      }
      expect(r.stdout).toContain("HOME=/tmp");
    } finally {
      delete process.env.LOOPSMITH_TEST_SECRET;
    }
  });
});
