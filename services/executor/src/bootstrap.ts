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
 * (`<length>\n<spec><archive>`, see {@link encodeSpec}), and the supervisor:
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
 * Length-prefixed fields, the Python supervisor's input format: each value as its length in
 * bytes (decimal), `:`, then its UTF-8 bytes; a list is the fields of its items, a map the
 * fields of its keys and values in turn. The supervisor splits them with bytes operations
 * (`fields`/`pairs` in bootstrap-python.ts); any byte may occur in a value (the marker has a NUL).
 */
export function encodeFields(values: readonly (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [];
  for (const v of values) {
    const bytes = typeof v === "string" ? Buffer.from(v, "utf8") : v;
    parts.push(Buffer.from(`${bytes.length}:`, "ascii"), bytes);
  }
  return Buffer.concat(parts);
}

/** A map as {@link encodeFields}: each key, then its value. */
function encodeMap(map: Record<string, string>): Buffer {
  return encodeFields(Object.entries(map).flat());
}

/** What the Python supervisor gets (as its first argument) to pre-start the pytest runner (prestart.ts). */
export interface PrestartSpec {
  /** The runner's argv (dropped to the sandbox user), without its two descriptor arguments. */
  argv: string[];
  /** A run uses the runner when its argv starts with this. */
  prefix: string[];
  /** The runner's environment: the default Python command's (`commandEnv`). */
  env: Record<string, string>;
  /** Variables a run may change (`PER_RUN_ENV`). */
  perRun: string[];
  /** Where the runner waits (the workspace). */
  cwd: string;
}

/**
 * The pre-start as the Python supervisor's argument: {@link encodeFields} of `argv`, `prefix`,
 * `env`, `perRun` and `cwd` (keys first), as text (an argument holds no NUL; none of these has one).
 */
export function encodePrestart(spec: PrestartSpec): string {
  return encodeFields([
    "argv",
    encodeFields(spec.argv),
    "prefix",
    encodeFields(spec.prefix),
    "env",
    encodeMap(spec.env),
    "perRun",
    encodeFields(spec.perRun),
    "cwd",
    spec.cwd,
  ]).toString("utf8");
}

/** The supervisor's own fields of a run, besides the {@link BootSpec}: the argv prefixes it runs. */
function wireOf(
  spec: BootSpec,
  archive: Buffer,
): { extract: string[]; read: string[]; drop: string[] } & {
  archiveBytes: number;
} {
  const drop = dropTo(spec.uid);
  return {
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
}

/**
 * Frames one run for the supervisor: `<body length>\n<body><archive>`, the body holding the
 * spec and the argv prefixes the supervisor needs, the archive ({@link workspaceArchive}) raw.
 * The body is JSON for the Node.js supervisor and {@link encodeFields} (keys and values in
 * turn; lists and maps nested as fields; numbers in decimal) for the Python one.
 * @param kind - the supervisor that reads it
 */
export function encodeSpec(spec: BootSpec, archive: Buffer, kind: "python" | "node"): Buffer {
  const wire = { ...spec, ...wireOf(spec, archive) };
  let body: Buffer;
  if (kind === "node") body = Buffer.from(JSON.stringify(wire), "utf8");
  else {
    const values: (string | Buffer)[] = [];
    for (const [key, value] of Object.entries(wire)) {
      if (value === undefined) continue;
      const encoded = Array.isArray(value)
        ? encodeFields(value)
        : typeof value === "object"
          ? encodeMap(value)
          : String(value);
      values.push(key, encoded);
    }
    body = encodeFields(values);
  }
  return Buffer.concat([Buffer.from(`${body.length}\n`, "ascii"), body, archive]);
}

export { PYTHON_BOOTSTRAP } from "./bootstrap-python.js";

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
