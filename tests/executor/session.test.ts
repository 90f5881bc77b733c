/**
 * Agent mode's session containers over real NATS and the real Docker engine:
 * open over a repository snapshot, the read-only tools answered from the host copy of the
 * candidate, runs in the one container kept for the session, writes into both, close, and
 * the leftovers sweep removing the session of an executor that was killed.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Endpoints, call, onReplica, putSnapshot } from "@loopsmith/shared/bus";
import { busyReason, hasCode, runService, type RunningService } from "@loopsmith/shared/runtime";
import {
  snapshotName,
  type SessionCall,
  type SessionObservation,
  type SessionOpen,
  type SessionOpened,
} from "@loopsmith/shared/contracts";
import {
  createExecutor,
  executorService,
  LABEL,
  LABEL_SESSION,
  liveExecutors,
  SESSION_IDLE_UID,
  snapshotLoader,
} from "@loopsmith/executor";
import { startNats, type Started } from "../fixtures/containers.js";
import { REPO } from "../fixtures/cli.js";
import { docker, log, request, testConfig } from "./helpers.js";
import { newCommit, snapshotTar } from "./repo-helpers.js";

const CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";
const TESTS = "from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n";

let nats: Started;
let nc: NatsConnection;
let running: RunningService | undefined;
let dataDir: string;
const commit = newCommit();
let seq = 0;

function openRequest(sessionId: string, extra: Partial<SessionOpen> = {}): SessionOpen {
  seq += 1;
  return {
    v: 1,
    taskId: "t-session",
    iteration: seq,
    idempotencyKey: `t-session/${seq}/session_open`,
    sessionId,
    language: "python",
    base: { snapshot: snapshotName(commit), commit },
    files: [],
    deleted: [],
    memoryMb: 256,
    timeoutMs: 20_000,
    ...extra,
  };
}

const open = (req: SessionOpen): Promise<SessionOpened> =>
  call(nc, Endpoints.executor.sessionOpen, req, { timeoutMs: 60_000, retries: 0 });

function tool(opened: SessionOpened, c: SessionCall["call"]): Promise<SessionObservation> {
  return call(
    nc,
    onReplica(Endpoints.executor.sessionCall, opened.executorId),
    { v: 1, sessionId: opened.sessionId, call: c } as SessionCall,
    { timeoutMs: 60_000, retries: 0 },
  );
}

const close = (opened: SessionOpened): Promise<{ closed: boolean }> =>
  call(
    nc,
    onReplica(Endpoints.executor.sessionClose, opened.executorId),
    { v: 1, sessionId: opened.sessionId },
    { timeoutMs: 30_000, retries: 0 },
  );

const sessionContainers = (sessionId: string) =>
  docker.listContainers({ all: true, filters: { label: [`${LABEL_SESSION}=${sessionId}`] } });

async function errorOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  dataDir = mkdtempSync(join(tmpdir(), "loopsmith-session-test-"));
  await putSnapshot(
    nc,
    snapshotName(commit),
    await snapshotTar({
      "pkg/__init__.py": "",
      "pkg/calc.py": CALC,
      "tests/test_calc.py": TESTS,
      "README.md": "# calc\nadd and mul\n",
      "data.bin": "\u0000\u0001\u0002binary",
      "link_in.py": "->pkg/calc.py",
      link_out: "->/etc/passwd",
    }),
  );
  const config = { ...testConfig({ warmPoolSize: 1 }), natsUrl: nats.url, dataDir };
  running = await runService("executor", (deps) => executorService(deps), { config, log });
}, 180_000);

afterAll(async () => {
  await running?.stop();
  await nc?.close();
  await nats?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("session over the bus", () => {
  let s: SessionOpened;

  beforeAll(async () => {
    s = await open(openRequest("t-session-1"));
  }, 120_000);

  it("opens on this replica with the base tree, links out of the tree left out", async () => {
    expect(s.executorId).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect(s.files).toBe(5);
    const containers = await sessionContainers(s.sessionId);
    expect(containers).toHaveLength(1);
    expect(containers[0]?.Labels[LABEL]).toBe(s.executorId);
    expect(containers[0]?.State).toBe("running");
  });

  it("reads numbered lines in a range, with the file's line count", async () => {
    const r = await tool(s, { tool: "read", path: "pkg/calc.py", startLine: 2, endLine: 3 });
    expect(r).toMatchObject({ ok: true, total: 6, output: "2:     return a - b\n3: " });
    const link = await tool(s, { tool: "read", path: "link_in.py" });
    expect(link.output.split("\n")[0]).toBe("1: def add(a, b):");
    const past = await tool(s, { tool: "read", path: "pkg/calc.py", startLine: 40 });
    expect(past).toMatchObject({ ok: false, total: 6 });
    expect(await tool(s, { tool: "read", path: "data.bin" })).toMatchObject({ ok: false });
    expect((await tool(s, { tool: "read", path: "link_out" })).output).toMatch(/no such file/);
  });

  it("lists the tree (directories end with /), refuses a path that leaves it", async () => {
    const r = await tool(s, { tool: "list", path: ".", depth: 2 });
    expect(r.ok).toBe(true);
    const lines = r.output.split("\n");
    expect(lines).toEqual(
      expect.arrayContaining([
        "pkg/",
        "pkg/calc.py",
        "tests/",
        "tests/test_calc.py",
        "README.md",
        "link_in.py -> pkg/calc.py",
      ]),
    );
    expect(lines).not.toContain("link_out");
    expect(r.total).toBe(lines.length);
    const shallow = await tool(s, { tool: "list", path: "pkg", depth: 1 });
    expect(shallow.output.split("\n")).toEqual(["pkg/__init__.py", "pkg/calc.py"]);
    for (const path of ["..", "../..", "/etc", "pkg/../.."]) {
      const out = await tool(s, { tool: "list", path, depth: 1 });
      expect(out.ok, path).toBe(false);
      expect(out.output, path).toMatch(/leaves the workspace/);
    }
    // read's path is checked by its schema before it reaches the executor.
    const refused = await errorOf(tool(s, { tool: "read", path: "../etc/passwd" }));
    expect(hasCode(refused, "bad_request")).toBe(true);
  });

  it("searches with a regular expression and a glob; a bad pattern is refused with the engine's message", async () => {
    const defs = await tool(s, { tool: "search", pattern: "^def \\w+", glob: "*.py", maxResults: 100 });
    expect(defs.ok).toBe(true);
    expect(defs.output.split("\n")).toEqual([
      "pkg/calc.py:1: def add(a, b):",
      "pkg/calc.py:5: def mul(a, b):",
      "tests/test_calc.py:4: def test_add():",
    ]);
    expect(defs.total).toBe(3);
    const onlyTests = await tool(s, { tool: "search", pattern: "add", glob: "tests/**", maxResults: 100 });
    expect(onlyTests.output.split("\n").every((l) => l.startsWith("tests/test_calc.py:"))).toBe(true);
    expect(onlyTests.total).toBe(3);
    const cut = await tool(s, { tool: "search", pattern: "add", maxResults: 1 });
    expect(cut.total).toBe(5);
    expect(cut.output.split("\n")[0]).toBe("README.md:2: add and mul");
    const bad = await tool(s, { tool: "search", pattern: "(unclosed", maxResults: 10 });
    expect(bad.ok).toBe(false);
    expect(bad.output).toMatch(/invalid regular expression.*Unterminated group/);
  });

  it("runs commands in the session container: exit codes, output, a file a run writes is not in the candidate", async () => {
    expect(await tool(s, { tool: "run", command: "true" })).toMatchObject({ ok: true, exitCode: 0, timedOut: false });
    const failing = await tool(s, { tool: "run", command: "echo out; echo err >&2; exit 3" });
    expect(failing).toMatchObject({ ok: false, exitCode: 3, timedOut: false });
    expect(failing.output).toContain("out\n");
    expect(failing.output).toContain("err\n");
    expect(failing.totalBytes).toBe(8);
    const made = await tool(s, {
      tool: "run",
      command: "echo junk > made.txt && echo '# junk' >> pkg/calc.py && cat made.txt",
    });
    expect(made).toMatchObject({ ok: true, output: "junk\n" });
    expect((await tool(s, { tool: "run", command: "cat made.txt" })).output).toBe("junk\n");
    const read = await tool(s, { tool: "read", path: "made.txt" });
    expect(read.ok).toBe(false);
    expect(read.output).toMatch(/no such file/);
    expect((await tool(s, { tool: "read", path: "pkg/calc.py" })).output).not.toContain("junk");
    const found = await tool(s, { tool: "search", pattern: "junk", maxResults: 10 });
    expect(found.total).toBe(0);
  });

  it("kills a command past its timeout, and the session keeps working; background processes do not outlive a run", async () => {
    const started = Date.now();
    const slow = await tool(s, { tool: "run", command: "echo begun; sleep 30", timeoutMs: 700 });
    expect(slow).toMatchObject({ ok: false, exitCode: null, timedOut: true });
    expect(slow.output).toContain("begun");
    // The limits it ran under: the session container's memory and the executor's CPU, pids and
    // tmpfs, with this call's timeout.
    const { executor } = testConfig();
    expect(slow.limits).toEqual({
      cpus: executor.cpus,
      memoryMb: 256,
      pidsLimit: executor.pidsLimit,
      timeoutMs: 700,
      tmpfsMb: executor.tmpfsMb,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    const bg = Date.now();
    const spawned = await tool(s, { tool: "run", command: "sleep 300 & echo started" });
    expect(spawned).toMatchObject({ ok: true, output: "started\n" });
    expect(Date.now() - bg).toBeLessThan(5_000);
    const after = await tool(s, {
      tool: "run",
      command: "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done",
    });
    expect(after.output).not.toMatch(/sleep 300|sleep 30\b/);
    expect(await tool(s, { tool: "run", command: "true" })).toMatchObject({ ok: true, exitCode: 0 });
  });

  it("writes files and deletions into both the candidate and the container", async () => {
    const w = await tool(s, {
      tool: "write",
      files: [
        { path: "pkg/calc.py", content: CALC.replace("a - b", "a + b") },
        { path: "pkg/new/mod.py", content: "X = 1\n" },
      ],
      deleted: ["README.md"],
    });
    expect(w.ok).toBe(true);
    expect((await tool(s, { tool: "read", path: "pkg/calc.py", startLine: 2, endLine: 2 })).output).toBe(
      "2:     return a + b",
    );
    expect((await tool(s, { tool: "read", path: "pkg/new/mod.py" })).output).toBe("1: X = 1");
    expect((await tool(s, { tool: "read", path: "README.md" })).ok).toBe(false);
    const seen = await tool(s, {
      tool: "run",
      command:
        "cat pkg/new/mod.py && test ! -e README.md && python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -1",
    });
    expect(seen.ok).toBe(true);
    expect(seen.output).toMatch(/X = 1\n.*1 passed/s);
  });

  it("confines the container as a verdict run: no network, non-root, no capabilities, read-only root", async () => {
    const net = await tool(s, {
      tool: "run",
      command: "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
    });
    expect(net.ok).toBe(false);
    expect(net.output).toMatch(/Network is unreachable|Errno/);
    expect((await tool(s, { tool: "run", command: "id -u; id -g" })).output).toBe("10001\n10001\n");
    expect((await tool(s, { tool: "run", command: "touch /etc/x" })).ok).toBe(false);
    const caps = await tool(s, { tool: "run", command: "grep CapEff /proc/self/status" });
    expect(caps.output).toMatch(/CapEff:\s+0+\n/);
    const [info] = await sessionContainers(s.sessionId);
    const inspect = await docker.getContainer(info?.Id as string).inspect();
    expect(inspect.HostConfig.NetworkMode).toBe("none");
    expect(inspect.HostConfig.ReadonlyRootfs).toBe(true);
    expect(inspect.HostConfig.CapDrop).toEqual(["ALL"]);
    expect(inspect.HostConfig.CapAdd ?? []).toEqual([]);
    expect(inspect.HostConfig.Memory).toBe(256 * 1024 * 1024);
    expect(inspect.HostConfig.PidsLimit).toBeGreaterThan(0);
    expect(inspect.HostConfig.SecurityOpt?.some((o: string) => o.startsWith("seccomp="))).toBe(true);
    expect(inspect.Config.User).toBe(`${SESSION_IDLE_UID}:${SESSION_IDLE_UID}`);
  });

  it("re-opening an id replaces its files and its container", async () => {
    const again = await open(
      openRequest(s.sessionId, { files: [{ path: "pkg/calc.py", content: "VERSION = 2\n" }], deleted: ["data.bin"] }),
    );
    expect(again.executorId).toBe(s.executorId);
    expect((await tool(again, { tool: "read", path: "pkg/calc.py" })).output).toBe("1: VERSION = 2");
    expect((await tool(again, { tool: "run", command: "cat pkg/calc.py; test ! -e data.bin" })).output).toBe(
      "VERSION = 2\n",
    );
    expect(await sessionContainers(s.sessionId)).toHaveLength(1);
  });

  it("cuts output past the bus's max_payload on the executor: the reply carries head, tail and the note, not an error", async () => {
    const noteOf = (o: SessionObservation): { notes: number; cut: number; kept: number } => {
      const notes = [...o.output.matchAll(/\n\[… ([\d,]+) bytes cut …\]\n/g)];
      const note = notes[0];
      return {
        notes: notes.length,
        cut: Number(note?.[1]?.replace(/,/g, "") ?? 0),
        kept: Buffer.byteLength(o.output) - Buffer.byteLength(note?.[0] ?? ""),
      };
    };
    const maxPayload = nc.info?.max_payload ?? 0;
    expect(maxPayload).toBe(1024 * 1024);
    const replyBytes = (o: SessionObservation): number => Buffer.byteLength(JSON.stringify({ ok: true, value: o }));
    // 50 MB of lines: the capture keeps 1 MiB, whose JSON (each newline escaped) passes max_payload.
    const yes = await tool(s, { tool: "run", command: "yes AAAA | head -c 50000000" });
    expect(yes).toMatchObject({ ok: true, exitCode: 0, timedOut: false, totalBytes: 50_000_000 });
    expect(replyBytes(yes)).toBeLessThanOrEqual(maxPayload);
    expect(yes.output.startsWith("AAAA\nAAAA\n")).toBe(true);
    expect(yes.output.endsWith("AAAA\nAAAA\n")).toBe(true);
    const cut = noteOf(yes);
    expect(cut.notes).toBe(1);
    expect(cut.cut + cut.kept).toBe(50_000_000);
    // Control bytes (six bytes each in JSON) and random bytes (invalid UTF-8).
    for (const command of ["head -c 5000000 /dev/zero | tr '\\0' '\\1'", "head -c 5000000 /dev/urandom"]) {
      const r = await tool(s, { tool: "run", command });
      expect(r, command).toMatchObject({ ok: true, exitCode: 0, totalBytes: 5_000_000 });
      expect(replyBytes(r), command).toBeLessThanOrEqual(maxPayload);
      expect(noteOf(r).notes, command).toBe(1);
      expect(noteOf(r).cut, command).toBeGreaterThan(4_000_000);
    }
    expect((await tool(s, { tool: "run", command: "head -c 5 /dev/zero | tr '\\0' '\\1'" })).output).toBe(
      "\u0001".repeat(5),
    );
    // A read of a file of 400 000 lines (its numbered lines about 3.6 MB) and a search of 1 000
    // long lines of three-byte characters (about 1.5 MB) are cut the same way.
    const long = `${"€".repeat(500)}\n`.repeat(500);
    for (const files of [
      [{ path: "big/lines.txt", content: "\n".repeat(400_000) }],
      [{ path: "big/euro1.txt", content: long }],
      [{ path: "big/euro2.txt", content: long }],
    ])
      expect((await tool(s, { tool: "write", files, deleted: [] })).ok).toBe(true);
    const read = await tool(s, { tool: "read", path: "big/lines.txt" });
    expect(read).toMatchObject({ ok: true, total: 400_000 });
    expect(replyBytes(read)).toBeLessThanOrEqual(maxPayload);
    expect(read.output.startsWith("1: \n2: \n")).toBe(true);
    expect(read.output.endsWith("399999: \n400000: ")).toBe(true);
    expect(noteOf(read).cut + noteOf(read).kept).toBe(read.totalBytes);
    const search = await tool(s, { tool: "search", pattern: "€", glob: "big/*", maxResults: 1_000 });
    expect(search).toMatchObject({ ok: true, total: 1_000 });
    expect(replyBytes(search)).toBeLessThanOrEqual(maxPayload);
    expect(search.output.startsWith("big/euro1.txt:1: €")).toBe(true);
    expect(noteOf(search).notes).toBe(1);
    expect(await tool(s, { tool: "run", command: "echo still here" })).toMatchObject({ output: "still here\n" });
  }, 60_000);

  it("close removes the container; calls after it, and to an unknown session, fail not_found", async () => {
    expect(await close(s)).toEqual({ closed: true });
    expect(await sessionContainers(s.sessionId)).toEqual([]);
    const gone = await errorOf(tool(s, { tool: "read", path: "pkg/calc.py" }));
    expect(hasCode(gone, "not_found")).toBe(true);
    const unknown = await errorOf(tool({ ...s, sessionId: "no-such-session" }, { tool: "run", command: "true" }));
    expect(hasCode(unknown, "not_found")).toBe(true);
    expect(await close({ ...s, sessionId: "no-such-session" })).toEqual({ closed: false });
    // Another replica's subject: nobody serves it.
    const elsewhere = await errorOf(tool({ ...s, executorId: "nobody-here" }, { tool: "run", command: "true" }));
    expect(hasCode(elsewhere, "unavailable")).toBe(true);
  });
});

describe("idle sessions", () => {
  it("are closed once no call came for the idle time: container and host copy gone", async () => {
    const sessionsDir = mkdtempSync(join(tmpdir(), "loopsmith-session-idle-"));
    const ex = createExecutor({
      docker,
      config: testConfig({ warmPoolSize: 0 }),
      log,
      kinds: ["python"],
      loadBase: snapshotLoader(nc, join(dataDir, "idle-cache")),
      sessionsDir,
      sessionIdleMs: 1_500,
    });
    await ex.start();
    try {
      const opened = await ex.sessions.open(openRequest("t-session-idle"));
      expect(ex.sessions.size).toBe(1);
      expect(await sessionContainers(opened.sessionId)).toHaveLength(1);
      expect(readdirSync(join(sessionsDir, ex.instanceId))).toHaveLength(1);
      // A call keeps it open past the first idle time.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(
        (await ex.sessions.call({ v: 1, sessionId: opened.sessionId, call: { tool: "run", command: "true" } })).ok,
      ).toBe(true);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(ex.sessions.size).toBe(1);
      const deadline = Date.now() + 10_000;
      // The session leaves the table at once; its container's removal follows.
      const left = async (): Promise<boolean> =>
        ex.sessions.size > 0 ||
        (await sessionContainers(opened.sessionId)).length > 0 ||
        readdirSync(join(sessionsDir, ex.instanceId)).length > 0;
      while ((await left()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(ex.sessions.size).toBe(0);
      expect(await sessionContainers(opened.sessionId)).toEqual([]);
      expect(readdirSync(join(sessionsDir, ex.instanceId))).toEqual([]);
      const gone = await errorOf(
        ex.sessions.call({ v: 1, sessionId: opened.sessionId, call: { tool: "run", command: "true" } }),
      );
      expect(hasCode(gone, "not_found")).toBe(true);
    } finally {
      await ex.stop();
      rmSync(sessionsDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("session runs and the executor's slots", () => {
  it("a run holds one of the slots verdict runs take; a run that finds none free within its timeout is not run", async () => {
    const ex = createExecutor({
      docker,
      config: testConfig({ warmPoolSize: 0, concurrency: 1, queueLimit: 0 }),
      log,
      kinds: ["python"],
      loadBase: snapshotLoader(nc, join(dataDir, "slots-cache")),
      sessionsDir: join(dataDir, "slots-sessions"),
    });
    await ex.start();
    try {
      const a = await ex.sessions.open(openRequest("t-session-slot-a"));
      const b = await ex.sessions.open(openRequest("t-session-slot-b"));
      const runA = (command: string, timeoutMs?: number) =>
        ex.sessions.call({
          v: 1,
          sessionId: a.sessionId,
          call: { tool: "run", command, ...(timeoutMs ? { timeoutMs } : {}) },
        });
      const slow = runA("sleep 3; echo done");
      const deadline = Date.now() + 10_000;
      while (ex.load().running === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(ex.load()).toMatchObject({ running: 1, freeSlots: 0 });
      // The one slot is the session's: a verdict run finds this executor full.
      const verdict = await errorOf(ex.run(request("python", [{ path: "t.py", content: "print(1)\n" }])));
      expect(busyReason(verdict)).toBe("full");
      // Another session's run waits for the slot past the queue bound, up to its own timeout.
      const started = Date.now();
      const starved = await ex.sessions.call({
        v: 1,
        sessionId: b.sessionId,
        call: { tool: "run", command: "echo ran", timeoutMs: 600 },
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(550);
      expect(starved).toMatchObject({ ok: false, exitCode: null, timedOut: true });
      expect(starved.output).toMatch(/^\[not run: every slot of this executor stayed taken/);
      // Queued behind the slow run, it runs once the slot is free.
      const queued = ex.sessions.call({ v: 1, sessionId: b.sessionId, call: { tool: "run", command: "echo ran" } });
      expect(await slow).toMatchObject({ ok: true, output: "done\n" });
      expect(await queued).toMatchObject({ ok: true, output: "ran\n" });
      expect(ex.load()).toMatchObject({ running: 0, queued: 0 });
    } finally {
      await ex.stop();
    }
  }, 60_000);
});

describe("sessions of a dead executor", () => {
  it("a killed executor's session container ends, and the next executor's start-up sweep removes it and its host copy", async () => {
    // Only the child serves session_open from here on.
    await running?.stop();
    running = undefined;
    const childData = mkdtempSync(join(tmpdir(), "loopsmith-session-child-"));
    const child = spawn(process.execPath, ["--import", "tsx", join(REPO, "services", "executor", "src", "main.ts")], {
      cwd: REPO,
      env: {
        ...process.env,
        NATS_URL: nats.url,
        LOOPSMITH_WARM_POOL_SIZE: "1",
        LOG_LEVEL: "warn",
        XDG_DATA_HOME: childData,
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    try {
      const opened = await call(nc, Endpoints.executor.sessionOpen, openRequest("t-session-killed"), {
        timeoutMs: 60_000,
        retries: 12,
        backoffMs: 1_000,
      });
      expect((await tool(opened, { tool: "run", command: "true" })).ok).toBe(true);
      const [info] = await sessionContainers(opened.sessionId);
      expect(info?.Labels[LABEL]).toBe(opened.executorId);
      child.kill("SIGKILL");
      await exited;
      // Its attach connection closed: the container's idle process read end-of-file and ended.
      const deadline = Date.now() + 20_000;
      let state = "";
      while (Date.now() < deadline) {
        state = (await docker.getContainer(info?.Id as string).inspect()).State.Status;
        if (state === "exited") break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(state).toBe("exited");
      // Its host copy is still there: a killed executor closes nothing.
      const sessionsDir = join(childData, "loopsmith", "sessions");
      expect(readdirSync(join(sessionsDir, opened.executorId))).toHaveLength(1);
      const next = createExecutor({
        docker,
        config: testConfig({ warmPoolSize: 0 }),
        log,
        kinds: ["python"],
        liveInstances: liveExecutors(nc, log),
        sessionsDir,
      });
      await next.start();
      try {
        expect(await sessionContainers(opened.sessionId)).toEqual([]);
        expect(readdirSync(sessionsDir)).not.toContain(opened.executorId);
      } finally {
        await next.stop();
      }
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
      rmSync(childData, { recursive: true, force: true });
    }
    expect(stderr).not.toMatch(/"level":(50|60)/);
  }, 180_000);
});
