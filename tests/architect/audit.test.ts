/**
 * The security audit through the real stack's parts: the conductor on real NATS JetStream,
 * the reviewer service over NATS (the real gate, and the audit model answered by the
 * scripted provider from the task's own script), and the real executor on the Docker engine,
 * which runs bandit and ESLint's security plugin in the sandbox images and then the tests.
 * The builder and the reflection are test doubles (their replies are what the test is about).
 */
import { afterAll, beforeAll, describe, expect } from "vitest";
import { connect } from "@nats-io/transport-node";
import {
  AuditRecord,
  type BuildRequest,
  type ExecutionRequest,
  type FileChange,
  type TaskScript,
} from "@loopsmith/shared/contracts";
import { Endpoints, call } from "@loopsmith/shared/bus";
import { loadConfig, runService, type RunningService } from "@loopsmith/shared/runtime";
import { startConductor } from "@loopsmith/architect";
import type { Executor } from "@loopsmith/executor";
import { reviewerService } from "@loopsmith/reviewer";
import { it } from "../fixtures/index.js";
import { startExecutor } from "../executor/helpers.js";
import { log, provider, runTask, steps, task, usage } from "./helpers.js";

let executor: Executor;
beforeAll(async () => {
  executor = await startExecutor({ warmPoolSize: 0 });
}, 180_000);
afterAll(async () => {
  await executor?.stop();
});

/** The audit model's replies, in call order (the review role's list of the task's script). */
const script = (review: unknown[]): TaskScript => ({ v: 1, kind: "loopsmith-script", replies: { review } });

/**
 * Runs a task with the audit on whose build answers `candidates[i]` at iteration i + 1, with
 * the reviewer service on the bus and the real executor.
 */
async function solveAudited(
  url: string,
  opts: { language: "python" | "javascript"; candidates: FileChange[][]; review: unknown[]; tests: FileChange[] },
) {
  const config = loadConfig({ env: { NATS_URL: url, LOOPSMITH_PROVIDER: "scripted" }, discover: false });
  const reviewer: RunningService = await runService("reviewer", (deps) => reviewerService(deps), { config, log });
  const builds: BuildRequest[] = [];
  const runs: ExecutionRequest[] = [];
  const nc = await connect({ servers: url });
  const { steps: s, calls } = steps([], {
    build: async (req) => {
      builds.push(req);
      const files = opts.candidates[Math.min(req.iteration, opts.candidates.length) - 1] ?? [];
      return { value: { files, tests: [], notes: "" }, usage: usage(), provider };
    },
    gate: (req) => call(nc, Endpoints.reviewer.gate, req, { timeoutMs: 30_000 }),
    audit: (req) => call(nc, Endpoints.reviewer.audit, req, { timeoutMs: 60_000 }),
    execute: async (req) => (runs.push(req), executor.run(req)),
  });
  const conductor = await startConductor({ nc, steps: s, log });
  try {
    const run = await runTask(
      nc,
      task({
        language: opts.language,
        acceptanceTests: opts.tests,
        audit: true,
        memory: "off",
        script: script(opts.review),
        limits: { maxIterations: opts.candidates.length, runTimeoutMs: 60_000 },
      }),
    );
    const audits = run.events
      .filter((e) => e.kind === "step" && e.phase === "audit")
      .map((e) => AuditRecord.parse(e.data?.audit));
    return { ...run, builds, runs, calls, audits };
  } finally {
    await conductor.stop();
    await nc.close();
    await reviewer.stop();
  }
}

const PY_TEST: FileChange = {
  path: "test_auth.py",
  content: "from auth import digest\n\ndef test_digest():\n    assert len(digest('pw')) == 64\n",
};
const py = (body: string): FileChange[] => [{ path: "auth.py", content: `import hashlib\n\n${body}` }];

describe("the security audit on the real stack", () => {
  it("a bandit HIGH and then a model's high finding each block an iteration; the builder is told why; the clean one runs", async ({
    nats,
  }) => {
    const secret = {
      rule: "secrets",
      file: "auth.py",
      line: 3,
      severity: "high",
      message: "an API key is written in the code: read it from the environment",
    };
    const r = await solveAudited(nats.url, {
      language: "python",
      tests: [PY_TEST],
      candidates: [
        py("def digest(pw):\n    return hashlib.md5(pw.encode()).hexdigest() * 2\n"),
        py(
          'API_KEY = "sk-live-0123456789abcdef"\n\ndef digest(pw):\n    return hashlib.sha256(pw.encode()).hexdigest()\n',
        ),
        py("def digest(pw):\n    return hashlib.sha256(pw.encode()).hexdigest()\n"),
      ],
      review: [{ findings: [] }, { findings: [secret] }, { findings: [] }],
    });
    // Iterations 1 and 2: the static run only; iteration 3: the static run, then the tests.
    expect(r.runs.map((q) => (q.command ? "static" : "tests"))).toEqual(["static", "static", "static", "tests"]);
    expect(r.result.status).toBe("passed");
    expect(r.result.iterations).toBe(3);

    // Bandit really ran in the sandbox and found the MD5.
    expect(r.audits[0]).toMatchObject({ blocked: true, static: { tool: "bandit", status: "ok" } });
    expect(r.audits[0]?.findings).toContainEqual(
      expect.objectContaining({ source: "bandit", rule: "B324:hashlib", file: "auth.py", line: 4, severity: "high" }),
    );
    expect(r.audits[1]).toMatchObject({ blocked: true, findings: [{ ...secret, source: "model" }] });
    expect(r.audits[2]).toMatchObject({ blocked: false, findings: [] });

    // Each next build carries the blocking findings as its previous failure.
    expect(r.builds[1]?.previous?.failure).toMatchObject({ status: "blocked" });
    expect(r.builds[1]?.previous?.failure.output).toContain("security audit, bandit B324:hashlib");
    expect(r.builds[2]?.previous?.failure.output).toContain(
      "security audit, model secrets: an API key is written in the code: read it from the environment (auth.py:3)",
    );
    expect(
      r.events.some((e) => e.message.startsWith("audit: 1 finding, 1 high; bandit; blocked: high model secrets")),
    ).toBe(true);
  }, 300_000);

  it("ESLint's security plugin runs in the Node image; a medium finding warns and the candidate runs", async ({
    nats,
  }) => {
    const r = await solveAudited(nats.url, {
      language: "javascript",
      tests: [
        {
          path: "files.test.js",
          content:
            'const { test } = require("node:test");\nconst assert = require("node:assert");\nconst { size } = require("./files.js");\ntest("size", () => assert.ok(size("files.js") > 0));\n',
        },
      ],
      candidates: [
        [
          {
            path: "files.js",
            content:
              'const fs = require("node:fs");\nconst path = require("node:path");\nfunction size(name) {\n  return fs.readFileSync(path.join(__dirname, name)).length;\n}\nmodule.exports = { size };\n',
          },
        ],
      ],
      review: [{ findings: [] }],
    });
    expect(r.audits[0]).toMatchObject({ blocked: false, static: { tool: "eslint-plugin-security", status: "ok" } });
    expect(r.audits[0]?.findings).toEqual([
      expect.objectContaining({
        source: "eslint",
        rule: "security/detect-non-literal-fs-filename",
        file: "files.js",
        line: 4,
        severity: "medium",
      }),
    ]);
    expect(
      r.events.some(
        (e) =>
          e.kind === "warning" &&
          e.message.startsWith(
            "audit: 1 lower-severity finding, the candidate runs: medium eslint security/detect-non-literal-fs-filename (files.js:4)",
          ),
      ),
    ).toBe(true);
    expect(r.runs.map((q) => (q.command ? "static" : "tests"))).toEqual(["static", "tests"]);
    expect(r.result.status).toBe("passed");
  }, 300_000);
});
