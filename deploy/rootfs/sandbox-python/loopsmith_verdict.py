"""loopsmith's pytest plugin: the verdict, recorded by the process that does not run the tests.

Installed in the sandbox image (site-packages, read-only) and loaded with
``-p loopsmith_verdict``. It does two things, depending on the process it is loaded in:

* In the **controller** (the pytest process the sandbox started; with pytest-xdist it only
  schedules, and the tests are collected and run in worker processes): it takes the verdict
  channel the supervisor opened (``LOOPSMITH_VERDICT_FD``, a pipe) and the run's key
  (``LOOPSMITH_VERDICT_KEY``), removes both from the environment before any worker starts,
  marks the pipe not inheritable and the process not dumpable (so a worker of the same user
  can neither write to the pipe nor read the key from /proc), and writes HMAC-SHA256-signed
  JSON records on it: ``start`` at load, ``end`` at the session's end with every test's
  outcome and the ids the workers collected. It also keeps the tripwire tests out of the
  terminal report and out of the exit status.
* In a **worker** (or in-process when xdist is off): it appends the run's tripwire tests
  (the module ``LOOPSMITH_TRIPWIRES`` names, written by the executor after the candidate was
  fixed) after every other collected item, so they run last, after any -k/-m selection.

The executor checks the records (services/executor/src/integrity.ts): a session that started
and did not end, a record with a bad signature, a tripwire with the wrong outcome or missing,
or a report for an id nobody collected is never a pass. See docs/SANDBOX.md, "Verdicts".
"""
import hashlib
import hmac
import json
import os
import time

import pytest

FD_ENV = "LOOPSMITH_VERDICT_FD"
KEY_ENV = "LOOPSMITH_VERDICT_KEY"
TRIPWIRES_ENV = "LOOPSMITH_TRIPWIRES"
TRIPWIRE_DIR = "loopsmith-tripwires"
MESSAGE_LIMIT = 4000


def _take_channel():
    fd, key = os.environ.pop(FD_ENV, None), os.environ.pop(KEY_ENV, None)
    if fd is None or key is None:
        return None
    try:
        fd = int(fd)
        os.fstat(fd)
        os.set_inheritable(fd, False)
    except (ValueError, OSError):
        return None
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    except Exception:
        pass
    return fd, key.encode()


_channel = _take_channel()


def _send(record):
    if _channel is None:
        return
    fd, key = _channel
    payload = json.dumps(record, separators=(",", ":")).encode()
    line = hmac.new(key, payload, hashlib.sha256).hexdigest().encode() + b" " + payload + b"\n"
    view = memoryview(line)
    try:
        while view:
            view = view[os.write(fd, view):]
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


def _controller(config):
    return _channel is not None and not hasattr(config, "workerinput")


def _isolated(config):
    n = getattr(config.option, "numprocesses", None)
    return bool(n) and config.pluginmanager.hasplugin("dsession")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if _controller(config):
        _send({"t": "start", "pid": os.getpid(), "isolated": _isolated(config), "time": time.time()})


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
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
    items.extend(expand(module))


def pytest_runtest_logreport(report):
    _record.add(report)


def pytest_collectreport(report):
    if report.failed:
        _record.collect_errors.append({"id": report.nodeid, "message": str(report.longreprtext)[-MESSAGE_LIMIT:]})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    if _record.collected is None:
        _record.collected = list(ids)
    elif _record.collected != list(ids):
        _record.collect_errors.append({"id": "", "message": "the workers collected different tests"})


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    if error:
        _record.crashed.append(str(error)[:MESSAGE_LIMIT])


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config):
    if _controller(config) and _is_tripwire(report.nodeid):
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
    if not _controller(session.config):
        return
    real = [t for nid, t in _record.tests.items() if not _is_tripwire(nid)]
    # The exit status as if the tripwires were not there (a must-fail tripwire fails), and
    # pytest's own for a collection error (2, "interrupted"), which xdist reports as 1.
    if _record.collect_errors and not real and int(exitstatus) == 1:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    elif int(exitstatus) in (0, 1) and not _record.collect_errors:
        if not real:
            session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
        elif all(t["outcome"] in ("passed", "skipped") for t in real):
            session.exitstatus = pytest.ExitCode.OK
        else:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    collected = _record.collected
    if collected is None and not _isolated(session.config):
        collected = [item.nodeid for item in getattr(session, "items", [])]
    _send(
        {
            "t": "end",
            "exitstatus": int(session.exitstatus),
            "isolated": _isolated(session.config),
            "collected": collected,
            "tests": [_record.tests[n] for n in _record.order],
            "collectErrors": _record.collect_errors,
            "crashed": _record.crashed,
        }
    )
