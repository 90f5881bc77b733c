/**
 * Repo mode's setup layer on the real Docker engine: built once per key into a named volume
 * (concurrent runs share the build), reused by later runs and by a restarted executor,
 * mounted read-only; a failed setup does not stop the run and is not retried for 10 minutes.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { putSnapshot } from "@loopsmith/shared/bus";
import { snapshotName, type ExecutionRequest, type FileChange, type Language } from "@loopsmith/shared/contracts";
import {
  createExecutor,
  LABEL_SETUP,
  SETUP_NETWORK,
  snapshotLoader,
  volumeName,
  type Executor,
} from "@loopsmith/executor";
import { startNats, type Started } from "../fixtures/containers.js";
import { containersOf, docker, log, testConfig } from "./helpers.js";
import { newCommit, snapshotTar } from "./repo-helpers.js";

let nats: Started;
let nc: NatsConnection;
let cacheDir: string;
const executors: Executor[] = [];
const volumes = new Set<string>();
const node = newCommit();
const python = newCommit();
const npmZero = newCommit();
const npmDep = newCommit();
let seq = 0;

const NODE_TREE = {
  "package.json": JSON.stringify({ name: "demo", version: "1.0.0", dependencies: {} }),
  "test/fake.test.js":
    "const test = require('node:test');\nconst assert = require('node:assert');\ntest('fake', () => assert.strictEqual(require('fake'), 42));\n",
};
const NPM_ZERO = {
  "package.json": JSON.stringify({ name: "zero", version: "1.0.0" }),
  "package-lock.json": JSON.stringify({
    name: "zero",
    version: "1.0.0",
    lockfileVersion: 3,
    requires: true,
    packages: { "": { name: "zero", version: "1.0.0" } },
  }),
};
const NPM_DEP = {
  "package.json": JSON.stringify({ name: "dep", version: "1.0.0", dependencies: { "is-number": "7.0.0" } }),
};
const PY_TREE = {
  "setup.py": "from setuptools import setup\nsetup(name='demo', version='1.0', py_modules=['demo'])\n",
  "demo.py": "X = 1\n",
  "test_demo.py": "import demo\n\ndef test_x():\n    assert demo.X == 1\n",
};

/** An executor for both images, reading snapshots from the test's NATS. */
async function executor(): Promise<Executor> {
  const ex = createExecutor({
    docker,
    config: testConfig({ warmPoolSize: 1 }),
    log,
    loadBase: snapshotLoader(nc, cacheDir),
    setup: { timeoutMs: 60_000, env: { ...process.env, PIP_DEFAULT_TIMEOUT: "5", PIP_RETRIES: "0" } },
  });
  executors.push(ex);
  await ex.start();
  return ex;
}

function req(
  language: Language,
  commit: string,
  shell: string,
  setupCommand: string,
  files: FileChange[] = [],
): ExecutionRequest {
  seq += 1;
  return {
    v: 1,
    taskId: "t-setup",
    iteration: seq,
    idempotencyKey: `t-setup/${seq}/execute`,
    language,
    files,
    base: { snapshot: snapshotName(commit), commit, deleted: [], setupCommand },
    shell,
    timeoutMs: 30_000,
    memoryMb: 512,
  };
}

/** Keeps the result's volume for removal after the file. */
function seen<T extends { setup?: { key: string } }>(r: T): T {
  if (r.setup) volumes.add(volumeName(r.setup.key));
  return r;
}

let ex: Executor;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  cacheDir = mkdtempSync(join(tmpdir(), "loopsmith-setup-"));
  await putSnapshot(nc, snapshotName(node), await snapshotTar(NODE_TREE));
  await putSnapshot(nc, snapshotName(python), await snapshotTar(PY_TREE));
  await putSnapshot(nc, snapshotName(npmZero), await snapshotTar(NPM_ZERO));
  await putSnapshot(nc, snapshotName(npmDep), await snapshotTar(NPM_DEP));
  ex = await executor();
});

afterAll(async () => {
  for (const e of executors) await e.stop();
  for (const e of executors) expect(await containersOf(e.instanceId)).toHaveLength(0);
  for (const v of volumes)
    await docker
      .getVolume(v)
      .remove({ force: true })
      .catch(() => undefined);
  await nc?.close();
  await nats?.stop();
  if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
});

// A stand-in for an installer, with no network: writes a package into node_modules.
const INSTALL_FAKE =
  "mkdir -p node_modules/fake && echo 'module.exports = 42;' > node_modules/fake/index.js && echo built >> node_modules/.builds";

describe("setup layer", () => {
  it("is built once for concurrent runs, mounted read-only, and reused", async () => {
    const shell = 'node --test && test "$(wc -l < node_modules/.builds)" -eq 1 && ! touch node_modules/x 2>/dev/null';
    const [a, b] = await Promise.all([
      ex.run(req("javascript", node, shell, INSTALL_FAKE)),
      ex.run(req("javascript", node, shell, INSTALL_FAKE)),
    ]).then((rs) => rs.map(seen));
    expect(a?.status, `${a?.stdout}${a?.stderr}${a?.setup?.message ?? ""}`).toBe("passed");
    expect(b?.status, `${b?.stdout}${b?.stderr}`).toBe("passed");
    expect([a?.setup?.status, b?.setup?.status].sort()).toEqual(["built", "reused"]);
    expect(a?.setup?.key).toBe(b?.setup?.key);
    const key = a?.setup?.key ?? "";
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    const info = await docker.getVolume(volumeName(key)).inspect();
    expect(info.Labels?.[LABEL_SETUP]).toBe(key);

    const again = seen(await ex.run(req("javascript", node, shell, INSTALL_FAKE)));
    expect(again.status).toBe("passed");
    expect(again.setup).toMatchObject({ key, status: "reused" });

    // Another executor (a restart) finds the layer ready on the volume.
    const restarted = await executor();
    const later = seen(await restarted.run(req("javascript", node, shell, INSTALL_FAKE)));
    expect(later.setup).toMatchObject({ key, status: "reused" });
    await restarted.stop();

    // A changed manifest is another key, so another layer.
    const changed = seen(
      await ex.run(
        req("javascript", node, "node --test", INSTALL_FAKE, [
          { path: "package.json", content: JSON.stringify({ name: "demo", version: "1.0.1" }) },
        ]),
      ),
    );
    expect(changed.setup?.status).toBe("built");
    expect(changed.setup?.key).not.toBe(key);
    await ex.settled();
    expect(await containersOf(ex.instanceId)).toHaveLength(2); // only the warm containers are left
  });

  it("runs without the layer when the setup fails, and does not try again for 10 minutes", async () => {
    const first = seen(await ex.run(req("javascript", node, "node --test", "echo no registry >&2; exit 1")));
    expect(first.setup?.status).toBe("failed");
    expect(first.setup?.message).toContain("exited with code 1");
    expect(first.setup?.message).toContain("no registry");
    // The run happened, without the layer: the test cannot load the package.
    expect(first.status).toBe("failed");
    expect(first.reason).toContain("the setup command failed");

    const second = seen(await ex.run(req("javascript", node, "node --test", "echo no registry >&2; exit 1")));
    expect(second.setup?.status).toBe("failed");
    expect(second.setup?.message).toContain("is not tried again before");
    expect(second.setup?.durationMs).toBeLessThan(1_000);

    // The failure is on the volume: a restarted executor does not try again either.
    const restarted = await executor();
    const third = seen(await restarted.run(req("javascript", node, "node --test", "echo no registry >&2; exit 1")));
    expect(third.setup?.status).toBe("failed");
    expect(third.setup?.message).toContain("is not tried again before");
    await restarted.stop();
  });

  it("reports a pip install that needs PyPI failing (unreachable here) and still runs the tests", async () => {
    // `pip install -e .` alone installs offline since the image carries setuptools (python 4);
    // a requirement only PyPI has cannot be met.
    const r = seen(
      await ex.run(req("python", python, "python3 -m pytest -q", "pip install -e . 'attrs-loopsmith-absent==9.9'")),
    );
    expect(r.setup?.status).toBe("failed");
    expect(r.setup?.message).toMatch(/exited with code \d+/);
    expect(r.status, r.stdout + r.stderr).toBe("passed"); // this repository needs nothing installed
    expect(r.tests.map((t) => t.name)).toEqual(["test_x"]);
  });

  it("installs with pip into the user base, which the run sees (modules and scripts)", async () => {
    // A local wheel (PyPI is not reachable here): pip's user scheme into the layer, on Debian's
    // externally managed Python.
    const wheel = [
      "python3 - <<'EOF'",
      "import zipfile",
      "with zipfile.ZipFile('/tmp/localdep-1.0-py3-none-any.whl', 'w') as z:",
      "    z.writestr('localdep.py', 'VALUE = 7\\ndef main():\\n    print(\\'cli\\', VALUE)\\n')",
      "    z.writestr('localdep-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: localdep\\nVersion: 1.0\\n')",
      "    z.writestr('localdep-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')",
      "    z.writestr('localdep-1.0.dist-info/entry_points.txt', '[console_scripts]\\nlocaldep-cli = localdep:main\\n')",
      "    z.writestr('localdep-1.0.dist-info/RECORD', '')",
      "EOF",
      "pip install --no-index /tmp/localdep-1.0-py3-none-any.whl",
    ].join("\n");
    const r = seen(
      await ex.run(
        req("python", python, "python3 -c 'import localdep; print(\"value\", localdep.VALUE)' && localdep-cli", wheel),
      ),
    );
    expect(r.setup?.status, r.setup?.message).toBe("built");
    expect(r.status, r.stdout + r.stderr).toBe("passed");
    expect(r.stdout).toContain("value 7");
    expect(r.stdout).toContain("cli 7");
  });

  it("runs npm ci with a zero-dependency lock file once, and reuses the layer", async () => {
    const r1 = seen(
      await ex.run(req("javascript", npmZero, "node -e 'console.log(1)' && ! test -w node_modules", "npm ci")),
    );
    expect(r1.setup?.status, r1.setup?.message).toBe("built");
    expect(r1.status, r1.stdout + r1.stderr).toBe("passed");
    const r2 = seen(await ex.run(req("javascript", npmZero, "node -e 'console.log(1)'", "npm ci")));
    expect(r2.setup).toMatchObject({ key: r1.setup?.key, status: "reused" });
    const info = await docker.getVolume(volumeName(r1.setup?.key ?? "")).inspect();
    expect(info.Name).toBe(volumeName(r1.setup?.key ?? ""));
  });

  it("installs from the npm registry through the host's CA bundle; the run itself stays offline", async () => {
    const shell = "node -e \"const n = require('is-number'); if (!n(5)) process.exit(1); console.log('is-number ok')\"";
    const r = seen(await ex.run(req("javascript", npmDep, shell, "npm install --no-save")));
    expect(r.setup?.status, r.setup?.message).toBe("built");
    expect(r.status, r.stdout + r.stderr).toBe("passed");
    expect(r.stdout).toContain("is-number ok");
    const nets = await docker.listNetworks({ filters: { name: [SETUP_NETWORK] } });
    expect(nets.find((n) => n.Name === SETUP_NETWORK)?.Labels?.[LABEL_SETUP]).toBe("network");
    const offline = seen(
      await ex.run(
        req(
          "javascript",
          npmDep,
          "node -e \"fetch('https://registry.npmjs.org/').then(() => process.exit(0), () => process.exit(9))\"",
          "npm install --no-save",
        ),
      ),
    );
    expect(offline.setup?.status).toBe("reused");
    expect(offline.status).toBe("failed");
    expect(offline.exitCode).toBe(9);
  });
});
