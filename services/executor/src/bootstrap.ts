/**
 * The supervisor that runs inside every sandbox container (under docker-init), in the
 * image's own language so that no extra file is needed in the image.
 *
 * A warm container runs it from the moment it is created; it blocks reading stdin. A run
 * then sends one {@link BootSpec} (`<length>\n<json>`), and the supervisor:
 * 1. writes the files under `/workspace` (relative paths only, `O_EXCL|O_NOFOLLOW`),
 * 2. runs the command with stdin from /dev/null, stdout/stderr inherited, the given env,
 * 3. when it exits, SIGKILLs every other process of the sandbox user (background children),
 * 4. reads the result file (JUnit XML) without following a link, and
 * 5. writes the marker to stderr, then a trailer to stdout: `MARKER + json + "\n"`
 *    ({@link BootTrailer}), then exits, which ends the container (docker-init's child is gone).
 */

/** What the host sends to the supervisor. */
export interface BootSpec {
  /** argv of the command. */
  argv: string[];
  /** The command's whole environment (an allowlist; nothing from the host). */
  env: Record<string, string>;
  /** Files to write under `/workspace`: relative path and UTF-8 content. */
  files: { path: string; content: string }[];
  /** Absolute path, outside the workspace, where the command may leave JUnit XML. */
  resultPath: string;
  /** Largest result file read back, in bytes. */
  resultLimitBytes: number;
  /** Per-run secret that starts the trailer; never shown to the command. */
  marker: string;
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
  /** The result file, base64, when it existed as a regular file. */
  result?: string;
  /** Processes still alive after the command exited, which were killed. */
  stragglers: number;
}

/** Writes the spec in the framing the supervisor reads. */
export function encodeSpec(spec: BootSpec): Buffer {
  const body = Buffer.from(JSON.stringify(spec), "utf8");
  return Buffer.concat([Buffer.from(`${body.length}\n`, "ascii"), body]);
}

/** Python 3.8+ supervisor (for the Python image); makes itself non-dumpable where it can. */
export const PYTHON_BOOTSTRAP = String.raw`
import os, sys, json, time, signal, subprocess, base64, stat
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
def write_files(files):
    root = "/workspace"
    for f in files:
        p = f["path"]
        parts = p.split("/")
        if p.startswith("/") or any(s in ("", ".", "..") for s in parts) or "\0" in p:
            raise ValueError("path escapes the workspace: " + p)
        d = root
        for s in parts[:-1]:
            d = d + "/" + s
            try:
                os.mkdir(d, 0o755)
            except FileExistsError:
                st = os.lstat(d)
                if not stat.S_ISDIR(st.st_mode):
                    raise ValueError("not a directory: " + d)
        fd = os.open(root + "/" + p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(f["content"].encode("utf-8"))
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
def others():
    me = os.getpid()
    return [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
def main():
    global marker
    spec = json.loads(read_exact(int(read_line())))
    marker = spec["marker"].encode()
    try:
        write_files(spec["files"])
        os.makedirs(os.path.dirname(spec["resultPath"]), 0o700, exist_ok=True)
    except Exception as e:
        out({"phase": "setup", "error": type(e).__name__ + ": " + str(e), "exitCode": None, "signal": None, "durationMs": 0, "stragglers": 0})
        return
    start = time.monotonic()
    code, sig = None, None
    try:
        p = subprocess.Popen(spec["argv"], cwd="/workspace", env=spec["env"], stdin=subprocess.DEVNULL, close_fds=True)
        rc = p.wait()
        code, sig = (rc, None) if rc >= 0 else (None, -rc)
    except OSError as e:
        os.write(2, ("loopsmith: cannot run %s: %s\n" % (spec["argv"][0], e.strerror)).encode())
        code = 127 if isinstance(e, FileNotFoundError) else 126
    duration = (time.monotonic() - start) * 1000.0
    stragglers = len(others())
    for _ in range(5000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break
        except PermissionError:
            break
        time.sleep(0.0005)
    trailer = {"phase": "run", "exitCode": code, "signal": sig, "durationMs": duration, "stragglers": stragglers}
    try:
        fd = os.open(spec["resultPath"], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                trailer["result"] = base64.b64encode(os.read(fd, spec["resultLimitBytes"])).decode()
        finally:
            os.close(fd)
    except OSError:
        pass
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
function writeFiles(files) {
  const root = "/workspace";
  for (const f of files) {
    const p = f.path, parts = p.split("/");
    if (p.startsWith("/") || p.includes("\0") || parts.some((s) => s === "" || s === "." || s === "..")) throw new Error("path escapes the workspace: " + p);
    let d = root;
    for (const s of parts.slice(0, -1)) {
      d += "/" + s;
      try { fs.mkdirSync(d, 0o755); } catch (e) { if (e.code !== "EEXIST" || !fs.lstatSync(d).isDirectory()) throw e; }
    }
    const c = fs.constants;
    const fd = fs.openSync(root + "/" + p, c.O_WRONLY | c.O_CREAT | c.O_EXCL | c.O_NOFOLLOW, 0o644);
    try { writeAll(fd, Buffer.from(f.content, "utf8")); } finally { fs.closeSync(fd); }
  }
}
function others() { return fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p) && +p !== 1 && +p !== process.pid); }
function main() {
  const spec = JSON.parse(readExact(parseInt(readLine(), 10)).toString("utf8"));
  marker = spec.marker;
  try {
    writeFiles(spec.files);
    fs.mkdirSync(require("path").dirname(spec.resultPath), { recursive: true, mode: 0o700 });
  } catch (e) {
    out({ phase: "setup", error: String(e && e.message || e), exitCode: null, signal: null, durationMs: 0, stragglers: 0 });
    return;
  }
  const start = process.hrtime.bigint();
  const r = cp.spawnSync(spec.argv[0], spec.argv.slice(1), { cwd: "/workspace", env: spec.env, stdio: ["ignore", "inherit", "inherit"] });
  let code = r.status, sig = r.signal ? require("os").constants.signals[r.signal] : null;
  if (r.error) { writeAll(2, Buffer.from("loopsmith: cannot run " + spec.argv[0] + ": " + r.error.code + "\n")); code = r.error.code === "ENOENT" ? 127 : 126; sig = null; }
  const durationMs = Number(process.hrtime.bigint() - start) / 1e6;
  const stragglers = others().length;
  for (let i = 0; i < 5000; i++) { try { process.kill(-1, "SIGKILL"); } catch { break; } sleep(1); }
  const trailer = { phase: "run", exitCode: code, signal: sig, durationMs, stragglers };
  try {
    const c = fs.constants;
    const fd = fs.openSync(spec.resultPath, c.O_RDONLY | c.O_NOFOLLOW | c.O_NONBLOCK);
    try {
      if (fs.fstatSync(fd).isFile()) {
        const buf = Buffer.alloc(spec.resultLimitBytes); let off = 0, k = 0;
        while (off < buf.length && (k = fs.readSync(fd, buf, off, buf.length - off, null)) > 0) off += k;
        trailer.result = buf.subarray(0, off).toString("base64");
      }
    } finally { fs.closeSync(fd); }
  } catch {}
  out(trailer);
}
main();
`;
