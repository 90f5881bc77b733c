/**
 * The Python supervisor's wire format, run by real interpreters: the host's `python3` and every
 * other `python3.X` (3.8 to 3.13) on PATH. The spec and the pre-start go through the
 * supervisor's own decoder and come back through its own JSON encoder (the trailer's), which
 * the host parses as it parses a trailer.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { encodeFields, encodePrestart, encodeSpec, type BootSpec } from "./bootstrap.js";
import { PYTHON_PRELUDE, PYTHON_WIRE } from "./bootstrap-python.js";

/** `PYENV_VERSION` picks the version where `python3.X` is a pyenv shim; elsewhere it is ignored. */
const envOf = (python: string): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  LANG: "C.UTF-8",
  ...(/^python3\.\d+$/.test(python) ? { PYENV_VERSION: python.slice("python".length) } : {}),
});
const PYTHONS = [
  "python3",
  ...["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
    .map((v) => `python${v}`)
    .filter((cmd) => spawnSync(cmd, ["-c", "pass"], { env: envOf(cmd) }).status === 0),
];

/** Runs `program` (after the supervisor's wire helpers) in `python` with `-I -S`, as the supervisor runs. */
function py(python: string, program: string, input: Buffer | string = "", args: string[] = []): string {
  const r = spawnSync(python, ["-I", "-S", "-c", PYTHON_WIRE + program, ...args], {
    input,
    env: envOf(python),
  });
  if (r.status !== 0) throw new Error(`${python} failed: ${r.stderr.toString()}`);
  return r.stdout.toString("utf8");
}

/** Every code point below 0x100, a surrogate pair, quotes and backslashes, and some UTF-8. */
const NASTY = [
  Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join(""),
  'a "quoted" \\back\\slashed\\" value',
  "\u0000LOOPSMITH-marker:",
  "é日本語 🚀 \u2028\u2029 \u007f",
  "",
  "12:34:",
];

const READ_SPEC = String.raw`
import sys
data = sys.stdin.buffer.read()
nl = data.index(b"\n")
body = data[nl + 1:nl + 1 + int(data[:nl])]
archive = data[nl + 1 + int(data[:nl]):]
spec = pairs(body)
lists = [jstr(k) + b":" + jlist(fields(spec[k])) for k in (b"argv", b"extract", b"read", b"drop")]
rest = [(k, spec[k]) for k in sorted(spec) if k not in (b"argv", b"extract", b"read", b"drop", b"env")]
sys.stdout.buffer.write(jobj(rest + [(b"archive", archive)])[:-1] + b"," + b",".join(lists) + b',"env":' + jmap(pairs(spec[b"env"])) + b"}")
`;

describe("the Python supervisor's wire format", () => {
  const spec: BootSpec = {
    argv: ["python3", ...NASTY],
    env: Object.fromEntries(NASTY.map((v, i) => [`K${i}_é`, v])),
    resultPath: "/tmp/.loopsmith/result.xml",
    resultLimitBytes: 1 << 20,
    marker: NASTY[2] ?? "",
    uid: 10001,
    deadlineMs: 12345,
    verdictKey: "ab".repeat(32),
  };
  const archive = Buffer.from(NASTY.join("|"), "utf8");

  it.each(PYTHONS)("%s decodes every field of a run's spec as the host encoded it", (python) => {
    const got = JSON.parse(py(python, READ_SPEC, encodeSpec(spec, archive, "python"))) as Record<string, unknown>;
    expect(got.argv).toEqual(spec.argv);
    expect(got.env).toEqual(spec.env);
    expect(got.marker).toBe(spec.marker);
    expect(got.verdictKey).toBe(spec.verdictKey);
    expect(got.resultPath).toBe(spec.resultPath);
    expect(got.archive).toBe(archive.toString("utf8"));
    expect(Number(got.archiveBytes)).toBe(archive.length);
    expect(Number(got.deadlineMs)).toBe(12345);
    expect(Number(got.resultLimitBytes)).toBe(1 << 20);
    expect((got.drop as string[])[0]).toBe("setpriv");
    expect(got.extract).toEqual(expect.arrayContaining(["tar", "-x"]));
    expect(got.read).toEqual(expect.arrayContaining(["dd", "if=/tmp/.loopsmith/result.xml", "count=16"]));
    expect(got).not.toHaveProperty("cwd");
  });

  it.each(PYTHONS)("%s reads the pre-start from its argument", (python) => {
    const pre = {
      argv: ["setpriv", "--", "python3", "-c", "x = '\"\\\\'\n"],
      prefix: ["python3", "-m"],
      env: { A: "é", B: "" },
      perRun: ["X"],
      cwd: "/testbed",
    };
    const program = String.raw`
import sys
cfg = pairs(sys.argv[1].encode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()))
sys.stdout.buffer.write(b'{"argv":' + jlist(fields(cfg[b"argv"])) + b',"prefix":' + jlist(fields(cfg[b"prefix"])) + b',"env":' + jmap(pairs(cfg[b"env"])) + b',"perRun":' + jlist(fields(cfg[b"perRun"])) + b',"cwd":' + jstr(cfg[b"cwd"]) + b"}")
`;
    expect(JSON.parse(py(python, program, "", [encodePrestart(pre)]))).toEqual(pre);
  });

  it.each(PYTHONS)("%s writes a trailer the host parses: escapes, numbers, null, one line", (python) => {
    const program = String.raw`
import sys
vals = fields(sys.stdin.buffer.read())
sys.stdout.buffer.write(jobj([(b"s%d" % i, v) for i, v in enumerate(vals)] + [(b"n", None), (b"i", -3), (b"f", 1.5), (b"z", 0)]) + b"\n")
`;
    const text = py(python, program, encodeFields(NASTY));
    expect(text.indexOf("\n")).toBe(text.length - 1);
    expect([...text.slice(0, -1)].filter((c) => c.charCodeAt(0) < 0x20)).toEqual([]);
    const got = JSON.parse(text) as Record<string, unknown>;
    expect(NASTY.map((_, i) => got[`s${i}`])).toEqual(NASTY);
    expect(got).toMatchObject({ n: null, i: -3, f: 1.5, z: 0 });
  });

  it("rejects a frame whose length runs past its end", () => {
    expect(() => py("python3", 'fields(b"5:abc")')).toThrow(/bad frame/);
  });

  it.each(PYTHONS)("%s: the supervisor's imports leave out the costly modules and make it non-dumpable", (python) => {
    const program = String.raw`
import sys
print(sorted(m for m in ("json", "subprocess", "threading", "base64", "ctypes", "os", "signal", "enum") if m in sys.modules))
import ctypes
print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))
`;
    const r = spawnSync(python, ["-I", "-S", "-c", PYTHON_PRELUDE + program], { env: envOf(python) });
    expect(r.stderr.toString()).toBe("");
    expect(r.stdout.toString()).toBe("[]\n0\n");
  });
});
