/**
 * The Python supervisor as it was before it started lean (JSON spec, subprocess, threads),
 * kept only for bench/supervisor.ts to measure the two side by side. Not used by the executor.
 */
export const LEGACY_PYTHON_BOOTSTRAP = String.raw`
import os, sys, json, time, signal, subprocess, base64, select, threading
try:
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
except Exception:
    pass
marker = b""
def out(obj):
    os.write(2, marker)
    data = marker + json.dumps(obj).encode() + b"\n"
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]
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
ending = threading.Lock()
def watch_owner():
    # stdin is the executor's attach connection: its end means the executor is gone.
    while True:
        try:
            select.select([0], [], [])
            if not os.read(0, 65536):
                break
        except BlockingIOError:
            continue
        except OSError:
            break
    ending.acquire()
    for _ in range(5000):
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.0005)
    os._exit(137)
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
def close_all(*fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
def read_channel(vr, limit, into):
    size = 0
    while True:
        b = os.read(vr, 65536)
        if not b:
            break
        if size < limit:
            into.append(b)
            size += len(b)
def prestart(cfg):
    # The pytest runner, started before the run (prestart.ts), with the verdict channel open:
    # its key file stays empty until a run that uses the runner arrives.
    ctl_r, ctl_w = os.pipe()
    ready_r, ready_w = os.pipe()
    vr, vw = os.pipe()
    kw = os.memfd_create("loopsmith-verdict-key", os.MFD_CLOEXEC)
    kr = os.open("/proc/self/fd/%d" % kw, os.O_RDONLY | os.O_CLOEXEC)
    try:
        p = subprocess.Popen(cfg["argv"] + [str(ctl_r), str(ready_w)], cwd=cfg["cwd"], env=cfg["env"], stdin=subprocess.DEVNULL, close_fds=True, pass_fds=(ctl_r, ready_w, vw, kr))
    except OSError:
        close_all(ctl_r, ctl_w, ready_r, ready_w, vr, vw, kw, kr)
        return None
    close_all(ctl_r, ready_w, vw, kr)
    return {"cfg": cfg, "p": p, "ctl": ctl_w, "ready": ready_r, "vr": vr, "vw": vw, "kw": kw, "kr": kr}
def drop_runner(pre):
    try:
        pre["p"].kill()
    except OSError:
        pass
    pre["p"].wait()
    close_all(pre["ctl"], pre["ready"], pre["vr"], pre["kw"])
def use_runner(pre, spec, env):
    # The run's command must be the runner's interpreter running pytest, in the runner's
    # environment but for the per-run variables, with the verdict channel; and the runner ready.
    cfg = pre["cfg"]
    n = len(cfg["prefix"])
    if not spec.get("verdictKey") or spec["argv"][:n] != cfg["prefix"]:
        return None
    for k in set(env) | set(cfg["env"]):
        if k not in cfg["perRun"] and env.get(k) != cfg["env"].get(k):
            return None
    r, _, _ = select.select([pre["ready"]], [], [], 10.0)
    if not r or os.read(pre["ready"], 1) != b"1":
        return None
    os.write(pre["kw"], spec["verdictKey"].encode())
    env = dict(env, LOOPSMITH_VERDICT_FD=str(pre["vw"]), LOOPSMITH_VERDICT_KEY_FD=str(pre["kr"]))
    go = json.dumps({"args": spec["argv"][n:], "env": env, "cwd": spec.get("cwd") or "/workspace", "argv": spec["argv"]}).encode()
    old = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        view = memoryview(go)
        while view:
            view = view[os.write(pre["ctl"], view):]
    except OSError:
        return None
    finally:
        signal.signal(signal.SIGPIPE, old)
    close_all(pre["ctl"], pre["ready"], pre["kw"])
    return pre["p"]
def main():
    global marker
    pre = None
    if len(sys.argv) > 1:
        try:
            pre = prestart(json.loads(sys.argv[1]))
        except Exception:
            pre = None
    spec = json.loads(read_exact(int(read_line())))
    archive = read_exact(spec["archiveBytes"])
    threading.Thread(target=watch_owner, daemon=True).start()
    marker = spec["marker"].encode()
    env = spec["env"]
    setup = subprocess.run(spec["extract"], input=archive, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, close_fds=True)
    if setup.returncode != 0:
        if pre is not None:
            drop_runner(pre)
        out({"phase": "setup", "error": setup.stderr.decode("utf-8", "replace")[-2000:] or "tar exit %d" % setup.returncode, "exitCode": None, "signal": None, "durationMs": 0, "stragglers": 0})
        return
    start = time.monotonic()
    code, sig = None, None
    verdict, fds, reader = [], (), None
    limit = spec["resultLimitBytes"]
    p = use_runner(pre, spec, env) if pre is not None else None
    if p is not None:
        reader = threading.Thread(target=read_channel, args=(pre["vr"], limit, verdict), daemon=True)
        reader.start()
    else:
        if pre is not None:
            drop_runner(pre)
            start = time.monotonic()
        if spec.get("verdictKey"):
            vr, vw = os.pipe()
            kr = key_fd(spec["verdictKey"].encode())
            fds = (vw, kr)
            env = dict(env, LOOPSMITH_VERDICT_FD=str(vw), LOOPSMITH_VERDICT_KEY_FD=str(kr))
            reader = threading.Thread(target=read_channel, args=(vr, limit, verdict), daemon=True)
            reader.start()
    try:
        if p is None:
            p = subprocess.Popen(spec["drop"] + spec["argv"], cwd=spec.get("cwd") or "/workspace", env=env, stdin=subprocess.DEVNULL, close_fds=True, pass_fds=fds)
            close_all(*fds)
            fds = ()
        try:
            rc = p.wait(timeout=spec["deadlineMs"] / 1000.0)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        code, sig = (rc, None) if rc >= 0 else (None, -rc)
    except OSError as e:
        os.write(2, ("loopsmith: cannot run %s: %s\n" % (spec["argv"][0], e.strerror)).encode())
        code = 127 if isinstance(e, FileNotFoundError) else 126
    close_all(*fds)
    # From here to the trailer, an executor gone meanwhile waits: one ending, not two.
    ending.acquire()
    duration = (time.monotonic() - start) * 1000.0
    stragglers = len(others())
    for _ in range(5000):
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.0005)
    trailer = {"phase": "run", "exitCode": code, "signal": sig, "durationMs": duration, "stragglers": stragglers}
    if reader is not None:
        reader.join(2.0)
        trailer["verdict"] = base64.b64encode(b"".join(verdict)[: spec["resultLimitBytes"]]).decode()
    # No result file (a controller's run writes none): no reader to start. lstat only looks;
    # the file is read, when there is one, by dd as the sandbox user, without following links.
    try:
        os.lstat(spec["resultPath"])
        written = True
    except OSError:
        written = False
    if written:
        r = subprocess.run(spec["read"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        if r.returncode == 0 and r.stdout:
            trailer["result"] = base64.b64encode(r.stdout[: spec["resultLimitBytes"]]).decode()
    out(trailer)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
main()
`;
