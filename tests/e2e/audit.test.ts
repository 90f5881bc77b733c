/**
 * `loopsmith solve --audit` through the CLI and the built app, scripted: the CLI starts NATS
 * and the five services; bandit runs in the Docker sandbox and finds the first candidate's
 * MD5 (high), which blocks that iteration before its tests run; the reflection and the second
 * build (SHA-256) follow, its audit is clean and it passes. `report.md` (`--out`) and
 * `loopsmith show` list the audit's findings. Then the configuration's `review.audit` turns
 * the audit on without the flag.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loopsmith, type CliRun } from "../fixtures/cli.js";

const dir = mkdtempSync(join(tmpdir(), "loopsmith-audit-"));
const env = {
  LOOPSMITH_DATA_DIR: join(dir, "data"),
  NATS_URL: "",
  DATABASE_URL: "",
  ANTHROPIC_API_KEY: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "info",
};

const file = (name: string, value: unknown): string => {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(value, null, 2));
  return path;
};

const TASK = file("task.json", {
  goal: "Write digest(pw) in auth.py: the hex SHA-256 of the password's UTF-8 bytes.",
  language: "python",
  acceptanceTests: [
    {
      path: "test_auth.py",
      content:
        "import hashlib\nfrom auth import digest\n\ndef test_digest():\n    assert digest('pw') == hashlib.sha256(b'pw').hexdigest()\n",
    },
  ],
  limits: { maxIterations: 3 },
});

const auth = (hash: string) => ({
  files: [
    {
      path: "auth.py",
      content: `import hashlib\n\n\ndef digest(pw):\n    return hashlib.${hash}(pw.encode()).hexdigest()\n`,
    },
  ],
  tests: [],
  notes: "",
});

/** Plan, the MD5 build then the SHA-256 one, a reflection, and two clean audits (the review role's list). */
const SCRIPT = file("script.json", {
  v: 1,
  kind: "loopsmith-script",
  description: "the security audit: bandit blocks an MD5 digest, the SHA-256 one passes",
  replies: {
    plan: [
      { summary: "digest with hashlib", acceptanceCriteria: ["sha256 hex"], steps: ["write it"], files: ["auth.py"] },
    ],
    build: [auth("md5"), auth("sha256")],
    reflect: [
      { rootCause: "MD5 is a weak hash", hypothesis: "SHA-256 passes the audit", fixPlan: "use hashlib.sha256" },
    ],
    review: [{ findings: [] }],
  },
});

describe("loopsmith solve --audit", () => {
  let solved: CliRun;
  const out = join(dir, "out");

  it("blocks the MD5 candidate on bandit's high finding, and the next one passes", async () => {
    solved = await loopsmith(
      [
        "solve",
        "--file",
        TASK,
        "--provider",
        "scripted",
        "--script",
        SCRIPT,
        "--audit",
        "--task-id",
        "audit-e2e",
        "--out",
        out,
      ],
      env,
      400_000,
    );
    expect(solved.code, solved.stderr).toBe(0);
    expect(solved.stdout.split("\n")[0]).toMatch(/^SCRIPTED RUN/);
    expect(solved.stdout).toContain("blocked: high bandit B324:hashlib (auth.py:5): Use of weak MD5 hash for security");
    expect(solved.stdout).toMatch(/passed after 2 iterations/);
    const result = JSON.parse(readFileSync(join(out, "result.json"), "utf8")) as { status: string; iterations: number };
    expect(result).toMatchObject({ status: "passed", iterations: 2 });
  }, 420_000);

  it("report.md and show list the audit's findings per iteration", async () => {
    const report = readFileSync(join(out, "report.md"), "utf8");
    expect(report).toContain("### Iteration 1: blocked");
    expect(report).toContain("- Security audit: 1 finding (1 high), blocked; bandit ok");
    expect(report).toContain("  - high bandit B324:hashlib auth.py:5: Use of weak MD5 hash for security.");
    expect(report).toContain("- Security audit: 0 findings; bandit ok");
    const show = await loopsmith(["show", "audit-e2e"], env, 180_000);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain("        audit: 1 finding (1 high), blocked; bandit ok");
    expect(show.stdout).toContain("          high bandit B324:hashlib auth.py:5: Use of weak MD5 hash for security.");
  }, 200_000);

  it("the configuration's review.audit turns it on without the flag", async () => {
    const config = file("config.json", { review: { audit: true } });
    const r = await loopsmith(
      [
        "solve",
        "--file",
        TASK,
        "--provider",
        "scripted",
        "--script",
        SCRIPT,
        "--config",
        config,
        "--task-id",
        "audit-cfg",
      ],
      env,
      400_000,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("blocked: high bandit B324:hashlib (auth.py:5)");
  }, 420_000);
});
