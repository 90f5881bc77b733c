/**
 * The supervisor that runs inside every sandbox container (under docker-init), in the
 * image's own language so that no extra file is needed in the image.
 *
 * A warm container runs it from the moment it is created; it blocks reading stdin. Its
 * stdin is the executor's attach connection (`StdinOnce`): when the executor dies, the
 * engine closes it, the supervisor reads end-of-file and exits, and the container ends —
 * a sandbox lives no longer than its owner, whatever host or pid namespace that owner was
 * in. The supervisor keeps reading stdin during a run: end-of-file then kills every process
 * in the container and exits (code 137) without a trailer, since nobody is left to read one.
 * A run sends one {@link BootSpec} and the workspace as a tar archive
 * (`<json length>\n<json><archive>`, see {@link encodeSpec}), and the supervisor:
 * 1. extracts the archive with `tar` running as the sandbox user (so the files are the
 *    sandbox user's, and nothing is written with more rights than the command has),
 * 2. runs the command as the sandbox user, stdin from /dev/null, stdout/stderr inherited,
 *    the given env,
 * 3. when it exits, SIGKILLs every other process in the container (background children),
 * 4. reads the result file (JUnit XML) with `dd` running as the sandbox user, without
 *    following a link and without blocking on a FIFO, at most `resultLimitBytes`, and
 * 5. writes the marker to stderr, then a trailer to stdout: `MARKER + json + "\n"`
 *    ({@link BootTrailer}), then exits, which ends the container (docker-init's child is gone).
 * Every step run as the sandbox user goes through {@link dropTo} (`setpriv`: real and
 * effective uid and gid, no supplementary groups, empty capability sets).
 *
 * The supervisor produces the verdict, so it runs as a different user from the command
 * (root inside the container, holding only CAP_SETUID, CAP_SETGID, CAP_SETPCAP and
 * CAP_KILL; see `createOptions`): the command cannot signal it, trace it, or open its
 * memory, environment or descriptors under /proc, so it cannot learn the per-run marker
 * nor forge the trailer. The executor's self-test checks this at every start.
 */

/** The sandbox user that runs every command (the images create it with this uid and gid). */
export const SANDBOX_UID = 10001;

/** What the host sends to the supervisor, besides the workspace archive. */
export interface BootSpec {
  /** argv of the command. */
  argv: string[];
  /** The command's whole environment (an allowlist; nothing from the host). */
  env: Record<string, string>;
  /** Absolute path, outside the workspace, where the command may leave JUnit XML. */
  resultPath: string;
  /** Largest result file read back, in bytes (a multiple of 64 KiB). */
  resultLimitBytes: number;
  /** Per-run secret that starts the trailer; never shown to the command. */
  marker: string;
  /** uid and gid the command runs as ({@link SANDBOX_UID}). */
  uid: number;
  /**
   * The supervisor's own limit on the command, in ms: it kills the command when this passes.
   * Longer than the run's timeout (the executor kills first while it lives); it bounds a run
   * whose executor died mid-run.
   */
  deadlineMs: number;
  /**
   * The run's verdict key (64 hex digits), when the command's test runner reports through the
   * verdict channel: the supervisor opens a pipe (Python) or socket (Node.js) to the command,
   * names its descriptor in `LOOPSMITH_VERDICT_FD`, hands over the key (Python: in a
   * read-only anonymous file whose descriptor `LOOPSMITH_VERDICT_KEY_FD` names, read by the
   * pytest controller only after it forked its worker; Node.js: written once on the socket),
   * and returns what the
   * runner's controller wrote there as {@link BootTrailer.verdict}. See integrity.ts.
   */
  verdictKey?: string;
  /**
   * Where the workspace is and the command starts (an image's own workdir, e.g. `/testbed`);
   * absent: `/workspace`. The archive's `workspace/` entries are extracted there.
   */
  cwd?: string;
}

/**
 * The extraction of a workspace archive (entries `workspace/…` and `tmp/.loopsmith/…`, at `/`)
 * as the sandbox user, with the workspace's entries put under `cwd` when it is not `/workspace`
 * (GNU tar's `--transform`).
 */
export function extractArgv(cwd?: string): string[] {
  const to = cwd && cwd !== "/workspace" ? cwd.slice(1) : undefined;
  return [
    "tar",
    "-x",
    "-f",
    "-",
    "-C",
    "/",
    "--no-same-permissions",
    "--no-overwrite-dir",
    ...(to ? [`--transform=s,^workspace/,${to}/,`, `--transform=s,^workspace$,${to},`] : []),
  ];
}

/** The argv prefix that runs a program as `uid` with no capabilities (util-linux `setpriv`). */
export function dropTo(uid: number): string[] {
  return [
    "setpriv",
    `--reuid=${uid}`,
    `--regid=${uid}`,
    "--clear-groups",
    "--bounding-set=-all",
    "--inh-caps=-all",
    "--no-new-privs",
    "--",
  ];
}

/** What the supervisor reports after the command ended. */
export interface BootTrailer {
  /** `setup`: the files could not be written (then `error` says why); `run`: the command ran. */
  phase: "setup" | "run";
  error?: string;
  /** Exit code of the command, or null when a signal ended it. */
  exitCode: number | null;
  /** Signal number that ended the command, or null. */
  signal: number | null;
  /** Wall time of the command, in ms. */
  durationMs: number;
  /** The result file, base64, when it could be read. */
  result?: string;
  /** Processes still alive after the command exited, which were killed. */
  stragglers: number;
  /** What arrived on the verdict channel (base64, at most `resultLimitBytes`), when one was open. */
  verdict?: string;
}

/** Block size of the result read (`dd bs=`), in bytes. */
const RESULT_BLOCK = 64 * 1024;

/**
 * Frames one run for the supervisor: the spec as JSON (with the argv prefixes it needs),
 * then the workspace archive ({@link workspaceArchive}) as raw bytes.
 */
export function encodeSpec(spec: BootSpec, archive: Buffer): Buffer {
  const drop = dropTo(spec.uid);
  const wire = {
    ...spec,
    archiveBytes: archive.length,
    extract: [...drop, ...extractArgv(spec.cwd)],
    read: [
      ...drop,
      "dd",
      `if=${spec.resultPath}`,
      "iflag=nofollow,nonblock",
      `bs=${RESULT_BLOCK}`,
      `count=${Math.ceil(spec.resultLimitBytes / RESULT_BLOCK)}`,
      "status=none",
    ],
    drop,
  };
  const body = Buffer.from(JSON.stringify(wire), "utf8");
  return Buffer.concat([Buffer.from(`${body.length}\n`, "ascii"), body, archive]);
}

/** Python 3.8+ supervisor (for the Python image); makes itself non-dumpable too. */
export const PYTHON_BOOTSTRAP = String.raw`
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

/** Node.js 18+ supervisor (for the Node image). */
export const NODE_BOOTSTRAP = String.raw`
const fs = require("fs"), cp = require("child_process");
let marker = "";
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
function readSome(buf, off, len) {
  for (;;) {
    try { return fs.readSync(0, buf, off, len, null); }
    catch (e) { if (e.code === "EAGAIN") { sleep(2); continue; } if (e.code === "EOF") return 0; throw e; }
  }
}
function readExact(n) {
  const buf = Buffer.alloc(n); let off = 0;
  while (off < n) { const k = readSome(buf, off, n - off); if (k === 0) throw new Error("stdin closed"); off += k; }
  return buf;
}
function readLine() {
  let s = ""; const b = Buffer.alloc(1);
  while (!s.endsWith("\n")) { if (readSome(b, 0, 1) === 0) throw new Error("stdin closed"); s += b.toString("latin1"); if (s.length > 20) throw new Error("bad header"); }
  return s;
}
function writeAll(fd, data) { let off = 0; while (off < data.length) off += fs.writeSync(fd, data, off, data.length - off); }
function out(obj) { writeAll(2, Buffer.from(marker)); writeAll(1, Buffer.from(marker + JSON.stringify(obj) + "\n")); }
function others() { return fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p) && +p !== 1 && +p !== process.pid); }
function killAll() { for (let i = 0; i < 5000; i++) { try { process.kill(-1, "SIGKILL"); } catch { break; } sleep(1); } }
function ownerGone() { killAll(); process.exit(137); }
function main() {
  const spec = JSON.parse(readExact(parseInt(readLine(), 10)).toString("utf8"));
  const archive = readExact(spec.archiveBytes);
  // stdin is the executor's attach connection: its end means the executor is gone.
  process.stdin.on("end", ownerGone).on("error", ownerGone).on("data", () => undefined);
  marker = spec.marker;
  const env = spec.env;
  const setup = cp.spawnSync(spec.extract[0], spec.extract.slice(1), { input: archive, env, stdio: ["pipe", "ignore", "pipe"], maxBuffer: 1 << 20 });
  if (setup.status !== 0) {
    const why = (setup.stderr ? setup.stderr.toString("utf8").slice(-2000) : "") || (setup.error ? String(setup.error.code) : "tar exit " + setup.status);
    out({ phase: "setup", error: why, exitCode: null, signal: null, durationMs: 0, stragglers: 0 });
    process.exit(0);
  }
  const start = process.hrtime.bigint();
  const argv = spec.drop.concat(spec.argv);
  const withVerdict = typeof spec.verdictKey === "string";
  const verdict = []; let verdictBytes = 0, verdictDone = !withVerdict;
  // Spawned, not spawnSync: the event loop keeps watching stdin while the command runs.
  const child = cp.spawn(argv[0], argv.slice(1), { cwd: spec.cwd || "/workspace", env: withVerdict ? Object.assign({}, env, { LOOPSMITH_VERDICT_FD: "3" }) : env, stdio: withVerdict ? ["ignore", "inherit", "inherit", "pipe"] : ["ignore", "inherit", "inherit"] });
  let afterVerdict = null;
  if (withVerdict) {
    const channel = child.stdio[3];
    channel.on("error", () => undefined);
    channel.write(spec.verdictKey + "\n");
    channel.on("data", (b) => { if (verdictBytes < spec.resultLimitBytes) { verdict.push(b); verdictBytes += b.length; } });
    channel.on("close", () => { verdictDone = true; if (afterVerdict) afterVerdict(); });
  }
  const deadline = setTimeout(() => child.kill("SIGKILL"), spec.deadlineMs);
  let failed = null, ended = false;
  child.on("error", (e) => { failed = e; finish(null, null); });
  child.on("exit", (status, signal) => finish(status, signal));
  function finish(status, signal) {
    if (ended) return;
    ended = true;
    clearTimeout(deadline);
    let code = status, sig = signal ? require("os").constants.signals[signal] : null;
    if (failed) { writeAll(2, Buffer.from("loopsmith: cannot run " + spec.argv[0] + ": " + failed.code + "\n")); code = failed.code === "ENOENT" ? 127 : 126; sig = null; }
    const durationMs = Number(process.hrtime.bigint() - start) / 1e6;
    const stragglers = others().length;
    killAll();
    const trailer = { phase: "run", exitCode: code, signal: sig, durationMs, stragglers };
    const report = () => {
      if (withVerdict) trailer.verdict = Buffer.concat(verdict).subarray(0, spec.resultLimitBytes).toString("base64");
      const res = cp.spawnSync(spec.read[0], spec.read.slice(1), { env, stdio: ["ignore", "pipe", "ignore"], maxBuffer: spec.resultLimitBytes + (1 << 16) });
      if (res.status === 0 && res.stdout && res.stdout.length) trailer.result = res.stdout.subarray(0, spec.resultLimitBytes).toString("base64");
      out(trailer);
      process.exit(0);
    };
    if (verdictDone) return report();
    afterVerdict = report;
    setTimeout(report, 2000);
  }
}
main();
`;
