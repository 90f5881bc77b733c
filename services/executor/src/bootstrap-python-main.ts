/**
 * The second half of the Python supervisor (bootstrap-python.ts): the pre-started runner and
 * the run itself, over the helpers defined there.
 */
/** The pre-started pytest runner's side of the supervisor (prestart.ts). */
export const PYTHON_RUNNER = String.raw`
def prestart(cfg):
    # The pytest runner, started before the run (prestart.ts), with the verdict channel open:
    # its key file stays empty until a run that uses the runner arrives.
    cfg = {"argv": fields(cfg[b"argv"]), "prefix": fields(cfg[b"prefix"]), "env": pairs(cfg[b"env"]), "perRun": set(fields(cfg[b"perRun"])), "cwd": cfg[b"cwd"]}
    ctl_r, ctl_w = os.pipe()
    ready_r, ready_w = os.pipe()
    vr, vw = os.pipe()
    kw = os.memfd_create("loopsmith-verdict-key", os.MFD_CLOEXEC)
    kr = os.open("/proc/self/fd/%d" % kw, os.O_RDONLY | os.O_CLOEXEC)
    try:
        pid = spawn(cfg["argv"] + [b"%d" % ctl_r, b"%d" % ready_w], cfg["env"], cwd=cfg["cwd"], keep=(ctl_r, ready_w, vw, kr), name=cfg["argv"][0])
    except OSError:
        close_all(ctl_r, ctl_w, ready_r, ready_w, vr, vw, kw, kr)
        return None
    close_all(ctl_r, ready_w, vw, kr)
    # vw and kr stay the runner's descriptor numbers; the supervisor's copies are closed.
    return {"cfg": cfg, "pid": pid, "ctl": ctl_w, "ready": ready_r, "vr": vr, "vw": vw, "kw": kw, "kr": kr}
def drop_runner(pre):
    reap(pre["pid"])
    close_all(pre["ctl"], pre["ready"], pre["vr"], pre["kw"])
def use_runner(pre, spec, argv, env, cwd):
    # The run's command must be the runner's interpreter running pytest, in the runner's
    # environment but for the per-run variables, with the verdict channel; and the runner ready.
    cfg = pre["cfg"]
    n = len(cfg["prefix"])
    key = spec.get(b"verdictKey")
    if not key or argv[:n] != cfg["prefix"]:
        return None
    for k in set(env) | set(cfg["env"]):
        if k not in cfg["perRun"] and env.get(k) != cfg["env"].get(k):
            return None
    if not readable(pre["ready"], 10.0) or os.read(pre["ready"], 1) != b"1":
        return None
    os.write(pre["kw"], key)
    env = dict(env)
    env[b"LOOPSMITH_VERDICT_FD"] = b"%d" % pre["vw"]
    env[b"LOOPSMITH_VERDICT_KEY_FD"] = b"%d" % pre["kr"]
    # The runner decodes this with json (pytest imports it anyway).
    go = b'{"args":' + jlist(argv[n:]) + b',"env":' + jmap(env) + b',"cwd":' + jstr(cwd) + b',"argv":' + jlist(argv) + b"}"
    old = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        send(pre["ctl"], go)
    except OSError:
        return None
    finally:
        signal.signal(signal.SIGPIPE, old)
    close_all(pre["ctl"], pre["ready"], pre["kw"])
    return pre["pid"]
`;

/** The supervisor's run: extract, the command (or the runner), the end of the run, the trailer. */
export const PYTHON_MAIN = String.raw`
def extract(spec, archive, env):
    # tar as the sandbox user: the archive through a pipe while its stderr is read.
    in_r, in_w = os.pipe()
    err_r, err_w = os.pipe()
    null = os.open(b"/dev/null", os.O_WRONLY)
    try:
        pid = spawn(fields(spec[b"extract"]), env, stdin=in_r, stdout=null, stderr=err_w, name=b"tar")
    finally:
        close_all(in_r, err_w, null)
    os.set_blocking(in_w, False)
    err = []
    reads = {err_r: [err, 1 << 62]}
    old = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        st = pump(pid, reads, w=in_w, data=archive)
    finally:
        signal.signal(signal.SIGPIPE, old)
    while reads:
        take(reads, err_r)
    os.close(err_r)
    code, sig = status_of(st)
    return (code if sig is None else -sig), b"".join(err)
def read_result(spec, env, limit):
    # No result file (a controller's run writes none): no reader to start. lstat only looks;
    # the file is read, when there is one, by dd as the sandbox user, without following links.
    try:
        os.lstat(spec[b"resultPath"])
    except OSError:
        return None
    r, w = os.pipe()
    null = os.open(b"/dev/null", os.O_WRONLY)
    try:
        pid = spawn(fields(spec[b"read"]), env, stdout=w, stderr=null, name=b"dd")
    finally:
        close_all(w, null)
    chunks = []
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, st = os.waitpid(pid, 0)
    data = b"".join(chunks)
    if status_of(st) == (0, None) and data:
        return binascii.b2a_base64(data[:limit], newline=False)
    return None
def main():
    global marker
    pre = None
    if len(sys.argv) > 1:
        try:
            pre = prestart(pairs(sys.argv[1].encode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())))
        except Exception:
            pre = None
    spec = pairs(read_exact(int(read_line())))
    archive = read_exact(int(spec[b"archiveBytes"]))
    marker = spec[b"marker"]
    env = pairs(spec[b"env"])
    argv = fields(spec[b"argv"])
    cwd = spec.get(b"cwd") or b"/workspace"
    limit = int(spec[b"resultLimitBytes"])
    rc, err = extract(spec, archive, env)
    del archive
    if rc != 0:
        if pre is not None:
            drop_runner(pre)
        why = err.decode("utf-8", "replace")[-2000:].encode() or b"tar exit %d" % rc
        out([(b"phase", b"setup"), (b"error", why), (b"exitCode", None), (b"signal", None), (b"durationMs", 0), (b"stragglers", 0)])
        return
    start = time.monotonic()
    code, sig = None, None
    verdict, fds, reads = [], (), {}
    pid = use_runner(pre, spec, argv, env, cwd) if pre is not None else None
    if pid is not None:
        reads[pre["vr"]] = [verdict, limit]
    else:
        if pre is not None:
            drop_runner(pre)
            start = time.monotonic()
        if spec.get(b"verdictKey"):
            vr, vw = os.pipe()
            kr = key_fd(spec[b"verdictKey"])
            fds = (vw, kr)
            env = dict(env)
            env[b"LOOPSMITH_VERDICT_FD"] = b"%d" % vw
            env[b"LOOPSMITH_VERDICT_KEY_FD"] = b"%d" % kr
            reads[vr] = [verdict, limit]
    with_verdict = bool(reads)
    try:
        if pid is None:
            try:
                pid = spawn(fields(spec[b"drop"]) + argv, env, cwd=cwd, keep=fds, name=argv[0])
            finally:
                close_all(*fds)
                fds = ()
        st = pump(pid, reads, until=start + float(spec[b"deadlineMs"]) / 1000.0)
        if st is None:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            st = pump(pid, reads)
        code, sig = status_of(st)
    except OSError as e:
        os.write(2, b"loopsmith: cannot run " + argv[0] + b": " + (e.strerror or "error").encode() + b"\n")
        code = 127 if e.errno == 2 else 126
    # From here on stdin is no longer watched: the run ends with its trailer.
    duration = (time.monotonic() - start) * 1000.0
    stragglers = len(others())
    kill_all()
    trailer = [(b"phase", b"run"), (b"exitCode", code), (b"signal", sig), (b"durationMs", duration), (b"stragglers", stragglers)]
    if with_verdict:
        # The channel ends once every holder of its write end is gone; wait for that 2 s at most.
        until = time.monotonic() + 2.0
        while reads:
            t = until - time.monotonic()
            if t <= 0:
                break
            r, _, _ = select.select(list(reads), [], [], t)
            for fd in r:
                take(reads, fd)
        trailer.append((b"verdict", binascii.b2a_base64(b"".join(verdict)[:limit], newline=False)))
    result = read_result(spec, env, limit)
    if result is not None:
        trailer.append((b"result", result))
    out(trailer)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
main()
`;
