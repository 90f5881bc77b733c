"""loopsmith's pytest plugin: the verdict, recorded by a process that does not run the tests.

Loaded with ``-p loopsmith_verdict`` (installed in the sandbox image, read-only). When the
supervisor opened a verdict channel for the command, the pytest process it started becomes
the **controller**:

* At import (before any conftest or test module) it takes the channel's descriptors out of
  the environment: ``LOOPSMITH_VERDICT_FD`` (a pipe the supervisor reads) and
  ``LOOPSMITH_VERDICT_KEY_FD`` (a read-only file holding the run's HMAC key, which it does
  not read yet), marks both not inheritable and the process not dumpable, so another process
  of the same user can neither read its memory nor open its descriptors under /proc.
* At collection it **forks the worker**: the child closes both descriptors at once (no code
  of the run has executed in it yet, and the key was never in its memory), then collects and
  runs the tests and sends each report back on a private pipe. Only after the fork does the
  controller read the key, so the worker never had it. The controller replays the worker's
  reports into its own hooks (the terminal report, JUnit, the exit status) and writes
  HMAC-SHA256-signed JSON records on the channel: ``start`` after the fork, ``end`` at the
  session's end with every test's outcome and the ids the worker collected. It keeps the
  tripwire tests out of the terminal report and out of the exit status.
* The worker appends the run's tripwire tests (the module ``LOOPSMITH_TRIPWIRES`` names,
  written by the executor after the candidate was fixed) after every other collected item,
  so they run last, after any -k/-m selection.
* The worker checks that each test runs the code it was collected with: when an item is
  collected it records its function's code object and a digest of its bytecode, constants
  and names, and checks them again before and after the test is called; it also checks that
  a function defined in the test module has its code from the test module's file. A test
  whose code was swapped (``test.__code__ = other.__code__``, by a thread the code under test
  started, or at import) fails, and the controller lists it under ``tampered`` in its ``end``
  record, which the executor judges ``tampering``.

A fork costs a page-table copy; the second interpreter pytest-xdist started per run (and its
import of pytest) cost more than the test run it judged. The controller needs pytest's
report serialisation hooks and pytest 7's collection API (pytest 7 and later); with an older pytest it stays out of the
way and sends nothing, and the executor judges the run by its result file or exit code.

The executor checks the records (services/executor/src/integrity.ts): a session that started
and did not end, a record with a bad signature, a tripwire with the wrong outcome or missing,
or a report for an id the worker did not collect is never a pass. See docs/SANDBOX.md,
"Verdicts".
"""
import hashlib
import hmac
import json
import os
import select
import sys
import time
import types
import warnings

import pytest

FD_ENV = "LOOPSMITH_VERDICT_FD"
KEY_FD_ENV = "LOOPSMITH_VERDICT_KEY_FD"
TRIPWIRES_ENV = "LOOPSMITH_TRIPWIRES"
TRIPWIRE_DIR = "loopsmith-tripwires"
MESSAGE_LIMIT = 4000
KEY_LIMIT = 256


def _prctl_dumpable(value):
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, value, 0, 0, 0)  # PR_SET_DUMPABLE
    except Exception:
        pass


def _take_channel():
    fd, kfd = os.environ.pop(FD_ENV, None), os.environ.pop(KEY_FD_ENV, None)
    if fd is None or kfd is None:
        return None
    try:
        fd, kfd = int(fd), int(kfd)
        for d in (fd, kfd):
            os.fstat(d)
            os.set_inheritable(d, False)
    except (ValueError, OSError):
        return None
    _prctl_dumpable(0)
    return {"fd": fd, "kfd": kfd, "key": None}


# The channel, in the controller only (None in the worker and when no channel was opened).
_channel = _take_channel()
# The worker's pipe to the controller (in the worker), and the controller's end of it.
_to_controller = None
_from_worker = None
_worker_pid = None


def _send(record):
    if _channel is None or _channel["key"] is None:
        return
    payload = json.dumps(record, separators=(",", ":")).encode()
    line = hmac.new(_channel["key"], payload, hashlib.sha256).hexdigest().encode() + b" " + payload + b"\n"
    view = memoryview(line)
    try:
        while view:
            view = view[os.write(_channel["fd"], view):]
    except OSError:
        pass


def _is_tripwire(nodeid):
    return nodeid.startswith(TRIPWIRE_DIR + "/")


class _Record:
    def __init__(self):
        self.tests = {}
        self.order = []
        self.collected = None
        self.collect_errors = []
        self.crashed = []
        self.tampered = []

    def tamper(self, nodeid, message):
        if any(t["id"] == nodeid for t in self.tampered):
            return
        self.tampered.append({"id": str(nodeid), "message": str(message)[:MESSAGE_LIMIT]})

    def add(self, report):
        nid = report.nodeid
        if nid not in self.tests:
            self.tests[nid] = {"id": nid, "outcome": "passed", "ms": 0.0}
            self.order.append(nid)
        t = self.tests[nid]
        t["ms"] += float(getattr(report, "duration", 0.0) or 0.0) * 1000.0
        if report.failed:
            failed = "failed" if report.when == "call" else "error"
            if t["outcome"] not in ("failed", "error"):
                t["outcome"] = failed
                t["message"] = str(report.longreprtext)[-MESSAGE_LIMIT:]
        elif report.skipped and t["outcome"] == "passed":
            if getattr(report, "wasxfail", None) is not None:
                t["outcome"] = "skipped"
                t["message"] = "xfail: " + str(report.wasxfail)[:MESSAGE_LIMIT]
            else:
                t["outcome"] = "skipped"
                lr = report.longrepr
                t["message"] = str(lr[2] if isinstance(lr, tuple) and len(lr) == 3 else lr)[:MESSAGE_LIMIT]


_record = _Record()


def _pytest_major():
    try:
        return int(str(pytest.__version__).split(".")[0])
    except ValueError:
        return 0


def _supported(config):
    """pytest 7 or later: report serialisation (4.4), ``ExitCode`` (5), ``Module.from_parent(path=)`` (7)."""
    return (
        _pytest_major() >= 7
        and hasattr(config.hook, "pytest_report_to_serializable")
        and hasattr(config.hook, "pytest_report_from_serializable")
    )


_config_ref = []
# An older pytest than the controller needs: the plugin does nothing at all.
_inert = False


def _config():
    return _config_ref[0]


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    global _channel, _inert
    _config_ref[:] = [config]
    if _channel is not None and not _supported(config):
        _inert = True
        # An older pytest: no controller, no records (its tripwires are not added either). The
        # executor judges the run by its result file or its exit code and says so.
        for d in (_channel["fd"], _channel["kfd"]):
            try:
                os.close(d)
            except OSError:
                pass
        _channel = None


# --- the worker -------------------------------------------------------------------------


def _to_parent(message):
    if _to_controller is None:
        return
    data = (json.dumps(message, separators=(",", ":"), default=str) + "\n").encode()
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(_to_controller, view):]
    except OSError:
        pass


def _serial(config, report):
    return config.hook.pytest_report_to_serializable(config=config, report=report)


def _become_worker(config, write_end, read_end):
    """In the child, before anything of the run executes: drop the channel, keep a pipe."""
    global _channel, _to_controller
    for d in (_channel["fd"], _channel["kfd"], read_end):
        os.close(d)
    _channel = None
    _to_controller = write_end
    _prctl_dumpable(1)
    config.pluginmanager.register(_WorkerLoop(), "loopsmith-verdict-worker")
    config.pluginmanager.register(_CodeIdentity(), "loopsmith-verdict-code-identity")
    # The controller writes the terminal report from the replayed reports: the worker's
    # terminal reporter writes nowhere. JUnit is written at the session's end, which the
    # worker never reaches (it exits after its run loop).
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and hasattr(reporter, "_tw"):
        try:
            reporter._tw = type(reporter._tw)(file=open(os.devnull, "w"))
        except Exception:
            pass


# What each collected test runs, in the worker: nodeid -> (function, code object, digest).
_identity = {}


def _digest(code, depth=0):
    """A digest of what a code object does: its bytecode, constants (nested code too) and names."""
    h = hashlib.sha256(code.co_code)
    h.update(repr(code.co_names).encode("utf-8", "replace"))
    for c in code.co_consts:
        if isinstance(c, types.CodeType) and depth < 16:
            h.update(b"C" + _digest(c, depth + 1))
        else:
            h.update(b"K" + repr(c).encode("utf-8", "replace"))
    return h.digest()


def _function_of(item):
    """The plain function a collected test calls, or None (a doctest, a callable object)."""
    try:
        obj = item.obj
    except Exception:
        return None
    obj = getattr(obj, "__func__", obj)
    return obj if isinstance(obj, types.FunctionType) else None


def _same_file(a, b):
    if a == b:
        return True
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (TypeError, ValueError, OSError):
        return False


def _foreign_code(item, fn):
    """Why a function defined in the test module runs code from another file, or None."""
    inner = fn
    for _ in range(32):  # the function a decorator wraps (functools.wraps): its own code is the decorator's
        nxt = getattr(inner, "__wrapped__", None)
        if not isinstance(nxt, types.FunctionType):
            break
        inner = nxt
    try:
        module = item.module
        name, path = module.__name__, getattr(module, "__file__", None)
    except Exception:
        return None
    code = inner.__code__
    if not path or getattr(inner, "__module__", None) != name or code.co_filename.startswith("<"):
        return None
    if _same_file(code.co_filename, path):
        return None
    return "%s runs code from %s, not from its own module %s: its code was replaced (%s.__code__)" % (
        item.nodeid,
        code.co_filename,
        path,
        inner.__name__,
    )


def _check_identity(item, when):
    """Reports (to the controller) and returns why `item` no longer runs the code it was collected with."""
    known = _identity.get(item.nodeid)
    fn = _function_of(item)
    if known is None or fn is None:
        return None
    old_fn, old_code, old_digest = known
    why = None
    if fn is not old_fn and _digest(fn.__code__) != old_digest:
        why = "%s: the test's function was replaced by another after it was collected (found %s)" % (item.nodeid, when)
    elif fn.__code__ is not old_code and _digest(fn.__code__) != old_digest:
        why = "%s: the code of %s was replaced after it was collected (found %s)" % (item.nodeid, fn.__name__, when)
    why = why or _foreign_code(item, fn)
    if why is not None:
        _to_parent({"k": "tampered", "id": item.nodeid, "msg": why})
    return why


def _remember(item):
    """Records what a collected test runs (in the worker); a test already swapped is reported."""
    fn = _function_of(item)
    if fn is None:
        return
    _identity[item.nodeid] = (fn, fn.__code__, _digest(fn.__code__))
    why = _foreign_code(item, fn)
    if why is not None:
        _to_parent({"k": "tampered", "id": item.nodeid, "msg": why})


class _CodeIdentity:
    """Registered in the worker only: each test runs the code it was collected with."""

    @pytest.hookimpl(trylast=True)
    def pytest_itemcollected(self, item):
        _remember(item)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        why = _check_identity(item, "before the test was called")
        if why is not None:
            pytest.fail("loopsmith: " + why, pytrace=False)
        yield
        _check_identity(item, "after the test was called")


def _worker_exit():
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(0)


# --- the controller ---------------------------------------------------------------------


def _fork_worker(session):
    global _from_worker, _worker_pid
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pid = os.fork()
    if pid == 0:
        _become_worker(session.config, w, r)
        try:
            session.perform_collect()
        except BaseException as e:  # a usage error (a path not found), an interrupt
            _to_parent({"k": "raise", "cls": type(e).__name__, "msg": str(e)})
            _worker_exit()
        return
    os.close(w)
    _from_worker, _worker_pid = r, pid
    key = os.pread(_channel["kfd"], KEY_LIMIT, 0).strip()
    os.close(_channel["kfd"])
    _channel["key"] = key or None
    _send({"t": "start", "pid": os.getpid(), "isolated": True, "time": time.time()})


class _Relay:
    """Reads the worker's messages and replays them into the controller's hooks."""

    def __init__(self, session):
        self.session = session
        self.config = session.config
        self.buffer = b""
        self.eof = False
        self.status = None
        self.xdist_ids = None
        self.running = None

    def lines(self):
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                yield line
            if self.eof:
                return
            ready, _, _ = select.select([_from_worker], [], [], 0.5)
            if ready:
                chunk = os.read(_from_worker, 1 << 16)
                if chunk:
                    self.buffer += chunk
                    continue
                self.eof = True
            elif self.worker_gone():
                # Anything the worker wrote before it ended is still in the pipe.
                ready, _, _ = select.select([_from_worker], [], [], 0)
                if not ready:
                    self.eof = True

    def worker_gone(self):
        if self.status is not None:
            return True
        try:
            pid, status = os.waitpid(_worker_pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = _worker_pid, 0
        if pid == 0:
            return False
        self.status = status
        return True

    def until(self, *kinds):
        """Replays messages until one of `kinds` (returned) or the worker's end (None)."""
        hook = self.config.hook
        for line in self.lines():
            try:
                m = json.loads(line)
            except ValueError:
                continue
            k = m.get("k") if isinstance(m, dict) else None
            if k in ("report", "collectreport"):
                data = m.get("r")
                # JSON has no tuples: a skip's longrepr (path, line, reason) and a location come
                # back as lists, and pytest's reporters (JUnit's append_skipped) want tuples.
                if isinstance(data, dict):
                    for key in ("longrepr", "location"):
                        if isinstance(data.get(key), list):
                            data[key] = tuple(data[key])
                rep = hook.pytest_report_from_serializable(config=self.config, data=data)
                if rep is None:
                    continue
                if k == "report":
                    hook.pytest_runtest_logreport(report=rep)
                else:
                    hook.pytest_collectreport(report=rep)
            elif k == "xdist-collected":
                ids = list(m.get("ids") or [])
                if self.xdist_ids is None:
                    self.xdist_ids = ids
                    _record.collected = ids
                    self.session.testscollected = len([i for i in ids if not _is_tripwire(i)])
                elif self.xdist_ids != ids:
                    _record.collect_errors.append({"id": "", "message": "the workers collected different tests"})
            elif k == "xdist-down":
                _record.crashed.append(str(m.get("msg") or "")[:MESSAGE_LIMIT])
            elif k == "tampered":
                _record.tamper(m.get("id") or "", m.get("msg") or "")
            elif k in ("logstart", "logfinish"):
                self.running = m.get("id") if k == "logstart" else None
                loc = tuple(m.get("loc") or ("", None, ""))
                getattr(hook, "pytest_runtest_" + k)(nodeid=m.get("id"), location=loc)
            if k in kinds:
                return m
        return None

    def crashed(self, why=None):
        """The worker's session ended early: recorded, counted as a failure, and said."""
        if why is None:
            self.worker_gone()
            while self.status is None:
                time.sleep(0.01)
                self.worker_gone()
            if os.WIFSIGNALED(self.status):
                how = "killed by signal %d" % os.WTERMSIG(self.status)
            else:
                how = "exit status %d" % os.WEXITSTATUS(self.status)
            why = "the test process ended before its session did (%s)" % how
        _record.crashed.append(why)
        if self.running is not None:
            t = _record.tests.setdefault(self.running, {"id": self.running, "outcome": "error", "ms": 0.0})
            if self.running not in _record.order:
                _record.order.append(self.running)
            t["outcome"], t["message"] = "error", why + ", while this test ran"
        self.session.testsfailed += 1
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("loopsmith: " + why)


_relay = None


def _reraise(session, m):
    cls, msg = m.get("cls"), str(m.get("msg") or "")
    if cls == "UsageError":
        raise pytest.UsageError(msg)
    if cls == "Exit":
        raise pytest.exit(msg, returncode=m.get("returncode"))
    if cls == "Failed":
        raise session.Failed(msg)
    if cls == "Interrupted":
        raise session.Interrupted(msg)
    if cls == "KeyboardInterrupt":
        raise KeyboardInterrupt()
    # Anything else (SystemExit raised by code under test as it was imported, an internal
    # error) ended the worker's session early: never a pass.
    _relay.crashed("the test process stopped with %s%s" % (cls, ": " + msg if msg else ""))


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    global _relay
    if _channel is None:
        return None
    _fork_worker(session)
    if _channel is None:  # the worker, with its tests collected
        xdist = session.config.pluginmanager.hasplugin("dsession")
        ids = None if xdist else [i.nodeid for i in session.items]
        _to_parent({"k": "collected", "ids": ids})
        return True
    _relay = _Relay(session)
    m = _relay.until("collected", "raise")
    if m is None:
        _relay.crashed()
        return True
    if m.get("k") == "raise":
        _reraise(session, m)
    ids = m.get("ids")
    if ids is not None:  # under xdist the workers' collection arrives later
        _record.collected = list(ids)
    # Progress and "no tests ran" count the run's own tests, not the tripwires.
    session.testscollected = len([i for i in ids or [] if not _is_tripwire(i)])
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    # The controller: it has no items; the worker's reports arrive meanwhile.
    if _relay is None:
        return None
    m = _relay.until("done", "raise")
    if m is None:
        if not _record.crashed:
            _relay.crashed()
        return True
    if m.get("k") == "raise":
        _relay.until("done")
        _reraise(session, m)
    return True


class _WorkerLoop:
    """Registered in the worker only: runs the tests, says how the loop ended, and exits."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        outcome = yield
        exc = outcome.excinfo
        if exc is not None:
            e = exc[1]
            _to_parent({"k": "raise", "cls": type(e).__name__, "msg": str(e), "returncode": getattr(e, "returncode", None)})
        _to_parent({"k": "done"})
        _worker_exit()


def pytest_runtest_logstart(nodeid, location):
    if _to_controller is not None:
        _to_parent({"k": "logstart", "id": nodeid, "loc": list(location)})


def pytest_runtest_logfinish(nodeid, location):
    if _to_controller is not None:
        _to_parent({"k": "logfinish", "id": nodeid, "loc": list(location)})


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if _inert:
        return
    path = os.environ.get(TRIPWIRES_ENV)
    if not path or not os.path.isfile(path):
        return
    import pathlib

    def expand(node):
        for x in node.collect():
            if isinstance(x, pytest.Item):
                yield x
            else:
                yield from expand(x)

    module = pytest.Module.from_parent(session, path=pathlib.Path(path), nodeid=TRIPWIRE_DIR + "/" + os.path.basename(path))
    wires = list(expand(module))
    if _to_controller is not None:
        for item in wires:
            _remember(item)
    items.extend(wires)


def pytest_runtest_logreport(report):
    if _to_controller is not None:
        _to_parent({"k": "report", "r": _serial(_config(), report)})
        return
    _record.add(report)


def pytest_collectreport(report):
    if _to_controller is not None:
        _to_parent({"k": "collectreport", "r": _serial(_config(), report)})
        return
    if report.failed:
        _record.collect_errors.append({"id": report.nodeid, "message": str(report.longreprtext)[-MESSAGE_LIMIT:]})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    # A repository that runs its tests under xdist (`-n`): its workers collect.
    if _to_controller is None:
        return
    _to_parent({"k": "xdist-collected", "ids": list(ids)})


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    if error and _to_controller is not None:
        _to_parent({"k": "xdist-down", "msg": str(error)[:MESSAGE_LIMIT]})


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config):
    if _channel is not None and _is_tripwire(report.nodeid):
        return "loopsmith-tripwire", "", ""
    return None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    terminalreporter.stats.pop("loopsmith-tripwire", None)
    for key in list(terminalreporter.stats):
        kept = [r for r in terminalreporter.stats[key] if not _is_tripwire(getattr(r, "nodeid", "") or "")]
        if kept:
            terminalreporter.stats[key] = kept
        else:
            del terminalreporter.stats[key]
    yield


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if _channel is None or _channel["key"] is None:
        return
    real = [t for nid, t in _record.tests.items() if not _is_tripwire(nid)]
    # The exit status as if the tripwires were not there (a must-fail tripwire fails).
    if _record.collect_errors and not real and int(exitstatus) == 1:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    elif int(exitstatus) in (0, 1) and not _record.collect_errors and not _record.crashed:
        if _record.tampered:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif not real:
            session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
        elif all(t["outcome"] in ("passed", "skipped") for t in real):
            session.exitstatus = pytest.ExitCode.OK
        else:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _send(
        {
            "t": "end",
            "exitstatus": int(session.exitstatus),
            "isolated": True,
            "collected": _record.collected,
            "tests": [_record.tests[n] for n in _record.order],
            "collectErrors": _record.collect_errors,
            "crashed": _record.crashed,
            "tampered": _record.tampered,
        }
    )
