/**
 * The Python supervisor (bootstrap.ts describes what every supervisor does), written to start
 * lean: it runs once per sandbox container, so each module it imports is paid for by every
 * run. It imports only built-in or C modules (`posix`, `_signal`, `select`, `binascii`,
 * `_ctypes`, `time`), not the Python-level `os`, `signal`, `json`, `subprocess`, `threading`,
 * `base64` or `ctypes` (about 25 ms of CPU a start in loopsmith/sandbox-python, measured with
 * `python3 -X importtime` and rusage; see docs/BENCHMARKS.md).
 *
 * - Input: length-prefixed fields ({@link encodeFields}), parsed with bytes operations.
 * - Output: the trailer as JSON, written by a small encoder (RFC 8259 string escapes).
 * - Children: `fork` + `execve` from a process that has no other thread, so no fork-with-threads
 *   warning can reach the command's stderr. One `select` loop in the main thread watches stdin
 *   (its end: the executor is gone), the verdict pipe, the child's exit (SIGCHLD through the
 *   signal wakeup pipe) and the deadline (select's timeout).
 * - Non-dumpable through `prctl(PR_SET_DUMPABLE, 0)`, called by `_ctypes` (the C module under
 *   `ctypes`), as `ctypes.CDLL(None).prctl` would.
 * Python 3.8 to 3.13.
 */

import { PYTHON_MAIN, PYTHON_RUNNER } from "./bootstrap-python-main.js";

/**
 * The supervisor's wire helpers (also run alone by the unit tests): `fields`/`pairs` decode
 * {@link encodeFields}; `jstr`/`jlist`/`jmap`/`jobj` encode JSON. Strings are UTF-8 bytes:
 * backslash and quote are escaped, control characters become `\u00XX`, other bytes are kept.
 */
export const PYTHON_WIRE = String.raw`
CTRL = bytes(range(32))
def fields(b):
    # Each field: its length in decimal, a colon, then that many bytes.
    out, i = [], 0
    while i < len(b):
        j = b.index(b":", i)
        n = int(b[i:j])
        end = j + 1 + n
        if n < 0 or end > len(b):
            raise ValueError("bad frame")
        out.append(b[j + 1:end])
        i = end
    return out
def pairs(b):
    f = fields(b)
    if len(f) % 2:
        raise ValueError("bad frame")
    return dict(zip(f[0::2], f[1::2]))
def jstr(b):
    b = b.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    if len(b.translate(None, CTRL)) != len(b):
        b = b"".join(b"\\u%04x" % c if c < 32 else bytes((c,)) for c in b)
    return b'"' + b + b'"'
def jlist(items):
    return b"[" + b",".join(jstr(x) for x in items) + b"]"
def jmap(d):
    return b"{" + b",".join(jstr(k) + b":" + jstr(v) for k, v in d.items()) + b"}"
def jval(v):
    if v is None:
        return b"null"
    if isinstance(v, bytes):
        return jstr(v)
    if isinstance(v, float):
        return b"%.3f" % v
    return b"%d" % v
def jobj(items):
    return b"{" + b",".join(jstr(k) + b":" + jval(v) for k, v in items) + b"}"
`;

/** The supervisor's imports and its `prctl(PR_SET_DUMPABLE, 0)` (also run alone by the unit tests). */
export const PYTHON_PRELUDE = String.raw`
import posix as os, sys, time, _signal as signal, select, binascii
try:
    import _ctypes
    class _Int(_ctypes._SimpleCData):
        _type_ = "i"
    class _Fn(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL
        _restype_ = _Int
    class _Libc:
        _handle = _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)
    _Fn(("prctl", _Libc))(4, 0, 0, 0, 0)
except Exception:
    pass
`;

const PROCESSES = String.raw`
marker = b""
def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
def out(items):
    os.write(2, marker)
    write_all(1, marker + jobj(items) + b"\n")
def read_exact(n):
    chunks = []
    while n > 0:
        b = os.read(0, min(n, 1 << 20))
        if not b:
            raise EOFError("stdin closed")
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)
def read_line():
    line = b""
    while not line.endswith(b"\n"):
        b = os.read(0, 1)
        if not b:
            raise EOFError("stdin closed")
        line += b
        if len(line) > 20:
            raise ValueError("bad header")
    return line
def kill_all():
    for _ in range(5000):
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.0005)
def check_owner():
    # stdin is the executor's attach connection: its end means the executor is gone.
    try:
        b = os.read(0, 65536)
    except BlockingIOError:
        return
    except OSError:
        b = b""
    if not b:
        kill_all()
        os._exit(137)
def close_all(*fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
# A child's exit wakes select through this pipe (SIGCHLD's handler does nothing else).
wake_r, wake_w = os.pipe()
os.set_blocking(wake_r, False)
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda n, f: None)
def exec_child(argv, env, name):
    saved = last = None
    path = [argv[0]] if b"/" in argv[0] else [(d + b"/" if d else b"") + argv[0] for d in env.get(b"PATH", b"/bin:/usr/bin").split(b":")]
    for p in path:
        try:
            os.execve(p, argv, env)
        except OSError as e:
            last = e
            if saved is None and e.errno not in (2, 20):
                saved = e
    raise saved or last
def spawn(argv, env, cwd=None, stdin=-1, stdout=1, stderr=2, keep=(), name=b""):
    # argv and env as bytes. The child: chdir, its stdin (/dev/null when -1), stdout and stderr,
    # every other descriptor closed but keep, the signals the interpreter ignores back to their
    # default, execve along PATH; when that fails, why on stderr and exit 127 (not found) or 126.
    pid = os.fork()
    if pid:
        return pid
    code = 126
    try:
        try:
            if cwd is not None:
                os.chdir(cwd)
            if stdin < 0:
                stdin = os.open(b"/dev/null", os.O_RDONLY)
            for fd, to in ((stdin, 0), (stdout, 1), (stderr, 2)):
                if fd != to:
                    os.dup2(fd, to)
            for fd in keep:
                os.set_inheritable(fd, True)
            try:
                top = max(int(n) for n in os.listdir(b"/proc/self/fd")) + 1
            except (OSError, ValueError):
                top = 65536
            lo = 3
            for fd in sorted(keep):
                os.closerange(lo, fd)
                lo = fd + 1
            os.closerange(lo, max(lo, top))
            for s in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
                signal.signal(s, signal.SIG_DFL)
            exec_child(argv, env, name)
        except OSError as e:
            code = 127 if e.errno == 2 else 126
            os.write(2, b"loopsmith: cannot run " + name + b": " + (e.strerror or "error").encode() + b"\n")
    finally:
        os._exit(code)
def take(reads, fd):
    try:
        b = os.read(fd, 65536)
    except BlockingIOError:
        return
    if not b:
        del reads[fd]
        return
    sink = reads[fd]
    if sink[1] > 0:
        sink[0].append(b)
        sink[1] -= len(b)
def pump(pid, reads, until=None, w=-1, data=b""):
    # Until child pid exits (its wait status) or until passes (None): reads each pipe of reads
    # ({fd: [chunks, bytes still kept]}) until its end, writes data to w (non-blocking; closed
    # once written or when the reader is gone) and watches stdin.
    view = memoryview(data)
    try:
        while True:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                return status
            t = None
            if until is not None:
                t = until - time.monotonic()
                if t <= 0:
                    return None
            r, wr, _ = select.select([0, wake_r] + list(reads), [w] if w >= 0 else [], [], t)
            if 0 in r:
                check_owner()
            if wake_r in r:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except OSError:
                        break
            for fd in r:
                if fd in reads:
                    take(reads, fd)
            if wr:
                try:
                    view = view[os.write(w, view[: 1 << 16]):]
                except BlockingIOError:
                    pass
                except OSError:
                    view = view[:0]
                if not view:
                    os.close(w)
                    w = -1
    finally:
        if w >= 0:
            os.close(w)
def status_of(st):
    return (None, os.WTERMSIG(st)) if os.WIFSIGNALED(st) else (os.WEXITSTATUS(st), None)
def reap(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    os.waitpid(pid, 0)
def readable(fd, seconds):
    until = time.monotonic() + seconds
    while True:
        t = until - time.monotonic()
        if t <= 0:
            return False
        r, _, _ = select.select([0, fd], [], [], t)
        if 0 in r:
            check_owner()
        if fd in r:
            return True
def send(fd, data):
    view = memoryview(data)
    while view:
        r, wr, _ = select.select([0], [fd], [])
        if 0 in r:
            check_owner()
        if wr:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                pass
def key_fd(key):
    # The key in a file only this descriptor reaches, read-only: an anonymous memory file
    # (nothing on disk, no name), reopened read-only through /proc and the writable one closed.
    # Every pytest of a command line reads it with pread; none can change it.
    w = os.memfd_create("loopsmith-verdict-key", os.MFD_CLOEXEC)
    os.write(w, key)
    r = os.open("/proc/self/fd/%d" % w, os.O_RDONLY | os.O_CLOEXEC)
    os.close(w)
    return r
def others():
    me = os.getpid()
    return [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
`;

/** Python 3.8+ supervisor (for the Python image); makes itself non-dumpable too. */
export const PYTHON_BOOTSTRAP = PYTHON_PRELUDE + PYTHON_WIRE + PROCESSES + PYTHON_RUNNER + PYTHON_MAIN;
