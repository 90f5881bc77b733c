"""Runs many test runs from one warm interpreter: imports pytest once, then forks a child per run.

Used by bench/transfer.ts (through run-local.ts) to run HumanEval mutants on the host without
paying pytest's start-up on every run. First it leaves the network (a network namespace of its
own, see ``isolate``) and writes one JSON line, ``{"pytest": <version or null>, "isolation":
<null, or why the network could not be left>}``, and stops if it could not. Then it reads one
JSON job a line on stdin, ``{"dir": <workspace>, "mode": "pytest" or "plain", "timeoutS":
<seconds>, "memoryMb": <MiB>}``, and answers each with one JSON line, ``{"exitCode": <int or
null>, "timedOut": <bool>, "ms": <wall ms>}``. The child changes into the workspace, limits its
address space, CPU time and file sizes, sends its output to ``output.txt`` there and runs
either pytest over ``test_solution.py`` as the sandbox's default command does (an empty ini
file, no conftest, no cache, no plugin autoloading, JUnit XML to ``result.xml``) or
``program.py`` as plain Python. A child that outlives its time is killed.
"""
import ctypes
import ctypes.util
import json
import os
import resource
import runpy
import signal
import socket
import sys
import time
import traceback

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def isolate():
    """Moves this process into a user and network namespace of its own (``unshare -rn``'s
    namespaces, without the uid map): no interface but an unconfigured loopback. Returns None
    when done, else why not."""
    try:
        if hasattr(os, "unshare"):
            os.unshare(CLONE_NEWUSER | CLONE_NEWNET)
        else:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, os.strerror(errno))
    except OSError as err:
        return "unshare(CLONE_NEWUSER | CLONE_NEWNET) failed: " + str(err)
    interfaces = sorted(name for _, name in socket.if_nameindex())
    return None if interfaces == ["lo"] else "interfaces left: " + ", ".join(interfaces)


NO_NETWORK = isolate()  # before anything else runs here

try:
    import pytest
    import _pytest.assertion.rewrite  # noqa: F401  (every run needs it: imported before the fork)
    import _pytest.junitxml  # noqa: F401
except ImportError:
    pytest = None


OUTPUT_LIMIT = 16 * 1024 * 1024  # bytes a run may write to any one file


def run_pytest(workspace):
    args = [
        "-q",
        "-c",
        os.devnull,
        "--rootdir=" + workspace,
        "--noconftest",
        "-p",
        "no:cacheprovider",
        "--junitxml=" + os.path.join(workspace, "result.xml"),
        "test_solution.py",
    ]
    return int(pytest.main(args))


def run_plain(workspace):
    try:
        runpy.run_path(os.path.join(workspace, "program.py"), run_name="__main__")
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    except BaseException:  # noqa: BLE001  (the program's own failure is the result)
        traceback.print_exc()
        return 1
    return 0


def child(job):
    workspace = job["dir"]
    limit = int(job["memoryMb"]) * 1024 * 1024
    cpu = int(job["timeoutS"]) + 1
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
    out = os.open(os.path.join(workspace, "output.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.chdir(workspace)
    code = run_pytest(workspace) if job["mode"] == "pytest" else run_plain(workspace)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(job):
    started = time.monotonic()
    deadline = started + float(job["timeoutS"])
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            child(job)
        except BaseException:  # noqa: BLE001  (a child never returns into the loop)
            os._exit(98)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return {"exitCode": code, "timedOut": False, "ms": (time.monotonic() - started) * 1000}
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"exitCode": None, "timedOut": True, "ms": (time.monotonic() - started) * 1000}
        time.sleep(0.002)


def main():
    print(json.dumps({"pytest": pytest.__version__ if pytest else None, "isolation": NO_NETWORK}), flush=True)
    if NO_NETWORK is not None:
        return
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(run(json.loads(line))), flush=True)


main()
