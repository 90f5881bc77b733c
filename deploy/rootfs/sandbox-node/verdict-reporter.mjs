// loopsmith's verdict reporter for node's test runner (`node --test`), installed in the
// sandbox image at /opt/loopsmith/verdict-reporter.mjs and loaded with
// `--test-reporter=/opt/loopsmith/verdict-reporter.mjs`.
//
// Reporters run in the runner's own process, which never loads a test file: each test file
// runs in a child process. Node loads reporters before it starts the first child
// (lib/internal/test_runner/runner.js: runFiles waits for the reporters' setup), so at load
// this module takes the run's key from the verdict channel (fd LOOPSMITH_VERDICT_FD, a socket
// to the sandbox's supervisor, which writes the key on it once) before any test code exists,
// and removes the channel's variable from the environment the children inherit. At the end
// it writes every test's outcome as HMAC-SHA256-signed JSON records on the channel; the
// executor checks them (services/executor/src/integrity.ts). The children inherit the
// channel's descriptor (node cannot mark it close-on-exec), so they can write to it, but
// without the key their lines fail the check and make the run `tampering`.
// The executor gives the runner a wrapper module per test file: it imports the file, then runs
// the run's tripwire test and seal (a root hook that always fails with its finding) in the same
// child process (integrity.ts). This reporter keeps them out of the spec view and the exit status.
// A test file whose child reported no test (it exited before, or during, its tests: node then
// reports the file itself as one passing test) is reported as an error.
import fs from "node:fs";
import { createHmac } from "node:crypto";
import { spec } from "node:test/reporters";

const MESSAGE_LIMIT = 4000;
const fdText = process.env.LOOPSMITH_VERDICT_FD;
delete process.env.LOOPSMITH_VERDICT_FD;

function readKey(fd) {
  const buf = Buffer.alloc(65);
  let off = 0;
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; off < 65 && i < 5000; i++) {
    try {
      const n = fs.readSync(fd, buf, off, 65 - off, null);
      if (n === 0) break;
      off += n;
    } catch (e) {
      if (e.code !== "EAGAIN") break;
      Atomics.wait(sleeper, 0, 0, 1);
    }
  }
  return off === 65 ? buf.subarray(0, 64) : null;
}

const fd = fdText && /^\d+$/.test(fdText) ? Number(fdText) : null;
const key = fd === null ? null : readKey(fd);

function send(record) {
  if (fd === null || key === null) return;
  const payload = JSON.stringify(record);
  const line = `${createHmac("sha256", key).update(payload).digest("hex")} ${payload}\n`;
  const data = Buffer.from(line);
  let off = 0;
  try {
    while (off < data.length) off += fs.writeSync(fd, data, off, data.length - off);
  } catch {
    // the supervisor is gone: nobody is left to read the verdict
  }
}

send({ t: "start", pid: process.pid, isolated: true, time: Date.now() / 1000 });

function messageOf(error) {
  if (!error) return undefined;
  const cause = error.cause ?? error;
  const text = cause && typeof cause === "object" && "stack" in cause ? String(cause.stack) : String(cause);
  return text.slice(0, MESSAGE_LIMIT);
}

/** A tripwire's test name: `lsw_` and 12 hex digits, then ` @` and the test file its child ran. */
const TRIPWIRE = /^lsw_[0-9a-f]{12} @/;
const COUNT = /^(tests|pass|fail) (\d+)$/;
/** A seal's finding: the wrapper's root hook fails with `lsw_<12 hex> ok|patched…`, reported under the wrapper's path. */
const SEAL = /lsw_[0-9a-f]{12} (ok|patched)/;
const isSeal = (d) => d.nesting === 0 && d.name === d.file && SEAL.test(String(d.details?.error?.cause?.message ?? d.details?.error?.message ?? ""));

// The spec reporter's view for the person (and the model) reading the output, without the
// tripwires: their events are left out and the closing counts are corrected.
export default async function* verdictReporter(source) {
  const tests = [];
  const view = new spec();
  const chunks = [];
  view.on("data", (c) => chunks.push(c));
  const wires = { tests: 0, pass: 0, fail: 0 };
  for await (const event of source) {
    const d = event.data ?? {};
    const wire = typeof d.name === "string" && (TRIPWIRE.test(d.name) || isSeal(d));
    if (event.type === "test:pass" || event.type === "test:fail") record(tests, event);
    if (wire && (event.type === "test:pass" || event.type === "test:fail")) {
      wires.tests += 1;
      wires[event.type === "test:pass" ? "pass" : "fail"] += 1;
    }
    if (!wire) {
      const m = event.type === "test:diagnostic" && d.nesting === 0 ? COUNT.exec(d.message ?? "") : null;
      view.write(m ? { ...event, data: { ...d, message: `${m[1]} ${Math.max(0, Number(m[2]) - wires[m[1]])}` } } : event);
    }
    while (chunks.length) yield chunks.shift();
  }
  view.end();
  await new Promise((resolve) => view.once("end", resolve).once("error", resolve).resume());
  while (chunks.length) yield chunks.shift();
  const real = tests.filter((t) => !TRIPWIRE.test(t.name) && !t.seal);
  const failing = real.some((t) => t.outcome === "failed" || t.outcome === "error");
  // The exit status as if the tripwires were not there (a must-fail tripwire fails).
  process.exitCode = failing ? 1 : 0;
  send({ t: "end", exitstatus: failing ? 1 : 0, isolated: true, collected: null, tests, collectErrors: [], crashed: [] });
}

function record(tests, event) {
  const d = event.data;
  if (d.details?.type === "suite") return;
  const id = `${d.file ?? ""}::${d.name}`;
  const ms = Number(d.details?.duration_ms ?? 0);
  if (isSeal(d)) {
    tests.push({ id, file: d.file, name: d.name, outcome: event.type === "test:fail" ? "failed" : "passed", ms, seal: true, message: messageOf(d.details?.error) });
    return;
  }
  if (d.nesting === 0 && d.file && d.name === d.file) {
    // The file's child reported no test of its own.
    const message = event.type === "test:fail" ? messageOf(d.details?.error) : "the test file ended without reporting any test: it exited before or during its tests, or defines none";
    tests.push({ id, file: d.file, name: d.name, outcome: "error", ms, fileOnly: true, message });
    return;
  }
  const outcome = event.type === "test:fail" ? "failed" : d.skip !== undefined || d.todo !== undefined ? "skipped" : "passed";
  const t = { id, file: d.file ?? "", name: d.name, outcome, ms };
  if (outcome === "failed") t.message = messageOf(d.details?.error);
  else if (d.details?.error) t.message = messageOf(d.details.error);
  tests.push(t);
}
