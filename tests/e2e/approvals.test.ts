/**
 * `solve --dependencies ask` end to end, as a user runs it: the real CLI, the five services,
 * NATS and the Docker sandbox, on a copy of examples/repo-bugfix whose scripted fix also adds
 * a requirements.txt (a new package).
 * - On a terminal (a pseudo-terminal made by util-linux's `script`) the CLI shows the
 *   manifest's diff, asks y/N; `y` lets the waiting task go on to pass, and `loopsmith show`
 *   lists the decision: who (the user name), what, when, the answer.
 * - Without a terminal the task stops with `needs_approval`, as it always did.
 * - With the package on the repository's allowlist nothing asks, the task passes, and the
 *   decision (in `show` and report.md) names the allowlist.
 */
import { spawn, execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO, loopsmith, type CliRun } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-approvals-e2e-"));
const configHome = mkdtempSync(join(tmpdir(), "loopsmith-approvals-config-"));
const env = {
  LOOPSMITH_DATA_DIR: dataDir,
  XDG_CONFIG_HOME: configHome,
  NATS_URL: "",
  DATABASE_URL: "",
  ANTHROPIC_API_KEY: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "warn",
};
const GOAL = "Fix the failing test tests/test_pricing.py::test_bulk_discount_starts_at_threshold";

/** The example's script, its fix in one build that also adds requirements.txt with tabulate. */
function script(): string {
  const original = JSON.parse(readFileSync(join(REPO, "examples", "repo-bugfix", "script.json"), "utf8")) as {
    replies: { plan: unknown[]; build: Array<{ edits: unknown[] }> };
  };
  const fix = original.replies.build[1];
  if (!fix) throw new Error("examples/repo-bugfix/script.json has no second build");
  const build = {
    ...fix,
    edits: [fix.edits[1], { path: "requirements.txt", search: "", replace: "tabulate==0.9.0\n" }],
  };
  const file = join(mkdtempSync(join(tmpdir(), "loopsmith-approvals-script-")), "script.json");
  writeFileSync(file, JSON.stringify({ ...original, replies: { plan: original.replies.plan, build: [build] } }));
  return file;
}

/** A committed copy of the example repository. */
function userRepo(): string {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-approvals-repo-"));
  cpSync(join(REPO, "examples", "repo-bugfix", "repo"), dir, { recursive: true });
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", dir, "-c", "user.name=u", "-c", "user.email=u@example.com", ...args]);
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  return dir;
}

const solveArgs = (dir: string, taskId: string, scriptFile: string): string[] => [
  "solve",
  "--repo",
  dir,
  GOAL,
  "--provider",
  "scripted",
  "--script",
  scriptFile,
  "--task-id",
  taskId,
  "--dependencies",
  "ask",
  "--setup-cmd",
  "",
];

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Runs the CLI in a pseudo-terminal (`script -qfec`): stdin and stdout are a TTY. When the
 * output shows `prompt`, types `answer` and Enter.
 */
function inTerminal(
  args: string[],
  prompt: string,
  answer: string,
  timeoutMs: number,
): Promise<CliRun & { asked: boolean }> {
  const started = Date.now();
  const line = [process.execPath, join(REPO, "cli", "bin", "loopsmith.js"), ...args].map(quote).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-qfec", line, "/dev/null"], {
      cwd: REPO,
      env: { ...process.env, ...env, TERM: "xterm", COLUMNS: "200", LINES: "50" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let asked = false;
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (!asked && stdout.includes(prompt)) {
        asked = true;
        child.stdin.write(`${answer}\r`);
      }
    });
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the terminal run did not finish in ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      child.stdin.end();
      resolve({ code, stdout, stderr, ms: Date.now() - started, asked });
    });
  });
}

describe("solve --dependencies ask", () => {
  const scriptFile = script();

  it("on a terminal: shows the manifest's diff, asks, and goes on after y; show records the decision", async () => {
    const dir = userRepo();
    const run = await inTerminal(solveArgs(dir, "approve-tty", scriptFile), "[y/N]", "y", 420_000);
    expect(run.asked, `${run.stdout}\n${run.stderr}`).toBe(true);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    // What the person saw before the question: the diff of the manifest and the package.
    const before = run.stdout.slice(0, run.stdout.indexOf("[y/N]"));
    expect(before).toContain("+tabulate==0.9.0");
    expect(before).toContain("+tabulate ==0.9.0  (requirements.txt)");
    expect(run.stdout).toContain("answer sent: approved");
    expect(run.stdout).toMatch(/PASSED/);
    // The branch holds the approved manifest.
    expect(
      execFileSync("git", ["-C", dir, "show", "loopsmith/approve-tty:requirements.txt"], { encoding: "utf8" }),
    ).toBe("tabulate==0.9.0\n");

    const show = await loopsmith(["show", "approve-tty"], env, 180_000);
    expect(show.code, show.stderr).toBe(0);
    const line = show.stdout.split("\n").find((l) => l.includes("approved by")) ?? "";
    expect(show.stdout).toContain("dependency decisions:");
    expect(line).toContain(`approved by ${userInfo().username}: +tabulate ==0.9.0`);
    expect(Date.parse(line.trim().split(/\s+/)[0] ?? "")).toBeGreaterThan(Date.now() - 3_600_000);
  }, 600_000);

  it("without a terminal: stops with needs_approval, as before", async () => {
    const dir = userRepo();
    const run = await loopsmith([...solveArgs(dir, "approve-notty", scriptFile), "--json"], env, 420_000);
    const result = run.stdout
      .split("\n")
      .map((l) => {
        try {
          return JSON.parse(l) as { kind?: string; stopReason?: string; taskId?: string };
        } catch {
          return {};
        }
      })
      .find((o) => o.taskId === "approve-notty" && o.stopReason !== undefined);
    expect(result?.stopReason, `${run.stdout}\n${run.stderr}`).toBe("needs_approval");
    expect(run.code).toBe(1);
  }, 600_000);

  it("with the package on the repository's allowlist: nothing asks, the task passes, show names the list", async () => {
    const dir = userRepo();
    mkdirSync(join(dir, ".loopsmith"));
    writeFileSync(join(dir, ".loopsmith", "allowed-dependencies"), "# approved for this project\ntabulate\n");
    const out = mkdtempSync(join(tmpdir(), "loopsmith-approvals-out-"));
    const run = await loopsmith([...solveArgs(dir, "approve-listed", scriptFile), "--out", out], env, 420_000);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).not.toContain("[y/N]");
    const report = readFileSync(join(out, "report.md"), "utf8");
    expect(report).toContain("## Dependency decisions");
    expect(report).toMatch(/approved by the allowlist .*allowed-dependencies.*tabulate/);
    const show = await loopsmith(["show", "approve-listed"], env, 180_000);
    expect(show.stdout).toContain(
      `approved by the allowlist ${join(dir, ".loopsmith", "allowed-dependencies")}: +tabulate ==0.9.0`,
    );
  }, 600_000);
});
