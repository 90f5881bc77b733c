/**
 * Repo mode on the real Docker engine and a real NATS object store: the workspace is a
 * snapshot's tree minus deleted paths plus the candidate's files; `shell` runs as `sh -c`;
 * pytest's JUnit is read wherever the line runs it; other runners count as one case.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_OWNER, putSnapshot } from "@loopsmith/shared/bus";
import { snapshotName, type ExecutionRequest, type FileChange } from "@loopsmith/shared/contracts";
import { createExecutor, snapshotLoader, type Executor } from "@loopsmith/executor";
import { startNats, type Started } from "../fixtures/containers.js";
import { containersOf, docker, log, testConfig } from "./helpers.js";
import { newCommit, snapshotTar } from "./repo-helpers.js";

const BUGGY = "def add(a, b):\n    return a - b\n";
const FIXED = "def add(a, b):\n    return a + b\n";
const TESTS =
  "from calc.ops import add\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_zero():\n    assert add(0, 0) == 0\n";

let nats: Started;
let nc: NatsConnection;
let ex: Executor;
let cacheDir: string;
const commit = newCommit();
let seq = 0;

function repoRequest(shell: string, files: FileChange[] = [], deleted: string[] = []): ExecutionRequest {
  seq += 1;
  return {
    v: 1,
    taskId: "t-repo",
    iteration: seq,
    idempotencyKey: `t-repo/${seq}/execute`,
    language: "python",
    files,
    base: { snapshot: snapshotName(commit), commit, deleted },
    shell,
    timeoutMs: 30_000,
    memoryMb: 512,
  };
}

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  cacheDir = mkdtempSync(join(tmpdir(), "loopsmith-repos-"));
  await putSnapshot(
    nc,
    snapshotName(commit),
    await snapshotTar({
      "calc/__init__.py": "",
      "calc/ops.py": BUGGY,
      "tests/test_ops.py": TESTS,
      "obsolete.py": "X = 1\n",
      "link_in.py": "->calc/ops.py",
      link_out: "->/etc/passwd",
      ".git/HEAD": "ref: refs/heads/main\n",
      ".git/config": "[core]\n",
      "node_modules/shim.js": "module.exports = 1;\n",
    }),
  );
  ex = createExecutor({
    docker,
    config: testConfig({ warmPoolSize: 1 }),
    log,
    kinds: ["python"],
    loadBase: snapshotLoader(nc, cacheDir),
  });
  await ex.start();
});

afterAll(async () => {
  await ex?.stop();
  if (ex) expect(await containersOf(ex.instanceId)).toHaveLength(0);
  await nc?.close();
  await nats?.stop();
  if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
});

describe("repo mode: base tree and overlay", () => {
  it("runs pytest over the base tree and reports each test from JUnit", async () => {
    const r = await ex.run(repoRequest("python3 -m pytest -q"));
    expect(r.status, r.stdout + r.stderr).toBe("failed");
    expect(r.tests.map((t) => [t.name, t.status]).sort()).toEqual([
      ["test_add", "failed"],
      ["test_zero", "passed"],
    ]);
    expect(r.summary).toMatchObject({ total: 2, passed: 1, failed: 1 });
    expect(r.setup).toBeUndefined();
  });

  it("passes when the overlay fixes the file", async () => {
    const r = await ex.run(repoRequest("python3 -m pytest -q", [{ path: "calc/ops.py", content: FIXED }]));
    expect(r.status, r.stdout + r.stderr).toBe("passed");
    expect(r.tests.map((t) => t.name).sort()).toEqual(["test_add", "test_zero"]);
  });

  it("passes with a skipped and an xfail test, judged by the controller, which writes the line's JUnit too", async () => {
    const skips = [
      "import pytest",
      "",
      '@pytest.mark.skip(reason="not today")',
      "def test_skipped():",
      "    assert False",
      "",
      '@pytest.mark.xfail(reason="known")',
      "def test_known():",
      "    assert False",
      "",
    ].join("\n");
    const r = await ex.run(
      repoRequest("python3 -m pytest -q", [
        { path: "calc/ops.py", content: FIXED },
        { path: "tests/test_skips.py", content: skips },
      ]),
    );
    expect(r.status, r.stdout + r.stderr).toBe("passed");
    expect(r.verdict).toBe("controller");
    expect(r.stdout).not.toContain("INTERNALERROR");
    expect(r.summary).toMatchObject({ total: 4, passed: 2, skipped: 2 });
  });

  it("leaves out deleted files, .git, node_modules and links out of the tree; keeps links inside", async () => {
    const check = [
      "test ! -e obsolete.py",
      "test ! -e .git",
      "test ! -e node_modules",
      "test -L link_in.py",
      'test "$(cat link_in.py)" = "$(cat calc/ops.py)"',
      "test ! -e link_out && test ! -L link_out",
      "test -f new/added.py",
      "echo checked",
    ].join(" && ");
    const r = await ex.run(repoRequest(check, [{ path: "new/added.py", content: "A = 1\n" }], ["obsolete.py"]));
    expect(r.status, r.stdout + r.stderr).toBe("passed");
    expect(r.stdout).toContain("checked");
    // No JUnit: one synthetic case named after the command.
    expect(r.tests).toHaveLength(1);
    expect(r.tests[0]).toMatchObject({ classname: "command", status: "passed" });
    expect(r.tests[0]?.name).toBe(`${check.slice(0, 199)}…`); // named after the command, cut at 200 characters
  });

  it("reports a missing command as command_not_found, naming it", async () => {
    const r = await ex.run(repoRequest("no-such-tool --check"));
    expect(r.status).toBe("command_not_found");
    expect(r.exitCode).toBe(127);
    expect(r.reason).toContain('"no-such-tool"');
    expect(r.tests).toEqual([]);
  });

  it("judges a non-pytest command by its exit code, as one synthetic case", async () => {
    const r = await ex.run(repoRequest("echo oops >&2; exit 3"));
    expect(r.status).toBe("failed");
    expect(r.exitCode).toBe(3);
    expect(r.summary).toMatchObject({ total: 1, failed: 1 });
    expect(r.tests[0]?.message).toContain("exit code 3");
    expect(r.tests[0]?.message).toContain("oops");
  });

  it("keeps the usual limits: a timeout is a timeout", async () => {
    const r = await ex.run({ ...repoRequest("sleep 30"), timeoutMs: 1_500 });
    expect(r.status).toBe("timeout");
    expect(r.tests).toEqual([]);
  });

  it("blocks a changed file that clashes with the tree", async () => {
    const r = await ex.run(repoRequest("true", [{ path: "calc/ops.py/x.py", content: "" }]));
    expect(r.status).toBe("blocked");
    expect(r.reason).toContain('"calc/ops.py", which is a file');
  });

  it("answers sandbox_error when the snapshot is not in the store", async () => {
    const other = newCommit();
    const r = await ex.run({
      ...repoRequest("true"),
      base: { snapshot: snapshotName(other), commit: other, deleted: [] },
    });
    expect(r.status).toBe("sandbox_error");
    expect(r.reason).toContain(snapshotName(other));
  });

  it("never extracts .git from a snapshot into the cache", async () => {
    const { readdirSync } = await import("node:fs");
    // One folder per owner: the task of another owner never gets this tree.
    const tree = join(cacheDir, DEFAULT_OWNER, snapshotName(commit).replace(/\.tar$/, ""));
    expect(readdirSync(tree).sort()).toEqual([
      "calc",
      "link_in.py",
      "link_out",
      "node_modules",
      "obsolete.py",
      "tests",
    ]);
  });
});
